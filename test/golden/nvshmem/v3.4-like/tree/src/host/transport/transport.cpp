/* Miniature of NVSHMEM's transport.cpp: the plugin handle, connecting the transports, finalizing them. */
#include <dlfcn.h>
#include "non_abi/nvshmem_build_options.h"
#include "internal/host_transport/transport.h"

static void *transport_lib = NULL;
#ifdef NVSHMEM_IBGDA_SUPPORT
static void *transport_lib_IBGDA = NULL;
#endif

int nvshmemi_setup_connections(nvshmemi_state_t *state) {
    int status = 0;
    nvshmem_transport_t *transports = (nvshmem_transport_t *)state->transports;
    nvshmem_transport_t tcurr;
    for (int i = 0; i < state->num_initialized_transports; i++) {
        tcurr = transports[i];
        if (!(tcurr->attr & NVSHMEM_TRANSPORT_ATTR_CONNECTED)) {
            continue;
        }
        int selected_devices[1] = {0};
        status = tcurr->host_ops.connect_endpoints(tcurr, selected_devices, 1);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "connect EPS failed \n");
        status = nvshmemi_boot_handle.barrier(&nvshmemi_boot_handle);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "barrier failed \n");

        status = nvshmemi_update_device_state();
    }

out:
    return status;
}

int nvshmemi_transport_finalize(nvshmemi_state_t *state) {
    int status = 0;
    nvshmem_transport_t *transports = NULL;

    if (!state->transports) return 0;
    transports = (nvshmem_transport_t *)state->transports;
    for (int i = 0; i < state->num_initialized_transports; i++) {
        status = transports[i]->host_ops.finalize(transports[i]);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "transport finalize failed \n");
        status = nvshmemi_update_device_state();
    }
out:
    if (transport_lib) {
        dlclose(transport_lib);
        transport_lib = NULL;
    }
    return status;
}
