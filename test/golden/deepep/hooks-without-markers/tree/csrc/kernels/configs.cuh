// Fixture written for nvshmem-efa tests: the shapes of DeepEP V1's configs.cuh that the patcher anchors on
// (567632d include order: the IBGDA header first, inside #ifndef DISABLE_NVSHMEM).
#pragma once

#define NUM_MAX_NVL_PEERS 8
#define NUM_MAX_LOCAL_EXPERTS 1024

#ifndef DISABLE_NVSHMEM
#ifndef __CUDACC_RDC__
#define __CUDACC_RDC__
#endif
#endif

#include <cuda_runtime.h>

namespace deep_ep {
inline int fixture_config() { return NUM_MAX_NVL_PEERS; }
}  // namespace deep_ep

#ifndef DISABLE_NVSHMEM
// removed #include <device_host_transport/nvshmem_common_ibgda.h>: the NVSHMEM nvshmem-efa builds has no IBGDA
// removed #include <infiniband/mlx5dv.h>: the NVSHMEM nvshmem-efa builds has no IBGDA
#include <nvshmem.h>
#include <nvshmemx.h>

#include <non_abi/device/threadgroup/nvshmemi_common_device_defines.cuh>
#endif
