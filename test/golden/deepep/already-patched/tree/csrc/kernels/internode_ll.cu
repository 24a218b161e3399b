// Fixture written for nvshmem-efa tests: DeepEP V1 internode_ll.cu include block.
#include "configs.cuh"
#include "exception.cuh"
/* nvshmem-efa:begin deepep-shim-include:internode_ll.cu */
// replaced #include "ibgda_device.cuh" (mlx5 WQEs, IBGDA device state) with the EFA shim
#include "nvshmem_efa_shim.cuh"
/* nvshmem-efa:end deepep-shim-include:internode_ll.cu */
#include "launch.cuh"

namespace deep_ep {
namespace internode_ll {
__global__ void fixture_dispatch(int num_local_experts) {
    EP_DEVICE_ASSERT(ibgda_get_state()->num_rc_per_pe >= num_local_experts);
}
}  // namespace internode_ll
}  // namespace deep_ep
