// nvshmem-efa template deepep_efa: installed by nvshmem-efa, which rewrites this file on each run.
//
// Replaces DeepEP's IBGDA device layer (ibgda_device.cuh, which writes mlx5 WQEs) with the same function
// names over NVSHMEM's public API, so DeepEP builds and runs on an NVSHMEM without IBGDA (libfabric/EFA),
// and over the EFA GDA device path when the NVSHMEM built by nvshmem-efa has it and it is active.
//
// Defines:
//   NVSHMEM_EFA_SHIM_DEFINE_STATE       in exactly one translation unit: defines the device state and the
//                                       host function that initialises it (one definition under -rdc=true)
//   NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE   the DeepEP EPv2 layout (functions in deep_ep::legacy)
//   NVSHMEM_EFA_SHIM_GDA                the NVSHMEM install has <nvshmem_efa/nvshmemx_efa_gda_device.cuh>, and
//                                       the build chose the shim's own GDA path (build --deepep-gda shim, the
//                                       default); undefined, every remote operation is an NVSHMEM device API call
//   NVSHMEM_EFA_SHIM_STATE_ONLY         only the state (for a translation unit outside DeepEP's kernels)
//   NVSHMEM_EFA_SHIM_STANDALONE         the functions without DeepEP's headers (configs.cuh, exception.cuh,
//                                       utils.cuh), which the shim itself does not use: for a test kernel
//                                       outside DeepEP
//
// A standalone test (a kernel that calls the functions the way DeepEP's low-latency kernels do) defines
// NVSHMEM_EFA_SHIM_STANDALONE and NVSHMEM_EFA_SHIM_GDA, puts the directory holding nvshmem_efa/ (the
// transport's installed device headers) and NVSHMEM's include directory on the include path, defines
// NVSHMEM_EFA_SHIM_DEFINE_STATE in exactly one translation unit, compiles with -rdc=true (sm_90 for the
// async-proxy fence, see nvshmem_efa_shim_order_async_writes), and calls nvshmem_efa_shim::init_state() on every
// PE after nvshmemx_init_attr and before its first kernel. It calls the functions in namespace deep_ep
// (deep_ep::legacy with NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE) with DeepEP's arguments: qp_id the expert index
// that the put and the signal of one (expert, rank) share.
//
// Negative controls, for tests only (each breaks the ordering the signal protocol needs; the names say TEST so
// that nobody ships them, and init_state prints that the build is one). At most one:
//   NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL  a GDA signal is posted without waiting for its payload
//   NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL       a GDA signal waits for its payload's rail but is written on the
//                                                 next rail (another NIC), when there are several
//
// Like the ibgda_device.cuh it replaces, it brings in the DeepEP headers the kernels rely on through it.
//
// Ordering (docs/ordering.md says what the GDA path assumes of EFA and why): EFA (SRD, efa-direct) places
// writes out of order, so every path that announces data (a counter add, a flag put) first orders the data
// before it: nvshmem_fence() on NVSHMEM's path, completion of the GDA WQEs on the GDA path. A completion only
// says the write is queued towards the target's PCIe: a later write from the same NIC lands after it, a write
// from another NIC (or the target's CPU) may land before it.
//
// Rails: with GDA on several NICs of the PE (nvshmemx_efa_gda_rails() > 1) the payload and the signal of one
// (expert, rank) take one rail, rail = (destination PE + qp_id) % rails (the GDA device API's policy with
// DeepEP's qp_id, the expert, as channel): different experts and destinations take different rails, and a
// signal is written by the NIC that wrote its payload. A signal waits only for that rail's WQEs to its own
// destination (efa_gda_quiet_rail_pe: the slots of the rail's queue addressed to that PE), so a slow NIC delays
// only the experts it carries, and a slow peer only its own signals. DeepEP's quiet (nvshmemi_ibgda_quiet) and every
// add through NVSHMEM wait on every rail.
//
// Signals: with GDA active, the low-latency kernels' count and flag (the call sites the DeepEP patcher
// turned into nvshmem_efa_shim_signal_add_zeroed_single_writer) and the shrink barrier's rma_p are RDMA
// writes posted by the GPU once the payload they announce has completed: no CPU on the path. They do so only
// where the transport says the protocol's assumptions hold on every PE (writes delivered once, GPUDirect RDMA
// writes ordered for the GPU: read at init, see init_state); otherwise they go through NVSHMEM and the init
// line says why. EFA has no NIC atomics, so every other add (normal mode's head/tail counters) still goes
// through NVSHMEM (its CPU proxy) after the GDA data completed. NVSHMEM_EFA_SHIM_SIGNALS=proxy (read at init)
// sends the low-latency signals through NVSHMEM too, from the same build: the baseline `nvshmem-efa bench`
// compares against.
//
// Receive waits: DeepEP's kernels wait for a peer's data with their own bound, NUM_TIMEOUT_CYCLES (EPv2 legacy:
// LEGACY_NUM_TIMEOUT_CYCLES; 100 s of SM clock), then print "DeepEP timeout for ... receive" naming the source
// rank and trap (or mask the rank). A signal write that failed is seen by its sender's next quiet, never by the
// receiver, which waits that long. NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS (read at init, validated) replaces that bound
// in the translation units that include the shim (dispatch, combine, normal mode's waits), so a job whose peer
// stopped ends within it: cycles = ms x the device's peak clock in kHz (a slower SM clock waits longer). Unset:
// DeepEP's own. Not the GDA bound (NVSHMEM_EFA_GDA_TIMEOUT_MS): a peer may be late for its own reasons (its
// compute, a checkpoint), which no NIC timeout should judge.
//
// Peer errors: NVSHMEM_EFA_SHIM_PEER_ERRORS (read at init, validated) says what a failed GDA completion caused by one
// peer (the peer refused or did not answer: a remote status, which the transport keeps per PE and which leaves the
// queue usable) does. "trap" (the default): the kernel stops with the reason, as every other failure does. "mask":
// this PE masks that rank: the failed signal is not written, and nothing more is sent to that rank over GDA (its puts,
// signals and barrier writes are dropped), while the other ranks' traffic flows on. DeepEP's own rank masking
// (is_rank_masked, --shrink-test) then serves: the ranks waiting for the masked rank's data time out (DeepEP's
// receive bound, NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS) and mask it in DeepEP's mask buffer. A failure of the queue itself
// (a local status, a bad completion, a timeout) still traps in both modes: no rank is to blame for it.
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdint>
#include <limits>

#ifdef NVSHMEM_EFA_SHIM_GDA
#include <nvshmem_efa/nvshmemx_efa_gda_device.cuh>
#endif

#if defined(NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL) && defined(NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL)
#error "nvshmem-efa shim: define at most one NVSHMEM_EFA_SHIM_TEST_* negative control (each is a test build of its own)"
#endif

#if !defined(NVSHMEM_EFA_SHIM_STATE_ONLY) && !defined(NVSHMEM_EFA_SHIM_STANDALONE)
#ifdef NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE
#include <deep_ep/common/exception.cuh>
#include "utils.cuh"
#else
#include "configs.cuh"
#include "exception.cuh"
#include "utils.cuh"
#endif
#endif

#ifdef NVSHMEM_EFA_SHIM_DEFINE_STATE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#endif

namespace nvshmem_efa_shim {

// What DeepEP's kernels read through ibgda_get_state(). num_rc_per_pe and num_devices_initialized only size
// DeepEP's quiet loops and satisfy its asserts; NVSHMEM's libfabric transport has no per-PE QP array.
struct State {
    int num_rc_per_pe;
    int num_devices_initialized;
#ifdef NVSHMEM_EFA_SHIM_GDA
    nvshmemx_efa_gda_device_state_t* gda;  // non-null when the EFA GDA path is active
    int signals_over_gda;                  // 1: low-latency signals are GDA writes; 0: through NVSHMEM (proxy)
#endif
    unsigned long long recv_timeout_cycles;  // DeepEP's receive-wait bound (NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS); 0: DeepEP's own
    int mask_peer_errors;                    // 1: NVSHMEM_EFA_SHIM_PEER_ERRORS=mask (a peer's failure masks it); 0: trap
};

// NVSHMEM_EFA_SHIM_PEER_ERRORS (nullptr: unset): 0 for "trap", unset or empty; 1 for "mask"; -1 for anything else.
inline int parse_peer_errors(const char* v) {
    if (v == nullptr || *v == 0) return 0;
    if (v[0] == 't' && v[1] == 'r' && v[2] == 'a' && v[3] == 'p' && v[4] == 0) return 0;
    if (v[0] == 'm' && v[1] == 'a' && v[2] == 's' && v[3] == 'k' && v[4] == 0) return 1;
    return -1;
}

// The value of NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS (nullptr: unset): *ms = 0 for unset or empty, else a whole number
// of milliseconds in 1 .. 86400000 (a day). Returns -1 for anything else (a sign, a unit, 0, past a day).
inline int parse_recv_timeout_ms(const char* v, unsigned long long* ms) {
    *ms = 0;
    if (v == nullptr || *v == 0) return 0;
    unsigned long long n = 0;
    for (const char* c = v; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        n = n * 10 + static_cast<unsigned long long>(*c - '0');
        if (n > 86400000ull) return -1;
    }
    if (n == 0) return -1;
    *ms = n;
    return 0;
}

// Per-peer NVLink mapping cache for nvshmemi_get_p2p_ptr (0 = not looked up yet).
constexpr int kMaxCachedPeers = 1024;
constexpr int kPeerP2p = 1, kPeerRemote = 2;

#ifdef NVSHMEM_EFA_SHIM_DEFINE_STATE
__device__ State state_d = {};
__device__ int peer_kind_d[kMaxCachedPeers] = {};
__device__ int64_t peer_delta_d[kMaxCachedPeers] = {};
// NVSHMEM_EFA_SHIM_PEER_ERRORS=mask: 0, or the status of the failure that masked the rank (never cleared while
// kernels run; zeroed at init). Ranks past kMaxCachedPeers are never masked: their failures trap.
__device__ int masked_d[kMaxCachedPeers] = {};
// Set (never cleared while kernels run) once a shim function has sent an operation through NVSHMEM: only
// then does nvshmemi_ibgda_quiet need NVSHMEM's quiet (a proxy operation) on top of the GDA quiet.
__device__ int proxy_used_d = 0;

// Finds nvshmemx_efa_gda_get_device_state in the libfabric transport NVSHMEM loaded (a plugin opened with
// RTLD_LOCAL, so dlsym(RTLD_DEFAULT) cannot see it).
inline void* find_transport_symbol(const char* name) {
    struct Found {
        const char* name;
        void* sym;
    } found = {name, nullptr};
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) -> int {
            auto* f = static_cast<Found*>(data);
            if (!info->dlpi_name || !strstr(info->dlpi_name, "nvshmem_transport_libfabric")) return 0;
            void* h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
            if (h) f->sym = dlsym(h, f->name);
            return f->sym != nullptr;
        },
        &found);
    return found.sym;
}

// NVSHMEM_EFA_SHIM_SIGNALS: "gda" (default) or "proxy"; anything else is refused. Returns 1 for GDA, 0 for
// proxy, -1 for a value it does not know.
inline int signals_over_gda_from_env() {
    const char* v = getenv("NVSHMEM_EFA_SHIM_SIGNALS");
    if (v == nullptr || *v == 0 || strcmp(v, "gda") == 0) return 1;
    if (strcmp(v, "proxy") == 0) return 0;
    fprintf(stderr, "nvshmem-efa shim: NVSHMEM_EFA_SHIM_SIGNALS=%s is not gda or proxy\n", v);
    return -1;
}

// NVSHMEM_EFA_SHIM_PEER_ERRORS: 0 trap (default), 1 mask; -1, with the reason on stderr, for a value it refuses.
inline int peer_errors_from_env() {
    const char* v = getenv("NVSHMEM_EFA_SHIM_PEER_ERRORS");
    const int m = parse_peer_errors(v);
    if (m < 0) fprintf(stderr, "nvshmem-efa shim: NVSHMEM_EFA_SHIM_PEER_ERRORS=%s is not trap or mask\n", v);
    return m;
}

// NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS: DeepEP's receive-wait bound in ms (1 .. 86400000), as SM cycles at the
// device's peak clock; unset or empty: 0 (DeepEP's own). Returns -1, with the reason on stderr, for a value it
// refuses.
inline int recv_timeout_cycles_from_env(int device, unsigned long long* cycles) {
    *cycles = 0;
    const char* v = getenv("NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS");
    unsigned long long ms = 0;
    if (parse_recv_timeout_ms(v, &ms) != 0) {
        fprintf(stderr, "nvshmem-efa shim: NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS=%s is not a whole number of ms in 1..86400000\n", v);
        return -1;
    }
    if (ms == 0) return 0;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0) {
        fprintf(stderr, "nvshmem-efa shim: NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS is set but the device's clock rate is unknown\n");
        return -1;
    }
    *cycles = ms * static_cast<unsigned long long>(khz);  // kHz = cycles per ms
    return 0;
}

#ifdef NVSHMEM_EFA_SHIM_GDA
// Whether GDA signals keep the signal protocol's assumptions on every PE (docs/ordering.md): 1 yes; 0 no, with the
// reason in why. Each verdict is a host query of the transport, int f(const char** why) (1 yes, 0 no with a
// one-line reason), found like its device state and agreed at start-up, so the answer is the same on every PE. A
// transport without one predates that verdict and gets no GDA signals: for all this build can tell, its writes may
// land twice or its GPU may see them out of order.
//   nvshmemx_efa_gda_signals_ordered: every PE's GPU has CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING >=
//     OWNER, so a kernel that sees a signal the NIC wrote sees the payload the same NIC wrote before it.
//   nvshmemx_efa_gda_writes_delivered_once: every rail of every PE accepted FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES,
//     so no write lands twice: a late copy of a signal cannot resurrect a zeroed slot (the DeepEP invariant
//     nvshmem_efa_shim_signal_add_zeroed_single_writer relies on).
inline int gda_signals_allowed(char* why, size_t whylen) {
    using verdict_fn = int (*)(const char**);
    static const char* const queries[] = {"nvshmemx_efa_gda_signals_ordered", "nvshmemx_efa_gda_writes_delivered_once"};
    for (const char* name : queries) {
        auto query = reinterpret_cast<verdict_fn>(find_transport_symbol(name));
        if (!query) {
            snprintf(why, whylen, "this NVSHMEM's GDA transport has no %s (rebuild NVSHMEM with this nvshmem-efa)", name);
            return 0;
        }
        const char* reason = nullptr;
        if (query(&reason) != 1) {
            snprintf(why, whylen, "%s", reason ? reason : name);
            return 0;
        }
    }
    return 1;
}
#endif

// The negative control this build is (test builds only), or nullptr.
inline const char* test_switch() {
#if defined(NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL)
    return "NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL: GDA signals do not wait for their payload";
#elif defined(NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL)
    return "NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL: GDA signals are written on another rail than their payload";
#else
    return nullptr;
#endif
}

// Called right after nvshmemx_init_attr. The values satisfy both of DeepEP's device asserts:
//   low-latency dispatch: num_rc_per_pe >= num_local_experts, and num_local_experts <= NUM_MAX_LOCAL_EXPERTS;
//   normal dispatch:      num_rc_per_pe == num_channels or num_rc_per_pe >= num_sms (SMs the kernel uses,
//                         at most the device's SM count).
// So num_rc_per_pe = max(NUM_MAX_LOCAL_EXPERTS, SMs of the device); num_devices_initialized = 1 (one NIC
// path per PE). The quiet loops this sizes cost nothing beyond qp_id 0 (see nvshmemi_ibgda_quiet).
inline int init_state() {
#ifdef NUM_MAX_LOCAL_EXPERTS
    constexpr int kMaxLocalExperts = NUM_MAX_LOCAL_EXPERTS;
#else
    constexpr int kMaxLocalExperts = 1024;
#endif
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return -1;
    State s = {};
    s.num_rc_per_pe = sms > kMaxLocalExperts ? sms : kMaxLocalExperts;
    s.num_devices_initialized = 1;
    const int over_gda = signals_over_gda_from_env();
    if (over_gda < 0) return -1;
    if (recv_timeout_cycles_from_env(device, &s.recv_timeout_cycles) != 0) return -1;
    s.mask_peer_errors = peer_errors_from_env();
    if (s.mask_peer_errors < 0) return -1;
    // One line from PE 0 says which path remote operations take (nothing is switched off silently).
    const bool say = nvshmem_my_pe() == 0;
    if (say && test_switch())
        fprintf(stderr, "nvshmem-efa shim: TEST BUILD, NOT FOR USE: %s (a negative control)\n", test_switch());
#ifdef NVSHMEM_EFA_SHIM_GDA
    using get_state_fn = nvshmemx_efa_gda_device_state_t* (*)();
    using status_fn = const char* (*)();
    auto get = reinterpret_cast<get_state_fn>(find_transport_symbol("nvshmemx_efa_gda_get_device_state"));
    auto status = reinterpret_cast<status_fn>(find_transport_symbol("nvshmemx_efa_gda_status"));
    s.gda = get ? get() : nullptr;
    if (s.gda) {
        // The device code of this DeepEP build reads the state with its own layout: refuse another one.
        uint32_t abi = 0;
        if (cudaMemcpy(&abi, s.gda, sizeof abi, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
        if (abi != NVSHMEMX_EFA_GDA_ABI_VERSION) {
            fprintf(stderr,
                    "nvshmem-efa shim: the NVSHMEM transport's GDA device state is ABI %u, this DeepEP was built for ABI %u: "
                    "GDA is not used, every remote operation goes through NVSHMEM (rebuild DeepEP against this NVSHMEM)\n",
                    abi, (unsigned)NVSHMEMX_EFA_GDA_ABI_VERSION);
            s.gda = nullptr;
        }
    }
    char why_not[320] = "";
    const int allowed = s.gda && over_gda ? gda_signals_allowed(why_not, sizeof why_not) : 0;
    s.signals_over_gda = allowed;
    uint32_t rails = 0;
    if (s.gda && cudaMemcpy(&rails, &s.gda->n_rails, sizeof rails, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
    if (say && s.gda) {
        char signals[400];
        if (allowed)
            snprintf(signals, sizeof signals, "over GDA (RDMA write after the payload completed%s)",
                     rails > 1 ? ", on the payload's rail" : "");
        else if (!over_gda)
            snprintf(signals, sizeof signals, "through NVSHMEM's proxy (NVSHMEM_EFA_SHIM_SIGNALS=proxy)");
        else
            snprintf(signals, sizeof signals, "through NVSHMEM's proxy: %s", why_not);
        fprintf(stderr, "nvshmem-efa shim: EFA GDA active on %u rail%s; payload over GDA%s; low-latency signals %s; peer errors %s\n", rails,
                rails == 1 ? "" : "s", rails > 1 ? ", one rail per (expert, rank)" : "", signals,
                s.mask_peer_errors ? "mask the rank (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask)" : "trap");
    } else if (say)
        fprintf(stderr, "nvshmem-efa shim: EFA GDA not in use (%s); every remote operation goes through NVSHMEM\n",
                status ? status() : "no GDA transport in the loaded NVSHMEM");
#else
    // Built so by `nvshmem-efa build --deepep-gda device-api`, or against an NVSHMEM without GDA: only NVSHMEM's own
    // device API (build --device-api) can then carry DeepEP's remote operations over GDA, and it says so itself.
    if (say)
        fprintf(stderr, "nvshmem-efa shim: built without the shim's EFA GDA path (NVSHMEM_EFA_SHIM_GDA undefined); every remote "
                        "operation is an NVSHMEM device API call, over GDA where NVSHMEM's device API is on "
                        "(NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1 prints its path at finalize), else through NVSHMEM's proxy\n");
#endif
    if (say && s.recv_timeout_cycles)
        fprintf(stderr, "nvshmem-efa shim: DeepEP's receive waits end after %s ms (NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS; %llu cycles at the peak clock)\n",
                getenv("NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS"), s.recv_timeout_cycles);
    // A new NVSHMEM instance may map peers elsewhere: forget what the previous one cached.
    static const int no_kinds[kMaxCachedPeers] = {};
    if (cudaMemcpyToSymbol(peer_kind_d, no_kinds, sizeof no_kinds) != cudaSuccess) return -1;
    static const int unused = 0;
    if (cudaMemcpyToSymbol(proxy_used_d, &unused, sizeof unused) != cudaSuccess) return -1;
    static const int none_masked[kMaxCachedPeers] = {};
    if (cudaMemcpyToSymbol(masked_d, none_masked, sizeof none_masked) != cudaSuccess) return -1;
    return cudaMemcpyToSymbol(state_d, &s, sizeof s) == cudaSuccess ? 0 : -1;
}
#else
extern __device__ State state_d;
extern __device__ int peer_kind_d[kMaxCachedPeers];
extern __device__ int64_t peer_delta_d[kMaxCachedPeers];
extern __device__ int proxy_used_d;
extern __device__ int masked_d[kMaxCachedPeers];
#endif

// Before a shim function sends anything through NVSHMEM (so that a later quiet of ours includes NVSHMEM's).
__device__ __forceinline__ void mark_proxy_used() {
    if (*reinterpret_cast<volatile int*>(&proxy_used_d) == 0)
        *reinterpret_cast<volatile int*>(&proxy_used_d) = 1;
}

// DeepEP's receive-wait bound in SM cycles: NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS's when set, else deepep_default (its
// NUM_TIMEOUT_CYCLES). Device code reads the state (one L1 hit per spin of a wait); host code, which has no state,
// keeps DeepEP's value.
__host__ __device__ __forceinline__ unsigned long long recv_timeout_cycles(unsigned long long deepep_default) {
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__)
    const unsigned long long set = state_d.recv_timeout_cycles;
    return set ? set : deepep_default;
#else
    return deepep_default;
#endif
}

}  // namespace nvshmem_efa_shim

// DeepEP's bound, replaced in the translation units that include the shim (see "Receive waits" above). utils.cuh's
// barrier expanded its macro before this point and keeps DeepEP's value (it waits for NVLink peers only).
#ifdef NUM_TIMEOUT_CYCLES
namespace nvshmem_efa_shim {
constexpr unsigned long long kDeepEpTimeoutCycles = NUM_TIMEOUT_CYCLES;
}
#undef NUM_TIMEOUT_CYCLES
#define NUM_TIMEOUT_CYCLES (::nvshmem_efa_shim::recv_timeout_cycles(::nvshmem_efa_shim::kDeepEpTimeoutCycles))
#endif
#ifdef LEGACY_NUM_TIMEOUT_CYCLES
namespace nvshmem_efa_shim {
constexpr unsigned long long kDeepEpLegacyTimeoutCycles = LEGACY_NUM_TIMEOUT_CYCLES;
}
#undef LEGACY_NUM_TIMEOUT_CYCLES
#define LEGACY_NUM_TIMEOUT_CYCLES (::nvshmem_efa_shim::recv_timeout_cycles(::nvshmem_efa_shim::kDeepEpLegacyTimeoutCycles))
#endif

#ifndef NVSHMEM_EFA_SHIM_STATE_ONLY
#ifdef NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE
namespace deep_ep::legacy {
#else
namespace deep_ep {
#endif

__device__ __forceinline__ nvshmem_efa_shim::State* ibgda_get_state() {
    return &nvshmem_efa_shim::state_d;
}

// Whether this PE masked rank pe after its failure (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask): nothing more goes to it.
__device__ __forceinline__ bool nvshmem_efa_shim_masked(int pe) {
    return pe >= 0 && pe < nvshmem_efa_shim::kMaxCachedPeers && *reinterpret_cast<volatile int*>(&nvshmem_efa_shim::masked_d[pe]) != 0;
}

// NVLink peers: the address NVSHMEM maps for them (nvshmem_ptr); 0 when the peer is reached over the network.
// NVSHMEM maps a peer's whole heap at one offset, so the offset is learned once per peer and cached: the hot
// path is then one load, as in the IBGDA original, instead of a call per token.
__device__ __forceinline__ uint64_t nvshmemi_get_p2p_ptr(const uint64_t& ptr, const int& rank, const int& dst_rank) {
    if (rank == dst_rank)
        return ptr;
    if (dst_rank < 0 || dst_rank >= nvshmem_efa_shim::kMaxCachedPeers)
        return reinterpret_cast<uint64_t>(nvshmem_ptr(reinterpret_cast<void*>(ptr), dst_rank));
    const int known = *reinterpret_cast<volatile int*>(&nvshmem_efa_shim::peer_kind_d[dst_rank]);
    if (known == nvshmem_efa_shim::kPeerRemote)
        return 0;
    if (known == nvshmem_efa_shim::kPeerP2p)
        return ptr + static_cast<uint64_t>(__ldcg(&nvshmem_efa_shim::peer_delta_d[dst_rank]));
    const auto mapped = reinterpret_cast<uint64_t>(nvshmem_ptr(reinterpret_cast<void*>(ptr), dst_rank));
    // Idempotent: every thread that races here computes the same values.
    nvshmem_efa_shim::peer_delta_d[dst_rank] = static_cast<int64_t>(mapped - ptr);
    __threadfence();
    nvshmem_efa_shim::peer_kind_d[dst_rank] = mapped ? nvshmem_efa_shim::kPeerP2p : nvshmem_efa_shim::kPeerRemote;
    return mapped;
}

#ifdef NVSHMEM_EFA_SHIM_GDA
#ifdef __CUDACC__
#define NVSHMEM_EFA_SHIM_NOINLINE __noinline__
#else  // the shim's CPU test compiles it as host C++
#define NVSHMEM_EFA_SHIM_NOINLINE __attribute__((noinline))
#endif
// Out of line (one copy per translation unit, internal linkage under -rdc): the quiet waits anyway and the
// failure report only runs on failure. Inlined into every DeepEP kernel instantiation, the GDA code took
// internode_ll.cu from 21 s to 73 s to compile on a 2-core host (47 s with these two out of line).
// What NVSHMEM (its CPU proxy, another requester than the NIC) sends after GDA payload to pe must not overtake it at
// pe: the quiet says the payload is queued towards pe's PCIe, a read through each rail's NIC says it landed
// (efa_gda_flush). Found by efaemu's EFAEMU_PLACE_DEFER_US: without it the proxy's count or tail add overtook the
// tokens and chunks it announced (ll_pattern with signals through NVSHMEM, normal_mode).
// NVSHMEM_EFA_SHIM_PEER_ERRORS=mask: masks pe when err is pe's own failure (a remote status: the peer refused or did
// not answer; the transport keeps it per PE and the queue stays usable), says so once, and returns true: the caller
// sends nothing more to pe instead of trapping. false in trap mode and for every other error (the queue's).
static __device__ NVSHMEM_EFA_SHIM_NOINLINE bool nvshmem_efa_shim_mask_peer(int err, int pe) {
    if (!nvshmem_efa_shim::state_d.mask_peer_errors || !efa_gda_status_of_peer(static_cast<uint32_t>(err)) || pe < 0 ||
        pe >= nvshmem_efa_shim::kMaxCachedPeers)
        return false;
    if (atomicCAS(&nvshmem_efa_shim::masked_d[pe], 0, err) == 0)
        EFA_GDA_REPORT("nvshmem-efa shim: rank %d masked after its GDA failure (status %d): nothing more is sent to it "
                       "(NVSHMEM_EFA_SHIM_PEER_ERRORS=mask)\n", pe, err);
    return true;
}
// The quiet of every queue: in mask mode, every rank with a failure of its own on a shared queue is masked, and such a
// failure does not trap (efa_gda_quiet reports the first error of each queue, whichever rank caused it).
static __device__ NVSHMEM_EFA_SHIM_NOINLINE int nvshmem_efa_shim_gda_quiet_masked(nvshmemx_efa_gda_device_state_t* gda) {
    const int err = efa_gda_quiet(gda);
    if (!err || !nvshmem_efa_shim::state_d.mask_peer_errors) return err;
    int left = 0;
    const uint32_t rails = efa_gda_ro(&gda->n_rails), n_pes = efa_gda_ro(reinterpret_cast<const uint32_t*>(&gda->n_pes));
    for (uint32_t r = 0; r < rails && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        const nvshmemx_efa_gda_qp_t* qp = &gda->rail[r].qp;
        const int fatal = static_cast<int>(efa_gda_load(&qp->fatal));
        if (fatal) return fatal;
        const uint32_t* per_pe = efa_gda_pe_errors(qp);
        if (!per_pe) {  // a queue that keeps no PEs: its error is the queue's
            const int e = static_cast<int>(efa_gda_load(&qp->error));
            if (e && !left) left = e;
            continue;
        }
        for (uint32_t pe = 0; pe < n_pes; pe++) {
            const int e = static_cast<int>(efa_gda_load(&per_pe[pe]));
            if (e && !nvshmem_efa_shim_mask_peer(e, static_cast<int>(pe)) && !left) left = e;
        }
    }
    return left;
}
static __device__ NVSHMEM_EFA_SHIM_NOINLINE void nvshmem_efa_shim_gda_quiet_flush_checked(nvshmemx_efa_gda_device_state_t* gda, int pe) {
    if (nvshmem_efa_shim_masked(pe)) return;
    int err = nvshmem_efa_shim_gda_quiet_masked(gda);
    if (!err && !nvshmem_efa_shim_masked(pe)) err = efa_gda_flush(gda, pe);
    if (nvshmem_efa_shim_mask_peer(err, pe)) return;
    efa_gda_check_quiet(gda, err, "quiet and flush", pe);
}
static __device__ NVSHMEM_EFA_SHIM_NOINLINE void nvshmem_efa_shim_gda_quiet_checked(nvshmemx_efa_gda_device_state_t* gda, int pe) {
    efa_gda_check_quiet(gda, nvshmem_efa_shim_gda_quiet_masked(gda), "quiet", pe);
}
#ifndef NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL
// One rail's queue only: what a signal waits for (its payload took that rail).
// What a signal to pe waits for: the WQEs to pe on its rail (efa_gda_quiet_rail_pe), not those to other PEs. false:
// pe failed and is masked (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask): the signal is not to be written.
static __device__ NVSHMEM_EFA_SHIM_NOINLINE bool nvshmem_efa_shim_gda_quiet_rail_checked(nvshmemx_efa_gda_device_state_t* gda,
                                                                                         uint32_t rail, int pe) {
    const int err = efa_gda_quiet_rail_pe(gda, rail, pe);
    if (nvshmem_efa_shim_mask_peer(err, pe)) return false;
    efa_gda_check_quiet(gda, err, "quiet of the signal's rail and peer", pe);
    return true;
}
#endif
// The rail of everything the shim sends for one (destination PE, qp_id): DeepEP's qp_id is the expert, and the
// put and the signal of one (expert, rank) pass the same one (internode_ll.cu at 567632d: dispatch puts with
// dst_expert_local_idx to dst_rank at 267, the count with the same pair at 337; combine puts with local_expert_idx
// to dst_rank at 912, the flag with the same pair at 926). One rail, one NIC: the signal is written by the NIC
// that wrote the payload, the only order EFA gives between two writes (a completion means "queued towards the
// target's PCIe"; two NICs' DMAs are not ordered, so a signal on another NIC could land before its payload).
__device__ __forceinline__ uint32_t nvshmem_efa_shim_rail(const nvshmemx_efa_gda_device_state_t* gda, int pe, int qp_id) {
    return efa_gda_rail_of(gda, pe, static_cast<uint32_t>(qp_id));
}
// The post itself: inline for the low-latency kernels, which post per token; out of line where the including file
// defines NVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE (the patcher does for normal mode's internode.cu, one put per chunk).
#ifdef NVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE
static __device__ NVSHMEM_EFA_SHIM_NOINLINE
#else
__device__ __forceinline__
#endif
int nvshmem_efa_shim_gda_put(nvshmemx_efa_gda_device_state_t* gda, uint32_t rail, uint64_t req_rptr, uint64_t req_lptr, size_t bytes, int dst_pe) {
    return efa_gda_put_nbi_warp_on(gda, rail, reinterpret_cast<void*>(req_rptr), reinterpret_cast<const void*>(req_lptr), bytes, dst_pe);
}
static __device__ NVSHMEM_EFA_SHIM_NOINLINE void nvshmem_efa_shim_gda_put_failed(nvshmemx_efa_gda_device_state_t* gda, int err, uint64_t req_rptr, uint64_t req_lptr,
                                                                             int dst_pe, size_t bytes) {
    efa_gda_check(gda, err, "put_nbi_warp", reinterpret_cast<void*>(req_rptr), reinterpret_cast<void*>(req_lptr), dst_pe, bytes);
}
#endif

// Orders the calling warp's async-proxy writes to global memory before the put that follows reads them.
// DeepEP's low-latency combine stages each token in rdma_send_x with cp.async.bulk (TMA) stores that one elected
// lane issues (elect_one_sync: deterministic, but not promised to be lane 0), then waits with
// cp.async.bulk.wait_group.read 0 (internode_ll.cu:905 at 567632d, utils.cuh tma_store_wait), which only says the
// shared-memory source was read, not that the bytes are in global memory. The NIC reads the put's source over PCIe
// about a microsecond after the doorbell: a store still in flight would go out stale. So every lane waits for its
// own bulk groups to complete (wait_group without .read: the writes are performed; nothing to wait for in a lane
// that issued none) and fences the async proxy against the generic one (fence.proxy.async.global); __syncwarp then
// orders that before the posting lane's WQE, and the ring's system fence orders it before the doorbell. Also on
// NVSHMEM's path, where its CPU proxy posts the write that reads the source.
__device__ __forceinline__ void nvshmem_efa_shim_order_async_writes() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
    __syncwarp();
}

// Called by a whole warp with the same arguments.
template <bool kAlwaysDoPostSend = false>
__device__ __forceinline__ void nvshmemi_ibgda_put_nbi_warp(
    uint64_t req_rptr, uint64_t req_lptr, size_t bytes, int dst_pe, int qp_id, int lane_id, int message_idx) {
    (void)qp_id;  // unused without the GDA path
    (void)lane_id;
    (void)message_idx;
    nvshmem_efa_shim_order_async_writes();
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda) {
        // A masked rank (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask) gets nothing more: DeepEP masks it on its side.
        if (nvshmem_efa_shim_masked(dst_pe))
            return;
        // The rail of this (expert, rank): its signal takes it too (nvshmem_efa_shim_rail).
        const uint32_t rail = nvshmem_efa_shim_rail(gda, dst_pe, qp_id);
        // DeepEP has no way to hear of a failed put: stop with the reason rather than drop the tokens (or, in mask
        // mode, mask the rank whose failure it was).
        const int err = nvshmem_efa_shim_gda_put(gda, rail, req_rptr, req_lptr, bytes, dst_pe);
        if (err && (threadIdx.x & 31) == 0 && !nvshmem_efa_shim_mask_peer(err, dst_pe))
            nvshmem_efa_shim_gda_put_failed(gda, err, req_rptr, req_lptr, dst_pe, bytes);
        return;
    }
#endif
    if ((threadIdx.x & 31) == 0)
        nvshmem_efa_shim::mark_proxy_used();
    nvshmemx_putmem_nbi_warp(reinterpret_cast<void*>(req_rptr), reinterpret_cast<const void*>(req_lptr), bytes, dst_pe);
}

// Makes every earlier put to pe visible before what follows (an announcement sent through NVSHMEM). A failed
// GDA completion stops the kernel with the reason: a signal must never announce data that did not land.
__device__ __forceinline__ void nvshmem_efa_shim_order_before_signal(int pe) {
    nvshmem_efa_shim::mark_proxy_used();
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda)
        nvshmem_efa_shim_gda_quiet_flush_checked(gda, pe);
#endif
    (void)pe;
    nvshmem_fence();
}

// 64-bit counters (DeepEP's normal-mode tail/head buffers) get a 64-bit add, 32-bit ones a 32-bit add. Always
// through NVSHMEM: EFA has no NIC atomics, and these adds are not writes in disguise (normal mode's tail and
// head counters get several adds per round from their writer, internode.cu:835/1045/2132/2250 at 567632d).
__device__ __forceinline__ void nvshmemi_ibgda_amo_nonfetch_add(
    uint64_t* rptr, const int& value, int pe, int qp_id, bool is_local_copy = false) {
    (void)qp_id;
    if (is_local_copy) {
        atomicAdd(reinterpret_cast<unsigned long long*>(rptr), static_cast<unsigned long long>(static_cast<long long>(value)));
        return;
    }
    nvshmem_efa_shim_order_before_signal(pe);
    nvshmem_uint64_atomic_add(rptr, static_cast<uint64_t>(static_cast<int64_t>(value)), pe);
}

__device__ __forceinline__ void nvshmemi_ibgda_amo_nonfetch_add(
    int* rptr, const int& value, int pe, int qp_id, bool is_local_copy = false) {
    (void)qp_id;
    if (is_local_copy) {
        atomicAdd(rptr, value);
        return;
    }
    nvshmem_efa_shim_order_before_signal(pe);
    nvshmem_int_atomic_add(rptr, value, pe);
}

// The IBGDA original treats an untyped counter as 64-bit when it is local; keep that.
__device__ __forceinline__ void nvshmemi_ibgda_amo_nonfetch_add(
    void* rptr, const int& value, int pe, int qp_id, bool is_local_copy = false) {
    nvshmemi_ibgda_amo_nonfetch_add(static_cast<uint64_t*>(rptr), value, pe, qp_id, is_local_copy);
}

#ifdef NVSHMEM_EFA_SHIM_GDA
// The GDA state when low-latency signals go over GDA (GDA active, NVSHMEM_EFA_SHIM_SIGNALS not "proxy").
__device__ __forceinline__ nvshmemx_efa_gda_device_state_t* nvshmem_efa_shim_gda_signals() {
    const auto& st = nvshmem_efa_shim::state_d;
    return st.signals_over_gda ? st.gda : nullptr;
}

// A signal of (pe, qp_id): the value reaches pe only after every GDA WQE to pe reserved on the rail of (pe, qp_id)
// before this call completed (efa_gda_quiet_rail_pe: each such slot's own completion; EFA completes out of order),
// and it is written on that rail, by the NIC that wrote the payload. The payload of this (expert, rank) took that
// rail and went to pe (nvshmemi_ibgda_put_nbi_warp with the same pair); posts of other warps are covered because
// DeepEP orders them before the signal (a release/acquire counter or a bar.sync, see below). Other rails and other
// peers are not waited for: a slow NIC or peer delays only its own signals. Failures stop the kernel with the reason.
__device__ __forceinline__ void nvshmem_efa_shim_gda_signal(nvshmemx_efa_gda_device_state_t* gda, int* rptr, int value, int pe, int qp_id) {
    if (nvshmem_efa_shim_masked(pe))
        return;
    const uint32_t rail = nvshmem_efa_shim_rail(gda, pe, qp_id);
#ifndef NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL
    if (!nvshmem_efa_shim_gda_quiet_rail_checked(gda, rail, pe))
        return;
#endif
    uint32_t write_rail = rail;
#ifdef NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL
    write_rail = (rail + 1) % efa_gda_ro(&gda->n_rails);
#endif
    const int err = efa_gda_write_value_nbi_on(gda, write_rail, rptr, static_cast<uint32_t>(value), sizeof(int), pe);
    if (err && !nvshmem_efa_shim_mask_peer(err, pe))
        efa_gda_check(gda, err, "signal write", rptr, nullptr, pe, sizeof(int));
}
#endif

// nvshmemi_ibgda_amo_nonfetch_add(rptr, value, ...) for a slot that holds 0 when the add arrives and that
// nothing else modifies until the receiver has read it: then the add is a write of value, and over EFA GDA it
// is one (an RDMA write posted after the payload completed, no CPU involved). Without GDA, or with
// NVSHMEM_EFA_SHIM_SIGNALS=proxy, it is the add, through NVSHMEM. The DeepEP patcher calls this only at the
// low-latency call sites where DeepEP guarantees the assumption (proof at DeepEP 567632d, file:line;
// EPv2 legacy/internode_ll.cu is the same code one line earlier):
//
//   dispatch count, internode_ll.cu:337: slot rdma_recv_count[dst_expert_local_idx * num_ranks + rank] on
//   dst_rank (line 333), value -num_tokens_sent - 1 (never 0).
//   combine flag, internode_ll.cu:926: slot rdma_recv_flag[global_expert_idx] on dst_rank (line 922),
//   global_expert_idx = rank * num_local_experts + local_expert_idx (line 793), value 1.
//
//   One writer per slot per round. Each slot index contains the sender's rank (333: "+ rank"; 793), so only
//   that PE writes it, and within it only one thread: responsible_expert_idx = sm_id * num_warp_groups +
//   warp_group_id (165, 749) is unique per (SM, warp group), and only its sub-warp 0 lane 0 (325, count) or
//   sub-warp 1 lane 0 (919, flag) writes, once per launch; the receiver only reads the slot (388, 956).
//
//   The slot is 0 before the write, zeroed in another phase. Dispatch count and combine flag of buffer index
//   i are one signaling buffer (csrc/config.hpp:180 and :183 are the same pointer, asserted at :122). Each
//   low-latency call signals into buffer i = low_latency_buffer_idx and passes buffer i ^ 1 as next_clean
//   (deep_ep.cpp:1576-1577/1616 dispatch, 1721-1722/1744 combine), which its send phase zeroes (dispatch
//   internode_ll.cu:288-290, combine 778-781); the first use finds the RDMA buffer memset to 0 at Buffer::sync
//   (deep_ep.cpp:371), and clean_low_latency_buffer zeroes both between two barriers (89-95). Order: PE d
//   zeroes its buffer i in call k-1 before it sends any of its call k-1 signals (dispatch: the count waits
//   for FINISHED_SUM_TAG * 2 at 331, which includes SM 0's add made after the zeroing, 292-296; combine: the
//   flag waits for atomic_clean_flag at 920, set after the zeroing at 786); every PE s waits in call k-1's
//   receive phase for d's signals (388, 956: every (sender, expert) pair signals, a count of 0 tokens is -1);
//   s starts call k, the only one that writes into d's buffer i, after that; and d last read buffer i in call
//   k-2, before call k-1 began. So the write lands on a 0 that nothing else touches until d reads it.
//
//   DeepEP itself relies on this: the NVLink branch of both sites stores the value instead of adding it
//   (st_release_sys_global, 339 and 928), which is correct only under the same invariant. The patcher refuses
//   a tree where that store is not there with the same value.
//
// Where the invariant does not hold (normal mode's tail/head counters), the call sites keep
// nvshmemi_ibgda_amo_nonfetch_add: the add, through NVSHMEM.
__device__ __forceinline__ void nvshmem_efa_shim_signal_add_zeroed_single_writer(int* rptr, const int& value, int pe, int qp_id) {
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim_gda_signals()) {
        nvshmem_efa_shim_gda_signal(gda, rptr, value, pe, qp_id);
        return;
    }
#endif
    nvshmemi_ibgda_amo_nonfetch_add(rptr, value, pe, qp_id);
}

// A put of one int after every earlier operation completed. DeepEP calls it in the shrink barrier
// (internode_ll.cu:49) for sync_buffer_ptr[rank] on dst_rank, which only this PE writes: over GDA an RDMA write
// after a quiet of every rail, on the rail of (dst_pe, qp_id); otherwise NVSHMEM's put. The barrier announces no
// payload (what DeepEP reads after it was announced by its own signals, each on its payload's rail), so any rail
// serves it.
__device__ __forceinline__ void nvshmemi_ibgda_rma_p(
    int* rptr, const int value, int dst_pe, int qp_id, uint32_t imm = std::numeric_limits<uint32_t>::max()) {
    (void)qp_id;
    (void)imm;
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim_gda_signals()) {
        nvshmem_efa_shim_gda_quiet_checked(gda, dst_pe);
        if (nvshmem_efa_shim_masked(dst_pe))
            return;
        const int err = efa_gda_write_value_nbi_on(gda, nvshmem_efa_shim_rail(gda, dst_pe, qp_id), rptr, static_cast<uint32_t>(value),
                                                   sizeof(int), dst_pe);
        if (err && !nvshmem_efa_shim_mask_peer(err, dst_pe))
            efa_gda_check(gda, err, "barrier write", rptr, nullptr, dst_pe, sizeof(int));
        return;
    }
#endif
    nvshmem_efa_shim_order_before_signal(dst_pe);
    nvshmem_int_p(rptr, value, dst_pe);
}

// DeepEP calls this for every (peer, qp_id) pair; our quiets cover all peers, queues and rails at once, so only
// qp_id 0 does it: one quiet per peer instead of num_rc_per_pe of them. Like the IBGDA original it completes
// what went through this layer: the GDA queue, and NVSHMEM (a proxy operation) only once something of ours
// went through NVSHMEM.
__device__ __forceinline__ void nvshmemi_ibgda_quiet(int dst_pe, int qp_id) {
    (void)dst_pe;
    if (qp_id != 0)
        return;
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda) {
        nvshmem_efa_shim_gda_quiet_checked(gda, dst_pe);
        if (*reinterpret_cast<volatile int*>(&nvshmem_efa_shim::proxy_used_d) == 0)
            return;
    }
#endif
    nvshmem_quiet();
}

}  // namespace deep_ep / deep_ep::legacy
#endif  // NVSHMEM_EFA_SHIM_STATE_ONLY
