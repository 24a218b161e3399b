/* A stand-in for NVSHMEM's nvshmemi_transfer_api.cuh, written for this test: the types the transfer functions use and
 * their declarations, in 3.4.5's shape or, with STAND_IN_35, 3.5's (a qp_index on every RMA and AMO; pe, qp_handle and
 * num_qps on quiet and fence, all defaulted). Then the device API's caller hooks, as the patch includes them. */
#ifndef TRANSFER_API_STAND_IN_CUH
#define TRANSFER_API_STAND_IN_CUH
#include <cstddef>
#include <cstdint>

typedef enum { NVSHMEMI_THREADGROUP_THREAD = 0, NVSHMEMI_THREADGROUP_WARP = 1, NVSHMEMI_THREADGROUP_BLOCK = 3 } threadgroup_t;
typedef enum { NVSHMEMI_OP_PUT = 1, NVSHMEMI_OP_GET = 3 } nvshmemi_op_t;
typedef enum { NVSHMEMI_AMO_ADD = 4, NVSHMEMI_AMO_SIGNAL_SET = 9, NVSHMEMI_AMO_SIGNAL_ADD = 10 } nvshmemi_amo_t;

#ifdef STAND_IN_35
typedef int nvshmemx_qp_handle_t;
#define NVSHMEMX_QP_DEFAULT 0
#define NVSHMEMX_QP_ALL -1
#define NVSHMEMX_PE_ALL -1
#define NVSHMEMX_PE_ANY -2
#define QP , nvshmemx_qp_handle_t qp_index = NVSHMEMX_QP_DEFAULT
#define QUIET_EXTRA , int pe = NVSHMEMX_PE_ALL, nvshmemx_qp_handle_t *qp_handle = NULL, int num_qps = NVSHMEMX_QP_ALL
#define FENCE_PARAMS int pe = NVSHMEMX_PE_ALL, nvshmemx_qp_handle_t *qp_handle = NULL, int num_qps = NVSHMEMX_QP_ALL
#else
#define QP
#define QUIET_EXTRA
#define FENCE_PARAMS
#endif

template <typename T>
__device__ void nvshmemi_transfer_rma_p(void *rptr, const T value, int pe QP);
template <typename T>
__device__ T nvshmemi_transfer_rma_g(void *rptr, int pe QP);
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
__device__ void nvshmemi_transfer_rma(void *rptr, void *lptr, size_t bytes, int pe QP);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_transfer_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal, nvshmemi_amo_t sig_op,
                                             int pe, bool is_nbi QP);
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
__device__ void nvshmemi_transfer_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe QP);
template <typename T>
__device__ T nvshmemi_transfer_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op QP);
template <typename T>
__device__ void nvshmemi_transfer_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op QP);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_transfer_quiet(bool use_membar QUIET_EXTRA);
template <threadgroup_t SCOPE>
__device__ void nvshmemi_transfer_fence(FENCE_PARAMS);
#undef QP
#undef QUIET_EXTRA
#undef FENCE_PARAMS

#include "nvshmemx_efa_gda_device_api_hooks.cuh"
#endif
