// Fixture written for nvshmem-efa tests: DeepEP EPv2 legacy/internode_ll.cu include block.
#include <functional>
#include <optional>

#include "buffer.cuh"
#include "compiled.cuh"
#include "ibgda_device.cuh"
#include "launch.cuh"
#include "utils.cuh"

namespace deep_ep::legacy {
__global__ void fixture_internode_ll() {}
}  // namespace deep_ep::legacy
