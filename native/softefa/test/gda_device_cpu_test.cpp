// The GDA device code (templates/transport_efa_gda/nvshmemx_efa_gda_device.cuh), compiled as host C++
// (test/cuda_on_cpu.h) and driven by CPU threads standing in for warps, against the software EFA serving
// from its own thread with completion reordering on. Covers what the GPU proof covers, in CI: exact quiet
// under concurrency (and the count-based quiet it replaced failing), splitting at region ends, credits and
// RX overrun detection, CQE checks, 16-bit doorbells, 128-byte WQEs, NIC errors through quiet.
// Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include "cuda_on_cpu.h"

#include "nvshmemx_efa_gda_device.cuh"

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "backends/host_memory.h"
#include "softefa.h"

using namespace softefa;

static int failures = 0;
#define CHECK(cond, msg)                                       \
    do {                                                       \
        if (!(cond)) throw std::string(msg) + " [" #cond "]"; \
    } while (0)

static void test(const char *name, const std::function<void()> &fn) {
    try {
        fn();
        printf("ok %s\n", name);
    } catch (const std::string &e) {
        printf("FAIL %s: %s\n", name, e.c_str());
        failures++;
    }
    fflush(stdout);
}

// The count-based quiet this release replaced ("as many completions as WQEs reserved when it started"),
// kept only so the test can show it returning before the caller's own WQE completed.
static int count_based_quiet(nvshmemx_efa_gda_qp_t *qp) {
    const uint32_t target = efa_gda_load(&qp->sq_reserved);
    while ((int32_t)(efa_gda_load(&qp->cq_head) - target) < 0) {
        efa_gda_poll_cq(qp);
        EFA_GDA_SPIN_PAUSE();
    }
    __threadfence_system();
    return (int)efa_gda_load(&qp->error);
}

// Two PEs in one process: PE 0 (QP a: qpn 10, ah 1) posts; PE 1 (QP b: qpn 11, ah 2) is the target and
// receives immediates. Each PE's symmetric heap is one buffer registered as three regions (so transfers
// cross region ends), as NVSHMEM registers its heap in pieces.
struct Rig {
    static constexpr uint64_t kHeap = 12ull << 20;
    static constexpr uint64_t kPieces[3] = {5ull << 20, 4ull << 20, 3ull << 20};
    uint32_t sq_entries, max_batch, rx_entries, wqe_size;
    uint64_t max_rdma;
    HostMemory mem;
    std::unique_ptr<Device> emu;
    std::vector<uint8_t> heap0, heap1, sq, cq, rx_cq, idle_sq, idle_cq;
    uint32_t db = 0, idle_db = 0;
    std::vector<uint32_t> slot_done;
    // The device states (64 KiB each: on the heap), the queues in them.
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> state0{new nvshmemx_efa_gda_device_state_t()},
        state1{new nvshmemx_efa_gda_device_state_t()};
    nvshmemx_efa_gda_device_state_t &s0 = *state0, &s1 = *state1;
    nvshmemx_efa_gda_qp_t &qp = s0.qp, &qp1 = s1.qp;
    nvshmemx_efa_gda_rx_cq_t rx{};
    std::vector<nvshmemx_efa_gda_peer_t> peers;
    // The region table: header, then a row per region (PE 0's entry, PE 0's view, PE 1's view).
    std::vector<uint64_t> table_mem;
    nvshmemx_efa_gda_regions_t *table = nullptr;
    nvshmemx_efa_gda_region_t *row(int i) { return (nvshmemx_efa_gda_region_t *)(table + 1) + (size_t)i * 3; }
    // Credit blocks: [consumed, sent, seen, landing] x 2 PEs, then locks.
    uint64_t cred0[8] = {}, cred1[8] = {};
    uint32_t lock0[2] = {}, lock1[2] = {};
    nvshmemx_efa_gda_region_t peer_consumed0[2] = {}, peer_consumed1[2] = {};
    nvshmemx_efa_gda_credits_t credits0{}, credits1{};

    // The state as the host fills it, hot slots included (hot = false: every region only in the table).
    // idle_us: how long the NIC model holds reordered WQEs when no new doorbell comes. Threads standing in
    // for warps on a loaded 2-core machine stall for milliseconds, so tests that rely on other threads'
    // WQEs overtaking a held one give it room.
    Rig(const char *reorder, uint32_t sq_n = 256, uint32_t batch = 16, uint64_t rdma = 1 << 20, uint32_t rx_n = 64,
        uint32_t wqe = 64, uint32_t idle_us = 2000, bool hot = true)
        : sq_entries(sq_n), max_batch(batch), rx_entries(rx_n), wqe_size(wqe), max_rdma(rdma), emu(new Device(mem)),
          heap0(kHeap), heap1(kHeap), sq(sq_n * wqe), cq(sq_n * 32), rx_cq(rx_n * 32), idle_sq(sq_n * 64), idle_cq(sq_n * 32),
          slot_done(sq_n) {
        for (size_t i = 0; i < kHeap; i++) heap0[i] = (uint8_t)(i * 131 + 7);
        memset(heap1.data(), 0xA5, kHeap);
        for (uint32_t i = 0; i < sq_n; i++) slot_done[i] = i - sq_n;
        qp.sq_buf = sq.data();
        qp.sq_db = &db;
        qp.sq_entries = sq_n;
        qp.sq_log2 = (uint32_t)__builtin_ctz(sq_n);
        qp.max_batch = batch;
        qp.wqe_size = wqe;
        qp.cq_buf = cq.data();
        qp.cq_entries = sq_n;
        qp.cq_log2 = qp.sq_log2;
        qp.cq_entry_size = 32;
        qp.qp_num = 10;
        qp.max_rdma_size = rdma;
        qp.slot_done = slot_done.data();
        qp1 = qp;
        qp1.qp_num = 11;
        rx.cq_buf = rx_cq.data();
        rx.cq_entries = rx_n;
        rx.cq_log2 = (uint32_t)__builtin_ctz(rx_n);
        rx.cq_entry_size = 32;
        rx.qp_num = 11;
        peers = {{1, 10, 0x5A5A}, {2, 11, 0x6B6B}};
        table_mem.assign((sizeof(nvshmemx_efa_gda_regions_t) + 9 * sizeof(nvshmemx_efa_gda_region_t)) / 8, 0);
        table = (nvshmemx_efa_gda_regions_t *)table_mem.data();
        *table = {3, 2};
        uint64_t off = 0;
        for (int i = 0; i < 3; i++) {
            // EFA's rkey is the lkey: PE 0's view of its own region carries the same key.
            row(i)[0] = {(uint64_t)heap0.data() + off, kPieces[i], 0x100u + i, 1};
            row(i)[1] = {(uint64_t)heap0.data() + off, kPieces[i], 0x100u + i, 1};
            row(i)[2] = {(uint64_t)heap1.data() + off, kPieces[i], 0x200u + i, 1};
            off += kPieces[i];
        }
        auto credits = [](nvshmemx_efa_gda_credits_t &c, uint64_t *b, uint32_t *lock, uint32_t lkey,
                          nvshmemx_efa_gda_region_t *peer) {
            c.consumed = b;
            c.sent = b + 2;
            c.seen = b + 4;
            c.landing = b + 6;
            c.lock = lock;
            c.lkey = lkey;
            c.peer_consumed = peer;
        };
        credits(credits0, cred0, lock0, 0x301, peer_consumed0);
        credits(credits1, cred1, lock1, 0x302, peer_consumed1);
        peer_consumed0[0] = {(uint64_t)cred0, 16, 0x301, 1};  // PE 0's own consumed[] (what a failed post's filler reads)
        peer_consumed0[1] = {(uint64_t)cred1, 16, 0x300, 1};  // PE 1's consumed[] as PE 0 reads it
        for (nvshmemx_efa_gda_device_state_t *st : {&s0, &s1}) {
            st->abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
            st->n_pes = 2;
            st->imm_window = rx_n / 2;
            st->peers = peers.data();
            st->regions = table;
            st->credit_timeout_ns = 2000000000ull;
            for (int pe = 0; pe < 2; pe++) st->fast[pe].addr = peers[pe];
        }
        s0.my_pe = 0;
        s0.credits = &credits0;
        s1.my_pe = 1;
        s1.rx_cq = &rx;
        s1.credits = &credits1;
        if (hot)
            for (int i = 0; i < 3; i++) make_hot(i, i);

        // The NIC's view.
        off = 0;
        for (int i = 0; i < 3; i++) {
            emu->add_region({0x100u + i, (uint64_t)heap0.data() + off, kPieces[i], true, true});
            emu->add_region({0x200u + i, (uint64_t)heap1.data() + off, kPieces[i], true, true});
            off += kPieces[i];
        }
        emu->add_region({0x300, (uint64_t)cred1, 16, true, false});
        emu->add_region({0x301, (uint64_t)cred0, sizeof cred0, true, false});
        QpConfig a{};
        a.sq = sq.data();
        a.db = &db;
        a.sq_entries = sq_n;
        a.max_batch = batch;
        a.cq = cq.data();
        a.cq_entries = sq_n;
        a.cq_entry_size = 32;
        a.qpn = 10;
        a.ah = 1;
        a.qkey = 0x5A5A;
        a.max_rdma_size = rdma;
        a.wqe_size = wqe;
        emu->add_qp(a);
        QpConfig b = a;
        b.sq = idle_sq.data();
        b.db = &idle_db;
        b.cq = idle_cq.data();
        b.wqe_size = 64;
        b.rx_cq = rx_cq.data();
        b.rx_cq_entries = rx_n;
        b.rx_cq_entry_size = 32;
        b.rx_consumed = [this] { return __atomic_load_n(&rx.cq_head, __ATOMIC_SEQ_CST); };
        b.qpn = 11;
        b.ah = 2;
        b.qkey = 0x6B6B;
        emu->add_qp(b);
        emu->av_insert(1, 1, 10);  // PE 1 inserted PE 0
        emu->av_insert(0, 2, 11);
        emu->av_insert(0, 1, 10);  // and every PE itself, as the host inserts every PE
        emu->av_insert(1, 2, 11);
        Reorder r;
        std::string why;
        if (!parse_reorder(reorder, &r, &why)) throw why;
        r.idle_us = idle_us;
        emu->set_reorder(r);
        emu->start();
    }
    ~Rig() { emu->stop(); }
    std::string violations() {
        std::string s;
        for (auto &v : emu->violations()) s += v.what + "; ";
        return s;
    }
    uint8_t *sym(uint64_t off) { return heap0.data() + off; }
    // Hot slot k of PE 0's state holds table row i, as the host fills it.
    void make_hot(int k, int i) {
        s0.hot[k] = {row(i)[0].base, row(i)[0].length, row(i)[0].key, 1, 0};
        for (int pe = 0; pe < 2; pe++) s0.fast[pe].hot[k] = {row(i)[1 + pe].base, row(i)[1 + pe].key, 1};
    }
};
constexpr uint64_t Rig::kPieces[3];

// Runs fn on its own thread and fails the whole run with a message if it has not returned within ms: for
// tests whose failure mode is a wait that never ends.
static void within_ms(const char *what, int ms, const std::function<void()> &fn) {
    std::atomic<bool> finished{false};
    std::string failure;
    std::thread t([&] {
        try {
            fn();
        } catch (const std::string &e) {
            failure = e;
        }
        finished = true;
    });
    for (int i = 0; i < ms && !finished; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!finished) {
        printf("FAIL %s: still waiting after %d ms\n", what, ms);
        fflush(stdout);
        _exit(1);
    }
    t.join();
    if (!failure.empty()) throw failure;
}

// Runs fn on n threads (one "warp" each).
static void parallel(int n, const std::function<void(int)> &fn) {
    std::vector<std::thread> t;
    for (int i = 0; i < n; i++) t.emplace_back(fn, i);
    for (auto &x : t) x.join();
}

// Checkers put `large` bytes, quiet, and look at the target; posters keep posting 64-byte puts meanwhile.
// Returns how many checks found the target not yet written after quiet returned; with until_early, the
// checkers stop at the first such check (iters is then a bound).
static int concurrent_quiet(Rig &r, int checkers, int posters, int iters, bool count_based, uint64_t large,
                            bool until_early = false) {
    std::atomic<int> early{0}, running{checkers};
    std::atomic<int> errors{0};
    parallel(checkers + posters, [&](int id) {
        if (id < checkers) {
            const uint64_t src_off = (uint64_t)id * large, dst_off = 6ull * (1 << 20) + (uint64_t)id * large;
            for (int it = 0; it < iters && !(until_early && early.load() > 0); it++) {
                const uint8_t pattern = (uint8_t)(it * 37 + id + 1);
                memset(r.heap0.data() + src_off, pattern, large);
                std::atomic_thread_fence(std::memory_order_seq_cst);
                if (efa_gda_put_nbi(&r.s0, r.sym(dst_off), r.heap0.data() + src_off, large, 1)) errors++;
                const int q = count_based ? count_based_quiet(&r.qp) : efa_gda_quiet(&r.s0);
                if (q) errors++;
                const volatile uint8_t *t = r.heap1.data() + dst_off;
                bool landed = t[large - 1] == pattern && t[0] == pattern;
                for (uint64_t i = 0; i < large && landed; i += 4096) landed = t[i] == pattern;
                if (!landed) early++;
            }
            running--;
        } else {
            const uint64_t off = 9ull * (1 << 20) + (uint64_t)(id - checkers) * 65536;
            for (uint64_t i = 0; running.load() > 0; i++)
                if (efa_gda_put_nbi(&r.s0, r.sym(off + (i % 1000) * 64), r.heap0.data() + off, 64, 1)) errors++;
        }
    });
    if (efa_gda_quiet(&r.s0)) errors++;
    if (errors) throw std::string("device errors during the run: ") + std::to_string(errors.load());
    return early.load();
}

int main() {
    for (bool hot : {true, false})
    test(hot ? "puts, gets and puts with immediate across heap-region ends land every byte (random completion order, hot regions)"
             : "puts, gets and puts with immediate across heap-region ends land every byte (random completion order, region table only)",
         [hot] {
        Rig r("random:11:8", 256, 16, 64 << 10, 256, 64, 2000, hot);
        // Ranges that cross the 5 MiB and 9 MiB region ends (remote and local sides) and exceed the 64 KiB max
        // RDMA size of this rig. kind: 0 put, 1 get, 2 put with immediate. Disjoint at the target.
        struct Op {
            uint64_t local, sym, len;
            int kind;
        };
        const uint64_t M = 1ull << 20;
        const std::vector<Op> ops = {{0, 5 * M - 100, 300, 0},          {1 * M, 7 * M + M / 2, 3 * M, 0},
                                     {5 * M - 7, 11 * M, 64, 0},         {9 * M - 2000, 4 * M, 4000, 1},
                                     {2 * M, 5 * M + 1000, 140000, 2},  {100, 4 * M + 8192, 1, 2}};
        for (uint64_t i = 0; i < 4000; i++) r.heap1[4 * M + i] = (uint8_t)(i * 7 + 1);  // what PE 1 holds for the get
        uint32_t imms = 0;
        for (const Op &o : ops) {
            int e;
            if (o.kind == 0) e = efa_gda_put_nbi(&r.s0, r.sym(o.sym), r.heap0.data() + o.local, o.len, 1);
            else if (o.kind == 1) e = efa_gda_get_nbi(&r.s0, r.heap0.data() + o.local, r.sym(o.sym), o.len, 1);
            else e = efa_gda_put_imm_nbi(&r.s0, r.sym(o.sym), r.heap0.data() + o.local, o.len, 1, 0xAB00 + imms++);
            CHECK(e == 0, "post error " + std::to_string(e));
        }
        CHECK(efa_gda_quiet(&r.s0) == 0, "quiet error");
        for (const Op &o : ops) {
            if (o.kind == 1) CHECK(memcmp(r.heap0.data() + o.local, r.heap1.data() + o.sym, o.len) == 0, "get data");
            else CHECK(memcmp(r.heap1.data() + o.sym, r.heap0.data() + o.local, o.len) == 0, "put data");
        }
        uint32_t got = 0, imm, bytes;
        int pe = -1;
        while (got < imms) {
            const int rc = efa_gda_rx_poll(&r.s1, &imm, &bytes, &pe);
            CHECK(rc >= 0, "rx_poll " + std::to_string(rc));
            if (rc == 1) {
                CHECK(pe == 0 && (imm & 0xff00) == 0xAB00, "immediate from PE 0");
                got++;
            }
        }
        const nvshmemx_efa_gda_qp_t q = r.qp;
        CHECK(q.sq_retired == q.sq_reserved && q.sq_rung == q.sq_reserved && q.cq_head == q.sq_reserved, "every slot retired");
        // 2 + 48 + 2 + 2 + 3 + 1 WQEs: one per piece between region ends and 64 KiB limits.
        CHECK(q.sq_reserved == 58, "split into " + std::to_string(q.sq_reserved) + " WQEs, want 58");
        CHECK(r.emu->stats().reordered > 0, "completions came out of order");
        CHECK(r.emu->violations().empty(), r.violations());
    });

    test("reserve refuses more WQEs than max_batch or the SQ holds, instead of spinning", [] {
        // A reserve that spins would never return: watch it from here and fail loudly.
        auto within = [](const char *what, const std::function<int()> &fn) {
            std::atomic<int> rc{-1};
            std::atomic<bool> finished{false};
            std::thread t([&] {
                rc = fn();
                finished = true;
            });
            for (int i = 0; i < 2000 && !finished; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            if (!finished) {
                printf("FAIL reserve refuses more WQEs than max_batch or the SQ holds: %s spins\n", what);
                fflush(stdout);
                _exit(1);
            }
            t.join();
            return rc.load();
        };
        Rig r("inorder", 16, 64);
        efa_gda_reservation res;
        CHECK(within("n > sq_entries", [&] { return efa_gda_reserve(&r.qp, 17, &res); }) == NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES,
              "n > sq_entries");
        CHECK(efa_gda_reserve(&r.qp, 0, &res) == NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES, "n = 0");
        Rig b("inorder", 256, 8);
        CHECK(within("n > max_batch", [&] { return efa_gda_reserve(&b.qp, 9, &res); }) == NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES,
              "n > max_batch");
        CHECK(efa_gda_reserve(&b.qp, 8, &res) == 0 && res.slot == 0, "n = max_batch is fine");
    });

    test("concurrent quiet: the count-based quiet returns before its own large put landed", [] {
        Rig r("large:65536:32", 256, 16, 1 << 20, 64, 64, 50000);
        const int early = concurrent_quiet(r, 2, 3, 1000, true, 256 << 10, true);
        CHECK(early > 0, "the count-based quiet never returned early in 2 x 1000 tries, so this test could not catch it");
    });

    for (int checkers : {1, 2, 4}) {
        const std::string name = "concurrent quiet: the retired-prefix quiet covers its own put (" + std::to_string(checkers) +
                                 " checker thread(s), 3 posters, large:64K:32)";
        test(name.c_str(), [checkers] {
            Rig r("large:65536:32", 256, 16, 1 << 20, 64, 64, 50000);
            const int early = concurrent_quiet(r, checkers, 3, 30, false, 256 << 10);
            CHECK(early == 0, std::to_string(early) + " checks saw the target unwritten after quiet");
            CHECK(r.emu->stats().reordered > 0, "reordering was on");
            CHECK(r.emu->violations().empty(), r.violations());
        });
    }

    test("put with immediate split into pieces: the immediate arrives after all of its data", [] {
        // 4 KiB pieces are held until 64 later WQEs completed (noise, one every 20 us); the last piece (100
        // bytes, with the immediate) would complete at once if posted before the earlier pieces completed.
        Rig r("large:4096:64", 256, 16, 4096, 64, 64, 50000);
        const uint64_t len = 65536 + 100;
        std::atomic<bool> done{false};
        std::atomic<int> bad{0}, seen{0};
        const int n = 40;
        std::thread receiver([&] {
            uint32_t imm, bytes;
            int pe;
            while (seen < n) {
                const int rc = efa_gda_rx_poll(&r.s1, &imm, &bytes, &pe);
                if (rc < 0) {
                    bad += 1000000;
                    return;
                }
                if (rc == 1) {
                    const uint64_t dst = (uint64_t)imm * 69632 + (6ull << 20);
                    for (uint64_t i = 0; i < len; i += 256)
                        if (r.heap1[dst + i] != (uint8_t)(imm + 1)) bad++;
                    if (r.heap1[dst + len - 1] != (uint8_t)(imm + 1)) bad++;
                    seen++;
                }
                std::this_thread::yield();
            }
        });
        std::thread noise([&] {
            for (uint64_t i = 0; !done; i++) {
                efa_gda_put_nbi(&r.s0, r.sym((10ull << 20) + (i % 100) * 64), r.sym(0), 64, 1);
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        });
        for (int k = 0; k < n; k++) {
            const uint64_t src = (1ull << 20) + (uint64_t)(k % 8) * 69632, dst = (6ull << 20) + (uint64_t)k * 69632;
            efa_gda_quiet(&r.s0);  // the previous use of this source range is done
            memset(r.heap0.data() + src, (uint8_t)(k + 1), len);
            CHECK(efa_gda_put_imm_nbi(&r.s0, r.sym(dst), r.heap0.data() + src, len, 1, (uint32_t)k) == 0, "put_imm");
        }
        receiver.join();
        done = true;
        noise.join();
        CHECK(bad == 0, std::to_string(bad.load()) + " sampled bytes missing when their immediate arrived");
        CHECK(r.emu->stats().reordered > 0 && r.emu->violations().empty(), r.violations());
    });

    test("credits: 4 x window immediates to a slowly draining receiver all arrive, no overrun, credits refreshed", [] {
        Rig r("random:5:4", 256, 16, 1 << 20, 16);  // window 8
        const int n = 32;
        std::atomic<int> got{0}, errs{0};
        std::thread receiver([&] {
            uint32_t imm, bytes;
            int pe;
            while (got < n) {
                std::this_thread::sleep_for(std::chrono::microseconds(300));
                const int rc = efa_gda_rx_poll(&r.s1, &imm, &bytes, &pe);
                if (rc < 0) errs++;
                if (rc == 1) got++;
                if (rc < 0) return;
            }
        });
        for (int k = 0; k < n; k++)
            CHECK(efa_gda_put_imm_nbi(&r.s0, r.sym(1 << 20), r.sym(0), 8, 1, (uint32_t)k) == 0, "put_imm " + std::to_string(k));
        receiver.join();
        CHECK(got == n && errs == 0, "received " + std::to_string(got.load()));
        CHECK(r.credits0.refreshes > 0, "the sender ran out of credits and refreshed them");
        CHECK(r.emu->stats().rx_overruns == 0 && r.emu->violations().empty(), r.violations());
    });

    test("credits: a receiver that never drains makes the sender fail with NO_CREDITS, its CQ intact", [] {
        Rig r("inorder", 256, 16, 1 << 20, 16);
        r.s0.credit_timeout_ns = 50000000;  // 50 ms
        int rc = 0, sent = 0;
        for (; sent < 20 && rc == 0; sent++) rc = efa_gda_put_imm_nbi(&r.s0, r.sym(1 << 20), r.sym(0), 8, 1, 1);
        CHECK(rc == NVSHMEMX_EFA_GDA_ERR_NO_CREDITS && sent == 9, "the 9th immediate waits for credits, then fails: rc " +
                                                                     std::to_string(rc) + " after " + std::to_string(sent));
        CHECK(efa_gda_quiet(&r.s0) == 0, "the 8 sent completed");
        CHECK(r.emu->stats().rx_overruns == 0, r.violations());
    });

    test("overrun on purpose (immediates past the window, credits skipped): reported by the NIC model and rx_poll", [] {
        Rig r("inorder", 256, 16, 1 << 20, 16);
        efa_gda_piece p{};
        CHECK(efa_gda_piece_at(r.table, 2, 1, (uint64_t)r.sym(0), (uint64_t)r.sym(1 << 20), 8, 1 << 20, &p) == 0, "piece");
        for (int k = 0; k < 20; k++) {
            uint32_t end;
            CHECK(efa_gda_post_one(&r.qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, r.peers[1], p, true, (uint32_t)k), &end) == 0, "post");
        }
        CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
        uint32_t imm, bytes;
        int pe;
        const int rc = efa_gda_rx_poll(&r.s1, &imm, &bytes, &pe);
        CHECK(rc == -NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN, "rx_poll sees the overrun: " + std::to_string(rc));
        CHECK(efa_gda_rx_poll(&r.s1, &imm, &bytes, &pe) == -NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN, "and keeps reporting it");
        CHECK(r.emu->stats().rx_overruns == 4 && r.violations().find("RX CQ overrun") != std::string::npos, r.violations());
    });

    test("a CQE of another QP makes quiet return BAD_CQE instead of hanging", [] {
        Rig r("inorder");
        r.emu->stop();
        uint32_t end;
        efa_gda_piece p{};
        efa_gda_piece_at(r.table, 2, 1, (uint64_t)r.sym(0), (uint64_t)r.sym(64), 8, 1 << 20, &p);
        CHECK(efa_gda_post_one(&r.qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, r.peers[1], p, false, 0), &end) == 0, "post");
        uint8_t e[32];
        build_tx_cqe(e, 32, 0, 0, EFA_IO_RDMA_WRITE, 99);  // qp_num 99
        e[EFA_GDA_CQE_FLAGS_OFFSET] |= 1;
        memcpy(r.cq.data(), e, 32);
        CHECK(efa_gda_quiet(&r.s0) == NVSHMEMX_EFA_GDA_ERR_BAD_CQE && r.qp.fatal == 1, "BAD_CQE");
        efa_gda_reservation res;
        CHECK(efa_gda_reserve(&r.qp, 1, &res) == NVSHMEMX_EFA_GDA_ERR_BAD_CQE, "the queue refuses new work");
        Rig t("inorder");
        t.emu->stop();
        efa_gda_post_one(&t.qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, t.peers[1], p, false, 0), &end);
        build_tx_cqe(e, 32, 0, 0, EFA_IO_RDMA_WRITE, 10);
        e[EFA_GDA_CQE_FLAGS_OFFSET] = (uint8_t)((e[EFA_GDA_CQE_FLAGS_OFFSET] & ~0x6) | (2 << 1) | 1);  // q_type RECV
        memcpy(t.cq.data(), e, 32);
        CHECK(efa_gda_quiet(&t.s0) == NVSHMEMX_EFA_GDA_ERR_BAD_CQE, "a receive-queue CQE in the send CQ");
        Rig u("inorder");
        u.emu->stop();
        efa_gda_post_one(&u.qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, u.peers[1], p, false, 0), &end);
        build_tx_cqe(e, 32, 7, 0, EFA_IO_RDMA_WRITE, 10);  // request id 7 was never posted
        e[EFA_GDA_CQE_FLAGS_OFFSET] |= 1;
        memcpy(u.cq.data(), e, 32);
        CHECK(efa_gda_quiet(&u.s0) == NVSHMEMX_EFA_GDA_ERR_BAD_CQE, "a request id not in flight");
    });

    test("refused posts (bad PE, unregistered, out-of-heap, unreachable) fill their reserved slots with WQEs that move nothing", [] {
        within_ms("refused posts: quiet after them (an unfilled slot never completes)", 20000, [] {
            Rig r("inorder");
            static uint8_t outside[64];
            const std::vector<uint8_t> heap0(r.heap0), heap1(r.heap1);
            uint64_t cred0[8];
            memcpy(cred0, r.cred0, sizeof cred0);
            CHECK(efa_gda_put_nbi(&r.s0, r.sym(0), outside, 8, 1) == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION, "source outside");
            CHECK(efa_gda_put_nbi(&r.s0, outside, r.sym(0), 8, 1) == NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION, "dest outside");
            CHECK(efa_gda_get_nbi(&r.s0, outside, r.sym(0), 8, 1) == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION, "get into outside");
            for (int pe : {2, -1, 1 << 30})
                CHECK(efa_gda_put_nbi(&r.s0, r.sym(0), r.sym(0), 8, pe) == NVSHMEMX_EFA_GDA_ERR_BAD_PE, "PE " + std::to_string(pe) + " of 2");
            r.row(1)[2].valid = 0;   // PE 1 could not register its second region,
            r.s0.hot[1].present = 0; // which the host then never makes hot
            CHECK(efa_gda_put_nbi(&r.s0, r.sym(6 << 20), r.sym(0), 8, 1) == NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE, "unreachable");
            CHECK(efa_gda_put_nbi(&r.s0, r.sym((5 << 20) - 4), r.sym(0), 8, 1) == NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE,
                  "a put crossing into it");
            // 7 refused posts, each in the slot it reserved, and the crossing put's first piece.
            CHECK(r.qp.sq_reserved == 8, "slots reserved: " + std::to_string(r.qp.sq_reserved));
            CHECK(efa_gda_quiet(&r.s0) == 0, "quiet: every slot completed OK");
            CHECK(r.qp.error == 0 && r.qp.error_count == 0 && r.qp.sq_retired == 8, "no failed completion");
            const Stats st = r.emu->stats();
            CHECK(st.wqes == 8 && st.errors == 0 && st.bytes == 4, "the NIC ran 8 WQEs, moved 4 bytes: " + std::to_string(st.wqes) + "/" +
                                                                      std::to_string(st.errors) + "/" + std::to_string(st.bytes));
            CHECK(!r.emu->qp_in_error(0), "the QP is not in error");
            CHECK(memcmp(heap0.data(), r.heap0.data(), heap0.size()) == 0 && memcmp(cred0, r.cred0, sizeof cred0) == 0,
                  "nothing written on PE 0");
            for (size_t i = 0; i < heap1.size(); i++)
                if (r.heap1[i] != heap1[i] && (i < (5u << 20) - 4 || i >= (5u << 20)))
                    throw std::string("PE 1 byte ") + std::to_string(i) + " written";
            CHECK(r.emu->violations().empty(), r.violations());
            CHECK(efa_gda_put_nbi(&r.s0, r.sym(1 << 20), r.sym(0), 64, 1) == 0 && efa_gda_quiet(&r.s0) == 0 &&
                      memcmp(r.heap1.data() + (1 << 20), r.heap0.data(), 64) == 0,
                  "the queue goes on");
        });
    });

    test("a refused post's slot is filled while other threads post through a small SQ: nothing waits on it forever", [] {
        // Without the fill, the next slot's doorbell would wait for this one forever: watch from here.
        within_ms("refused posts among others: posting (a reserved slot never rung)", 30000, [] {
            Rig r("random:9:4", 16, 4);
            static uint8_t outside[64];
            std::atomic<int> bad{0};
            parallel(4, [&](int id) {
                for (int i = 0; i < 300; i++) {
                    const uint64_t off = (1ull << 20) + ((uint64_t)id * 300 + i) * 64;
                    if (id == 3 && i % 3 == 0) {
                        const int pe = i % 2 ? 7 : 1;
                        const int e = efa_gda_put_nbi(&r.s0, r.sym(off), pe == 1 ? outside : r.sym(0), 64, pe);
                        if (e != (pe == 1 ? (int)NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION : (int)NVSHMEMX_EFA_GDA_ERR_BAD_PE)) bad++;
                    } else if (efa_gda_put_nbi(&r.s0, r.sym(off), r.sym(off), 64, 1)) {
                        bad++;
                    }
                }
            });
            CHECK(bad == 0, std::to_string(bad.load()) + " posts returned the wrong result");
            CHECK(efa_gda_quiet(&r.s0) == 0 && r.qp.sq_reserved == 1200 && r.qp.sq_retired == 1200, "quiet, all 1200 slots");
            for (int id = 0; id < 4; id++)
                for (int i = 0; i < 300; i++) {
                    const uint64_t off = (1ull << 20) + ((uint64_t)id * 300 + i) * 64;
                    const bool refused = id == 3 && i % 3 == 0;
                    const bool landed = memcmp(r.heap1.data() + off, r.heap0.data() + off, 64) == 0;
                    CHECK(landed != refused, "put " + std::to_string(id) + "/" + std::to_string(i));
                }
            CHECK(r.emu->stats().errors == 0 && r.emu->violations().empty(), r.violations());
        });
    });

    test("hot regions: a filled slot is used; one not fully written, or retired, is skipped for the region table", [] {
        // Hot slot 0 holds region 0 with PE 1's base shifted by 1 MiB (the NIC accepts both): where a put
        // lands tells which path it took.
        Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, false);
        r.make_hot(0, 0);
        r.s0.fast[1].hot[0].base += 1 << 20;
        uint64_t dst = 64;
        auto lands = [&](const char *what, bool via_hot) {
            CHECK(efa_gda_put_nbi(&r.s0, r.sym(dst), r.sym(0), 64, 1) == 0 && efa_gda_quiet(&r.s0) == 0, what);
            const uint8_t *at = r.heap1.data() + dst + (via_hot ? 1 << 20 : 0);
            CHECK(memcmp(at, r.heap0.data(), 64) == 0, std::string(what) + (via_hot ? ": not through the hot slot" : ": not through the table"));
            dst += 128;
        };
        lands("filled slot", true);
        r.s0.fast[1].hot[0].present = 0;
        lands("the peer's entry not written yet", false);
        r.s0.fast[1].hot[0].present = 1;
        const uint64_t rbase = r.s0.fast[1].hot[0].base;
        r.s0.fast[1].hot[0].base = 0;
        lands("the peer's base not written yet", false);
        r.s0.fast[1].hot[0].base = rbase;
        const uint64_t base = r.s0.hot[0].base;
        r.s0.hot[0].base = 0;
        lands("our base not written yet", false);
        r.s0.hot[0].base = base;
        lands("filled again", true);
        // Retired, and the region gone from the table (a new table without row 0).
        r.s0.hot[0].present = 0;
        std::vector<uint64_t> t2((sizeof(nvshmemx_efa_gda_regions_t) + 6 * sizeof(nvshmemx_efa_gda_region_t)) / 8);
        auto *h2 = (nvshmemx_efa_gda_regions_t *)t2.data();
        *h2 = {2, 2};
        memcpy(h2 + 1, r.row(1), 6 * sizeof(nvshmemx_efa_gda_region_t));
        r.s0.regions = h2;
        CHECK(efa_gda_put_nbi(&r.s0, r.sym(dst), r.sym(0), 64, 1) == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION, "retired: refused");
        CHECK(efa_gda_quiet(&r.s0) == 0 && r.qp.error == 0, "its slot filled, completed OK");
        CHECK(r.emu->violations().empty(), r.violations());
    });

    test("prepared handle: puts and gets within its regions land; other posts go the general way; a failed set-up reports", [] {
        Rig r("random:3:4");
        efa_gda_handle h;
        CHECK(efa_gda_handle_init(&r.s0, 1, r.sym(6 << 20), r.sym(0), &h) == 0, "handle for PE 1: sym in region 1, local in 0");
        for (int i = 0; i < 100; i++)
            CHECK(efa_gda_put_nbi(h, r.sym((6 << 20) + i * 64), r.sym(i * 64), 64) == 0, "put through the handle");
        for (uint64_t i = 0; i < 4000; i++) r.heap1[(7 << 20) + i] = (uint8_t)(i * 3 + 1);
        CHECK(efa_gda_get_nbi(h, r.sym(1 << 20), r.sym(7 << 20), 4000) == 0, "get through the handle");
        const uint32_t direct = r.qp.sq_reserved;
        CHECK(efa_gda_put_nbi(h, r.sym(10 << 20), r.sym(2 << 20), 64) == 0, "dest outside its region");
        CHECK(efa_gda_put_nbi(h, r.sym((9 << 20) - 8), r.sym(3 << 20), 64) == 0, "dest crossing its region's end");
        CHECK(r.qp.sq_reserved == direct + 3, "the crossing put split in two by the general path");
        CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
        CHECK(memcmp(r.heap1.data() + (6 << 20), r.heap0.data(), 6400) == 0, "puts landed");
        CHECK(memcmp(r.heap0.data() + (1 << 20), r.heap1.data() + (7 << 20), 4000) == 0, "get landed");
        CHECK(memcmp(r.heap1.data() + (10 << 20), r.heap0.data() + (2 << 20), 64) == 0 &&
                  memcmp(r.heap1.data() + (9 << 20) - 8, r.heap0.data() + (3 << 20), 64) == 0,
              "general-path puts landed");
        static uint8_t outside[64];
        efa_gda_handle bad;
        CHECK(efa_gda_handle_init(&r.s0, 2, r.sym(0), r.sym(0), &bad) == NVSHMEMX_EFA_GDA_ERR_BAD_PE, "PE 2 of 2");
        CHECK(efa_gda_put_nbi(bad, r.sym(0), r.sym(0), 8) == NVSHMEMX_EFA_GDA_ERR_BAD_PE, "a post through it reports BAD_PE");
        CHECK(efa_gda_handle_init(&r.s0, 1, r.sym(0), outside, &bad) == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION, "local outside");
        CHECK(efa_gda_put_nbi(bad, r.sym(0), outside, 8) == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION, "and a post through it");
        CHECK(efa_gda_quiet(&r.s0) == 0 && r.emu->stats().errors == 0 && r.emu->violations().empty(), r.violations());
    });

    test("NIC errors reach quiet: UNKNOWN_PEER, then FLUSHED after a QP error", [] {
        Rig r("inorder");
        r.emu->av_remove(1, 1, 10);
        CHECK(efa_gda_put_nbi(&r.s0, r.sym(1 << 20), r.sym(0), 64, 1) == 0, "post");
        CHECK(efa_gda_quiet(&r.s0) == EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER, "quiet returns UNKNOWN_PEER");
        CHECK(r.heap1[1 << 20] == 0xA5, "no data moved");
        r.qp.error = 0;
        r.emu->av_insert(1, 1, 10);
        r.emu->set_qp_error(0);
        CHECK(efa_gda_put_nbi(&r.s0, r.sym(1 << 20), r.sym(0), 64, 1) == 0, "post");
        CHECK(efa_gda_quiet(&r.s0) == EFA_IO_COMP_STATUS_FLUSHED && r.heap1[1 << 20] == 0xA5, "quiet returns FLUSHED");
    });

    test("the doorbell register gets the 16-bit producer counter past 65536 WQEs; 128-byte WQE stride", [] {
        for (uint32_t wqe : {64u, 128u}) {
            Rig r("reverse", 64, 16, 1 << 20, 64, wqe);
            for (int i = 0; i < 70000; i++) {
                const int e = efa_gda_put_nbi(&r.s0, r.sym((1 << 20) + (i % 4096) * 8), r.sym(0), 8, 1);
                if (e) throw std::string("post ") + std::to_string(e);
                CHECK(r.db <= 0xffff, "doorbell value above 16 bits");
            }
            CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
            CHECK(r.qp.sq_reserved == 70000 && r.emu->stats().wqes == 70000, "every WQE served");
            CHECK(r.emu->violations().empty(), r.violations());
        }
    });

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
