/* Miniature of NVSHMEM 3.4.5's init_device.cu: the device state and the callback that hands out its address. */
#include <cuda_runtime.h>
#include "non_abi/nvshmem_build_options.h"
#include "device_host/nvshmem_types.h"

#ifdef NVSHMEM_IBGDA_SUPPORT
#include "device_host_transport/nvshmem_common_ibgda.h"
__constant__ nvshmemi_ibgda_device_state_t nvshmemi_ibgda_device_state_d;
#endif

__constant__ nvshmemi_device_host_state_t nvshmemi_device_state_d;

extern "C" {
void nvshmemi_get_mem_handle(void **dev_state_ptr, void **transport_dev_state_ptr);
}

void nvshmemi_get_mem_handle(void **dev_state_ptr, void **transport_dev_state_ptr) {
    int status = 0;
    status = cudaGetSymbolAddress(dev_state_ptr, nvshmemi_device_state_d);
    if (status) {
        *dev_state_ptr = NULL;
    }
#ifdef NVSHMEM_IBGDA_SUPPORT
    status = cudaGetSymbolAddress(transport_dev_state_ptr, nvshmemi_ibgda_device_state_d);
    if (status) {
        *transport_dev_state_ptr = NULL;
    }
#endif
}
