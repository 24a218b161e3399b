// Fixture written for nvshmem-efa tests: DeepEP V1 runtime.cu, the guarded include and NVSHMEM init.
#include <cstring>
#include <vector>

#include "configs.cuh"
#include "exception.cuh"

#ifndef DISABLE_NVSHMEM
// replaced #include "ibgda_device.cuh" (mlx5 WQEs, IBGDA device state) with the EFA shim
#define NVSHMEM_EFA_SHIM_DEFINE_STATE  // the one translation unit that defines the shim state
#include "nvshmem_efa_shim.cuh"
#include "nvshmem.h"
#endif

namespace deep_ep {
namespace internode {
#ifndef DISABLE_NVSHMEM
int init(const std::vector<uint8_t>& root_unique_id_val, int rank, int num_ranks, bool low_latency_mode) {
    nvshmemx_uniqueid_t root_unique_id;
    nvshmemx_init_attr_t attr;
    std::memcpy(&root_unique_id, root_unique_id_val.data(), sizeof(nvshmemx_uniqueid_t));
    nvshmemx_set_attr_uniqueid_args(rank, num_ranks, &root_unique_id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    EP_HOST_ASSERT(nvshmem_efa_shim::init_state() == 0);

    nvshmem_barrier_all();
    return nvshmem_my_pe();
}
#endif
}  // namespace internode
}  // namespace deep_ep
