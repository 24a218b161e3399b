/* Test-only NVSHMEM-shaped header (written for nvshmem-efa); see nvshmem.h. */
#pragma once
#include <cstddef>
__device__ void nvshmemx_putmem_nbi_warp(void *dest, const void *source, size_t bytes, int pe);
