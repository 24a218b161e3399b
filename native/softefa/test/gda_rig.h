// The test rig of the CPU tests that run GPU code on CPU threads (test/cuda_on_cpu.h) against the software EFA:
// two PEs in one process, their heaps, PE 0's GDA device state as the host fills it, the NIC model serving from
// its own thread; plus the harness (test(), CHECK, threads standing in for warps) and DeepEP's low-latency
// dispatch shaped on threads (dispatch_shaped). Include after cuda_on_cpu.h and the GDA device header.
#pragma once

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

// GDA_TEST_ONLY=text runs only the tests whose name contains text (to watch one fail on purpose, by hand).
inline void test(const char *name, const std::function<void()> &fn) {
    const char *only = getenv("GDA_TEST_ONLY");
    if (only && !strstr(name, only)) return;
    try {
        fn();
        printf("ok %s\n", name);
    } catch (const std::string &e) {
        printf("FAIL %s: %s\n", name, e.c_str());
        failures++;
    }
    fflush(stdout);
}

// Two PEs in one process: PE 0 posts; PE 1 is the target and receives immediates. Each PE's symmetric heap is
// one buffer registered as three regions (so transfers cross region ends), as NVSHMEM registers its heap in
// pieces. With rails > 1 each PE has one NIC per rail, and each rail is its own software EFA (a Device: the
// NICs of rail r of both PEs and the network between them), so a WQE can only reach the QPs and keys of its
// own rail: rail r's QPs are PE 0: qpn 10 + 2r (ah 1), PE 1: qpn 11 + 2r (ah 2); rail r's keys are PE 0's heap
// regions 0x100 + 0x10r + i, PE 1's 0x200 + 0x10r + i, credit blocks 0x301/0x300 + 0x10r, signal scratch
// 0x401 + 0x10r. Rail 0 is what the single-rail rig always was.
struct Rig {
    static constexpr uint64_t kHeap = 12ull << 20;
    static constexpr uint64_t kPieces[3] = {5ull << 20, 4ull << 20, 3ull << 20};
    uint32_t sq_entries, max_batch, rx_entries, wqe_size, n_rails, n_owned;
    uint64_t max_rdma;
    HostMemory mem;
    std::vector<std::unique_ptr<Device>> emus;  // one software EFA per rail
    Device *emu;                                // rail 0's
    std::vector<uint8_t> heap0, heap1;
    // Per rail: PE 0's SQ/CQ/doorbell/slot marks, PE 1's (idle) SQ/CQ/doorbell and RX CQ, the RX state.
    struct RailMem {
        std::vector<uint8_t> sq, cq, rx_cq, idle_sq, idle_cq;
        uint32_t db = 0, idle_db = 0;
        std::vector<uint32_t> slot_done;
        // The destination PE of each slot's WQE (ABI 7), then each PE's first failed completion (ABI 8: 2 PEs, as
        // two 16-bit halves each, zero).
        std::vector<uint16_t> slot_pe;
        nvshmemx_efa_gda_rx_cq_t rx{};
        std::vector<nvshmemx_efa_gda_peer_t> peers;
        // Credit blocks: [consumed, sent, seen, landing] x 2 PEs, then locks.
        uint64_t cred0[8] = {}, cred1[8] = {};
        uint32_t lock0[2] = {}, lock1[2] = {};
        nvshmemx_efa_gda_region_t peer_consumed0[2] = {}, peer_consumed1[2] = {};
        nvshmemx_efa_gda_credits_t credits0{}, credits1{};
        std::vector<uint64_t> sig0;  // PE 0's signal scratch (one word per SQ slot)
        // PE 0's owned queues: each its own QP on this rail's NIC (qpn 40 + 8r + k), ring, CQ and slot marks.
        struct Owned {
            std::vector<uint8_t> sq, cq;
            std::vector<uint32_t> slot_done;
            std::vector<uint16_t> slot_pe;
            uint32_t db = 0;
        };
        std::vector<std::unique_ptr<Owned>> owned_mem;
        std::vector<nvshmemx_efa_gda_qp_t> owned;
        std::vector<uint32_t> owner;
    };
    std::vector<std::unique_ptr<RailMem>> rails;
    // The device states (about 260 KiB each: on the heap), the queues in them.
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> state0{new nvshmemx_efa_gda_device_state_t()},
        state1{new nvshmemx_efa_gda_device_state_t()};
    nvshmemx_efa_gda_device_state_t &s0 = *state0, &s1 = *state1;
    nvshmemx_efa_gda_qp_t &qp = s0.rail[0].qp, &qp1 = s1.rail[0].qp;
    // Rail 0's pieces under the names the single-rail tests use.
    uint32_t &db;
    nvshmemx_efa_gda_rx_cq_t &rx;
    std::vector<nvshmemx_efa_gda_peer_t> &peers;
    uint64_t (&cred0)[8];
    nvshmemx_efa_gda_credits_t &credits0;
    std::vector<uint64_t> &sig0;
    // The region table: header, then a row per region and rail (PE 0's entry, PE 0's view, PE 1's view).
    std::vector<uint64_t> table_mem;
    nvshmemx_efa_gda_regions_t *table = nullptr;
    nvshmemx_efa_gda_region_t *row(int i, uint32_t rail = 0) {
        return (nvshmemx_efa_gda_region_t *)(table + 1) + ((size_t)i * n_rails + rail) * 3;
    }
    static uint32_t key(int pe, uint32_t rail, int i) { return 0x100u * (uint32_t)(pe + 1) + 0x10u * rail + (uint32_t)i; }

    // The state as the host fills it, hot slots included (hot = false: every region only in the table).
    // idle_us: how long the NIC model holds reordered WQEs when no new doorbell comes. Threads standing in
    // for warps on a loaded 2-core machine stall for milliseconds, so tests that rely on other threads'
    // WQEs overtaking a held one give it room. reorder_rest: the completion order of rails 1.. (default: reorder).
    Rig(const char *reorder, uint32_t sq_n = 256, uint32_t batch = 16, uint64_t rdma = 1 << 20, uint32_t rx_n = 64,
        uint32_t wqe = 64, uint32_t idle_us = 2000, bool hot = true, uint32_t n_rails_ = 1, const char *reorder_rest = nullptr,
        uint32_t n_owned_ = 0)
        : sq_entries(sq_n), max_batch(batch), rx_entries(rx_n), wqe_size(wqe), n_rails(n_rails_), n_owned(n_owned_), max_rdma(rdma),
          emus(make_devices(mem, n_rails_)), emu(emus[0].get()), heap0(kHeap), heap1(kHeap),
          rails(make_rails(n_rails_, sq_n, wqe, rx_n)), db(rails[0]->db), rx(rails[0]->rx), peers(rails[0]->peers),
          cred0(rails[0]->cred0), credits0(rails[0]->credits0), sig0(rails[0]->sig0) {
        if (n_rails < 1 || n_rails > NVSHMEMX_EFA_GDA_MAX_RAILS) throw std::string("rig: bad rail count");
        for (size_t i = 0; i < kHeap; i++) heap0[i] = (uint8_t)(i * 131 + 7);
        memset(heap1.data(), 0xA5, kHeap);
        table_mem.assign((sizeof(nvshmemx_efa_gda_regions_t) + 9 * n_rails * sizeof(nvshmemx_efa_gda_region_t)) / 8 + 1, 0);
        table = (nvshmemx_efa_gda_regions_t *)table_mem.data();
        *table = {3, 2, n_rails, 0};
        for (uint32_t r = 0; r < n_rails; r++) {
            uint64_t off = 0;
            for (int i = 0; i < 3; i++) {
                // EFA's rkey is the lkey: PE 0's view of its own region carries the same key.
                row(i, r)[0] = {(uint64_t)heap0.data() + off, kPieces[i], key(0, r, i), 1};
                row(i, r)[1] = {(uint64_t)heap0.data() + off, kPieces[i], key(0, r, i), 1};
                row(i, r)[2] = {(uint64_t)heap1.data() + off, kPieces[i], key(1, r, i), 1};
                off += kPieces[i];
            }
        }
        for (nvshmemx_efa_gda_device_state_t *st : {&s0, &s1}) {
            st->abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
            st->n_pes = 2;
            st->n_rails = n_rails;
            st->regions = table;
            st->credit_timeout_ns = 2000000000ull;
            // Every wait bounded (as NVSHMEM_EFA_GDA_TIMEOUT_MS does): a test that would hang fails instead. Far
            // above any wait of a passing test on a loaded machine; the timeout tests set their own.
            st->timeout_ns = 60000000000ull;
        }
        s0.my_pe = 0;
        s1.my_pe = 1;
        for (uint32_t r = 0; r < n_rails; r++) setup_rail(r, hot, r ? (reorder_rest ? reorder_rest : reorder) : reorder, idle_us);
        for (auto &e : emus) e->start();
    }
    ~Rig() {
        for (auto &e : emus) e->stop();
    }
    std::string violations() {
        std::string s;
        for (uint32_t r = 0; r < n_rails; r++)
            for (auto &v : emus[r]->violations()) s += (n_rails > 1 ? "rail " + std::to_string(r) + ": " : std::string()) + v.what + "; ";
        return s;
    }
    uint8_t *sym(uint64_t off) { return heap0.data() + off; }
    // Hot slot k of PE 0's state holds table row i, on every rail, as the host fills it.
    void make_hot(int k, int i) {
        for (uint32_t r = 0; r < n_rails; r++) {
            s0.rail[r].hot[k] = {row(i, r)[0].base, row(i, r)[0].length, row(i, r)[0].key, 1, 0};
            for (int pe = 0; pe < 2; pe++) s0.rail[r].fast[pe].hot[k] = {row(i, r)[1 + pe].base, row(i, r)[1 + pe].key, 1};
        }
    }
    uint64_t wqes(uint32_t rail) { return emus[rail]->stats().wqes; }

private:
    static std::vector<std::unique_ptr<Device>> make_devices(HostMemory &m, uint32_t n) {
        std::vector<std::unique_ptr<Device>> v;
        for (uint32_t r = 0; r < n; r++) v.emplace_back(new Device(m));
        return v;
    }
    static std::vector<std::unique_ptr<RailMem>> make_rails(uint32_t n, uint32_t sq_n, uint32_t wqe, uint32_t rx_n) {
        std::vector<std::unique_ptr<RailMem>> v;
        for (uint32_t r = 0; r < n; r++) {
            std::unique_ptr<RailMem> m(new RailMem());
            m->sq.assign(sq_n * wqe, 0);
            m->cq.assign(sq_n * 32, 0);
            m->rx_cq.assign(rx_n * 32, 0);
            m->idle_sq.assign(sq_n * 64, 0);
            m->idle_cq.assign(sq_n * 32, 0);
            m->slot_done.resize(sq_n);
            for (uint32_t i = 0; i < sq_n; i++) m->slot_done[i] = i - sq_n;
            m->slot_pe.assign(sq_n, 0xffff);
            m->slot_pe.resize(sq_n + 2 * 2, 0);
            m->sig0.assign(sq_n, 0);
            v.push_back(std::move(m));
        }
        return v;
    }
    void setup_rail(uint32_t r, bool hot, const char *reorder, uint32_t idle_us) {
        RailMem &m = *rails[r];
        Device &dev = *emus[r];
        const uint16_t qpn0 = (uint16_t)(10 + 2 * r), qpn1 = (uint16_t)(11 + 2 * r);
        nvshmemx_efa_gda_rail_t &a = s0.rail[r], &b = s1.rail[r];
        nvshmemx_efa_gda_qp_t &q = a.qp;
        q.sq_buf = m.sq.data();
        q.sq_db = &m.db;
        q.sq_entries = sq_entries;
        q.sq_log2 = (uint32_t)__builtin_ctz(sq_entries);
        q.max_batch = max_batch;
        q.wqe_size = wqe_size;
        q.cq_buf = m.cq.data();
        q.cq_entries = sq_entries;
        q.cq_log2 = q.sq_log2;
        q.cq_entry_size = 32;
        q.qp_num = qpn0;
        q.max_rdma_size = max_rdma;
        q.slot_done = m.slot_done.data();
        q.slot_pe = m.slot_pe.data();
        b.qp = q;
        b.qp.qp_num = qpn1;
        m.rx.cq_buf = m.rx_cq.data();
        m.rx.cq_entries = rx_entries;
        m.rx.cq_log2 = (uint32_t)__builtin_ctz(rx_entries);
        m.rx.cq_entry_size = 32;
        m.rx.qp_num = qpn1;
        m.peers = {{1, qpn0, 0x5A5A}, {2, qpn1, 0x6B6B}};
        auto credits = [](nvshmemx_efa_gda_credits_t &c, uint64_t *blk, uint32_t *lock, uint32_t lkey,
                          nvshmemx_efa_gda_region_t *peer) {
            c.consumed = blk;
            c.sent = blk + 2;
            c.seen = blk + 4;
            c.landing = blk + 6;
            c.lock = lock;
            c.lkey = lkey;
            c.peer_consumed = peer;
        };
        const uint32_t rk = 0x10u * r;
        credits(m.credits0, m.cred0, m.lock0, 0x301 + rk, m.peer_consumed0);
        credits(m.credits1, m.cred1, m.lock1, 0x302 + rk, m.peer_consumed1);
        m.peer_consumed0[0] = {(uint64_t)m.cred0, 16, 0x301 + rk, 1};  // PE 0's own consumed[] (what a failed post's filler reads)
        m.peer_consumed0[1] = {(uint64_t)m.cred1, 16, 0x300 + rk, 1};  // PE 1's consumed[] as PE 0 reads it
        for (nvshmemx_efa_gda_rail_t *rl : {&a, &b}) {
            rl->imm_window = rx_entries / 2;
            rl->peers = m.peers.data();
            for (int pe = 0; pe < 2; pe++) rl->fast[pe].addr = m.peers[pe];
        }
        a.credits = &m.credits0;
        a.signal_src = m.sig0.data();
        a.signal_lkey = 0x401 + rk;
        b.rx_cq = &m.rx;
        b.credits = &m.credits1;
        if (hot)
            for (int i = 0; i < 3; i++) {
                a.hot[i] = {row(i, r)[0].base, row(i, r)[0].length, row(i, r)[0].key, 1, 0};
                for (int pe = 0; pe < 2; pe++) a.fast[pe].hot[i] = {row(i, r)[1 + pe].base, row(i, r)[1 + pe].key, 1};
            }

        // The NIC's view (this rail's keys only).
        uint64_t off = 0;
        for (int i = 0; i < 3; i++) {
            dev.add_region({key(0, r, i), (uint64_t)heap0.data() + off, kPieces[i], true, true});
            dev.add_region({key(1, r, i), (uint64_t)heap1.data() + off, kPieces[i], true, true});
            off += kPieces[i];
        }
        dev.add_region({0x300 + rk, (uint64_t)m.cred1, 16, true, false});
        dev.add_region({0x301 + rk, (uint64_t)m.cred0, sizeof m.cred0, true, false});
        dev.add_region({0x401 + rk, (uint64_t)m.sig0.data(), m.sig0.size() * sizeof(uint64_t), false, false});
        QpConfig qa{};
        qa.sq = m.sq.data();
        qa.db = &m.db;
        qa.sq_entries = sq_entries;
        qa.max_batch = max_batch;
        qa.cq = m.cq.data();
        qa.cq_entries = sq_entries;
        qa.cq_entry_size = 32;
        qa.qpn = qpn0;
        qa.ah = 1;
        qa.qkey = 0x5A5A;
        qa.max_rdma_size = max_rdma;
        qa.wqe_size = wqe_size;
        dev.add_qp(qa);
        QpConfig qb = qa;
        qb.sq = m.idle_sq.data();
        qb.db = &m.idle_db;
        qb.cq = m.idle_cq.data();
        qb.wqe_size = 64;
        qb.rx_cq = m.rx_cq.data();
        qb.rx_cq_entries = rx_entries;
        qb.rx_cq_entry_size = 32;
        nvshmemx_efa_gda_rx_cq_t *rxp = &m.rx;
        qb.rx_consumed = [rxp] { return __atomic_load_n(&rxp->cq_head, __ATOMIC_SEQ_CST); };
        qb.qpn = qpn1;
        qb.ah = 2;
        qb.qkey = 0x6B6B;
        dev.add_qp(qb);
        for (uint32_t k = 0; k < n_owned; k++) {
            std::unique_ptr<RailMem::Owned> om(new RailMem::Owned());
            om->sq.assign(sq_entries * wqe_size, 0);
            om->cq.assign(sq_entries * 32, 0);
            om->slot_done.resize(sq_entries);
            for (uint32_t i = 0; i < sq_entries; i++) om->slot_done[i] = i - sq_entries;
            om->slot_pe.assign(sq_entries, 0xffff);
            om->slot_pe.resize(sq_entries + 2 * 2, 0);
            nvshmemx_efa_gda_qp_t o = q;
            o.sq_buf = om->sq.data();
            o.sq_db = &om->db;
            o.cq_buf = om->cq.data();
            o.qp_num = (uint16_t)(40 + 8 * r + k);
            o.slot_done = om->slot_done.data();
            o.slot_pe = om->slot_pe.data();
            m.owned.push_back(o);
            QpConfig qo = qa;
            qo.sq = om->sq.data();
            qo.db = &om->db;
            qo.cq = om->cq.data();
            qo.qpn = (uint16_t)o.qp_num;
            dev.add_qp(qo);
            dev.av_insert(1, 1, qo.qpn);  // PE 1 inserted PE 0's owned queues, as the host inserts every address
            m.owned_mem.push_back(std::move(om));
        }
        m.owner.assign(n_owned, 0);
        a.owned = n_owned ? m.owned.data() : nullptr;
        a.owner = n_owned ? m.owner.data() : nullptr;
        a.n_owned = n_owned;
        dev.av_insert(1, 1, qpn0);  // PE 1 inserted PE 0
        dev.av_insert(0, 2, qpn1);
        dev.av_insert(0, 1, qpn0);  // and every PE itself, as the host inserts every PE
        dev.av_insert(1, 2, qpn1);
        Reorder ro;
        std::string why;
        if (!parse_reorder(reorder, &ro, &why)) throw why;
        ro.idle_us = idle_us;
        dev.set_reorder(ro);
    }
};
constexpr uint64_t Rig::kPieces[3];

// Runs fn on its own thread and fails the whole run with a message if it has not returned within ms: for
// tests whose failure mode is a wait that never ends.
inline void within_ms(const char *what, int ms, const std::function<void()> &fn) {
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

// Runs fn on n threads, thread i being warp i (threadIdx.x = 32 i: lane 0 of warp i, the rail policy's channel i).
inline void parallel(int n, const std::function<void(int)> &fn) {
    std::vector<std::thread> t;
    for (int i = 0; i < n; i++)
        t.emplace_back([&fn, i] {
            threadIdx.x = 32u * (unsigned)i;
            fn(i);
        });
    for (auto &x : t) x.join();
}

// ---- signals ------------------------------------------------------------------------------------------------
// DeepEP's low-latency dispatch, shaped on CPU threads: token warps put each token to its expert's next slot on
// PE 1 and then bump the expert's finish counter (release); a signal warp per expert waits for the counter
// (acquire) and writes the count (-n - 1, never 0) into the expert's count slot on PE 1; the receiver polls the
// count slots and, whenever one reads non-zero, checks that all n of that expert's tokens are in place. Then it
// zeroes the count slots (the "other phase") and the next round starts: one writer per slot per round, the
// slot 0 before it is written. The operations are the caller's: put (a token's payload, PE 0 -> PE 1), signal
// (the count into its slot on PE 1) and quiet (the senders' end of a round), each returning 0 or an error.
struct SignalRun {
    int stale = 0, wrong_count = 0, signals = 0, errors = 0;
};
struct SignalOps {
    std::function<int(void *dst, const void *src, uint64_t bytes)> put;
    std::function<int(int *slot, int value)> signal;
    std::function<int()> quiet;
};
inline SignalRun dispatch_shaped(Rig &r, const SignalOps &ops, int rounds) {
    constexpr int kExperts = 8, kTokens = 24, kTokenWarps = 3, kSignalWarps = 2;
    constexpr uint64_t kToken = 8192, M = 1ull << 20;
    // PE 1: payload areas (an expert's slots), then the count slots; PE 0: one source buffer per token.
    auto area = [&](int e, int slot) { return (uint64_t)(e * kTokens + slot) * kToken; };  // at PE 1's offset 0
    const uint64_t counts = 11 * M, src0 = 6 * M;
    auto pattern = [](int round, int e, int slot) { return (uint8_t)(round * 29 + e * 7 + slot * 3 + 1); };
    // Odd slots carry short tokens, which complete at once under large:4096:N and so overtake the long ones.
    auto length = [](int slot) { return slot % 2 ? kToken / 4 : kToken; };
    SignalRun out;
    std::atomic<int> stale{0}, wrong{0}, seen_total{0}, errors{0};
    std::atomic<int> next_slot[kExperts], finished[kExperts];
    int expected[kExperts];
    std::atomic<int> phase{0};  // round r: senders run while phase == 2r, the receiver advances it
    std::atomic<int> senders_done{0};
    memset(r.heap1.data() + counts, 0, kExperts * sizeof(int));  // the slots start at 0 (DeepEP: the buffer's memset)
    for (int e = 0; e < kExperts; e++) {
        next_slot[e] = 0;
        finished[e] = 0;
        expected[e] = 0;
        for (int t = 0; t < kTokens; t++) expected[e] += (t * 5) % kExperts == e;
    }
    parallel(kTokenWarps + kSignalWarps + 1, [&](int id) {
        for (int round = 0; round < rounds; round++) {
            while (phase.load() != 2 * round) std::this_thread::yield();
            if (id < kTokenWarps) {
                for (int t = id; t < kTokens; t += kTokenWarps) {
                    const int e = (t * 5 + round * 3) % kExperts;
                    const int slot = next_slot[e].fetch_add(1);
                    uint8_t *src = r.sym(src0 + (uint64_t)t * kToken);
                    memset(src, pattern(round, e, slot), length(slot));
                    std::atomic_thread_fence(std::memory_order_seq_cst);
                    if (ops.put(r.sym(area(e, slot)), src, length(slot))) errors++;
                    finished[e].fetch_add(1, std::memory_order_release);
                }
            } else if (id < kTokenWarps + kSignalWarps) {
                for (int e = id - kTokenWarps; e < kExperts; e += kSignalWarps) {
                    while (finished[e].load(std::memory_order_acquire) != expected[e]) std::this_thread::yield();
                    if (ops.signal((int *)r.sym(counts + (uint64_t)e * sizeof(int)), -expected[e] - 1)) errors++;
                }
            } else {
                int seen = 0;
                bool done[kExperts] = {};
                while (seen < kExperts) {
                    for (int e = 0; e < kExperts; e++) {
                        if (done[e]) continue;
                        const int v = __atomic_load_n((const int *)(r.heap1.data() + counts + e * sizeof(int)), __ATOMIC_ACQUIRE);
                        if (v == 0) continue;
                        done[e] = true;
                        seen++;
                        const int n = -v - 1;
                        if (n != expected[e]) wrong++;
                        for (int i = 0; i < n && i < kTokens; i++) {
                            const volatile uint8_t *at = r.heap1.data() + area(e, i);
                            const uint8_t want = pattern(round, e, i);
                            const uint64_t len = length(i);
                            if (at[0] != want || at[len / 2] != want || at[len - 1] != want) stale++;
                        }
                    }
                    std::this_thread::yield();
                }
                seen_total += seen;
            }
            // End of the round: the senders wait for their posts (sources are reused next round), the
            // receiver zeroes the count slots (another phase than the writes) and starts the next round.
            if (id < kTokenWarps + kSignalWarps) {
                if (ops.quiet()) errors++;
                senders_done++;
            } else {
                while (senders_done.load() != kTokenWarps + kSignalWarps) std::this_thread::yield();
                senders_done = 0;
                memset(r.heap1.data() + counts, 0, kExperts * sizeof(int));
                for (int e = 0; e < kExperts; e++) next_slot[e] = 0, finished[e] = 0;
                if (round + 1 < rounds)
                    for (int e = 0; e < kExperts; e++) {
                        expected[e] = 0;
                        for (int t = 0; t < kTokens; t++) expected[e] += (t * 5 + (round + 1) * 3) % kExperts == e;
                    }
                std::atomic_thread_fence(std::memory_order_seq_cst);
                phase = 2 * (round + 1);
            }
        }
    });
    out.stale = stale;
    out.wrong_count = wrong;
    out.signals = seen_total;
    out.errors = errors;
    return out;
}
