// Fixture written for nvshmem-efa tests: stands for DeepEP's IBGDA device layer (mlx5 WQE writers).
#pragma once
#include "configs.cuh"
namespace deep_ep {
__device__ __forceinline__ int fixture_ibgda_layer() { return 1; }
}  // namespace deep_ep
