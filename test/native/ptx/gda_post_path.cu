// Every way the GDA device API and the DeepEP shim ring a doorbell, one kernel each, for the store-order check over
// their PTX (test/native/ptx-order.test.ts reads it with test/native/ptx/ptx-order.ts). Compiled with nvcc -ptx for
// sm_90 against a copy of the templates (or a mutant of them), never run. The rail is a kernel argument where the
// code takes one, so nothing is folded away that a real caller would execute. -DGDA_PTX_ONLY -DGDA_PTX_ONLY_<kernel>
// compiles that kernel alone (a mutant is judged on the kernel it must break: one small compile each).
#define NVSHMEM_EFA_SHIM_STANDALONE
#define NVSHMEM_EFA_SHIM_GDA
#include "nvshmem_efa_shim.cuh"

#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_put)
// A put of any size: the slot filler of a failed lookup, the first piece and the later pieces (efa_gda_post_one).
extern "C" __global__ void gda_put(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src, uint64_t bytes,
                                   int pe, int *err) {
    *err = efa_gda_put_nbi_on(s, rail, dest, src, bytes, pe);
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_put_imm)
// A put with an immediate: the credit wait, whose refresh posts a read.
extern "C" __global__ void gda_put_imm(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                       uint64_t bytes, int pe, uint32_t imm, int *err) {
    *err = efa_gda_put_imm_nbi_on(s, rail, dest, src, bytes, pe, imm);
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_signal)
// The device API's signal: a quiet of every rail, then the value's write from the slot's scratch entry.
extern "C" __global__ void gda_signal(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *sym, uint64_t value, int pe, int *err) {
    *err = efa_gda_signal_on(s, rail, sym, value, 8, pe);
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_handle_put)
// A prepared handle's put.
extern "C" __global__ void gda_handle_put(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                          uint64_t bytes, int pe, int *err) {
    efa_gda_handle h;
    int e = efa_gda_handle_init_on(s, rail, pe, dest, src, &h);
    if (!e) e = efa_gda_put_nbi(h, dest, src, bytes);
    *err = e;
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_warp_batch)
// A warp's batch: every lane's WQE, then one doorbell per group.
extern "C" __global__ void gda_warp_batch(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                          uint64_t bytes, int pe, int *err) {
    err[threadIdx.x] = efa_gda_rma_nbi_warp_batch_on(s, rail, true, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe);
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_gda_owned_put)
// An owned queue: its own doorbell store (efa_gda_rma_nbi on efa_gda_owned), not efa_gda_ring's.
extern "C" __global__ void gda_owned_put(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                         uint64_t bytes, int pe, int *err) {
    efa_gda_owned o;
    int e = efa_gda_own_on(s, rail, pe, dest, src, &o);
    if (!e) e = efa_gda_put_nbi(o, dest, src, bytes);
    efa_gda_disown(&o);
    *err = e;
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_shim_put)
// The shim's put, as DeepEP's low-latency kernels call it (a whole warp).
extern "C" __global__ void shim_put(uint64_t rptr, uint64_t lptr, size_t bytes, int pe, int qp_id) {
    deep_ep::nvshmemi_ibgda_put_nbi_warp(rptr, lptr, bytes, pe, qp_id, threadIdx.x & 31, 0);
}
#endif
#if !defined(GDA_PTX_ONLY) || defined(GDA_PTX_ONLY_shim_signal)
// The shim's signal: its wait for the payload's completion on the signal's rail (a call: it is out of line), then
// the write.
extern "C" __global__ void shim_signal(nvshmemx_efa_gda_device_state_t *s, int *rptr, int value, int pe, int qp_id) {
    deep_ep::nvshmem_efa_shim_gda_signal(s, rptr, value, pe, qp_id);
}
#endif
