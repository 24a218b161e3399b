#ifndef MINI_TRANSPORT_H
#define MINI_TRANSPORT_H
#include <stddef.h>
typedef struct bootstrap_handle {
    int (*allgather)(const void *in, void *out, int bytes, struct bootstrap_handle *h);
} bootstrap_handle_t;

typedef struct {
    char reserved[512];
} nvshmem_mem_handle_t;

typedef struct nvshmem_transport {
    bootstrap_handle_t *boot_handle;
    void *state;
    char **device_pci_paths;
    int n_devices;
    int my_pe;
    int n_pes;
} nvshmem_transport_v2;
typedef nvshmem_transport_v2 *nvshmem_transport_t;
#endif
