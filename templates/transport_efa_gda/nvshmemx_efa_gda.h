/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Public types and host API of the EFA GPU-Direct-Async (GDA) path. Installed with NVSHMEM's headers
 * (include/nvshmem_efa/). Plain C so that C, C++ and CUDA code can all include it.
 *
 * Lifetime: the transport fills one nvshmemx_efa_gda_device_state_t in GPU memory when GDA starts and
 * frees it at finalize. nvshmemx_efa_gda_get_device_state() hands its GPU address to the application,
 * which passes it to its kernels (nvshmemx_efa_gda_device.cuh takes it as an argument). While kernels run,
 * the host changes the state only by replacing the regions pointer with a new, fully written table and by
 * filling (once) or retiring a hot region slot (see nvshmemx_efa_gda_hot_local_t).
 *
 * Rails (ABI 5): a PE may reach the network through several NICs (rails; p5 has 4 EFA NICs per GPU, p5en 2).
 * GDA opens one efa-direct endpoint per rail, and the state holds one nvshmemx_efa_gda_rail_t per rail: its
 * send queue and completion queues, its credit block and signal scratch, every PE's address on that rail,
 * and the keys of the hot regions as that rail's NIC registered them. Rail r of one PE talks to rail r of
 * every other PE; every PE has the same n_rails (start-up agrees on it).
 *
 * Owned queues (ABI 6): besides its shared queue, a rail may have queues one thread at a time owns
 * (nvshmemx_efa_gda_rail_t.owned, NVSHMEM_EFA_GDA_OWNED_QUEUES per rail, each a QP of its own efa-direct
 * endpoint). The owner reserves its slots from a counter it keeps in registers, so a post waits for no
 * round trip before it stores its WQE: the shared queue's fetch-and-add is what keeps a shared post above
 * 1.2x the bare WQE-and-doorbell sequence. Quiet and signals wait on the owned queues too.
 *
 * Bounded waits (ABI 7): every wait of the device code (slot claim, SQ room, doorbell turn, quiet, owned-queue room,
 * credits refresh, a waiting receive) gives up after the state's timeout_ns with NVSHMEMX_EFA_GDA_ERR_TIMEOUT and
 * marks the queue so later waits on it fail at once; each queue keeps the PE every slot's WQE was addressed to
 * (slot_pe), so its first error names the peer (error_pe).
 *
 * Errors per PE (ABI 8): a queue that notes its slots' PEs keeps, right after slot_pe, each PE's first failed
 * completion (pe_error, [n_pes] words): a peer that refused or stopped answering fails the waits for that PE alone
 * (efa_gda_quiet_rail_pe), and the others' traffic goes on. A local failure (the QP's own: statuses 1..6), a
 * failure that names no PE, or a completion that is not the queue's makes the whole queue unusable (fatal).
 *
 * Layout: everything a post needs sits at a fixed offset from the state pointer: rail r's block at
 * rail[r], and within it the queue, the hot regions and the first NVSHMEMX_EFA_GDA_FAST_PES peers, so the
 * device loads it in one round of independent loads issued together with the slot reservation; choosing
 * the rail is one read of n_rails. Rail 0's queue, hot regions and signal scratch keep the offsets ABI 4
 * had. The region table behind the regions pointer stays the complete, authoritative list.
 */
#ifndef NVSHMEMX_EFA_GDA_H
#define NVSHMEMX_EFA_GDA_H

#include <stdint.h>

#define NVSHMEMX_EFA_GDA_ABI_VERSION 8
/* The RDMA WQE the device code builds: 64 bytes. The ring stride is the device's WQE size (qp->wqe_size,
 * 64 or 128); the tail of a 128-byte WQE is written as zeros, as rdma-core leaves it for RDMA requests. */
#define NVSHMEMX_EFA_GDA_WQE_SIZE 64
/* Peers whose address and hot-region views sit at a fixed offset in the state (larger PE numbers are
 * looked up through the peers and regions pointers), and the number of hot region slots. */
#define NVSHMEMX_EFA_GDA_FAST_PES 1024
#define NVSHMEMX_EFA_GDA_HOT_REGIONS 3
/* Rails (NICs) one PE drives at most: p5 has 4 EFA NICs per GPU. NVSHMEM may hand over more; the ones past
 * this are left out, and nvshmemx_efa_gda_status() says so. */
#define NVSHMEMX_EFA_GDA_MAX_RAILS 4

/* Device error codes. Values 1..63 are EFA completion statuses (efa_io_comp_status) reported by the NIC;
 * the ones below are detected by the device code. */
enum {
    NVSHMEMX_EFA_GDA_OK = 0,
    NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION = 0x100,    /* source/destination not in a registered local region */
    NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION = 0x101,   /* address not in the symmetric heap GDA knows */
    NVSHMEMX_EFA_GDA_ERR_BAD_PE = 0x102,             /* pe out of range */
    NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES = 0x103,      /* more WQEs at once than max_batch or the SQ holds */
    NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE = 0x104, /* in a heap region GDA could not register on some PE */
    NVSHMEMX_EFA_GDA_ERR_BAD_CQE = 0x105,            /* a completion that is not this queue's: unusable */
    NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN = 0x106,         /* the NIC wrote over receive completions not yet taken */
    NVSHMEMX_EFA_GDA_ERR_NO_CREDITS = 0x107,         /* the receiver took no immediates within the timeout */
    NVSHMEMX_EFA_GDA_ERR_BAD_SIGNAL = 0x108,         /* a signal of other than 4 or 8 aligned bytes, or no scratch */
    NVSHMEMX_EFA_GDA_ERR_BAD_RAIL = 0x109,           /* a rail named by the caller that GDA does not run on */
    NVSHMEMX_EFA_GDA_ERR_NO_OWNED_QUEUE = 0x10a,     /* every owned queue of the rail is taken, or it has none */
    NVSHMEMX_EFA_GDA_ERR_TIMEOUT = 0x10b,            /* a wait passed timeout_ns: the queue is marked and unusable */
};

/* Operation types of a posted WQE (efa_io_send_op_type values). */
enum { NVSHMEMX_EFA_GDA_OP_READ = 1, NVSHMEMX_EFA_GDA_OP_WRITE = 2 };

/* One peer's EFA address, from fi_efa_ops_gda.query_addr. */
typedef struct {
    uint16_t ah;
    uint16_t qpn;
    uint32_t qkey;
} nvshmemx_efa_gda_peer_t;

/* A registered memory region: the local lkey (get_mr_lkey, 24 bits) or a remote rkey (fi_mr_key). valid = 0
 * keeps the range known but unreachable (its registration failed somewhere), which the device reports. */
typedef struct {
    uint64_t base;
    uint64_t length;
    uint32_t key;
    uint32_t valid;
} nvshmemx_efa_gda_region_t;

/* The regions GDA can address, sized from what NVSHMEM registered. The header is followed by one row per
 * region and rail of 1 + n_pes entries: the region as this PE registered it on that rail (its lkey), then every
 * PE's view of it on that rail (its rkey), PE 0 first; at least one row per rail is allocated (zeroed when
 * count is 0), so a reader may load rail r's row 0 together with the header. Entry e of region i on rail r is
 * ((nvshmemx_efa_gda_region_t *)(table + 1))[(i * n_rails + r) * (1 + n_pes) + e]. A region one rail could not
 * register is valid = 0 in that rail's rows only. Immutable once published: a new registration publishes a
 * new table, so a running kernel never sees one half written. */
typedef struct {
    uint32_t count;   /* regions */
    uint32_t n_pes;   /* entries per row, less the local one */
    uint32_t n_rails; /* rows per region */
    uint32_t reserved;
} nvshmemx_efa_gda_regions_t;

/* One send queue and the completion queue that absorbs its completions. The first block is written by the
 * host and never changes; the counters are free-running 32-bit values owned by the device code. */
typedef struct {
    /* SQ: the NIC's LLQ ring and doorbell, mapped for the GPU (cuMemHostRegister IOMEMORY|DEVICEMAP). */
    uint8_t *sq_buf;
    uint32_t *sq_db;
    uint32_t sq_entries;   /* power of two, <= 65536 */
    uint32_t sq_log2;
    uint32_t max_batch;    /* most WQEs one doorbell may cover */
    uint32_t wqe_size;     /* ring stride: 64 or 128 */
    /* TX CQ in GPU memory (cq_open_ext over a dma-buf of it). */
    uint8_t *cq_buf;
    uint32_t cq_entries;   /* power of two, >= sq_entries */
    uint32_t cq_log2;
    uint32_t cq_entry_size;
    uint32_t qp_num;       /* this QP's number: every CQE must carry it */
    uint64_t max_rdma_size; /* larger messages are split */
    /* [sq_entries], GPU memory: slot_done[s % sq_entries] == s once slot s completed. The host initialises
     * entry i to i - sq_entries (the slot of the pass before), so no entry reads as done too early. */
    uint32_t *slot_done;
    /* [sq_entries], GPU memory, or NULL (then errors name no peer): slot_pe[s % sq_entries] is the PE the WQE
     * of slot s was addressed to, stored by the poster with its WQE (ABI 7); read when a completion fails.
     * Followed in the same allocation by pe_error[n_pes] (ABI 8, zeroed by the host): 0, or the first failed
     * completion status of a WQE addressed to that PE (efa_gda_pe_errors). */
    uint16_t *slot_pe;

    /* Device-owned, one 16-byte group read with one load by posters. sq_reserved: slots handed out;
     * sq_rung: every slot below was rung; sq_retired: every slot below completed (the contiguous prefix
     * the CQ poller advances); fatal: 0, or why the queue is unusable and every wait on it gives up at once:
     * NVSHMEMX_EFA_GDA_ERR_BAD_CQE (a completion that cannot be this queue's) or NVSHMEMX_EFA_GDA_ERR_TIMEOUT
     * (a wait on it passed the state's timeout_ns). */
    uint32_t sq_reserved;
    uint32_t sq_rung;
    uint32_t sq_retired;
    uint32_t fatal;
    uint32_t cq_head;      /* CQEs consumed */
    uint32_t cq_lock;
    /* First error seen (0 when none), the request id that carried it (for a timeout: the oldest slot not
     * completed), how many completions failed, and the PE that request was addressed to (slot_pe; ~0u when
     * unknown: no slot_pe, or a completion that was not this queue's). */
    uint32_t error;
    uint32_t error_req_id;
    uint32_t error_count;
    uint32_t error_pe;
    /* Sum of the request ids consumed; lets tests check every WQE completed exactly once. */
    uint64_t req_id_sum;
} nvshmemx_efa_gda_qp_t;

/* Receive-side completions of RDMA write with immediate (unsolicited, no receive posted). */
typedef struct {
    uint8_t *cq_buf;
    uint32_t cq_entries;
    uint32_t cq_log2;
    uint32_t cq_entry_size;
    uint32_t qp_num;       /* this PE's QP: every receive CQE must carry it */
    uint32_t cq_head;
    uint32_t cq_lock;
    uint32_t error;        /* first error (efa status or NVSHMEMX_EFA_GDA_ERR_*, TIMEOUT from a waiting receive), sticky */
    uint32_t last_pe;      /* sender of the last immediate taken (lookup hint) */
} nvshmemx_efa_gda_rx_cq_t;

/* Flow control of write-with-immediate (credits), one block per rail: an immediate a sender posts on rail r
 * arrives in the receiver's rail-r RX CQ. Receiver R counts in consumed[S] the immediates it took from sender
 * S on this rail (GPU memory registered for remote read on this rail's NIC). Sender S may have at most imm_window immediates
 * to R not yet taken: sent[R] - seen[R] < imm_window, where seen[R] is R's consumed[S] as S last read it
 * with an RDMA read (landing in landing[R]). imm_window = this rail's RX CQ entries / n_pes, so the RX CQ
 * never overruns while every sender keeps the rule. */
typedef struct {
    uint64_t *consumed;                       /* [n_pes] */
    uint64_t *sent;                           /* [n_pes] */
    uint64_t *seen;                           /* [n_pes] */
    uint64_t *landing;                        /* [n_pes] */
    uint32_t *lock;                           /* [n_pes]: one refresher per receiver */
    uint32_t lkey;                            /* of this block */
    uint32_t reserved0;
    nvshmemx_efa_gda_region_t *peer_consumed; /* [n_pes]: base of that PE's consumed[], its rkey */
    uint64_t refreshes;                       /* credit reads posted (statistics) */
} nvshmemx_efa_gda_credits_t;

/* Hot regions: copies of up to NVSHMEMX_EFA_GDA_HOT_REGIONS regions of the table, each reachable on
 * every PE and every rail and of the same length on every PE, at fixed offsets (this PE's entry in each
 * rail's block with that rail's lkey, each peer's in its fast entry of each rail with that rail's rkey). The host fills a slot once, when it registers the region (the peers' entries first,
 * this PE's entry last), and retires it by clearing `present` here when it releases the region; a retired
 * slot is never filled again. Every word is zero before the host writes it, so a reader that sees any of
 * base, the key word or the peer's entry still zero uses the region table instead. */
typedef struct {
    uint64_t base;
    uint64_t length;
    uint32_t lkey;
    uint32_t present; /* 1: in use; 0: not yet filled, or retired */
    uint64_t reserved;
} nvshmemx_efa_gda_hot_local_t;

typedef struct {
    uint64_t base; /* the region on that PE */
    uint32_t rkey;
    uint32_t present;
} nvshmemx_efa_gda_hot_remote_t;

/* One peer at a fixed offset: its address (written before the state is handed out) and its view of each
 * hot region. 64 bytes. */
typedef struct {
    nvshmemx_efa_gda_peer_t addr;
    uint64_t reserved;
    nvshmemx_efa_gda_hot_remote_t hot[NVSHMEMX_EFA_GDA_HOT_REGIONS];
} nvshmemx_efa_gda_fast_peer_t;

/* One rail: a NIC of this PE with its own efa-direct endpoint. */
typedef struct {
    nvshmemx_efa_gda_qp_t qp;                  /* the send queue, in the state itself */
    nvshmemx_efa_gda_hot_local_t hot[NVSHMEMX_EFA_GDA_HOT_REGIONS]; /* keys: this rail's lkeys */
    /* Signal scratch: [qp.sq_entries] 8-byte words of GPU memory registered on this rail (signal_lkey), the
     * source of signal writes (efa_gda_write_value_nbi). A signal posted in SQ slot s reads entry
     * s % sq_entries: the entry is written only once the slot is claimed (its previous WQE completed, so the
     * NIC is done reading it) and not again before this WQE completes (its next user, slot s + sq_entries,
     * is claimed only after s retired). NULL: signals are unavailable (ERR_BAD_SIGNAL). */
    uint64_t *signal_src;
    uint32_t signal_lkey;
    uint32_t imm_window;                       /* 0: put-with-immediate is unavailable on this rail */
    nvshmemx_efa_gda_rx_cq_t *rx_cq;           /* GPU memory: immediates that arrived on this rail */
    nvshmemx_efa_gda_peer_t *peers;            /* [n_pes], GPU memory: every PE's address on this rail (fast[]
                                                * repeats the first ones) */
    nvshmemx_efa_gda_credits_t *credits;       /* GPU memory; required: a post whose lookup failed after it
                                                * reserved its slot fills the slot with a 0-byte RDMA write to a
                                                * peer's first heap region, or, where that region is unreachable,
                                                * a 0-byte RDMA read of the peer's credit counters on this rail */
    /* Owned queues (ABI 6): [n_owned] queues of GPU memory, each a QP of its own endpoint on this rail, whose
     * WQEs address the peers' shared queues (peers[]); owner[k] is 0 while queue k is free, else taken
     * (efa_gda_own claims it with a compare-and-swap, efa_gda_disown frees it). Their counters follow the
     * same rules as the shared queue's, but only the owner reserves and rings: it stores sq_reserved before
     * each doorbell (so pollers and quiet see its WQEs) instead of fetching it. */
    nvshmemx_efa_gda_qp_t *owned;
    uint32_t *owner;
    uint32_t n_owned;
    uint32_t reserved_owned;
    uint64_t reserved[4];
    nvshmemx_efa_gda_fast_peer_t fast[NVSHMEMX_EFA_GDA_FAST_PES]; /* PEs 0 .. FAST_PES-1 (zero past n_pes) */
} nvshmemx_efa_gda_rail_t;

typedef struct {
    uint32_t abi_version;
    int32_t my_pe;
    int32_t n_pes;
    uint32_t n_rails;                          /* 1 .. NVSHMEMX_EFA_GDA_MAX_RAILS, the same on every PE */
    nvshmemx_efa_gda_regions_t *regions;       /* GPU memory; replaced, never modified, when regions change */
    uint64_t credit_timeout_ns;                /* a sender out of credits this long gets ERR_NO_CREDITS */
    uint32_t rx_next_rail;                     /* device-owned: the rail efa_gda_rx_poll looks at first */
    uint32_t reserved0;
    /* ABI 7: the bound of every device wait (NVSHMEM_EFA_GDA_TIMEOUT_MS), 0 = wait without one. A wait past it
     * returns NVSHMEMX_EFA_GDA_ERR_TIMEOUT and marks its queue (qp.fatal, rx_cq.error). */
    uint64_t timeout_ns;
    uint64_t reserved1[2];
    nvshmemx_efa_gda_rail_t rail[NVSHMEMX_EFA_GDA_MAX_RAILS]; /* [0, n_rails) in use, the rest zero */
} nvshmemx_efa_gda_device_state_t;

#ifdef __cplusplus
extern "C" {
#endif

/* One line: "EFA GDA active on N rail(s) (...)..." or why GDA is off. Never NULL. */
const char *nvshmemx_efa_gda_status(void);
/* Rails GDA runs on (the same on every PE), 0 when GDA is not active. */
int nvshmemx_efa_gda_rails(void);
/* 1 when the GDA path is active on this PE (and, because start-up agrees, on every PE). */
int nvshmemx_efa_gda_is_active(void);
/* GPU address of the device state, or NULL when GDA is not active. */
nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void);

#ifdef __cplusplus
}
#endif

#endif
