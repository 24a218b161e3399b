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
//   NVSHMEM_EFA_SHIM_GDA                the NVSHMEM install has <nvshmem_efa/nvshmemx_efa_gda_device.cuh>
//   NVSHMEM_EFA_SHIM_STATE_ONLY         only the state (for a translation unit outside DeepEP's kernels)
//
// Like the ibgda_device.cuh it replaces, it brings in the DeepEP headers the kernels rely on through it.
//
// Ordering: EFA (SRD) delivers out of order, so every path that announces data (a counter add, a flag put)
// first orders the data before it: nvshmem_fence() on NVSHMEM's path, completion of the GDA WQEs on the
// GDA path (EFA has no NIC atomics; the add goes through NVSHMEM after the data completed).
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdint>
#include <limits>

#ifdef NVSHMEM_EFA_SHIM_GDA
#include <nvshmem_efa/nvshmemx_efa_gda_device.cuh>
#endif

#ifndef NVSHMEM_EFA_SHIM_STATE_ONLY
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
#endif
};

// Per-peer NVLink mapping cache for nvshmemi_get_p2p_ptr (0 = not looked up yet).
constexpr int kMaxCachedPeers = 1024;
constexpr int kPeerP2p = 1, kPeerRemote = 2;

#ifdef NVSHMEM_EFA_SHIM_DEFINE_STATE
__device__ State state_d = {};
__device__ int peer_kind_d[kMaxCachedPeers] = {};
__device__ int64_t peer_delta_d[kMaxCachedPeers] = {};

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
#ifdef NVSHMEM_EFA_SHIM_GDA
    using get_state_fn = nvshmemx_efa_gda_device_state_t* (*)();
    auto get = reinterpret_cast<get_state_fn>(find_transport_symbol("nvshmemx_efa_gda_get_device_state"));
    s.gda = get ? get() : nullptr;
#endif
    // A new NVSHMEM instance may map peers elsewhere: forget what the previous one cached.
    static const int no_kinds[kMaxCachedPeers] = {};
    if (cudaMemcpyToSymbol(peer_kind_d, no_kinds, sizeof no_kinds) != cudaSuccess) return -1;
    return cudaMemcpyToSymbol(state_d, &s, sizeof s) == cudaSuccess ? 0 : -1;
}
#else
extern __device__ State state_d;
extern __device__ int peer_kind_d[kMaxCachedPeers];
extern __device__ int64_t peer_delta_d[kMaxCachedPeers];
#endif

}  // namespace nvshmem_efa_shim

#ifndef NVSHMEM_EFA_SHIM_STATE_ONLY
#ifdef NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE
namespace deep_ep::legacy {
#else
namespace deep_ep {
#endif

__device__ __forceinline__ nvshmem_efa_shim::State* ibgda_get_state() {
    return &nvshmem_efa_shim::state_d;
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

// Called by a whole warp with the same arguments.
template <bool kAlwaysDoPostSend = false>
__device__ __forceinline__ void nvshmemi_ibgda_put_nbi_warp(
    uint64_t req_rptr, uint64_t req_lptr, size_t bytes, int dst_pe, int qp_id, int lane_id, int message_idx) {
    (void)qp_id;
    (void)lane_id;
    (void)message_idx;
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda) {
        // DeepEP has no way to hear of a failed put: stop with the reason rather than drop the tokens.
        const int err = efa_gda_put_nbi_warp(gda, reinterpret_cast<void*>(req_rptr), reinterpret_cast<const void*>(req_lptr), bytes, dst_pe);
        if ((threadIdx.x & 31) == 0)
            efa_gda_check(err, "put_nbi_warp", reinterpret_cast<void*>(req_rptr), reinterpret_cast<void*>(req_lptr), dst_pe, bytes);
        return;
    }
#endif
    nvshmemx_putmem_nbi_warp(reinterpret_cast<void*>(req_rptr), reinterpret_cast<const void*>(req_lptr), bytes, dst_pe);
}

// Makes every earlier put to pe visible before what follows (the announcement). A failed GDA completion
// stops the kernel with the reason: a signal must never announce data that did not land.
__device__ __forceinline__ void nvshmem_efa_shim_order_before_signal(int pe) {
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda)
        efa_gda_check_quiet(gda, efa_gda_quiet(gda), "quiet", pe);
#endif
    (void)pe;
    nvshmem_fence();
}

// 64-bit counters (DeepEP's normal-mode tail/head buffers) get a 64-bit add, 32-bit ones a 32-bit add.
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

__device__ __forceinline__ void nvshmemi_ibgda_rma_p(
    int* rptr, const int value, int dst_pe, int qp_id, uint32_t imm = std::numeric_limits<uint32_t>::max()) {
    (void)qp_id;
    (void)imm;
    nvshmem_efa_shim_order_before_signal(dst_pe);
    nvshmem_int_p(rptr, value, dst_pe);
}

// DeepEP calls this for every (peer, qp_id) pair; NVSHMEM's quiet covers all peers and queues at once, so
// only qp_id 0 does it: one quiet per peer instead of num_rc_per_pe of them.
__device__ __forceinline__ void nvshmemi_ibgda_quiet(int dst_pe, int qp_id) {
    (void)dst_pe;
    if (qp_id != 0)
        return;
#ifdef NVSHMEM_EFA_SHIM_GDA
    if (auto* gda = nvshmem_efa_shim::state_d.gda)
        efa_gda_check_quiet(gda, efa_gda_quiet(gda), "quiet", dst_pe);
#endif
    nvshmem_quiet();
}

}  // namespace deep_ep / deep_ep::legacy
#endif  // NVSHMEM_EFA_SHIM_STATE_ONLY
