// Fixture written for nvshmem-efa tests: DeepEP v1.2.1's configs.cuh include order (IBGDA header last).
#pragma once

#define NUM_MAX_NVL_PEERS 8
#define NUM_MAX_LOCAL_EXPERTS 1024

#include <cuda_runtime.h>

#ifndef DISABLE_NVSHMEM
#include <nvshmem.h>
#include <nvshmemx.h>
#include <infiniband/mlx5dv.h>
#include <non_abi/device/threadgroup/nvshmemi_common_device_defines.cuh>
#include <device_host_transport/nvshmem_common_ibgda.h>
#endif
