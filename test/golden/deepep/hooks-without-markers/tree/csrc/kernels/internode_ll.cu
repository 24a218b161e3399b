// Fixture written for nvshmem-efa tests: DeepEP V1 internode_ll.cu include block, and the shapes of the
// low-latency signals (dispatch count, combine flag: remote add, NVLink store of the same value).
#include "configs.cuh"
#include "exception.cuh"
// replaced #include "ibgda_device.cuh" (mlx5 WQEs, IBGDA device state) with the EFA shim
#include "nvshmem_efa_shim.cuh"
#include "launch.cuh"

namespace deep_ep {
namespace internode_ll {
__global__ void fixture_dispatch(int num_local_experts, int* rdma_recv_count, int rank, int num_ranks, int dst_rank,
                                 int dst_expert_local_idx, int num_tokens_sent) {
    EP_DEVICE_ASSERT(ibgda_get_state()->num_rc_per_pe >= num_local_experts);
    auto dst_ptr = reinterpret_cast<uint64_t>(rdma_recv_count + dst_expert_local_idx * num_ranks + rank);
    auto dst_p2p_ptr = nvshmemi_get_p2p_ptr(dst_ptr, rank, dst_rank);
    if (true) {
        if (dst_p2p_ptr == 0) {
            // replaced nvshmemi_ibgda_amo_nonfetch_add: the slot has one writer per round and was zeroed by the previous call
            // (the NVLink branch below stores the same value), so the add is a write; over EFA GDA, posted after the payload
            // completed (the proof, with DeepEP's lines: nvshmem_efa_shim_signal_add_zeroed_single_writer in nvshmem_efa_shim.cuh)
            nvshmem_efa_shim_signal_add_zeroed_single_writer(reinterpret_cast<int*>(dst_ptr), -num_tokens_sent - 1, dst_rank, dst_expert_local_idx);
        } else {
            st_release_sys_global(reinterpret_cast<int*>(dst_p2p_ptr), -num_tokens_sent - 1);
        }
    }
}

__global__ void fixture_combine(int* rdma_recv_flag, int global_expert_idx, int rank, int dst_rank, int local_expert_idx) {
    if (threadIdx.x == 0) {
        auto dst_ptr = reinterpret_cast<uint64_t>(rdma_recv_flag + global_expert_idx);
        auto dst_p2p_ptr = nvshmemi_get_p2p_ptr(dst_ptr, rank, dst_rank);
        if (true) {
            if (dst_p2p_ptr == 0) {
                // replaced nvshmemi_ibgda_amo_nonfetch_add: the slot has one writer per round and was zeroed by the previous call
                // (the NVLink branch below stores the same value), so the add is a write; over EFA GDA, posted after the payload
                // completed (the proof, with DeepEP's lines: nvshmem_efa_shim_signal_add_zeroed_single_writer in nvshmem_efa_shim.cuh)
                nvshmem_efa_shim_signal_add_zeroed_single_writer(reinterpret_cast<int*>(dst_ptr), 1, dst_rank, local_expert_idx);
            } else {
                st_release_sys_global(reinterpret_cast<int*>(dst_p2p_ptr), 1);
            }
        }
    }
}
}  // namespace internode_ll
}  // namespace deep_ep
