/* Test-only NVSHMEM-shaped header (written for nvshmem-efa): declares the public device API the DeepEP shim
 * calls, with NVSHMEM's signatures, so CI can compile the shim without an NVSHMEM install. */
#pragma once
#include <cstddef>
#include <cstdint>
int nvshmem_my_pe(void);
__device__ void *nvshmem_ptr(const void *dest, int pe);
__device__ void nvshmem_fence(void);
__device__ void nvshmem_quiet(void);
__device__ void nvshmem_int_p(int *dest, int value, int pe);
__device__ void nvshmem_int_atomic_add(int *dest, int value, int pe);
__device__ void nvshmem_uint64_atomic_add(uint64_t *dest, uint64_t value, int pe);
