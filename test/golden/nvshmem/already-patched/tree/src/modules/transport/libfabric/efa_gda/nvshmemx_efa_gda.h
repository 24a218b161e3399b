/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Public types and host API of the EFA GPU-Direct-Async (GDA) path. Installed with NVSHMEM's headers
 * (include/nvshmem_efa/). Plain C so that C, C++ and CUDA code can all include it.
 *
 * Lifetime: the transport fills one nvshmemx_efa_gda_device_state_t in GPU memory when GDA starts and
 * frees it at finalize. nvshmemx_efa_gda_get_device_state() hands its GPU address to the application,
 * which passes it to its kernels (nvshmemx_efa_gda_device.cuh takes it as an argument). */
#ifndef NVSHMEMX_EFA_GDA_H
#define NVSHMEMX_EFA_GDA_H

#include <stdint.h>

#define NVSHMEMX_EFA_GDA_ABI_VERSION 1
/* A 64-byte efa_io_tx_wqe: the only WQE format this device code writes. */
#define NVSHMEMX_EFA_GDA_WQE_SIZE 64
/* Remote regions (symmetric heap chunks) the GDA path can address; NVSHMEM registers one per heap growth. */
#define NVSHMEMX_EFA_GDA_MAX_REGIONS 16

/* Device error codes. Values 1..63 are EFA completion statuses (efa_io_comp_status) reported by the NIC;
 * the ones below are detected by the device code before anything reaches the NIC. */
enum {
    NVSHMEMX_EFA_GDA_OK = 0,
    NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION = 0x100, /* source/destination not in a registered local region */
    NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION = 0x101, /* address not in the peer's registered regions */
    NVSHMEMX_EFA_GDA_ERR_BAD_PE = 0x102,           /* pe out of range or without an EFA address */
    NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES = 0x103,    /* a warp batch needs more WQEs than max_batch */
};

/* Operation types of a posted WQE (efa_io_send_op_type values). */
enum { NVSHMEMX_EFA_GDA_OP_READ = 1, NVSHMEMX_EFA_GDA_OP_WRITE = 2 };

/* One peer's EFA address, from fi_efa_ops_gda.query_addr. */
typedef struct {
    uint16_t ah;
    uint16_t qpn;
    uint32_t qkey;
} nvshmemx_efa_gda_peer_t;

/* A registered memory region: the local lkey (get_mr_lkey, 24 bits) or a remote rkey (fi_mr_key). */
typedef struct {
    uint64_t base;
    uint64_t length;
    uint32_t key;
    uint32_t valid;
} nvshmemx_efa_gda_region_t;

/* One send queue and the completion queue that absorbs its completions. The first block is written by the
 * host and never changes; the counters are free-running 32-bit values owned by the device code. */
typedef struct {
    /* SQ: the NIC's LLQ ring and doorbell, mapped for the GPU (cuMemHostRegister IOMEMORY|DEVICEMAP). */
    uint8_t *sq_buf;
    uint32_t *sq_db;
    uint32_t sq_entries;   /* power of two */
    uint32_t sq_log2;
    uint32_t max_batch;    /* most WQEs one doorbell may cover */
    uint32_t wqe_size;     /* 64 */
    /* TX CQ in GPU memory (cq_open_ext over a dma-buf of it). */
    uint8_t *cq_buf;
    uint32_t cq_entries;   /* power of two, >= sq_entries */
    uint32_t cq_log2;
    uint32_t cq_entry_size;
    uint32_t qp_num;       /* this QP's number, to check CQEs belong to it */
    uint64_t max_rdma_size; /* larger messages are split */

    /* Device-owned counters. sq_reserved: slots handed out; sq_rung: value last written to the doorbell;
     * sq_completed: completions consumed; cq_head: CQEs consumed (== sq_completed with one CQ per SQ). */
    uint32_t sq_reserved;
    uint32_t sq_rung;
    uint32_t sq_completed;
    uint32_t cq_head;
    uint32_t cq_lock;
    /* First error seen (0 when none), the request id that carried it, and how many completions failed. */
    uint32_t error;
    uint32_t error_req_id;
    uint32_t error_count;
    /* Sum of the request ids consumed; lets tests check every WQE completed exactly once. */
    uint64_t req_id_sum;
} nvshmemx_efa_gda_qp_t;

/* Receive-side completions of RDMA write with immediate (unsolicited, no receive posted). */
typedef struct {
    uint8_t *cq_buf;
    uint32_t cq_entries;
    uint32_t cq_log2;
    uint32_t cq_entry_size;
    uint32_t cq_head;
    uint32_t cq_lock;
    uint32_t error;
} nvshmemx_efa_gda_rx_cq_t;

typedef struct {
    uint32_t abi_version;
    int32_t my_pe;
    int32_t n_pes;
    uint32_t num_regions;
    nvshmemx_efa_gda_qp_t *qp;                 /* GPU memory */
    nvshmemx_efa_gda_rx_cq_t *rx_cq;           /* GPU memory; NULL when write-with-imm completions are not kept */
    nvshmemx_efa_gda_peer_t *peers;            /* [n_pes], GPU memory */
    nvshmemx_efa_gda_region_t local[NVSHMEMX_EFA_GDA_MAX_REGIONS];
    nvshmemx_efa_gda_region_t *remote;         /* [n_pes * NVSHMEMX_EFA_GDA_MAX_REGIONS], GPU memory */
} nvshmemx_efa_gda_device_state_t;

#ifdef __cplusplus
extern "C" {
#endif

/* One line: "active: ..." or why GDA is off. Never NULL. */
const char *nvshmemx_efa_gda_status(void);
/* 1 when the GDA path is active on this PE (and, because start-up agrees, on every PE). */
int nvshmemx_efa_gda_is_active(void);
/* GPU address of the device state, or NULL when GDA is not active. */
nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void);

#ifdef __cplusplus
}
#endif

#endif
