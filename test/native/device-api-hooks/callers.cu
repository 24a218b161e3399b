// NVSHMEM's calls of its transfer functions, in the forms its headers use, through the device API's caller hooks
// (the stand-in header above): each must compile to a branch on the slot between the GDA entry and NVSHMEM's own
// function, with 3.5's extra arguments (NULL for qp_handle included) passed to NVSHMEM's function.
#include "transfer_api_stand_in.cuh"

__global__ void callers(char *heap, int pe, uint64_t *sig) {
    nvshmemi_transfer_rma_nbi<NVSHMEMI_THREADGROUP_BLOCK, NVSHMEMI_OP_PUT>(heap, heap + 64, 64, pe);
    nvshmemi_transfer_rma<NVSHMEMI_THREADGROUP_WARP, NVSHMEMI_OP_GET>(heap, heap + 64, 64, pe);
    nvshmemi_transfer_rma_p<int>(heap, 7, pe);
    *sig += (uint64_t)nvshmemi_transfer_rma_g<long long>(heap, pe);
    nvshmemi_transfer_put_signal<NVSHMEMI_THREADGROUP_THREAD>(heap, heap + 64, 64, sig, 1, NVSHMEMI_AMO_SIGNAL_SET, pe, true);
    *sig += (uint64_t)nvshmemi_transfer_amo_fetch<unsigned long long>(sig, 1, 0, pe, NVSHMEMI_AMO_ADD);
    nvshmemi_transfer_amo_nonfetch<int>(heap, 1, pe, NVSHMEMI_AMO_ADD);
    nvshmemi_transfer_quiet<NVSHMEMI_THREADGROUP_THREAD>(true);
    nvshmemi_transfer_fence<NVSHMEMI_THREADGROUP_THREAD>();
#ifdef STAND_IN_35
    // 3.5's own forms (its collectives and nvshmemi_common_device.cuh): a PE, NULL or a handle array, a count.
    nvshmemi_transfer_rma_nbi<NVSHMEMI_THREADGROUP_THREAD, NVSHMEMI_OP_PUT>(heap, heap + 64, 64, pe, 3);
    nvshmemi_transfer_quiet<NVSHMEMI_THREADGROUP_BLOCK>(true, NVSHMEMX_PE_ANY, NULL, NVSHMEMX_QP_ALL);
    nvshmemi_transfer_fence<NVSHMEMI_THREADGROUP_THREAD>(NVSHMEMX_PE_ALL, NULL, 1);
    nvshmemx_qp_handle_t qps[2] = {1, 2};
    nvshmemi_transfer_quiet<NVSHMEMI_THREADGROUP_WARP>(false, pe, qps, 2);
#endif
}
