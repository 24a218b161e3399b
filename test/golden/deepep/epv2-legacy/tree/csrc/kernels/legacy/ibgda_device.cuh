// Fixture written for nvshmem-efa tests: stands for DeepEP EPv2's legacy IBGDA layer.
#pragma once

#include <nvshmem.h>
#include <device_host_transport/nvshmem_common_ibgda.h>

namespace deep_ep::legacy {
__device__ __forceinline__ int fixture_ibgda_layer() { return 2; }
}  // namespace deep_ep::legacy
