/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * The device API's entries, instantiated for every type and scope NVSHMEM instantiates its own transfer functions
 * for (NVSHMEM's TRANSFER_REPT_FOR_* lists), so that the hooks at the callers (nvshmemx_efa_gda_device_api_hooks.cuh)
 * find them in the device library. Included at the end of NVSHMEM's transfer_device.cuh (patched) where it is
 * compiled as the device library's transfer_device.cu, after nvshmemx_efa_gda_device_api.cuh defined them. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_API_ENTRIES_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_API_ENTRIES_CUH

#ifdef __CUDA_ARCH__
#define NVSHMEMX_EFA_GDA_I_VALUE(T)                                                              \
    template __device__ void nvshmemi_efa_gda_api_rma_p<T>(void *rptr, const T value, int pe); \
    template __device__ T nvshmemi_efa_gda_api_rma_g<T>(void *rptr, int pe);
TRANSFER_REPT_FOR_STANDARD_RMA_TYPES(NVSHMEMX_EFA_GDA_I_VALUE)

#define NVSHMEMX_EFA_GDA_I_SCOPE(SCOPE)                                                                                       \
    template __device__ void nvshmemi_efa_gda_api_rma<SCOPE, NVSHMEMI_OP_PUT>(void *rptr, void *lptr, size_t bytes, int pe);     \
    template __device__ void nvshmemi_efa_gda_api_rma<SCOPE, NVSHMEMI_OP_GET>(void *rptr, void *lptr, size_t bytes, int pe);     \
    template __device__ void nvshmemi_efa_gda_api_rma_nbi<SCOPE, NVSHMEMI_OP_PUT>(void *rptr, void *lptr, size_t bytes, int pe); \
    template __device__ void nvshmemi_efa_gda_api_rma_nbi<SCOPE, NVSHMEMI_OP_GET>(void *rptr, void *lptr, size_t bytes, int pe); \
    template __device__ void nvshmemi_efa_gda_api_put_signal<SCOPE>(void *rptr, void *lptr, size_t bytes, void *sig_addr,         \
                                                                    uint64_t signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi); \
    template __device__ void nvshmemi_efa_gda_api_quiet<SCOPE>(bool use_membar);                                              \
    template __device__ void nvshmemi_efa_gda_api_fence<SCOPE>();
TRANSFER_REPT_FOR_ALL_SCOPES(NVSHMEMX_EFA_GDA_I_SCOPE)

#define NVSHMEMX_EFA_GDA_I_AMO(T)                                                                                   \
    template __device__ T nvshmemi_efa_gda_api_amo_fetch<T>(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op); \
    template __device__ void nvshmemi_efa_gda_api_amo_nonfetch<T>(void *rptr, T value, int pe, nvshmemi_amo_t op);
TRANSFER_REPT_FOR_STANDARD_AMO_TYPES(NVSHMEMX_EFA_GDA_I_AMO)
TRANSFER_REPT_FOR_EXTENDED_AMO_TYPES(NVSHMEMX_EFA_GDA_I_AMO)

#undef NVSHMEMX_EFA_GDA_I_VALUE
#undef NVSHMEMX_EFA_GDA_I_SCOPE
#undef NVSHMEMX_EFA_GDA_I_AMO
#endif /* __CUDA_ARCH__ */
#endif
