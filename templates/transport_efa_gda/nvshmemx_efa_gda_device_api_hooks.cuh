/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * The device API hook at the caller: included at the end of NVSHMEM's nvshmemi_transfer_api.cuh (patched), the
 * header through which every application translation unit (and NVSHMEM's own collectives) reaches the
 * nvshmemi_transfer_* functions of NVSHMEM's device library. Each call becomes, in the caller's own code:
 *
 *     if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_<op>(...); else nvshmemi_transfer_<op>(...);
 *
 * so with GDA off a call pays one uniform constant load, its compare and a branch, and then calls NVSHMEM's own
 * transfer function, which the patch leaves byte for byte as NVSHMEM built it. (A hook inside the transfer
 * function cannot meet that: ptxas saves the registers the GDA call needs at every entry, whichever path runs;
 * bench/results/device-api-ptxas-cost.md.) The entries are defined once, in the device library
 * (nvshmemx_efa_gda_device_api_entries.cuh).
 *
 * The hooks take the parameters NVSHMEM 3.4.5 and 3.5 share and pass any more (3.5's qp_index, pe_hint, qp_handle,
 * num_qps, which GDA does not need: it picks its own rail) through to NVSHMEM's function as its parameters' types,
 * defaults included.
 *
 * Not here: a translation unit that compiles the transfer functions themselves (NVSHMEM's device library, an
 * application built with NVSHMEM_ENABLE_ALL_DEVICE_INLINING, numba's) defines NVSHMEMI_EFA_GDA_NO_CALLER_HOOK first
 * (transfer_device.cuh, patched): in the library the bodies stay NVSHMEM's, and where they are compiled into the
 * application they carry the hook themselves. An application compiled against NVSHMEM's unpatched headers and
 * linked with this build's device library takes the proxy path throughout: build applications against this
 * build's include directory. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_API_HOOKS_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_API_HOOKS_CUH

#if defined(__CUDA_ARCH__) && !defined(NVSHMEMI_EFA_GDA_NO_CALLER_HOOK)
#include "nvshmemx_efa_gda_api.h"

/* Defined once, in NVSHMEM's device library (init_device.cu, patched). */
extern __constant__ nvshmemx_efa_gda_api_slot_t nvshmemi_efa_gda_api_d;

/* The entries (nvshmemx_efa_gda_device_api.cuh), instantiated in the device library. */
template <typename T>
__device__ void nvshmemi_efa_gda_api_rma_p(void *rptr, const T value, int pe);
template <typename T>
__device__ T nvshmemi_efa_gda_api_rma_g(void *rptr, int pe);
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
__device__ void nvshmemi_efa_gda_api_rma(void *rptr, void *lptr, size_t bytes, int pe);
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
__device__ void nvshmemi_efa_gda_api_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_efa_gda_api_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal,
                                                nvshmemi_amo_t sig_op, int pe, bool is_nbi);
template <typename T>
__device__ T nvshmemi_efa_gda_api_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op);
template <typename T>
__device__ void nvshmemi_efa_gda_api_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_efa_gda_api_quiet(bool use_membar);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_efa_gda_api_fence();

/* NVSHMEM's function, called with what a 3.5 caller passes beyond the shared parameters (`rest`), each argument cast
 * to the function's parameter at its place, so a caller's NULL (a long once deduced) reaches the pointer it was
 * written for; parameters a caller leaves out keep NVSHMEM's defaults. */
template <unsigned... I>
struct nvshmemi_efa_gda_seq {};
template <unsigned N, unsigned... I>
struct nvshmemi_efa_gda_make_seq : nvshmemi_efa_gda_make_seq<N - 1, N - 1, I...> {};
template <unsigned... I>
struct nvshmemi_efa_gda_make_seq<0, I...> {
    typedef nvshmemi_efa_gda_seq<I...> type;
};
template <unsigned I, typename F>
struct nvshmemi_efa_gda_param;
template <typename R, typename P0, typename... P>
struct nvshmemi_efa_gda_param<0, R (*)(P0, P...)> {
    typedef P0 type;
};
template <unsigned I, typename R, typename P0, typename... P>
struct nvshmemi_efa_gda_param<I, R (*)(P0, P...)> : nvshmemi_efa_gda_param<I - 1, R (*)(P...)> {};
#define NVSHMEMI_EFA_GDA_SEQ(Rest) typename nvshmemi_efa_gda_make_seq<sizeof...(Rest)>::type()
#define NVSHMEMI_EFA_GDA_REST(FN, SHARED) (typename nvshmemi_efa_gda_param<SHARED + I, decltype(&FN)>::type) rest...

template <typename T, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_rma_p(nvshmemi_efa_gda_seq<I...>, void *rptr, const T value, int pe, Rest... rest) {
    nvshmemi_transfer_rma_p<T>(rptr, value, pe, NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_rma_p<T>, 3));
}
template <typename T, unsigned... I, typename... Rest>
__device__ __forceinline__ T nvshmemi_efa_gda_nvshmem_rma_g(nvshmemi_efa_gda_seq<I...>, void *rptr, int pe, Rest... rest) {
    return nvshmemi_transfer_rma_g<T>(rptr, pe, NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_rma_g<T>, 2));
}
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_rma(nvshmemi_efa_gda_seq<I...>, void *rptr, void *lptr, size_t bytes, int pe, Rest... rest) {
    nvshmemi_transfer_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe, NVSHMEMI_EFA_GDA_REST((nvshmemi_transfer_rma<SCOPE, channel_op>), 4));
}
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_rma_nbi(nvshmemi_efa_gda_seq<I...>, void *rptr, void *lptr, size_t bytes, int pe, Rest... rest) {
    nvshmemi_transfer_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe, NVSHMEMI_EFA_GDA_REST((nvshmemi_transfer_rma_nbi<SCOPE, channel_op>), 4));
}
template <threadgroup_t SCOPE, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_put_signal(nvshmemi_efa_gda_seq<I...>, void *rptr, void *lptr, size_t bytes, void *sig_addr,
                                                                    uint64_t signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi, Rest... rest) {
    nvshmemi_transfer_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi,
                                        NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_put_signal<SCOPE>, 8));
}
template <typename T, unsigned... I, typename... Rest>
__device__ __forceinline__ T nvshmemi_efa_gda_nvshmem_amo_fetch(nvshmemi_efa_gda_seq<I...>, void *rptr, T value, T compare, int pe, nvshmemi_amo_t op,
                                                                Rest... rest) {
    return nvshmemi_transfer_amo_fetch<T>(rptr, value, compare, pe, op, NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_amo_fetch<T>, 5));
}
template <typename T, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_amo_nonfetch(nvshmemi_efa_gda_seq<I...>, void *rptr, T value, int pe, nvshmemi_amo_t op, Rest... rest) {
    nvshmemi_transfer_amo_nonfetch<T>(rptr, value, pe, op, NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_amo_nonfetch<T>, 4));
}
template <threadgroup_t SCOPE, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_quiet(nvshmemi_efa_gda_seq<I...>, bool use_membar, Rest... rest) {
    nvshmemi_transfer_quiet<SCOPE>(use_membar, NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_quiet<SCOPE>, 1));
}
template <threadgroup_t SCOPE, unsigned... I, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_nvshmem_fence(nvshmemi_efa_gda_seq<I...>, Rest... rest) {
    nvshmemi_transfer_fence<SCOPE>(NVSHMEMI_EFA_GDA_REST(nvshmemi_transfer_fence<SCOPE>, 0));
}

/* The hooks: the entry when the slot is on, else NVSHMEM's function with the caller's arguments. */
template <typename T, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_rma_p(void *rptr, const T value, int pe, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_rma_p<T>(rptr, value, pe);
    else nvshmemi_efa_gda_nvshmem_rma_p<T>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, value, pe, rest...);
}
template <typename T, typename... Rest>
__device__ __forceinline__ T nvshmemi_efa_gda_hook_rma_g(void *rptr, int pe, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) return nvshmemi_efa_gda_api_rma_g<T>(rptr, pe);
    return nvshmemi_efa_gda_nvshmem_rma_g<T>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, pe, rest...);
}
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_rma(void *rptr, void *lptr, size_t bytes, int pe, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe);
    else nvshmemi_efa_gda_nvshmem_rma<SCOPE, channel_op>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, lptr, bytes, pe, rest...);
}
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe);
    else nvshmemi_efa_gda_nvshmem_rma_nbi<SCOPE, channel_op>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, lptr, bytes, pe, rest...);
}
template <threadgroup_t SCOPE, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal,
                                                                 nvshmemi_amo_t sig_op, int pe, bool is_nbi, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi);
    else nvshmemi_efa_gda_nvshmem_put_signal<SCOPE>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi, rest...);
}
template <typename T, typename... Rest>
__device__ __forceinline__ T nvshmemi_efa_gda_hook_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) return nvshmemi_efa_gda_api_amo_fetch<T>(rptr, value, compare, pe, op);
    return nvshmemi_efa_gda_nvshmem_amo_fetch<T>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, value, compare, pe, op, rest...);
}
template <typename T, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_amo_nonfetch<T>(rptr, value, pe, op);
    else nvshmemi_efa_gda_nvshmem_amo_nonfetch<T>(NVSHMEMI_EFA_GDA_SEQ(Rest), rptr, value, pe, op, rest...);
}
/* 3.5's quiet and fence may name one PE or some queues: GDA's quiet covers every queue, a superset. */
template <threadgroup_t SCOPE, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_quiet(bool use_membar, Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_quiet<SCOPE>(use_membar);
    else nvshmemi_efa_gda_nvshmem_quiet<SCOPE>(NVSHMEMI_EFA_GDA_SEQ(Rest), use_membar, rest...);
}
template <threadgroup_t SCOPE, typename... Rest>
__device__ __forceinline__ void nvshmemi_efa_gda_hook_fence(Rest... rest) {
    if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_fence<SCOPE>();
    else nvshmemi_efa_gda_nvshmem_fence<SCOPE>(NVSHMEMI_EFA_GDA_SEQ(Rest), rest...);
}
#undef NVSHMEMI_EFA_GDA_SEQ
#undef NVSHMEMI_EFA_GDA_REST

/* From here on in the translation unit, NVSHMEM's calls of its transfer functions are calls of the hooks. The
 * names above were bound before these, so the hooks still call NVSHMEM's functions. */
#define nvshmemi_transfer_rma_p nvshmemi_efa_gda_hook_rma_p
#define nvshmemi_transfer_rma_g nvshmemi_efa_gda_hook_rma_g
#define nvshmemi_transfer_rma nvshmemi_efa_gda_hook_rma
#define nvshmemi_transfer_rma_nbi nvshmemi_efa_gda_hook_rma_nbi
#define nvshmemi_transfer_put_signal nvshmemi_efa_gda_hook_put_signal
#define nvshmemi_transfer_amo_fetch nvshmemi_efa_gda_hook_amo_fetch
#define nvshmemi_transfer_amo_nonfetch nvshmemi_efa_gda_hook_amo_nonfetch
#define nvshmemi_transfer_quiet nvshmemi_efa_gda_hook_quiet
#define nvshmemi_transfer_fence nvshmemi_efa_gda_hook_fence

#endif /* __CUDA_ARCH__ && !NVSHMEMI_EFA_GDA_NO_CALLER_HOOK */
#endif
