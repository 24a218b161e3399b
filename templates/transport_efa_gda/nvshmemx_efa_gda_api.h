/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * The slot of NVSHMEM's device API over EFA GDA (nvshmemx_efa_gda_device_api.cuh): what the host hands every module
 * that links NVSHMEM's device library, and the block of GPU memory the device API keeps its counters in. Plain C
 * types: NVSHMEM's init_device.cu defines the __constant__ slot with them, its host library and the transport fill it. */
#ifndef NVSHMEMX_EFA_GDA_API_H
#define NVSHMEMX_EFA_GDA_API_H

#include "nvshmemx_efa_gda.h"

#define NVSHMEMX_EFA_GDA_API_ABI 5 /* 2: g over GDA (g_value, g_lock, g_slots); 3: READS_OVER_GDA, PROXY_UNORDERED_READ;
                                    * 4: unflushed (quiet flushes every PE written over GDA); 5: proxy_unflushed (fence
                                    * and quiet flush every PE the proxy wrote to, through every rail) */

/* Why an operation went through NVSHMEM's proxy while GDA was on (counted in the shared block). */
enum {
    NVSHMEMX_EFA_GDA_API_PROXY_NO_REGION = 0, /* an address outside the regions GDA registered */
    NVSHMEMX_EFA_GDA_API_PROXY_VALUE = 1,     /* p of 1 or 2 bytes, or a value write where writes may land twice */
    NVSHMEMX_EFA_GDA_API_PROXY_GET_VALUE = 2, /* g without GDA scratch (its registration failed), or outside GDA's regions */
    NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC = 3,    /* atomics, SIGNAL_ADD, signal_op: no RDMA atomics on efa-direct */
    NVSHMEMX_EFA_GDA_API_PROXY_UNORDERED_READ = 4, /* a get where a GPU may see a read's completion before its data */
    NVSHMEMX_EFA_GDA_API_PROXY_REASONS = 5
};

/* slot.flags */
#define NVSHMEMX_EFA_GDA_API_VALUES_OVER_GDA 0x1u /* every PE's NICs deliver a write once and every PE's GPU orders
                                                   * GPUDirect RDMA writes (>= OWNER): p and SET may be GDA writes */
#define NVSHMEMX_EFA_GDA_API_READS_OVER_GDA 0x2u  /* every PE's GPU orders GPUDirect RDMA writes: a get's data is in
                                                   * place when its completion is seen, so gets may be GDA reads */

/* GPU memory the host allocates once per PE; every module's slot points at the same block. */
typedef struct {
    unsigned long long proxy_issued;  /* operations the device API sent to NVSHMEM's proxy */
    unsigned long long proxy_quieted; /* the highest proxy_issued a finished proxy quiet covered */
    unsigned long long proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_REASONS];
    /* [n_pes]: the sum of the GDA queues' reserved counters when a flush to that PE last finished; while the sum
     * is unchanged, no GDA write was posted since, and a proxy operation to that PE needs no flush. */
    unsigned int *flushed_at;
    /* g over GDA: [slot.g_slots] 8-byte words its reads land in (registered for GDA on this PE's rails only), and
     * a lock word per slot (0 free, 1 taken). */
    unsigned long long *g_value;
    unsigned int *g_lock;
    /* [(n_pes + 31) / 32] bits: PE p's is set once a GDA write to p was posted, and taken by the next quiet (or proxy
     * operation to p), which flushes p: a completion is only "queued towards the receiver's PCIe", and OpenSHMEM's quiet
     * promises the writes are visible at every PE, which NVSHMEM's barrier relies on (review 3, finding 2). */
    unsigned int *unflushed;
    /* ABI 5, in the word ABI 4 reserved: [(n_pes + 31) / 32] bits, PE p's set once the device API handed the proxy a
     * write to p (put, p, non-fetching atomic, signal), taken by the next fence or quiet, which quiets the proxy and
     * then flushes p through every rail. On multi-rail NVSHMEM (AWS 3.5.7+) the proxy's write leaves through a NIC of
     * its choosing, and its quiet only means "queued towards p's PCIe" there: a GDA write after the fence, on p's GDA
     * rail, could land first (review 3, finding 7). A read through every rail lands it, whichever NIC it took. */
    unsigned int *proxy_unflushed;
} nvshmemx_efa_gda_api_shared_t;

typedef struct {
    uint32_t abi; /* NVSHMEMX_EFA_GDA_API_ABI */
    uint32_t on;  /* 1: the device API takes the GDA path */
    nvshmemx_efa_gda_device_state_t *state;
    nvshmemx_efa_gda_api_shared_t *shared;
    uint32_t flags;
    uint32_t g_slots; /* g's scratch slots (shared->g_value); 0: g through NVSHMEM's proxy */
} nvshmemx_efa_gda_api_slot_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Fills *slot for this PE: on when GDA is active and NVSHMEM_EFA_GDA_DEVICE_API is not 0 (zero otherwise).
 * Returns 0, or -1 when the shared block could not be allocated (the slot is then off and the status says why). */
int nvshmemx_efa_gda_get_api_slot(nvshmemx_efa_gda_api_slot_t *slot);
#ifdef __cplusplus
}
#endif

#endif
