// NVSHMEM's device API over EFA GDA (templates/transport_efa_gda/nvshmemx_efa_gda_device_api.cuh), compiled as host
// C++ (test/cuda_on_cpu.h) and called as NVSHMEM's patched nvshmemi_transfer_* functions call it, on CPU threads
// against the software EFA. NVSHMEM's proxy is a counting stand-in that applies each operation to PE 1 at once, as
// soon as it is called, and notes whether the GDA data the program ordered before it was in place by then: on EFA
// the proxy is another requester, which a GDA write that completed but was not yet placed could be overtaken by.
// Checks which path each operation takes, what is counted, and the ordering rules: a SET signal never lands
// before its payload, a proxy operation never runs before the GDA data ordered before it is in place, a fence
// orders a GDA write after a held one.
// Built once more with each negative control of the device API (NVSHMEMX_EFA_GDA_API_TEST_*): those builds run
// the ordering checks only, expecting the one rule their switch breaks to be broken and the others to hold.
// Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include "cuda_on_cpu.h"

#include "nvshmemx_efa_gda_device.cuh"

#include "gda_rig.h"

#include <chrono>

// What the device API takes from NVSHMEM (transfer_device.cuh's includes), as stand-ins.
#define __constant__
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
typedef enum { NVSHMEMI_THREADGROUP_THREAD = 0, NVSHMEMI_THREADGROUP_WARP = 1, NVSHMEMI_THREADGROUP_BLOCK = 3 } threadgroup_t;
typedef enum { NVSHMEMI_OP_PUT = 1, NVSHMEMI_OP_GET = 3 } nvshmemi_op_t;
typedef enum { NVSHMEMI_AMO_ADD = 4, NVSHMEMI_AMO_SIGNAL = 8, NVSHMEMI_AMO_SIGNAL_SET = 9, NVSHMEMI_AMO_SIGNAL_ADD = 10 } nvshmemi_amo_t;
template <threadgroup_t S>
int nvshmemi_thread_id_in_threadgroup() {
    return 0;  // the calling thread is the group's first
}
template <threadgroup_t S>
void nvshmemi_threadgroup_sync() {}

static Rig *g_rig;
// What the proxy saw: its calls, and whether the GDA data the test expects before each was in place when it ran.
static struct {
    std::atomic<int> rma{0}, p{0}, g{0}, amo{0}, amo_fetch{0}, fence{0}, quiet{0};
    std::function<bool()> ordered_before;  // the GDA data a proxy operation must find in place
    std::atomic<int> ran_early{0};         // proxy operations that ran before it was
    int total() const { return rma + p + g + amo + amo_fetch + fence + quiet; }
} g_proxy;
static uint8_t *on_pe1(const void *sym) { return g_rig->heap1.data() + ((const uint8_t *)sym - g_rig->heap0.data()); }
static void proxy_saw() {
    if (g_proxy.ordered_before && !g_proxy.ordered_before()) g_proxy.ran_early++;
}
// Multi-rail NVSHMEM (AWS 3.5.7+): the proxy's put leaves through a NIC of the proxy's choosing, here rail 0, while
// GDA sends PE 1's operations through rail 1. With g_multi_rail_proxy set, a proxy put is not applied at once: the
// proxy's quiet (or fence) makes it "queued towards PE 1's PCIe" on rail 0's NIC, as an EFA completion means, and it
// lands only when that NIC has since served a read to PE 1 (a rail-0 credit refresh: efa_gda_flush), which it
// serves after the writes it placed before. A GDA write on rail 1 does not wait for it.
static bool g_multi_rail_proxy = false;
static struct HeldPut {
    uint8_t *at = nullptr;
    std::vector<uint8_t> bytes;
    bool queued = false;        // the proxy's quiet or fence ran since the put
    uint64_t queued_at = 0;     // rail 0's refreshes when it was queued
} g_held;
static uint64_t rail0_refreshes() { return __atomic_load_n((uint64_t *)&g_rig->s0.rail[0].credits->refreshes, __ATOMIC_SEQ_CST); }
static void proxy_queue_held() {
    if (g_held.at && !g_held.queued) {
        g_held.queued = true;
        g_held.queued_at = rail0_refreshes();
    }
}
// Places the held put if rail 0 served a read to PE 1 since it was queued; true once it is in place.
static bool held_put_placed() {
    if (!g_held.at) return true;
    if (!g_held.queued || rail0_refreshes() == g_held.queued_at) return false;
    memcpy(g_held.at, g_held.bytes.data(), g_held.bytes.size());
    g_held.at = nullptr;
    return true;
}
void nvshmemi_proxy_rma_nbi(void *rptr, void *lptr, size_t bytes, int, nvshmemi_op_t op) {
    proxy_saw();
    g_proxy.rma++;
    if (op == NVSHMEMI_OP_PUT && g_multi_rail_proxy) {
        g_held.at = on_pe1(rptr);
        g_held.bytes.assign((uint8_t *)lptr, (uint8_t *)lptr + bytes);
        g_held.queued = false;
    } else if (op == NVSHMEMI_OP_PUT) memcpy(on_pe1(rptr), lptr, bytes);
    else memcpy(lptr, on_pe1(rptr), bytes);
}
void nvshmemi_proxy_quiet(bool) {
    g_proxy.quiet++;
    proxy_queue_held();
}
void nvshmemi_proxy_fence() {
    g_proxy.fence++;
    proxy_queue_held();
}
template <typename T>
void nvshmemi_proxy_rma_p(void *rptr, T value, int) {
    proxy_saw();
    g_proxy.p++;
    memcpy(on_pe1(rptr), &value, sizeof(T));
}
template <typename T>
T nvshmemi_proxy_rma_g(void *rptr, int) {
    proxy_saw();
    g_proxy.g++;
    T v;
    memcpy(&v, on_pe1(rptr), sizeof(T));
    return v;
}
template <typename T>
void nvshmemi_proxy_amo_nonfetch(void *rptr, T value, int, nvshmemi_amo_t op) {
    proxy_saw();
    g_proxy.amo++;
    T *at = (T *)on_pe1(rptr);
    if (op == NVSHMEMI_AMO_SIGNAL_SET) __atomic_store_n(at, value, __ATOMIC_SEQ_CST);
    else __atomic_fetch_add(at, value, __ATOMIC_SEQ_CST);
}
template <typename T>
void nvshmemi_proxy_amo_fetch(void *rptr, void *ret, T value, T, int, nvshmemi_amo_t) {
    proxy_saw();
    g_proxy.amo_fetch++;
    *(T *)ret = __atomic_fetch_add((T *)on_pe1(rptr), value, __ATOMIC_SEQ_CST);
}

#include "nvshmemx_efa_gda_device_api.cuh"

nvshmemx_efa_gda_api_slot_t nvshmemi_efa_gda_api_d;

#if defined(NVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT";
#elif defined(NVSHMEMX_EFA_GDA_API_TEST_FENCE_NO_GDA_QUIET)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_FENCE_NO_GDA_QUIET";
#elif defined(NVSHMEMX_EFA_GDA_API_TEST_NO_FLUSH_BEFORE_PROXY)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_NO_FLUSH_BEFORE_PROXY";
#elif defined(NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH";
#elif defined(NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL";
#elif defined(NVSHMEMX_EFA_GDA_API_TEST_NO_PROXY_FLUSH)
static const char *const kControl = "NVSHMEMX_EFA_GDA_API_TEST_NO_PROXY_FLUSH";
#else
static const char *const kControl = nullptr;
#endif
static bool broken(const char *ctl) { return kControl != nullptr && strcmp(kControl ? kControl : "", ctl) == 0; }
// One ordering rule and its negative control: in the build with `control`'s switch the test is named for what that
// build breaks (when_broken), elsewhere for the rule; fn(broken) runs it.
static void rule(const char *control, const char *when_broken, const std::string &title, const std::function<void(bool)> &fn) {
    const bool b = broken(control);
    test((b ? std::string("negative control ") + control + ": " + when_broken : title).c_str(), [&] { fn(b); });
}

// The slot and shared block as the host fills them for PE 0. g's scratch: kGSlots words in PE 0's heap, at kGScratch
// (the host registers its own buffer local-only; any GDA-registered local memory serves the device code alike).
static nvshmemx_efa_gda_api_shared_t g_shared;
static unsigned int g_flushed[2];
constexpr uint32_t kGSlots = 4;
constexpr uint64_t kGScratch = 10ull << 20;
static unsigned int g_locks[kGSlots];
static unsigned int g_unflushed[1];        // the unflushed bits of 2 PEs
static unsigned int g_proxy_unflushed[1];  // the PEs the proxy wrote to since their last flush
// reads_ordered: every GPU orders GPUDirect RDMA writes (the host's READS_OVER_GDA; values over GDA need it too).
static void setup(Rig &r, bool values_over_gda, uint32_t g_slots = 0, bool reads_ordered = true) {
    g_rig = &r;
    g_shared = {};
    g_flushed[0] = g_flushed[1] = 0;
    g_shared.flushed_at = g_flushed;
    g_unflushed[0] = 0;
    g_shared.unflushed = g_unflushed;
    g_proxy_unflushed[0] = 0;
    g_shared.proxy_unflushed = g_proxy_unflushed;
    memset(g_locks, 0, sizeof g_locks);
    g_shared.g_value = (unsigned long long *)r.sym(kGScratch);
    g_shared.g_lock = g_locks;
    nvshmemi_efa_gda_api_d = {NVSHMEMX_EFA_GDA_API_ABI, 1, &r.s0, &g_shared,
                              (values_over_gda ? NVSHMEMX_EFA_GDA_API_VALUES_OVER_GDA : 0u) | (reads_ordered ? NVSHMEMX_EFA_GDA_API_READS_OVER_GDA : 0u),
                              g_slots};
    g_proxy.rma = g_proxy.p = g_proxy.g = g_proxy.amo = g_proxy.amo_fetch = g_proxy.fence = g_proxy.quiet = 0;
    g_proxy.ordered_before = nullptr;
    g_proxy.ran_early = 0;
    g_multi_rail_proxy = false;
    g_held = HeldPut();
}
static void fill(Rig &r, uint64_t off, uint64_t n, uint8_t v) {
    memset(r.sym(off), v, n);
    memset(r.heap1.data() + off, 0, n);
}
static bool landed(Rig &r, uint64_t off, uint64_t n, uint8_t v) {
    const volatile uint8_t *at = r.heap1.data() + off;
    return at[0] == v && at[n / 2] == v && at[n - 1] == v;
}
// Waits up to ms for the 8 bytes at off on PE 1 to read non-zero; then says whether [poff, poff + pn) held v.
static bool poll_then_check(Rig &r, uint64_t off, int ms, uint64_t poff, uint64_t pn, uint8_t v, bool *seen) {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms); std::chrono::steady_clock::now() < until;) {
        if (__atomic_load_n((const uint64_t *)(r.heap1.data() + off), __ATOMIC_ACQUIRE)) {
            *seen = true;
            return landed(r, poff, pn, v);
        }
        std::this_thread::yield();
    }
    *seen = false;
    return false;
}

// The NIC holds a WQE of 4 KiB or more until 16 later ones completed, or 100 ms pass without a doorbell.
#define HELD_RIG Rig r("large:4096:16", 256, 16, 1 << 20, 64, 64, 100000)
constexpr uint64_t kTok = 8192, kFlag = 11ull << 20;

// A put of kTok bytes (held by the NIC) and then `then` on another thread; the receiver polls kFlag on PE 1 and
// reports whether the payload was in place when the flag appeared.
static bool flag_after_held_payload(Rig &r, const std::function<void()> &then) {
    fill(r, 0, kTok, 0x5C);
    memset(r.heap1.data() + kFlag, 0, 8);
    std::thread t([&] {
        nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), kTok, 1);
        then();
    });
    bool seen = false;
    const bool in_place = poll_then_check(r, kFlag, 3000, 0, kTok, 0x5C, &seen);
    t.join();
    CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
    CHECK(seen, "the flag never landed");
    CHECK(landed(r, 0, kTok, 0x5C), "the payload landed in the end");
    return in_place;
}

static void ordering_checks() {
    rule("NVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT", "a SET signal over GDA is seen before its held payload",
         "put with SET signal (writes delivered once): the signal is a GDA write, seen only after its "
         "payload, which the NIC held (large:4096:16); no proxy call",
         [&](bool b) {
             HELD_RIG;
             setup(r, true);
             fill(r, 0, kTok, 0x5C);
             memset(r.heap1.data() + kFlag, 0, 8);
             std::thread t([&] {
                 nvshmemi_efa_gda_api_put_signal<NVSHMEMI_THREADGROUP_WARP>(r.sym(0), r.sym(0), kTok, r.sym(kFlag), 7, NVSHMEMI_AMO_SIGNAL_SET, 1, true);
             });
             bool seen = false;
             const bool in_place = poll_then_check(r, kFlag, 3000, 0, kTok, 0x5C, &seen);
             t.join();
             CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
             CHECK(seen && *(uint64_t *)(r.heap1.data() + kFlag) == 7, "the signal never landed");
             CHECK(in_place == !b, in_place ? "the signal waited for its payload" : "the signal was seen before its payload");
             CHECK(g_proxy.total() == 0, "the proxy was called");
         });
    rule("NVSHMEMX_EFA_GDA_API_TEST_NO_FLUSH_BEFORE_PROXY", "the proxy's SIGNAL_ADD runs before its held GDA payload is in place",
         "put with SIGNAL_ADD: the payload over GDA, the add through the proxy only once the payload "
         "(held by the NIC) completed and was flushed; counted as an atomic",
         [&](bool b) {
             HELD_RIG;
             setup(r, true);
             g_proxy.ordered_before = [&] { return landed(r, 0, kTok, 0x5C); };
             fill(r, 0, kTok, 0x5C);
             nvshmemi_efa_gda_api_put_signal<NVSHMEMI_THREADGROUP_THREAD>(r.sym(0), r.sym(0), kTok, r.sym(kFlag), 2, NVSHMEMI_AMO_SIGNAL_ADD, 1, true);
             CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
             CHECK(g_proxy.amo == 1, "one proxy atomic");
             CHECK((g_proxy.ran_early == 0) == !b, g_proxy.ran_early ? "the add ran before the payload was in place" : "the add waited for the payload");
             CHECK(g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC] == 1 && g_shared.proxy_issued == 1, "counted once, as an atomic");
         });
    rule("NVSHMEMX_EFA_GDA_API_TEST_FENCE_NO_GDA_QUIET", "a put after a fence is seen before the held put before it",
         "fence: a GDA put after it is seen only after the GDA put before it, which the NIC held",
         [&](bool b) {
             HELD_RIG;
             setup(r, true);
             static uint64_t one;
             one = 1;
             memcpy(r.sym(kFlag + 64), &one, 8);  // the flag's source, in PE 0's heap
             const bool in_place = flag_after_held_payload(r, [&] {
                 nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
                 nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(kFlag), r.sym(kFlag + 64), 8, 1);
             });
             CHECK(in_place == !b, in_place ? "the later put waited for the fence" : "the later put was seen first");
             CHECK(g_proxy.total() == 0, "the proxy was called (it had no work)");
         });
}

// Review 3, finding 1: NVSHMEM's fence and quiet order what the GPU sent a PE, whichever warp sent it; an EFA
// completion orders later writes only on its own NIC. So every operation to a PE must leave through one rail.
static void rail_checks() {
    rule("NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL", "warps 1 and 3 send PE 1's operations through rail 0",
         "two rails: put, p, put with SET signal, get and g to PE 1, from warps 0 to 3, all leave "
         "through PE 1's rail (1 mod 2), none through rail 0; the data lands",
         [&](bool b) {
             Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
             setup(r, true, kGSlots);
             for (unsigned w = 0; w < 4; w++) {
                 threadIdx.x = 32u * w;
                 fill(r, (uint64_t)w << 16, 4096, (uint8_t)(0x40 + w));
                 nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_PUT>(r.sym((uint64_t)w << 16), r.sym((uint64_t)w << 16), 4096, 1);
                 nvshmemi_efa_gda_api_rma_p<uint64_t>(r.sym(kFlag + 8 * w), 100 + w, 1);
                 nvshmemi_efa_gda_api_put_signal<NVSHMEMI_THREADGROUP_THREAD>(r.sym(((uint64_t)w << 16) + 8192), r.sym((uint64_t)w << 16), 64,
                                                                             r.sym(kFlag + 64 + 8 * w), 7, NVSHMEMI_AMO_SIGNAL_SET, 1, true);
                 nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_GET>(r.sym(((uint64_t)w << 16) + 16384), r.sym((uint64_t)w << 16), 64, 1);
                 (void)nvshmemi_efa_gda_api_rma_g<uint64_t>(r.sym(kFlag + 8 * w), 1);
                 CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");  // the GDA quiet alone: the API's quiet adds a flush read on every rail
                 CHECK(landed(r, (uint64_t)w << 16, 4096, (uint8_t)(0x40 + w)), "a warp's put landed");
                 CHECK(*(uint64_t *)(r.heap1.data() + kFlag + 8 * w) == 100 + w && *(uint64_t *)(r.heap1.data() + kFlag + 64 + 8 * w) == 7,
                       "its p and its signal landed");
             }
             threadIdx.x = 0;
             const uint32_t on0 = r.s0.rail[0].qp.sq_reserved;
             CHECK((on0 == 0) == !b, on0 ? "warps 1 and 3 posted " + std::to_string(on0) + " WQEs on rail 0" : std::string("every operation went through rail 1"));
             CHECK(r.s0.rail[1].qp.sq_reserved >= (b ? 2u : 4u) * 5, "rail 1 carried PE 1's operations");
             CHECK(g_proxy.total() == 0, "the proxy was called");
         });
}

// Review 3, finding 7 (proxy_fence_gda): on multi-rail NVSHMEM a put from a buffer outside GDA's regions goes through
// the proxy's NIC, which need not be the GDA rail of PE 1. The proxy's quiet only queues it towards PE 1's PCIe on
// that NIC, so fence and quiet must flush PE 1 through every rail after it, or a GDA flag after them lands first.
static void proxy_flush_checks() {
    for (const bool by_quiet : {false, true}) {
        rule("NVSHMEMX_EFA_GDA_API_TEST_NO_PROXY_FLUSH",
             by_quiet ? "proxy_fence_gda: a GDA p after quiet is seen before the proxy's put" : "proxy_fence_gda: a GDA p after fence is seen before the proxy's put",
             std::string("proxy_fence_gda: two rails, the proxy on rail 0's NIC (multi-rail NVSHMEM), PE 1's GDA rail 1: a put from a "
                         "buffer outside GDA's regions through the proxy, ") +
                 (by_quiet ? "quiet" : "fence") + ", then p of a flag over GDA: the put is in place before the flag (PE 1 flushed "
                 "through every rail after the proxy's quiet); " + (by_quiet ? "the next quiet flushes only the flag's PE" : "the next fence posts nothing"),
             [&](bool b) {
                 Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
                 setup(r, true);
                 g_multi_rail_proxy = true;
                 std::vector<uint8_t> local(4096, 0x7E);  // not in a registered region: the proxy
                 memset(r.heap1.data() + (2 << 20), 0, 4096);
                 memset(r.heap1.data() + kFlag, 0, 8);
                 nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(2 << 20), local.data(), 4096, 1);
                 CHECK(g_proxy.rma == 1, "the put went through the proxy");
                 if (by_quiet) nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
                 else nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
                 // What was placed by the time the flag is posted: the flag, a GDA write on rail 1, lands at its completion.
                 const bool in_place = held_put_placed();
                 nvshmemi_efa_gda_api_rma_p<uint64_t>(r.sym(kFlag), 1, 1);
                 CHECK(efa_gda_quiet(&r.s0) == 0, "quiet");
                 CHECK(*(uint64_t *)(r.heap1.data() + kFlag) == 1 && g_proxy.p == 0, "the flag landed over GDA");
                 CHECK(in_place == !b, in_place ? "the proxy's put was in place before the flag" : "the flag landed before the proxy's put");
                 CHECK(r.s0.rail[1].qp.sq_reserved >= 1, "the flag took rail 1");
                 uint32_t before = 0;
                 for (uint32_t k = 0; k < r.n_rails; k++) before += r.s0.rail[k].qp.sq_reserved;
                 if (by_quiet) nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
                 else nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
                 uint32_t after = 0;
                 for (uint32_t k = 0; k < r.n_rails; k++) after += r.s0.rail[k].qp.sq_reserved;
                 // A quiet flushes the flag's PE (a GDA write, a read per rail; not in the build whose quiet flushes
                 // no GDA-written PE); a fence flushes nothing more.
                 const uint32_t want = by_quiet && !broken("NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH") ? 2u : 0u;
                 CHECK(after - before == want, "the second call posted " + std::to_string(after - before) + " WQEs");
             });
    }
}

// GDA WQEs PE 0 posted on every rail so far.
static uint32_t posted(Rig &r) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < r.n_rails; k++) n += r.s0.rail[k].qp.sq_reserved;
    return n;
}

// Review 3, finding 2: a completion is "queued towards the receiver's PCIe"; quiet promises visibility at every PE,
// and NVSHMEM's barrier (a quiet, then signals to its k-ary neighbours) relies on it. softefa places with the
// completion, so what is checked is the flush quiet adds: a read through each NIC to every PE it wrote to.
static void quiet_checks() {
    rule("NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH", "quiet flushes no PE it wrote to",
         "quiet flushes each PE sent a GDA write (put, p, SET signal) since its last flush, a read per "
         "rail, and no other: not after a get alone, nor twice; two rails",
         [&](bool b) {
             Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, true, 2);
             setup(r, true);
             fill(r, 0, 4096, 0x21);
             auto quiet_adds = [&] {
                 const uint32_t before = posted(r);
                 nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
                 return posted(r) - before;
             };
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), 4096, 1);
             CHECK(g_unflushed[0] == (b ? 2u : 2u), "the put marked PE 1");
             const uint32_t first = quiet_adds();
             CHECK(first == (b ? 0u : 2u), "the quiet after a put posted " + std::to_string(first) + " WQEs (a flush is a read per rail: 2)");
             CHECK(quiet_adds() == 0, "a second quiet posted WQEs");
             nvshmemi_efa_gda_api_rma_p<uint64_t>(r.sym(kFlag), 5, 1);
             CHECK(quiet_adds() == (b ? 0u : 2u), "the quiet after a p");
             nvshmemi_efa_gda_api_put_signal<NVSHMEMI_THREADGROUP_THREAD>(r.sym(8192), r.sym(0), 64, r.sym(kFlag + 8), 3, NVSHMEMI_AMO_SIGNAL_SET, 1, true);
             CHECK(quiet_adds() == (b ? 0u : 2u), "the quiet after a put with SET signal");
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_GET>(r.sym(16384), r.sym(0), 64, 1);
             CHECK(quiet_adds() == 0, "a get writes nothing at PE 1: no flush");
             CHECK(g_proxy.total() == 0, "the proxy was called");
         });
    if (!kControl) {
        test("a proxy operation to PE 1 takes its GDA mark with its flush: after a fetching atomic the quiet flushes nothing "
             "more; a non-fetching atomic marks PE 1 as written by the proxy, and the quiet after it flushes PE 1 once",
             [&] {
                 Rig r("inorder", 256, 16, 1 << 20, 64, 64, 2000, true, 1);
                 setup(r, true);
                 fill(r, 0, 4096, 0x22);
                 nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), 4096, 1);
                 (void)nvshmemi_efa_gda_api_amo_fetch<uint64_t>(r.sym(kFlag), 1, 0, 1, NVSHMEMI_AMO_ADD);
                 CHECK(g_unflushed[0] == 0, "the atomic's flush took PE 1's mark");
                 CHECK(g_proxy_unflushed[0] == 0, "a fetching atomic, waited for, marked PE 1 for the proxy's flush");
                 uint32_t before = posted(r);
                 nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
                 CHECK(posted(r) == before, "the quiet flushed again");
                 nvshmemi_efa_gda_api_amo_nonfetch<uint64_t>(r.sym(kFlag), 1, 1, NVSHMEMI_AMO_ADD);
                 CHECK(g_proxy_unflushed[0] == 2u, "the non-fetching atomic marked PE 1 for the proxy's flush");
                 before = posted(r);
                 nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
                 CHECK(posted(r) == before + 1 && g_proxy_unflushed[0] == 0 && g_proxy.quiet == 2, "the quiet: the proxy's, then one read to PE 1");
                 nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
                 CHECK(posted(r) == before + 1, "a fence after it flushed again");
             });
    }
}

int main() {
    ordering_checks();
    rail_checks();
    quiet_checks();
    proxy_flush_checks();
    if (kControl) {
        printf("%d failed\n", failures);
        return failures ? 1 : 0;
    }

    test("put_nbi and get_nbi of heap buffers (thread, warp and block scope) go over GDA: no proxy call; the data is in "
         "place after quiet, which makes no proxy quiet (random:7:8)",
         [&] {
             Rig r("random:7:8");
             setup(r, true);
             fill(r, 4 << 20, 2 << 20, 0x11);  // across two of the heap's registered regions (5 MiB, 4 MiB, 3 MiB)
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(4 << 20), r.sym(4 << 20), 2 << 20, 1);
             fill(r, 6 << 20, 4096, 0x22);
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_PUT>(r.sym(6 << 20), r.sym(6 << 20), 4096, 1);
             memset(r.heap1.data() + (7 << 20), 0x33, 4096);
             memset(r.sym(7 << 20), 0, 4096);
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_BLOCK, NVSHMEMI_OP_GET>(r.sym(7 << 20), r.sym(7 << 20), 4096, 1);
             nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_BLOCK>(false);
             CHECK(landed(r, 4 << 20, 2 << 20, 0x11) && landed(r, 6 << 20, 4096, 0x22), "the puts landed");
             CHECK(r.sym(7 << 20)[0] == 0x33 && r.sym(7 << 20)[4095] == 0x33, "the get's data is in place");
             CHECK(g_proxy.total() == 0, "the proxy was called");
             CHECK(r.violations().empty(), r.violations());
         });

    test("blocking put and get: the data is in place when the call returns, without a quiet (large:4096:16 holds them)", [&] {
        HELD_RIG;
        setup(r, true);
        fill(r, 0, kTok, 0x44);
        nvshmemi_efa_gda_api_rma<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), kTok, 1);
        CHECK(landed(r, 0, kTok, 0x44), "the blocking put returned before its data landed");
        memset(r.heap1.data() + (1 << 20), 0x55, kTok);
        memset(r.sym(1 << 20), 0, kTok);
        nvshmemi_efa_gda_api_rma<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_GET>(r.sym(1 << 20), r.sym(1 << 20), kTok, 1);
        CHECK(r.sym(1 << 20)[0] == 0x55 && r.sym(1 << 20)[kTok - 1] == 0x55, "the blocking get returned before its data");
        CHECK(g_proxy.total() == 0, "the proxy was called");
    });

    // Review 3, finding 3: a GPU that does not order GPUDirect RDMA writes may see a read's completion before its data.
    test("a GPU that does not order RDMA writes (no READS_OVER_GDA): get, nbi and blocking, goes through the proxy, counted "
         "as a read without write ordering; puts stay GDA writes",
         [&] {
             HELD_RIG;
             setup(r, false, 0, false);
             fill(r, 0, kTok, 0x66);
             nvshmemi_efa_gda_api_rma<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), kTok, 1);
             CHECK(landed(r, 0, kTok, 0x66) && g_proxy.rma == 0, "the put did not go over GDA");
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_GET>(r.sym(1 << 20), r.sym(1 << 20), kTok, 1);
             nvshmemi_efa_gda_api_rma<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_GET>(r.sym(2 << 20), r.sym(2 << 20), kTok, 1);
             CHECK(g_proxy.rma == 2, "the gets did not both go through the proxy");
             CHECK(g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_UNORDERED_READ] == 2 &&
                       g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_NO_REGION] == 0,
                   "the gets were not counted as reads without write ordering");
             CHECK(r.violations().empty(), r.violations());
         });

    test("a put from memory GDA did not register goes through the proxy, counted (no region); the next quiet makes one proxy "
         "quiet, the quiet after it none",
         [&] {
             Rig r("random:7:8");
             setup(r, true);
             std::vector<uint8_t> local(4096, 0x66);  // not in a registered region
             memset(r.heap1.data() + (2 << 20), 0, 4096);
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(2 << 20), local.data(), 4096, 1);
             CHECK(g_proxy.rma == 1 && landed(r, 2 << 20, 4096, 0x66), "the put went through the proxy");
             CHECK(g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_NO_REGION] == 1 && g_shared.proxy_issued == 1, "counted as no region");
             nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
             CHECK(g_proxy.quiet == 1, "the quiet quieted the proxy");
             nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_WARP>(true);
             nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
             CHECK(g_proxy.quiet == 1 && g_proxy.fence == 0, "a quiet or fence with nothing new on the proxy called it");
         });

    test("a fence after a proxy operation waits for the proxy (its quiet), so a GDA put after it cannot pass it", [&] {
        Rig r("random:7:8");
        setup(r, true);
        nvshmemi_efa_gda_api_amo_nonfetch<int>(r.sym(3 << 20), 5, 1, NVSHMEMI_AMO_ADD);
        nvshmemi_efa_gda_api_fence<NVSHMEMI_THREADGROUP_THREAD>();
        CHECK(g_proxy.amo == 1 && g_proxy.quiet == 1, "the fence did not quiet the proxy");
    });

    test("p: 4 and 8 bytes are GDA writes when writes are delivered once; 1 and 2 bytes, and every size where a write may "
         "land twice, go through the proxy (counted as values); g without scratch goes through the proxy (counted)",
         [&] {
             Rig r("random:7:8");
             setup(r, true);
             memset(r.heap1.data() + (9 << 20), 0, 64);
             nvshmemi_efa_gda_api_rma_p<int>(r.sym(9 << 20), 0x01020304, 1);
             nvshmemi_efa_gda_api_rma_p<double>(r.sym((9 << 20) + 8), 2.5, 1);
             nvshmemi_efa_gda_api_rma_p<char>(r.sym((9 << 20) + 16), 'x', 1);
             nvshmemi_efa_gda_api_rma_p<short>(r.sym((9 << 20) + 18), 77, 1);
             nvshmemi_efa_gda_api_quiet<NVSHMEMI_THREADGROUP_THREAD>(false);
             int i;
             double d;
             memcpy(&i, r.heap1.data() + (9 << 20), 4);
             memcpy(&d, r.heap1.data() + (9 << 20) + 8, 8);
             CHECK(i == 0x01020304 && d == 2.5, "the GDA values landed");
             CHECK(r.heap1[(9 << 20) + 16] == 'x' && *(short *)(r.heap1.data() + (9 << 20) + 18) == 77, "the proxy values landed");
             CHECK(g_proxy.p == 2 && g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_VALUE] == 2, "1 and 2 bytes through the proxy");
             setup(r, false);
             nvshmemi_efa_gda_api_rma_p<int>(r.sym(9 << 20), 9, 1);
             CHECK(g_proxy.p == 1 && *(int *)(r.heap1.data() + (9 << 20)) == 9, "without delivered-once the proxy");
             CHECK(nvshmemi_efa_gda_api_rma_g<int>(r.sym(9 << 20), 1) == 9 && g_proxy.g == 1, "g without scratch through the proxy");
             CHECK(g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_GET_VALUE] == 1, "g counted");
         });

    test("g with scratch: every size is a GDA read into a scratch slot, its value returned once the read completed, "
         "which the NIC held (large:4:16 holds every read); no proxy call; the slot is free again",
         [&] {
             Rig r("large:4:16", 256, 16, 1 << 20, 64, 64, 100000);
             setup(r, true, kGSlots);
             uint8_t *at = r.heap1.data() + (11 << 20);
             const int i = -123456;
             const double d = 6.25;
             const short h = -7;
             memcpy(at, &i, 4);
             memcpy(at + 8, &d, 8);
             memcpy(at + 16, &h, 2);
             at[24] = 'q';
             const uint64_t before = r.wqes(0);
             CHECK(nvshmemi_efa_gda_api_rma_g<int>(r.sym(11 << 20), 1) == i, "int");
             CHECK(nvshmemi_efa_gda_api_rma_g<double>(r.sym((11 << 20) + 8), 1) == d, "double");
             CHECK(nvshmemi_efa_gda_api_rma_g<short>(r.sym((11 << 20) + 16), 1) == h, "short");
             CHECK(nvshmemi_efa_gda_api_rma_g<char>(r.sym((11 << 20) + 24), 1) == 'q', "char");
             CHECK(r.wqes(0) == before + 4, "one read WQE each");
             CHECK(g_proxy.total() == 0 && g_shared.proxy_issued == 0, "the proxy was called");
             CHECK(g_locks[0] == 0 && g_locks[1] == 0 && g_locks[2] == 0 && g_locks[3] == 0, "a slot stayed taken");
             g_locks[0] = 1;  // taken by another thread: the next slot serves
             memcpy(at, &d, 8);
             CHECK(nvshmemi_efa_gda_api_rma_g<double>(r.sym(11 << 20), 1) == d && g_locks[0] == 1 && g_locks[1] == 0, "the next free slot");
             // Scratch outside GDA's regions (a registration the NIC does not know): the proxy, counted, the slot free.
             g_locks[0] = 0;
             std::vector<unsigned long long> elsewhere(kGSlots, 0);
             g_shared.g_value = elsewhere.data();
             CHECK(nvshmemi_efa_gda_api_rma_g<double>(r.sym(11 << 20), 1) == d, "the proxy's value");
             CHECK(g_proxy.g == 1 && g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_GET_VALUE] == 1 && g_locks[0] == 0,
                   "no region: the proxy, counted, the slot free");
             CHECK(r.violations().empty(), r.violations());
         });

    test("put with SET signal where writes may land twice: the payload over GDA, the SET through the proxy after it was in place", [&] {
        HELD_RIG;
        setup(r, false);
        fill(r, 0, kTok, 0x77);
        g_proxy.ordered_before = [&] { return landed(r, 0, kTok, 0x77); };
        nvshmemi_efa_gda_api_put_signal<NVSHMEMI_THREADGROUP_BLOCK>(r.sym(0), r.sym(0), kTok, r.sym(kFlag), 3, NVSHMEMI_AMO_SIGNAL_SET, 1, false);
        CHECK(g_proxy.amo == 1 && g_proxy.ran_early == 0, "the SET went through the proxy after its payload");
        CHECK(*(uint64_t *)(r.heap1.data() + kFlag) == 3, "the signal landed");
        CHECK(g_proxy.rma == 0, "the payload went over GDA");
    });

    test("an atomic after GDA puts runs through the proxy only once they are in place; a second atomic with no GDA write "
         "since needs no flush (fetching atomics too)",
         [&] {
             HELD_RIG;
             setup(r, true);
             fill(r, 0, kTok, 0x12);
             g_proxy.ordered_before = [&] { return landed(r, 0, kTok, 0x12); };
             nvshmemi_efa_gda_api_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(r.sym(0), r.sym(0), kTok, 1);
             *(long long *)(r.heap1.data() + (3 << 20)) = 40;
             const uint64_t reads = r.wqes(0);
             CHECK(nvshmemi_efa_gda_api_amo_fetch<long long>(r.sym(3 << 20), 2, 0, 1, NVSHMEMI_AMO_ADD) == 40, "fetched");
             const uint64_t after_first = r.wqes(0);
             nvshmemi_efa_gda_api_amo_nonfetch<long long>(r.sym(3 << 20), 1, 1, NVSHMEMI_AMO_ADD);
             CHECK(g_proxy.ran_early == 0, "an atomic ran before the put was in place");
             CHECK(after_first > reads && r.wqes(0) == after_first, "the first atomic flushed (a read WQE), the second did not");
             CHECK(*(long long *)(r.heap1.data() + (3 << 20)) == 43, "both adds applied");
             CHECK(g_shared.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC] == 2, "counted as atomics");
         });

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
