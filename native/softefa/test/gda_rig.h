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

using namespace softefa;

static int failures = 0;
#define CHECK(cond, msg)                                       \
    do {                                                       \
        if (!(cond)) throw std::string(msg) + " [" #cond "]"; \
    } while (0)

inline void test(const char *name, const std::function<void()> &fn) {
    try {
        fn();
        printf("ok %s\n", name);
    } catch (const std::string &e) {
        printf("FAIL %s: %s\n", name, e.c_str());
        failures++;
    }
    fflush(stdout);
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
    // PE 0's signal scratch (one word per SQ slot, registered for local access as the transport does).
    std::vector<uint64_t> sig0;

    // The state as the host fills it, hot slots included (hot = false: every region only in the table).
    // idle_us: how long the NIC model holds reordered WQEs when no new doorbell comes. Threads standing in
    // for warps on a loaded 2-core machine stall for milliseconds, so tests that rely on other threads'
    // WQEs overtaking a held one give it room.
    Rig(const char *reorder, uint32_t sq_n = 256, uint32_t batch = 16, uint64_t rdma = 1 << 20, uint32_t rx_n = 64,
        uint32_t wqe = 64, uint32_t idle_us = 2000, bool hot = true)
        : sq_entries(sq_n), max_batch(batch), rx_entries(rx_n), wqe_size(wqe), max_rdma(rdma), emu(new Device(mem)),
          heap0(kHeap), heap1(kHeap), sq(sq_n * wqe), cq(sq_n * 32), rx_cq(rx_n * 32), idle_sq(sq_n * 64), idle_cq(sq_n * 32),
          slot_done(sq_n), sig0(sq_n) {
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
        s0.signal_src = sig0.data();
        s0.signal_lkey = 0x401;
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
        emu->add_region({0x401, (uint64_t)sig0.data(), sig0.size() * sizeof(uint64_t), false, false});
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

// Runs fn on n threads (one "warp" each).
inline void parallel(int n, const std::function<void(int)> &fn) {
    std::vector<std::thread> t;
    for (int i = 0; i < n; i++) t.emplace_back(fn, i);
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
