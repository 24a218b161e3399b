// Fixture written for nvshmem-efa tests: DeepEP V1 internode.cu include block.
#include <functional>
#include <optional>

#include "buffer.cuh"
#include "configs.cuh"
#include "exception.cuh"
#define NVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE  // one put per chunk of tokens here: the GDA post is a call
// replaced #include "ibgda_device.cuh" (mlx5 WQEs, IBGDA device state) with the EFA shim
#include "nvshmem_efa_shim.cuh"
#include "launch.cuh"
#include "utils.cuh"

namespace deep_ep {
namespace internode {
__global__ void fixture_notify(int num_channels, int num_sms) {
    EP_DEVICE_ASSERT(ibgda_get_state()->num_rc_per_pe == num_channels or ibgda_get_state()->num_rc_per_pe >= num_sms);
}
}  // namespace internode
}  // namespace deep_ep
