// Fixture written for nvshmem-efa tests: DeepEP EPv2 legacy/internode_ll.cu include block, and the shapes of
// the low-latency signals (dispatch count, combine flag: remote add, NVLink store of the same value).
#include <functional>
#include <optional>

#include "buffer.cuh"
#include "compiled.cuh"
#include "ibgda_device.cuh"
#include "launch.cuh"
#include "utils.cuh"

namespace deep_ep::legacy {
__global__ void fixture_internode_ll(int* rdma_recv_count, int* rdma_recv_flag, int rank, int dst_rank, int num_tokens_sent,
                                     int dst_expert_local_idx, int local_expert_idx) {
    {
        auto dst_ptr = reinterpret_cast<uint64_t>(rdma_recv_count + dst_expert_local_idx);
        auto dst_p2p_ptr = nvshmemi_get_p2p_ptr(dst_ptr, rank, dst_rank);
        if (dst_p2p_ptr == 0) {
            nvshmemi_ibgda_amo_nonfetch_add(reinterpret_cast<int*>(dst_ptr), -num_tokens_sent - 1, dst_rank, dst_expert_local_idx);
        } else {
            st_release_sys_global(reinterpret_cast<int*>(dst_p2p_ptr), -num_tokens_sent - 1);
        }
    }
    {
        auto dst_ptr = reinterpret_cast<uint64_t>(rdma_recv_flag + local_expert_idx);
        auto dst_p2p_ptr = nvshmemi_get_p2p_ptr(dst_ptr, rank, dst_rank);
        if (dst_p2p_ptr == 0) {
            nvshmemi_ibgda_amo_nonfetch_add(reinterpret_cast<int*>(dst_ptr), 1, dst_rank, local_expert_idx);
        } else {
            st_release_sys_global(reinterpret_cast<int*>(dst_p2p_ptr), 1);
        }
    }
}
}  // namespace deep_ep::legacy
