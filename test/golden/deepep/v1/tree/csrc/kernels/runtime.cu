// Fixture written for nvshmem-efa tests: DeepEP V1 runtime.cu, the guarded include and NVSHMEM init.
#include <cstring>
#include <vector>

#include "configs.cuh"
#include "exception.cuh"

#ifndef DISABLE_NVSHMEM
#include "ibgda_device.cuh"
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

    nvshmem_barrier_all();
    return nvshmem_my_pe();
}
#endif
}  // namespace internode
}  // namespace deep_ep
