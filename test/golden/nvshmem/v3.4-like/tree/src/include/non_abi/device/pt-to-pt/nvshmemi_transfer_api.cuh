/* Miniature of NVSHMEM 3.4.5's declarations of its transfer functions, as applications see them. */

#include <cuda_runtime.h>
#include "non_abi/device/threadgroup/nvshmemi_common_device_defines.cuh"

#ifndef _NVSHMEMI_TRANSFER_H_
#define _NVSHMEMI_TRANSFER_H_
template <typename T>
__device__ void nvshmemi_transfer_rma_p(void *rptr, const T value, int pe);

template <typename T>
__device__ T nvshmemi_transfer_rma_g(void *rptr, int pe);

template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
__device__ void nvshmemi_transfer_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe);

template <threadgroup_t SCOPE>
__device__ void nvshmemi_transfer_quiet(bool use_membar);

template <threadgroup_t SCOPE>
__device__ void nvshmemi_transfer_fence();
#endif /* _NVSHMEMI_TRANSFER_H_ */
