// The DeepEP shim (templates/deepep_efa/nvshmem_efa_shim.cuh) with the EFA GDA path, compiled as host C++
// (test/cuda_on_cpu.h) and called the way DeepEP's low-latency kernels call it after the DeepEP patcher
// (get_p2p_ptr, put_nbi_warp, the count/flag signal, quiet, rma_p), on CPU threads against the software EFA
// with completion reordering on. NVSHMEM is a counting stand-in: on EFA every NVSHMEM call the shim makes is
// an operation of NVSHMEM's CPU proxy. Checks which path each switch takes: signals over GDA make no NVSHMEM
// call at all; NVSHMEM_EFA_SHIM_SIGNALS=proxy sends each signal through NVSHMEM's add after the payload
// completed; without GDA everything goes through NVSHMEM; normal mode's adds always do. Rails: the tokens and the
// count of one (expert, rank) take one rail, and the count waits only for that rail.
// Built once more with each negative control of the shim (NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL,
// NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL): those builds run the rail and wait checks only, expecting the one
// behaviour their switch breaks to be broken and the other to hold.
// Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include "cuda_on_cpu.h"

#include <algorithm>

#include "nvshmemx_efa_gda_device.cuh"

#include "gda_rig.h"

// What the shim uses from CUDA beyond cuda_on_cpu.h.
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicCAS(int *p, int cmp, int val) {
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
template <typename T>
inline T __ldcg(const T *p) {
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

#define NVSHMEM_EFA_SHIM_GDA
#include "nvshmem_efa_shim.cuh"

// The shim's device state (defined by one DeepEP translation unit in a real build).
namespace nvshmem_efa_shim {
State state_d;
int peer_kind_d[kMaxCachedPeers];
int64_t peer_delta_d[kMaxCachedPeers];
int proxy_used_d;
int masked_d[kMaxCachedPeers];
}  // namespace nvshmem_efa_shim

// NVSHMEM, counted. The data moves at once from PE 0's heap to the same offset of PE 1's (as NVSHMEM would,
// later but never before the shim's own ordering: the shim completes GDA payload before it calls these).
static Rig *g_rig;
static struct {
    std::atomic<int> put{0}, add{0}, add64{0}, p{0}, fence{0}, quiet{0};
    int total() const { return put + add + add64 + p + fence + quiet; }
} g_calls;
static uint8_t *on_pe1(const void *sym) { return g_rig->heap1.data() + ((const uint8_t *)sym - g_rig->heap0.data()); }
int nvshmem_my_pe(void) { return 0; }
void *nvshmem_ptr(const void *, int) { return nullptr; }  // every peer is remote: NVLink is not usable
void nvshmem_fence(void) { g_calls.fence++; }
void nvshmem_quiet(void) { g_calls.quiet++; }
void nvshmem_int_p(int *dest, int value, int) {
    g_calls.p++;
    __atomic_store_n((int *)on_pe1(dest), value, __ATOMIC_SEQ_CST);
}
void nvshmem_int_atomic_add(int *dest, int value, int) {
    g_calls.add++;
    __atomic_fetch_add((int *)on_pe1(dest), value, __ATOMIC_SEQ_CST);
}
void nvshmem_uint64_atomic_add(uint64_t *dest, uint64_t value, int) {
    g_calls.add64++;
    __atomic_fetch_add((uint64_t *)on_pe1(dest), value, __ATOMIC_SEQ_CST);
}
void nvshmemx_putmem_nbi_warp(void *dest, const void *source, size_t bytes, int) {
    g_calls.put++;
    memcpy(on_pe1(dest), source, bytes);
}

enum class Mode { GdaSignals, ProxySignals, NoGda };

// A rig, the shim's state for the mode, the counters zeroed.
static void setup(Rig &r, Mode m) {
    g_rig = &r;
    nvshmem_efa_shim::state_d = {};
    nvshmem_efa_shim::state_d.num_rc_per_pe = 1024;
    nvshmem_efa_shim::state_d.num_devices_initialized = 1;
    nvshmem_efa_shim::state_d.gda = m == Mode::NoGda ? nullptr : &r.s0;
    nvshmem_efa_shim::state_d.signals_over_gda = m == Mode::GdaSignals ? 1 : 0;
    memset(nvshmem_efa_shim::peer_kind_d, 0, sizeof nvshmem_efa_shim::peer_kind_d);
    nvshmem_efa_shim::proxy_used_d = 0;
    memset(nvshmem_efa_shim::masked_d, 0, sizeof nvshmem_efa_shim::masked_d);
    g_calls.put = g_calls.add = g_calls.add64 = g_calls.p = g_calls.fence = g_calls.quiet = 0;
}

// What the shim's behaviour is in this build: the negative controls each break one thing.
#if defined(NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL)
static const char *const kControl = "NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL";
constexpr bool kWaitsForPayload = false, kSignalOnPayloadRail = true;
#elif defined(NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL)
static const char *const kControl = "NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL";
constexpr bool kWaitsForPayload = true, kSignalOnPayloadRail = false;
#else
static const char *const kControl = nullptr;
constexpr bool kWaitsForPayload = true, kSignalOnPayloadRail = true;
#endif

// dispatch_shaped's layout on PE 1 (gda_rig.h): expert e's token slots at e * 24 * 8 KiB, its count at 11 MiB + 4e.
static int expert_of_token(const void *dst) { return (int)(((const uint8_t *)dst - g_rig->heap0.data()) / (24 * 8192)); }
static int expert_of_count(const int *slot) { return (int)(((const uint8_t *)slot - g_rig->heap0.data() - (11 << 20)) / sizeof(int)); }

// The calls of the patched low-latency kernels, PE 0 -> PE 1 (rank 0, dst_rank 1).
static SignalOps shim_ops() {
    SignalOps o;
    o.put = [](void *dst, const void *src, uint64_t n) {
        const uint64_t d = (uint64_t)dst;
        if (deep_ep::nvshmemi_get_p2p_ptr(d, 0, 1) != 0) return 1;  // the NVLink branch: not this test's
        // As DeepEP (internode_ll.cu:267): the destination's local expert as qp_id, the token's slot as message_idx.
        static thread_local int slot = 0;
        deep_ep::nvshmemi_ibgda_put_nbi_warp(d, (uint64_t)src, n, 1, expert_of_token(dst), 0, slot++);
        return 0;
    };
    o.signal = [](int *slot, int v) {
        if (deep_ep::nvshmemi_get_p2p_ptr((uint64_t)slot, 0, 1) != 0) return 1;
        // As DeepEP (internode_ll.cu:337): the same (dst_rank, local expert) as its tokens.
        deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer(slot, v, 1, expert_of_count(slot));
        return 0;
    };
    o.quiet = [] {
        for (int qp = 0; qp < 4; qp++) deep_ep::nvshmemi_ibgda_quiet(1, qp);
        return 0;
    };
    return o;
}

// The shrink barrier's remote part (internode_ll.cu barrier()): quiet every QP of the peer, then rma_p.
static void barrier_remote_part(Rig &r, int cnt) {
    for (int qp = 0; qp < 4; qp++) deep_ep::nvshmemi_ibgda_quiet(1, qp);
    deep_ep::nvshmemi_ibgda_rma_p((int *)r.sym((12ull << 20) - 64), cnt, 1, 0);
}

// Each rail's GDA WQEs reserved so far (PE 0's queues: what the shim posted on each rail).
static std::vector<uint32_t> per_rail(Rig &r) {
    std::vector<uint32_t> v;
    for (uint32_t k = 0; k < r.n_rails; k++) v.push_back(__atomic_load_n(&r.s0.rail[k].qp.sq_reserved, __ATOMIC_SEQ_CST));
    return v;
}
// Bytes of a token put with fill(v) in place on PE 1.
static bool landed(Rig &r, uint64_t off, uint64_t n, uint8_t v) {
    const volatile uint8_t *at = r.heap1.data() + off;
    return at[0] == v && at[n / 2] == v && at[n - 1] == v;
}
static void fill(Rig &r, uint64_t off, uint64_t n, uint8_t v) {
    memset(r.sym(off), v, n);
    memset(r.heap1.data() + off, 0, n);
}
// Waits up to ms for the int at off on PE 1 to read non-zero; returns it (0: never).
static int poll_count(Rig &r, uint64_t off, int ms) {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms); std::chrono::steady_clock::now() < until;) {
        const int v = __atomic_load_n((const int *)(r.heap1.data() + off), __ATOMIC_ACQUIRE);
        if (v) return v;
        std::this_thread::yield();
    }
    return 0;
}

// Tokens of each expert from several warps and slots, then the expert's count, as DeepEP's dispatch: all of one
// (expert, rank) on one rail, rail (PE + expert) % rails, the count included (the negative control SIGNAL_OTHER_RAIL
// writes it on the next rail). The shim before spread the tokens by warp + expert + slot and the count by warp.
static void one_rail_per_expert(uint32_t n_rails) {
    Rig r("random:11:8", 256, 16, 1 << 20, 64, 64, 2000, true, n_rails);
    setup(r, Mode::GdaSignals);
    constexpr int kExperts = 8, kWarps = 3;
    constexpr uint64_t kTok = 4096, kCounts = 11ull << 20;
    memset(r.heap1.data() + kCounts, 0, kExperts * sizeof(int));
    std::string wrong;
    for (int e = 0; e < kExperts; e++) {
        const uint32_t rail = (1u + (uint32_t)e) % n_rails, signal_rail = kSignalOnPayloadRail ? rail : (rail + 1) % n_rails;
        const std::vector<uint32_t> before = per_rail(r);
        for (int w = 0; w < kWarps; w++) {
            threadIdx.x = 32u * (unsigned)(w + e);  // different warps post an expert's tokens
            const uint64_t off = (uint64_t)(e * 24 + w) * 8192;
            fill(r, off, kTok, (uint8_t)(e * 16 + w + 1));
            deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(off), (uint64_t)r.sym(off), kTok, 1, e, 0, w + 5 * e);
        }
        const std::vector<uint32_t> tokens = per_rail(r);
        threadIdx.x = 32u * 7u;  // the count's warp is another one (DeepEP: the expert's responsible warp group)
        deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer((int *)r.sym(kCounts + 4 * e), -kWarps - 1, 1, e);
        const std::vector<uint32_t> after = per_rail(r);
        for (uint32_t k = 0; k < n_rails; k++) {
            const uint32_t t = tokens[k] - before[k], c = after[k] - tokens[k];
            if (t != (k == rail ? (uint32_t)kWarps : 0u) || c != (k == signal_rail ? 1u : 0u))
                wrong += " expert " + std::to_string(e) + " rail " + std::to_string(k) + ": " + std::to_string(t) + " tokens, " +
                         std::to_string(c) + " counts;";
        }
    }
    threadIdx.x = 0;
    CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
    CHECK(wrong.empty(), "tokens and count of one expert not on rail (1 + expert) % " + std::to_string(n_rails) +
                             (kSignalOnPayloadRail ? "" : " (count on the next rail)") + ":" + wrong);
    for (int e = 0; e < kExperts; e++) {
        CHECK(*(const int *)(r.heap1.data() + kCounts + 4 * e) == -kWarps - 1, "count of expert " + std::to_string(e));
        for (int w = 0; w < kWarps; w++)
            CHECK(landed(r, (uint64_t)(e * 24 + w) * 8192, kTok, (uint8_t)(e * 16 + w + 1)), "token landed");
    }
    CHECK(r.violations().empty(), r.violations());
}

// The count of an expert on a running rail while the other rail's NIC is stalled (its thread stopped, the token
// posted to it not completed): the count waits for its own rail only, so it is posted (within 3 s) and lands. A
// count that waits on every rail (efa_gda_quiet, the shim before) waits for the stalled NIC: caught, then the NIC
// resumes so that the run goes on.
static void stalled_other_rail() {
    Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
    setup(r, Mode::GdaSignals);
    constexpr uint64_t kTok = 8192, kCounts = 11ull << 20;
    const int e_run = 1, e_stall = 0;  // rails (1 + e) % 2: expert 1 on rail 0, expert 0 on rail 1
    memset(r.heap1.data() + kCounts, 0, 8);
    r.emus[1]->stop();
    const uint64_t stalled = 0, running = 24 * 8192;
    fill(r, stalled, kTok, 0x31);
    fill(r, running, kTok, 0x32);
    deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(stalled), (uint64_t)r.sym(stalled), kTok, 1, e_stall, 0, 0);
    deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(running), (uint64_t)r.sym(running), kTok, 1, e_run, 0, 0);
    std::atomic<bool> returned{false};
    std::thread t([&] {
        deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer((int *)r.sym(kCounts + 4 * e_run), -2, 1, e_run);
        returned = true;
    });
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3); !returned && std::chrono::steady_clock::now() < until;)
        std::this_thread::yield();
    const bool posted = returned;
    // Written on its tokens' rail (running), the count lands; the control SIGNAL_OTHER_RAIL writes it on the stalled one.
    const int seen = posted && kSignalOnPayloadRail ? poll_count(r, kCounts + 4 * e_run, 3000) : 0;
    const bool stalled_landed_early = landed(r, stalled, kTok, 0x31);
    r.emus[1]->start();  // the NIC resumes: whatever waited for it returns
    t.join();
    CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
    CHECK(!stalled_landed_early, "the stalled rail's token landed while its NIC was stopped: the test proves nothing");
    CHECK(posted, "the count of the expert on the running rail was not posted within 3 s while the other rail's NIC was stalled "
                  "(the count waited for every rail)");
    CHECK(seen == -2 || !kSignalOnPayloadRail, "the count posted on the running rail did not land");
    CHECK(*(const int *)(r.heap1.data() + kCounts + 4 * e_run) == -2, "the count landed in the end");
    CHECK(landed(r, running, kTok, 0x32) && landed(r, stalled, kTok, 0x31), "tokens landed");
}

// A large token held by the NIC (large:4096:16: until 16 later WQEs completed, or 100 ms without a doorbell), then
// its expert's count: the receiver must never see the count before the token. The shim waits for the token's
// completion (its rail's quiet) before the count; the negative control NO_QUIET_BEFORE_SIGNAL posts the count at
// once, which completes first and is seen before the token. softefa places a write's bytes with its completion,
// so the control SIGNAL_OTHER_RAIL (which waits, then writes on another NIC) passes here: only efaemu's
// EFAEMU_PLACE_DEFER_US, placement after completion and unordered across NICs, catches it.
static void count_after_held_token(uint32_t n_rails, bool *count_first) {
    Rig r("large:4096:16", 256, 16, 1 << 20, 64, 64, 100000, true, n_rails);
    setup(r, Mode::GdaSignals);
    constexpr uint64_t kTok = 8192, kCounts = 11ull << 20;
    const int e = 3;
    memset(r.heap1.data() + kCounts, 0, 32);
    const uint64_t off = (uint64_t)e * 24 * 8192;
    fill(r, off, kTok, 0x5C);
    deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(off), (uint64_t)r.sym(off), kTok, 1, e, 0, 0);
    std::thread t([&] { deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer((int *)r.sym(kCounts + 4 * e), -2, 1, e); });
    const int seen = poll_count(r, kCounts + 4 * e, 3000);
    const bool in_place = landed(r, off, kTok, 0x5C);
    t.join();
    CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
    CHECK(seen == -2, "the count never landed");
    CHECK(landed(r, off, kTok, 0x5C), "the token landed in the end");
    *count_first = !in_place;
}

int main() {
    // Per round: 24 tokens, 8 counts, and 5 sender threads that each quiet at its end.
    constexpr int kRounds = 6, kSignals = 8 * kRounds, kTokens = 24 * kRounds;
    const uint64_t sync_off = (12ull << 20) - 64;

    // The rails and the wait of a signal (every build; a control build expects its one behaviour broken, and names
    // that check after itself).
    const std::string ctl = kControl ? std::string("negative control ") + kControl + ": " : std::string();
    for (uint32_t n : {2u, 4u}) {
        const std::string rails = std::to_string(n) + " rails: ";
        const std::string name = kSignalOnPayloadRail ? rails + "the tokens and the count of one (expert, rank) go on one rail, (PE + expert) % rails, "
                                                                "whichever warps and slots post them (random:11:8)"
                                                      : ctl + rails + "the count goes on the rail after its tokens' rail (random:11:8)";
        test(name.c_str(), [&] { one_rail_per_expert(n); });
    }
    test("2 rails: a count waits only for its tokens' rail: with the other rail's NIC stalled, it is posted at once", [&] { stalled_other_rail(); });
    for (uint32_t n : {1u, 2u}) {
        const std::string rails = std::to_string(n) + (n == 1 ? " rail: " : " rails: ");
        const std::string name = kWaitsForPayload ? rails + "a count is seen only after its token, which the NIC held (large:4096:16)"
                                                  : ctl + rails + "a count is seen before its token, which the NIC held (large:4096:16)";
        test(name.c_str(), [&] {
            bool count_first = false;
            count_after_held_token(n, &count_first);
            CHECK(count_first == !kWaitsForPayload, count_first ? "the count was seen before its token" : "the count waited for its token");
        });
    }
    if (kControl) {
        printf("%d failed\n", failures);
        return failures ? 1 : 0;
    }

    test("signals over GDA: the low-latency calls (get_p2p_ptr, put_nbi_warp, the patched count signal, quiet, rma_p) "
         "make no NVSHMEM call; every count finds its tokens in place (random:7:8)", [&] {
        Rig r("random:7:8", 256, 16, 1 << 20, 64, 64, 2000);
        setup(r, Mode::GdaSignals);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
        CHECK(run.errors == 0 && run.signals == kSignals, "signals seen: " + std::to_string(run.signals));
        CHECK(run.stale == 0 && run.wrong_count == 0, std::to_string(run.stale) + " tokens not in place, " +
                                                          std::to_string(run.wrong_count) + " wrong counts");
        CHECK(*(const int *)(r.heap1.data() + sync_off) == -5, "rma_p landed over GDA");
        CHECK(g_calls.total() == 0, "NVSHMEM calls: put " + std::to_string(g_calls.put) + " add " + std::to_string(g_calls.add) +
                                        " p " + std::to_string(g_calls.p) + " fence " + std::to_string(g_calls.fence) + " quiet " +
                                        std::to_string(g_calls.quiet));
        // Payload, counts and the barrier value all went through the GDA queue.
        CHECK(r.qp.sq_reserved == (uint32_t)(kTokens + kSignals + 1), "GDA WQEs: " + std::to_string(r.qp.sq_reserved));
        CHECK(r.emu->stats().reordered > 0 && r.emu->violations().empty(), r.violations());
    });

    // Orders: both rails random; rail 0 in order while rail 1 holds its large tokens (20 ms, or 16 later WQEs): every
    // count waits only for its own rail, which its tokens took.
    const char *const orders[][2] = {{"random:7:8", "random:7:8"}, {"inorder", "large:4096:16"}};
    for (const auto &order : orders) {
    const std::string name = std::string("2 rails, signals over GDA: the experts spread over both rails, every count waits for its "
                                         "tokens' rail; no NVSHMEM call; every count finds its tokens in place (rail 0 ") + order[0] + ", rail 1 " + order[1] + ")";
    test(name.c_str(), [&] {
        Rig r(order[0], 256, 16, 1 << 20, 64, 64, 20000, true, 2, order[1]);
        setup(r, Mode::GdaSignals);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
        CHECK(run.errors == 0 && run.signals == kSignals, "signals seen: " + std::to_string(run.signals));
        CHECK(run.stale == 0 && run.wrong_count == 0, std::to_string(run.stale) + " tokens not in place, " +
                                                          std::to_string(run.wrong_count) + " wrong counts");
        CHECK(*(const int *)(r.heap1.data() + sync_off) == -5, "rma_p landed over GDA");
        CHECK(g_calls.total() == 0, "NVSHMEM calls: " + std::to_string(g_calls.total()));
        const uint32_t w0 = r.s0.rail[0].qp.sq_reserved, w1 = r.s0.rail[1].qp.sq_reserved;
        CHECK(w0 > kTokens / 4 && w1 > kTokens / 4 && w0 + w1 == (uint32_t)(kTokens + kSignals + 1),
              "GDA WQEs per rail: " + std::to_string(w0) + " + " + std::to_string(w1));
        CHECK(r.wqes(0) == w0 && r.wqes(1) == w1, "each rail's NIC ran its WQEs");
        // Out of order: within a rail (random), or rail 1's tokens held past later WQEs of rail 0 (large).
        const Stats a = r.emus[0]->stats(), b = r.emus[1]->stats();
        CHECK(a.reordered + b.reordered > 0 || b.max_held > 1, "completions were not out of order");
        CHECK(r.violations().empty(), r.violations());
    });
    }

    test("2 rails, NVSHMEM_EFA_SHIM_SIGNALS=proxy: the counts go through NVSHMEM after the payload completed and was flushed on both rails "
         "(random:7:8)", [&] {
        Rig r("random:7:8", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
        setup(r, Mode::ProxySignals);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(run.errors == 0 && run.signals == kSignals && run.stale == 0 && run.wrong_count == 0,
              std::to_string(run.stale) + " tokens not in place");
        CHECK(g_calls.put == 0 && g_calls.add == kSignals && g_calls.p == 1, "NVSHMEM adds " + std::to_string(g_calls.add));
        CHECK(r.s0.rail[0].qp.sq_reserved > 0 && r.s0.rail[1].qp.sq_reserved > 0 &&
                  r.s0.rail[0].qp.sq_reserved + r.s0.rail[1].qp.sq_reserved == (uint32_t)(kTokens + 2 * (kSignals + 1)),
              "the payload on GDA, on both rails, and before each of the kSignals + 1 NVSHMEM announcements one flush read "
              "per rail (efa_gda_flush: NVSHMEM's proxy is another requester than the NIC)");
    });

    test("NVSHMEM_EFA_SHIM_SIGNALS=proxy: the same calls send each count and the barrier value through NVSHMEM after the "
         "GDA payload completed; quiet then adds NVSHMEM's quiet (random:7:8)", [&] {
        Rig r("random:7:8", 256, 16, 1 << 20, 64, 64, 2000);
        setup(r, Mode::ProxySignals);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(run.errors == 0 && run.signals == kSignals && run.stale == 0 && run.wrong_count == 0,
              std::to_string(run.stale) + " tokens not in place");
        CHECK(g_calls.put == 0 && g_calls.add == kSignals && g_calls.p == 1 && g_calls.fence == kSignals + 1,
              "NVSHMEM calls: put " + std::to_string(g_calls.put) + " add " + std::to_string(g_calls.add) + " p " +
                  std::to_string(g_calls.p) + " fence " + std::to_string(g_calls.fence));
        // The barrier's quiet comes after the signals: NVSHMEM's quiet is part of it.
        CHECK(g_calls.quiet >= 1, "NVSHMEM quiets: " + std::to_string(g_calls.quiet));
        CHECK(r.qp.sq_reserved == (uint32_t)(kTokens + kSignals + 1),
              "the payload on GDA and one flush read before each NVSHMEM announcement: " + std::to_string(r.qp.sq_reserved));
    });

    test("GDA not active: every put, signal, quiet and rma_p goes through NVSHMEM", [&] {
        Rig r("inorder");
        setup(r, Mode::NoGda);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(run.errors == 0 && run.signals == kSignals && run.stale == 0 && run.wrong_count == 0, "the run");
        CHECK(g_calls.put == kTokens && g_calls.add == kSignals && g_calls.p == 1 && g_calls.quiet == kRounds * 5 + 1,
              "NVSHMEM calls: put " + std::to_string(g_calls.put) + " add " + std::to_string(g_calls.add));
        CHECK(r.qp.sq_reserved == 0, "nothing on GDA");
    });

    test("normal mode's counter adds go through NVSHMEM even with GDA signals on, after the GDA payload; quiet then "
         "includes NVSHMEM's quiet; a local copy is a local atomic", [&] {
        Rig r("random:3:4");
        setup(r, Mode::GdaSignals);
        deep_ep::nvshmemi_ibgda_put_nbi_warp<true>((uint64_t)r.sym(1 << 20), (uint64_t)r.sym(0), 4096, 1, 0, 0, 0);
        deep_ep::nvshmemi_ibgda_quiet(1, 0);
        CHECK(g_calls.quiet == 0, "no NVSHMEM quiet before anything went through NVSHMEM");
        uint64_t *tail = (uint64_t *)r.sym((11ull << 20) + 512);
        *(uint64_t *)(r.heap1.data() + (11ull << 20) + 512) = 0;
        deep_ep::nvshmemi_ibgda_amo_nonfetch_add(tail, 3, 1, 0, false);
        CHECK(g_calls.add64 == 1 && g_calls.fence == 1, "the add went through NVSHMEM after a fence");
        CHECK(memcmp(r.heap1.data() + (1 << 20), r.heap0.data(), 4096) == 0, "the put completed before the add was sent");
        deep_ep::nvshmemi_ibgda_quiet(1, 0);
        CHECK(g_calls.quiet == 1, "quiet includes NVSHMEM's once something went through it");
        uint64_t local = 5;
        deep_ep::nvshmemi_ibgda_amo_nonfetch_add(&local, 2, 0, 0, true);
        CHECK(local == 7 && g_calls.add64 == 1, "local copy");
    });

    // Review 3, finding 6 (issue 35 item 6): a dead peer must not end the job where DeepEP masks ranks. PE 1's NIC
    // forgets PE 0 (av_remove): PE 0's writes to PE 1 fail UNKNOWN_PEER, a remote status the transport keeps per PE.
    for (const bool mask : {false, true}) {
        test(mask ? "NVSHMEM_EFA_SHIM_PEER_ERRORS=mask: with PE 1 refusing, its count is not written and rank 1 is masked "
                    "(once, said on stdout) instead of a trap; later tokens, counts and barrier writes to it post nothing; "
                    "DeepEP's quiet does not trap"
                  : "NVSHMEM_EFA_SHIM_PEER_ERRORS=trap (the default): with PE 1 refusing, its count's wait traps, naming the "
                    "quiet of the signal's rail and peer",
             [&] {
                 Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000);
                 setup(r, Mode::GdaSignals);
                 nvshmem_efa_shim::state_d.mask_peer_errors = mask ? 1 : 0;
                 r.emu->av_remove(1, 1, 10);
                 int *count = (int *)r.sym(11 << 20);
                 memset(r.heap1.data() + (11 << 20), 0, 8);
                 deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(0), (uint64_t)r.sym(1 << 20), 4096, 1, 0, 0, 0);
                 cpu_trap_throws = true;
                 cpu_trap_report.clear();
                 bool trapped = false;
                 try {
                     deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer(count, -3, 1, 0);
                 } catch (const CpuTrap &) {
                     trapped = true;
                 }
                 cpu_trap_throws = false;
                 CHECK(trapped == !mask, trapped ? "the count's wait trapped: " + cpu_trap_report : std::string("the count's wait did not trap"));
                 CHECK(*(int *)(r.heap1.data() + (11 << 20)) == 0, "the count landed at a PE that refuses");
                 if (!mask) {
                     CHECK(cpu_trap_report.find("quiet of the signal's rail and peer") != std::string::npos, "the trap names the wait: " + cpu_trap_report);
                     CHECK(nvshmem_efa_shim::masked_d[1] == 0, "trap mode masked rank 1");
                     return;
                 }
                 CHECK(nvshmem_efa_shim::masked_d[1] == EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER, "rank 1 masked with its status");
                 CHECK(cpu_trap_report.find("rank 1 masked after its GDA failure") != std::string::npos, "said: " + cpu_trap_report);
                 const uint64_t before = r.wqes(0);
                 deep_ep::nvshmemi_ibgda_put_nbi_warp((uint64_t)r.sym(0), (uint64_t)r.sym(1 << 20), 4096, 1, 0, 0, 0);
                 deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer(count, -3, 1, 0);
                 deep_ep::nvshmemi_ibgda_rma_p(count + 1, 7, 1, 0);
                 for (int qp = 0; qp < 4; qp++) deep_ep::nvshmemi_ibgda_quiet(1, qp);
                 CHECK(r.wqes(0) == before, "a masked rank was sent " + std::to_string(r.wqes(0) - before) + " WQEs");
                 CHECK(g_calls.total() == 0, "NVSHMEM was called for a masked rank");
                 const size_t said = std::count_if(cpu_trap_report.begin(), cpu_trap_report.end(), [](char c) { return c == '\n'; });
                 CHECK(said == 1, "the mask was said " + std::to_string(said) + " times");
             });
    }
    test("NVSHMEM_EFA_SHIM_PEER_ERRORS: unset, empty and trap trap; mask masks; anything else is refused", [&] {
        CHECK(nvshmem_efa_shim::parse_peer_errors(nullptr) == 0 && nvshmem_efa_shim::parse_peer_errors("") == 0, "unset and empty: trap");
        CHECK(nvshmem_efa_shim::parse_peer_errors("trap") == 0 && nvshmem_efa_shim::parse_peer_errors("mask") == 1, "trap, mask");
        for (const char *bad : {"Mask", "masked", "tra", "1", "mask ", "ignore"})
            CHECK(nvshmem_efa_shim::parse_peer_errors(bad) == -1, std::string("refused: '") + bad + "'");
    });

    test("DeepEP's receive-wait bound (NUM_TIMEOUT_CYCLES in the kernels that include the shim) is DeepEP's own until "
         "NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS sets it; the value is validated", [&] {
        nvshmem_efa_shim::state_d.recv_timeout_cycles = 0;
        CHECK(NUM_TIMEOUT_CYCLES == 200000000000ull, "unset: DeepEP's 200G cycles, got " + std::to_string(NUM_TIMEOUT_CYCLES));
        nvshmem_efa_shim::state_d.recv_timeout_cycles = 3000ull * 1980000ull;  // 3 s at 1.98 GHz
        CHECK(NUM_TIMEOUT_CYCLES == 3000ull * 1980000ull, "set: the state's cycles, got " + std::to_string(NUM_TIMEOUT_CYCLES));
        nvshmem_efa_shim::state_d.recv_timeout_cycles = 0;
        unsigned long long ms = 7;
        CHECK(nvshmem_efa_shim::parse_recv_timeout_ms(nullptr, &ms) == 0 && ms == 0, "unset is DeepEP's own (0)");
        CHECK(nvshmem_efa_shim::parse_recv_timeout_ms("", &ms) == 0 && ms == 0, "empty is DeepEP's own (0)");
        CHECK(nvshmem_efa_shim::parse_recv_timeout_ms("5000", &ms) == 0 && ms == 5000, "5000 ms");
        CHECK(nvshmem_efa_shim::parse_recv_timeout_ms("86400000", &ms) == 0 && ms == 86400000, "a day");
        for (const char *bad : {"0", "-1", "5s", "abc", "86400001", "99999999999999999999999", " 5", "1e3"})
            CHECK(nvshmem_efa_shim::parse_recv_timeout_ms(bad, &ms) == -1, std::string("refused: '") + bad + "'");
    });

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
