// Fixture written for nvshmem-efa tests: DeepEP EPv2 backend/nvshmem.cu, where NVSHMEM is initialised.
#include <cstring>
#include <vector>

#include <deep_ep/common/exception.cuh>

#include <nvshmem.h>

namespace deep_ep::nvshmem {
int init(const std::vector<uint8_t>& root_unique_id_val, const int& rank, const int& num_ranks) {
    nvshmemx_uniqueid_t root_unique_id;
    nvshmemx_init_attr_t attr;
    std::memcpy(&root_unique_id, root_unique_id_val.data(), sizeof(nvshmemx_uniqueid_t));
    nvshmemx_set_attr_uniqueid_args(rank, num_ranks, &root_unique_id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    return nvshmem_my_pe();
}
}  // namespace deep_ep::nvshmem
