// Calls every shim function the way DeepEP V1 (567632d) and EPv2 legacy kernels do (after the DeepEP patcher); compiled
// with -rdc=true.
#define NUM_MAX_LOCAL_EXPERTS 1024
#ifdef DEFINE_STATE
#define NVSHMEM_EFA_SHIM_DEFINE_STATE
#endif
#include "nvshmem_efa_shim.cuh"

#ifdef NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE
namespace deep_ep::legacy {
#else
namespace deep_ep {
#endif
__global__ void uses(uint64_t *tail, int *count, uint64_t dst, uint64_t src, int rank, int num_sms, int experts) {
    const int lane_id = threadIdx.x & 31;
    if (ibgda_get_state()->num_rc_per_pe < experts || ibgda_get_state()->num_rc_per_pe < num_sms) __trap();
    const auto qps = ibgda_get_state()->num_rc_per_pe * ibgda_get_state()->num_devices_initialized;
    for (int qp = lane_id; qp < qps; qp += 32) nvshmemi_ibgda_quiet(1, qp);
    const auto p2p = nvshmemi_get_p2p_ptr(dst, rank, 1);
    if (p2p == 0) nvshmemi_ibgda_put_nbi_warp<true>(dst, src, 4096, 1, 0, lane_id, 0);
    if (lane_id == 0) {
        nvshmemi_ibgda_amo_nonfetch_add(tail, 5, 1, 0, false);
        nvshmemi_ibgda_amo_nonfetch_add(tail, 5, 1, 0, true);
        nvshmemi_ibgda_amo_nonfetch_add(reinterpret_cast<int *>(dst), -3, 1, 2);
        // The low-latency count and flag as the DeepEP patcher rewrites them (internode_ll.cu).
        nvshmem_efa_shim_signal_add_zeroed_single_writer(reinterpret_cast<int *>(dst), -3, 1, 2);
        nvshmem_efa_shim_signal_add_zeroed_single_writer(reinterpret_cast<int *>(dst), 1, 1, 0);
        nvshmemi_ibgda_rma_p(count, 7, 1, 0);
    }
}
}
#ifdef DEFINE_STATE
int host_init() { return nvshmem_efa_shim::init_state(); }
#endif

// DeepEP's receive wait (internode_ll.cu's shape) with the bound the shim put in NUM_TIMEOUT_CYCLES's place, on the
// device; host code keeps DeepEP's value. (The EPv2 variant's test headers define no bound.)
#ifdef NUM_TIMEOUT_CYCLES
__global__ void receive_wait(const int *flag, int *timed_out) {
    const auto start_time = clock64();
    unsigned long long wait_recv_cost = 0;
    while (*(const volatile int *)flag == 0 && (wait_recv_cost = clock64() - start_time) <= NUM_TIMEOUT_CYCLES)
        ;
    *timed_out = wait_recv_cost > NUM_TIMEOUT_CYCLES;
}
unsigned long long host_bound() { return NUM_TIMEOUT_CYCLES; }
#endif
