// The DeepEP shim (templates/deepep_efa/nvshmem_efa_shim.cuh) with the EFA GDA path, compiled as host C++
// (test/cuda_on_cpu.h) and called the way DeepEP's low-latency kernels call it after the DeepEP patcher
// (get_p2p_ptr, put_nbi_warp, the count/flag signal, quiet, rma_p), on CPU threads against the software EFA
// with completion reordering on. NVSHMEM is a counting stand-in: on EFA every NVSHMEM call the shim makes is
// an operation of NVSHMEM's CPU proxy. Checks which path each switch takes: signals over GDA make no NVSHMEM
// call at all; NVSHMEM_EFA_SHIM_SIGNALS=proxy sends each signal through NVSHMEM's add after the payload
// completed; without GDA everything goes through NVSHMEM; normal mode's adds always do.
// Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include "cuda_on_cpu.h"

#include "nvshmemx_efa_gda_device.cuh"

#include "gda_rig.h"

// What the shim uses from CUDA beyond cuda_on_cpu.h.
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
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
    g_calls.put = g_calls.add = g_calls.add64 = g_calls.p = g_calls.fence = g_calls.quiet = 0;
}

// The calls of the patched low-latency kernels, PE 0 -> PE 1 (rank 0, dst_rank 1).
static SignalOps shim_ops() {
    SignalOps o;
    o.put = [](void *dst, const void *src, uint64_t n) {
        const uint64_t d = (uint64_t)dst;
        if (deep_ep::nvshmemi_get_p2p_ptr(d, 0, 1) != 0) return 1;  // the NVLink branch: not this test's
        // As DeepEP: the expert (derived here from the token's slot area) as qp_id, the token's slot as message_idx.
        static thread_local int slot = 0;
        deep_ep::nvshmemi_ibgda_put_nbi_warp(d, (uint64_t)src, n, 1, (int)((d >> 13) % 8), 0, slot++);
        return 0;
    };
    o.signal = [](int *slot, int v) {
        if (deep_ep::nvshmemi_get_p2p_ptr((uint64_t)slot, 0, 1) != 0) return 1;
        deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer(slot, v, 1, 0);
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

int main() {
    // Per round: 24 tokens, 8 counts, and 5 sender threads that each quiet at its end.
    constexpr int kRounds = 6, kSignals = 8 * kRounds, kTokens = 24 * kRounds;
    const uint64_t sync_off = (12ull << 20) - 64;

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

    // Orders: both rails random; rail 0 in order while rail 1 holds its large tokens (20 ms, or 16 later WQEs), so a
    // count that waited for its own rail only would land before the tokens of the other.
    const char *const orders[][2] = {{"random:7:8", "random:7:8"}, {"inorder", "large:4096:16"}};
    for (const auto &order : orders) {
    const std::string name = std::string("2 rails, signals over GDA: the tokens spread over both rails, every count waits for both; "
                                         "no NVSHMEM call; every count finds its tokens in place (rail 0 ") + order[0] + ", rail 1 " + order[1] + ")";
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

    test("2 rails, NVSHMEM_EFA_SHIM_SIGNALS=proxy: the counts go through NVSHMEM after the payload completed on both rails "
         "(random:7:8)", [&] {
        Rig r("random:7:8", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
        setup(r, Mode::ProxySignals);
        const SignalRun run = dispatch_shaped(r, shim_ops(), kRounds);
        barrier_remote_part(r, -5);
        CHECK(run.errors == 0 && run.signals == kSignals && run.stale == 0 && run.wrong_count == 0,
              std::to_string(run.stale) + " tokens not in place");
        CHECK(g_calls.put == 0 && g_calls.add == kSignals && g_calls.p == 1, "NVSHMEM adds " + std::to_string(g_calls.add));
        CHECK(r.s0.rail[0].qp.sq_reserved > 0 && r.s0.rail[1].qp.sq_reserved > 0 &&
                  r.s0.rail[0].qp.sq_reserved + r.s0.rail[1].qp.sq_reserved == (uint32_t)kTokens,
              "only the payload on GDA, on both rails");
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
        CHECK(r.qp.sq_reserved == (uint32_t)kTokens, "only the payload on GDA: " + std::to_string(r.qp.sq_reserved));
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

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
