/* Miniature of NVSHMEM's init.cu: the registered device states and the copy into them. */
#include <map>
#include "non_abi/nvshmem_build_options.h"
#include "internal/host/nvshmem_internal.h"

static std::map<void *, int> registered_device_states;

#ifdef NVSHMEM_IBGDA_SUPPORT
static std::map<void *, int> registered_transport_device_states;
#endif

static int register_state_ptr(void *common, void *transport) {
    registered_device_states[common]++;
#ifdef NVSHMEM_IBGDA_SUPPORT
    if (transport != NULL) registered_transport_device_states[transport]++;
#else
    if (transport != NULL) {
        NVSHMEMI_ERROR_PRINT("IBGDA not enabled by host lib, but passed in by device.\n");
        return 0;
    }
#endif
    return 0;
}

static int unregister_state_ptr(void *common, void *transport) {
    nvshmemi_update_device_state();
    registered_device_states.erase(common);
#ifdef NVSHMEM_IBGDA_SUPPORT
    if (transport != NULL) registered_transport_device_states.erase(transport);
#endif
    return 0;
}

int nvshmemi_update_device_state() {
    int status = 0;
    for (auto it = registered_device_states.cbegin(); it != registered_device_states.cend(); ++it) {
        nvshmemi_device_host_state_t *device_state;
        nvshmemi_get_device_state((void **)&device_state);
        status = cudaMemcpy((it->first), (void *)device_state, sizeof(nvshmemi_device_host_state_t),
                            cudaMemcpyHostToDevice);
        if (status) break;
    }
#ifdef NVSHMEM_IBGDA_SUPPORT
    if (nvshmemi_options.IB_ENABLE_IBGDA) {
        for (auto it = registered_transport_device_states.cbegin();
             it != registered_transport_device_states.cend(); ++it) {
            status = cudaMemcpy((it->first), (void *)ibgda_device_state,
                                sizeof(nvshmemi_ibgda_device_state_t), cudaMemcpyHostToDevice);
            if (status) break;
        }
    }
#endif
    return status;
}
