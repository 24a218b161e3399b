// Drives the GDA host code the way the patched libfabric.cpp does, on one PE, and prints what a user sees.
// On a host without an EFA device (CI), init must fail cleanly with the reason and leave nothing behind.
#include <cstdio>
#include <cstring>

#include "transport_efa_gda.h"
#include "nvshmemx_efa_gda_api.h"

static int gathers = 0;
static int allgather(const void *in, void *out, int bytes, void *) {
    gathers++;
    memcpy(out, in, (size_t)bytes);
    return 0;
}

int main() {
    printf("enabled=%d\n", nvshmemt_efa_gda_enabled());
    printf("before: %s\n", nvshmemx_efa_gda_status());
    nvshmemt_efa_gda_bootstrap_t boot = {0, 1, allgather, nullptr};
    const int rc = nvshmemt_efa_gda_init(nullptr, &boot);
    printf("init=%d gathers=%d active=%d state=%p\n", rc, gathers, nvshmemx_efa_gda_is_active(),
           (void *)nvshmemx_efa_gda_get_device_state());
    printf("status: %s\n", nvshmemx_efa_gda_status());
    // NVSHMEM's host library asks for the device API's slot after connecting (transport.cpp, patched): off here.
    nvshmemx_efa_gda_api_slot_t slot;
    memset(&slot, 0xff, sizeof slot);
    const int slot_rc = nvshmemx_efa_gda_get_api_slot(&slot);
    printf("api slot: rc=%d abi=%u on=%u state=%p shared=%p flags=%u\n", slot_rc, slot.abi, slot.on, (void *)slot.state,
           (void *)slot.shared, slot.flags);
    static char heap[4096];
    nvshmemt_efa_gda_register_region(heap, sizeof heap);
    nvshmemt_efa_gda_release_region(heap);
    nvshmemt_efa_gda_fini();
    nvshmemt_efa_gda_fini();
    printf("after fini: gathers=%d active=%d\n", gathers, nvshmemt_efa_gda_active());
    return 0;
}
