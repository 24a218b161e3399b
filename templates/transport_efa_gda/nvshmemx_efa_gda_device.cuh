/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * GPU-initiated RDMA over EFA: kernels write WQEs straight into the NIC's send queue and ring its doorbell.
 * Include from CUDA code; pass the pointer from nvshmemx_efa_gda_get_device_state() to the kernel.
 *
 * Rules this code keeps (the NIC and docs/research/efa_gda.md §2 set them):
 *  - a WQE is 64 bytes written with 64-bit stores at the ring stride (64 or 128; a 128-byte WQE's tail is
 *    zero); meta_desc, first, last and comp_req are always set;
 *  - the phase bit of slot s is bit 0 of (s >> log2(entries)), 0 on the first pass;
 *  - the doorbell takes the producer counter masked to 16 bits (as rdma-core writes it), only ever grows,
 *    is rung in slot order, and never covers more than max_batch WQEs written since the last ring;
 *  - a slot is reused only after its own previous WQE completed (SQ-full waits on the retired prefix);
 *  - RDMA messages are split at the device's max RDMA size and at the ends of registered regions;
 *  - every CQE must be this queue's (q_type, qp_num, a request id in flight); one that is not makes the
 *    queue unusable and every wait returns NVSHMEMX_EFA_GDA_ERR_BAD_CQE instead of hanging.
 *
 * Completions are exact under concurrency: EFA completes out of order, so the CQ poller marks each
 * completed slot (by request id) and advances sq_retired, the contiguous prefix of completed slots. quiet()
 * waits until that prefix covers every WQE reserved before it was called, its own included; counting
 * completions instead would let later WQEs of other threads stand in for its own.
 *
 * Signals (efa_gda_signal) are RDMA writes of a value from a per-slot scratch entry, posted once the payload
 * they announce has completed.
 *
 * Rails (several NICs per PE, nvshmemx_efa_gda_rail_t): every rail is a queue of its own with everything
 * above (its own retired prefix, slot marks, credits and RX CQ); a WQE is posted on one rail and only that
 * rail's completions retire it. Which rail (the policy, efa_gda_rail_of): rail = (destination PE + channel)
 * % n_rails, where the channel is the calling warp's global index unless the caller names one (the *_on
 * functions take the rail itself). So the warps of a kernel spread over the rails, each warp's posts to one
 * PE stay on one rail, and different destinations start on different rails; a message split into pieces
 * keeps all of its pieces on its rail; a warp batch goes to the rail of its warp's channel. Completion is
 * exact per rail, and the operations that promise "everything before me completed" wait on every rail:
 * efa_gda_quiet and efa_gda_signal take a snapshot of every rail's reserved count and wait until each rail's
 * retired prefix covers it, whichever rails the payload took. Receiving (efa_gda_rx_poll) polls every rail.
 * A prepared handle (efa_gda_handle) binds one rail.
 *
 * Owned queues (efa_gda_owned, ABI 6): a rail may also have queues that one thread at a time owns; the owner
 * reserves slots from a counter in its registers instead of the shared fetch-and-add, so its post waits for
 * no round trip before storing the WQE. efa_gda_quiet and efa_gda_signal wait on them as well.
 *
 * Any number of threads may post at once (slots are reserved with one fetch-and-add and doorbells handed
 * over in slot order). A post issues its slot's fetch-and-add together with every load it needs (all at
 * fixed offsets from the state and its rail, see nvshmemx_efa_gda.h), so the common post waits for one
 * round trip to L2 before it stores its WQE, after one read of n_rails to choose the rail; a slot reserved
 * for a post that then fails is filled with a WQE that moves nothing. Callers that post to one peer
 * repeatedly can resolve it once (efa_gda_handle). Write-with-immediate is flow controlled by credits
 * (nvshmemx_efa_gda_credits_t, per rail): a sender may have at most imm_window immediates a receiver has
 * not taken, so the receiver's CQ cannot overrun. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_CUH

#include <stdio.h>
#include <string.h>

#include "nvshmemx_efa_gda.h"
#include "nvshmemx_efa_gda_wqe.h"

#define EFA_GDA_DEV __device__ __forceinline__
/* Spin-wait hint: nothing on the GPU; the host test build (threads standing in for warps on few cores)
 * defines it to yield. */
#ifndef EFA_GDA_SPIN_PAUSE
#define EFA_GDA_SPIN_PAUSE()
#endif

static_assert(offsetof(nvshmemx_efa_gda_qp_t, sq_reserved) % 16 == 0, "the poster's counters are one 16-byte load");
static_assert(offsetof(nvshmemx_efa_gda_device_state_t, rail) % 64 == 0 && sizeof(nvshmemx_efa_gda_rail_t) % 64 == 0 &&
                  offsetof(nvshmemx_efa_gda_rail_t, qp) == 0,
              "each rail's queue sits at a fixed, aligned offset");
static_assert(offsetof(nvshmemx_efa_gda_device_state_t, rail[0].qp) == 64 && offsetof(nvshmemx_efa_gda_device_state_t, rail[0].hot) == 192 &&
                  offsetof(nvshmemx_efa_gda_device_state_t, rail[0].signal_src) == 288,
              "rail 0's queue, hot regions and signal scratch keep ABI 4's offsets");
static_assert(offsetof(nvshmemx_efa_gda_rail_t, hot) % 32 == 0 && sizeof(nvshmemx_efa_gda_hot_local_t) == 32,
              "hot entries are read with 16-byte loads");
static_assert(offsetof(nvshmemx_efa_gda_rail_t, fast) % 64 == 0 && sizeof(nvshmemx_efa_gda_fast_peer_t) == 64,
              "a fast peer entry is one 64-byte block");
static_assert(sizeof(nvshmemx_efa_gda_regions_t) == 16 && sizeof(nvshmemx_efa_gda_region_t) == 24,
              "region table header and entries");
static_assert(offsetof(nvshmemx_efa_gda_qp_t, sq_buf) == 0 && offsetof(nvshmemx_efa_gda_qp_t, sq_entries) == 16 &&
                  offsetof(nvshmemx_efa_gda_qp_t, wqe_size) == 28 && offsetof(nvshmemx_efa_gda_qp_t, cq_entry_size) == 48 &&
                  offsetof(nvshmemx_efa_gda_qp_t, max_rdma_size) == 56,
              "the queue constants are read with three 16-byte loads (efa_gda_sq_of)");

EFA_GDA_DEV uint32_t efa_gda_load(const uint32_t *p) { return *(const volatile uint32_t *)p; }
EFA_GDA_DEV uint64_t efa_gda_load64(const uint64_t *p) { return *(const volatile uint64_t *)p; }
EFA_GDA_DEV void efa_gda_store(uint32_t *p, uint32_t v) { *(volatile uint32_t *)p = v; }
EFA_GDA_DEV void efa_gda_store64(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; }

/* Fields that never change while kernels run (the host writes the state's constants, queue constants, peer
 * addresses and each region table before a kernel can see them) go through the read-only cache. */
EFA_GDA_DEV uint32_t efa_gda_ro(const uint32_t *p) {
#if defined(__CUDA_ARCH__)
    return __ldg(p);
#else
    return *p;
#endif
}
EFA_GDA_DEV uint64_t efa_gda_ro(const uint64_t *p) {
#if defined(__CUDA_ARCH__)
    return __ldg((const unsigned long long *)p);
#else
    return *p;
#endif
}
template <typename T>
EFA_GDA_DEV T *efa_gda_ro(T *const *p) {
    return (T *)(uintptr_t)efa_gda_ro((const uint64_t *)p);
}
/* Two read-only 64-bit words, 16-byte aligned, in one load. */
EFA_GDA_DEV void efa_gda_ro2(const void *p, uint64_t *a, uint64_t *b) {
#if defined(__CUDA_ARCH__)
    const ulonglong2 v = __ldg((const ulonglong2 *)p);
    *a = v.x;
    *b = v.y;
#else
    *a = ((const uint64_t *)p)[0];
    *b = ((const uint64_t *)p)[1];
#endif
}
/* Two 64-bit words the host may write while kernels run (hot slots), 16-byte aligned, in one load. A plain
 * load: the compiler issues it with the post's other loads, and reloads it after every fence (each "memory"
 * clobber); each word is read whole, before or after the host wrote it, and either is safe to use
 * (nvshmemx_efa_gda_hot_local_t). */
EFA_GDA_DEV void efa_gda_load2(const void *p, uint64_t *a, uint64_t *b) {
#if defined(__CUDA_ARCH__)
    const ulonglong2 v = *(const ulonglong2 *)p;
    *a = v.x;
    *b = v.y;
#else
    *a = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
    *b = __atomic_load_n((const uint64_t *)p + 1, __ATOMIC_RELAXED);
#endif
}
EFA_GDA_DEV nvshmemx_efa_gda_region_t efa_gda_ro(const nvshmemx_efa_gda_region_t *r) {
    nvshmemx_efa_gda_region_t v;
    v.base = efa_gda_ro(&r->base);
    v.length = efa_gda_ro(&r->length);
    v.key = efa_gda_ro(&r->key);
    v.valid = efa_gda_ro(&r->valid);
    return v;
}
EFA_GDA_DEV nvshmemx_efa_gda_peer_t efa_gda_ro(const nvshmemx_efa_gda_peer_t *p) {
    const uint64_t w = efa_gda_ro((const uint64_t *)p);
    nvshmemx_efa_gda_peer_t v;
    memcpy(&v, &w, sizeof v);
    return v;
}

/* The counters a poster needs, read together. */
struct efa_gda_counters {
    uint32_t reserved, rung, retired, fatal;
};
EFA_GDA_DEV efa_gda_counters efa_gda_load_counters(const nvshmemx_efa_gda_qp_t *qp) {
    efa_gda_counters c;
#if defined(__CUDA_ARCH__)
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.reserved), "=r"(c.rung), "=r"(c.retired), "=r"(c.fatal)
                 : "l"(&qp->sq_reserved));
#else
    c.reserved = efa_gda_load(&qp->sq_reserved);
    c.rung = efa_gda_load(&qp->sq_rung);
    c.retired = efa_gda_load(&qp->sq_retired);
    c.fatal = efa_gda_load(&qp->fatal);
#endif
    return c;
}

/* Reserves n slots: the fetch-and-add on sq_reserved, as one plain atom (no warp aggregation: a post is one
 * lane's, and the aggregation's shuffle would wait for the atom before anything else could be issued). */
EFA_GDA_DEV uint32_t efa_gda_fetch_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t n) {
#if defined(__CUDA_ARCH__)
    uint32_t old;
    asm volatile("atom.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(&qp->sq_reserved), "r"(n) : "memory");
    return old;
#else
    return atomicAdd(&qp->sq_reserved, n);
#endif
}

/* A send queue's constants, read once per operation (three 16-byte loads): every load after a post's
 * system fence misses L1 (the fence invalidates it) and costs a trip to L2, so none is left for later. */
struct efa_gda_sq {
    nvshmemx_efa_gda_qp_t *qp;
    uint8_t *buf;
    uint32_t *db;
    uint32_t entries, log2, max_batch, wqe_size;
    uint64_t max_rdma;
};
EFA_GDA_DEV efa_gda_sq efa_gda_sq_of(nvshmemx_efa_gda_qp_t *qp) {
    efa_gda_sq q;
    uint64_t buf, db, e01, e23, unused, max_rdma;
    efa_gda_ro2(&qp->sq_buf, &buf, &db);
    efa_gda_ro2(&qp->sq_entries, &e01, &e23);
    efa_gda_ro2(&qp->cq_entry_size, &unused, &max_rdma);
    (void)unused;
    q.qp = qp;
    q.buf = (uint8_t *)(uintptr_t)buf;
    q.db = (uint32_t *)(uintptr_t)db;
    q.entries = (uint32_t)e01;
    q.log2 = (uint32_t)(e01 >> 32);
    q.max_batch = (uint32_t)e23;
    q.wqe_size = (uint32_t)(e23 >> 32);
    q.max_rdma = max_rdma;
    return q;
}

/* Nanoseconds from the GPU's global timer (the host test build supplies EFA_GDA_HOST_NOW_NS). */
EFA_GDA_DEV uint64_t efa_gda_now_ns() {
#if defined(__CUDA_ARCH__)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(EFA_GDA_HOST_NOW_NS)
    return EFA_GDA_HOST_NOW_NS();
#else
    return 0;
#endif
}

EFA_GDA_DEV const char *efa_gda_strerror(int err) {
    switch (err) {
    case NVSHMEMX_EFA_GDA_OK: return "success";
    case NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION: return "local buffer not in a region registered for GDA";
    case NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION: return "address not in the symmetric heap GDA registered";
    case NVSHMEMX_EFA_GDA_ERR_BAD_PE: return "PE out of range";
    case NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES: return "more WQEs at once than max_batch or the send queue allow";
    case NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE: return "heap region GDA could not register on every PE (see nvshmemx_efa_gda_status)";
    case NVSHMEMX_EFA_GDA_ERR_BAD_CQE: return "a completion that is not this queue's: the GDA queue is unusable";
    case NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN: return "receive completions overwritten before they were taken";
    case NVSHMEMX_EFA_GDA_ERR_NO_CREDITS: return "the receiver took no immediates within the credit timeout";
    case NVSHMEMX_EFA_GDA_ERR_BAD_SIGNAL: return "signal not 4 or 8 aligned bytes, or the device state has no signal scratch (transport older than ABI 4)";
    case NVSHMEMX_EFA_GDA_ERR_BAD_RAIL: return "rail out of range (nvshmemx_efa_gda_rails)";
    case EFA_IO_COMP_STATUS_FLUSHED: return "NIC: flushed (the queue pair is in error)";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR: return "NIC: QP internal error (malformed WQE)";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH: return "NIC: invalid address handle";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY: return "NIC: invalid lkey";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH: return "NIC: bad length";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS: return "NIC: remote bad address or rkey";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN: return "NIC: bad destination QP";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR: return "NIC: receiver not ready";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER: return "NIC: the target has not inserted this PE in its address vector";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE: return "NIC: remote unreachable";
    default: return err > 0 && err < 64 ? "NIC: error completion" : "unknown error";
    }
}

EFA_GDA_DEV void efa_gda_record_error(nvshmemx_efa_gda_qp_t *qp, uint32_t err, uint32_t req_id) {
    if (atomicCAS(&qp->error, 0u, err) == 0u) efa_gda_store(&qp->error_req_id, req_id);
    atomicAdd(&qp->error_count, 1u);
}

EFA_GDA_DEV void efa_gda_set_fatal(nvshmemx_efa_gda_qp_t *qp, uint32_t req_id) {
    efa_gda_record_error(qp, NVSHMEMX_EFA_GDA_ERR_BAD_CQE, req_id);
    __threadfence();
    efa_gda_store(&qp->fatal, 1u);
}

/* Consumes the TX completions that have arrived, marks their slots done and advances the retired prefix;
 * one poller at a time (others return at once). A failed completion records the NIC's status as the QP's
 * error. */
EFA_GDA_DEV void efa_gda_poll_cq(nvshmemx_efa_gda_qp_t *qp) {
    if (atomicCAS(&qp->cq_lock, 0u, 1u) != 0u) return;
    __threadfence();
    uint32_t head = efa_gda_load(&qp->cq_head);
    const uint32_t retired = efa_gda_load(&qp->sq_retired);
    const uint32_t cq_mask = qp->cq_entries - 1, sq_mask = qp->sq_entries - 1;
    uint32_t reserved = 0, n = 0;
    bool have_reserved = false;
    uint64_t req_sum = 0;
    while (!efa_gda_load(&qp->fatal)) {
        const uint8_t *cqe = qp->cq_buf + (size_t)(head & cq_mask) * qp->cq_entry_size;
        const uint8_t flags = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET);
        if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) != efa_gda_cq_expected_phase(head, qp->cq_log2)) break;
        /* The NIC writes the phase last; read the body only after seeing it. */
        __threadfence_system();
        const uint8_t status = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_STATUS_OFFSET);
        const uint16_t req_id = *(const volatile uint16_t *)(cqe + EFA_GDA_CQE_REQ_ID_OFFSET);
        const uint16_t qp_num = *(const volatile uint16_t *)(cqe + EFA_GDA_CQE_QP_NUM_OFFSET);
        /* The slot is the one in flight whose low 16 bits are req_id: in flight means in [retired, reserved),
         * a window of at most sq_entries <= 65536 slots, so the match is unique. */
        const uint32_t slot = retired + (uint16_t)(req_id - (uint16_t)retired);
        if (!have_reserved || (int32_t)(slot - reserved) >= 0) {
            reserved = efa_gda_load(&qp->sq_reserved);
            have_reserved = true;
        }
        const bool ours = EFA_GDA_GET(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) == EFA_IO_SEND_QUEUE &&
                          qp_num == (uint16_t)qp->qp_num && slot - retired < qp->sq_entries &&
                          (int32_t)(slot - reserved) < 0 && efa_gda_load(&qp->slot_done[slot & sq_mask]) != slot;
        head++;
        n++;
        if (!ours) {
            efa_gda_set_fatal(qp, req_id);
            break;
        }
        if (status != EFA_IO_COMP_STATUS_OK) efa_gda_record_error(qp, status, req_id);
        efa_gda_store(&qp->slot_done[slot & sq_mask], slot);
        req_sum += req_id;
    }
    if (n) {
        qp->req_id_sum += req_sum;
        uint32_t r = retired;
        while (efa_gda_load(&qp->slot_done[r & sq_mask]) == r) r++;
        efa_gda_store(&qp->cq_head, head);
        __threadfence();
        efa_gda_store(&qp->sq_retired, r);
    }
    __threadfence();
    atomicExch(&qp->cq_lock, 0u);
}

/* A reservation: the first slot and the doorbell position seen when it could be used. */
struct efa_gda_reservation {
    uint32_t slot, rung_seen;
};

/* Waits until slots [slot, slot + n), already reserved, may be written: while the SQ is full (the slots'
 * previous WQEs have not completed; it polls completions) and while writing them would put more than
 * max_batch WQEs past the doorbell. c: the counters as read when the slots were reserved (any values read
 * since the queue started are safe: they only grow). Earlier slots never wait on later ones, so every holder
 * gets there. Gives up when the queue became unusable. */
EFA_GDA_DEV int efa_gda_claim(const efa_gda_sq &q, uint32_t slot, uint32_t n, efa_gda_counters c, efa_gda_reservation *res) {
    nvshmemx_efa_gda_qp_t *qp = q.qp;
    for (;;) {
        if (c.fatal) return NVSHMEMX_EFA_GDA_ERR_BAD_CQE;
        const bool room = slot + n - c.retired <= q.entries;
        if (room && slot + n - c.rung <= q.max_batch) {
            res->slot = slot;
            res->rung_seen = c.rung;
            return NVSHMEMX_EFA_GDA_OK;
        }
        if (!room) efa_gda_poll_cq(qp);
        EFA_GDA_SPIN_PAUSE();
        c = efa_gda_load_counters(qp);
    }
}

/* Reserves n consecutive slots with one fetch-and-add, then claims them (efa_gda_claim). Refuses n that can
 * never fit (0, > max_batch or > sq_entries). */
EFA_GDA_DEV int efa_gda_reserve(const efa_gda_sq &q, uint32_t n, efa_gda_reservation *res) {
    if (n == 0 || n > q.max_batch || n > q.entries) return NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES;
    /* The counters first, so that nothing waits for the atom before they are issued: most of the time they
     * already allow the slots (older values only make the check stricter). */
    const efa_gda_counters c = efa_gda_load_counters(q.qp);
    const uint32_t slot = efa_gda_fetch_slots(q.qp, n);
    return efa_gda_claim(q, slot, n, c, res);
}
EFA_GDA_DEV int efa_gda_reserve(nvshmemx_efa_gda_qp_t *qp, uint32_t n, efa_gda_reservation *res) {
    return efa_gda_reserve(efa_gda_sq_of(qp), n, res);
}

/* A WQE in registers. efa_gda_wqe_of builds everything but the slot's request id and phase, which
 * efa_gda_store_wqe adds to the first word when it stores the WQE into its slot: the WQE can be built
 * while the slot's reservation is in flight. */
static_assert(offsetof(struct efa_io_tx_meta_desc, req_id) == 0 && offsetof(struct efa_io_tx_meta_desc, ctrl2) == 3,
              "request id and phase are in the WQE's first 64-bit word");
EFA_GDA_DEV efa_gda_wqe_words efa_gda_wqe_of(struct efa_gda_rdma_desc d) {
    union efa_gda_wqe_words w;
    d.req_id = 0;
    efa_gda_build_rdma_wqe(&w, &d, 0);
    return w;
}
EFA_GDA_DEV void efa_gda_store_wqe(const efa_gda_sq &q, uint32_t slot, const efa_gda_wqe_words &w) {
    const uint64_t first = w.q[0] | (uint64_t)(uint16_t)slot |
                           ((uint64_t)EFA_GDA_FIELD(EFA_IO_TX_META_DESC_PHASE_MASK, efa_gda_sq_phase(slot, q.log2)) << 24);
    volatile uint64_t *dst = (volatile uint64_t *)(q.buf + (size_t)(slot & (q.entries - 1)) * q.wqe_size);
    dst[0] = first;
#pragma unroll
    for (int i = 1; i < NVSHMEMX_EFA_GDA_WQE_SIZE / 8; i++) dst[i] = w.q[i];
    for (uint32_t i = NVSHMEMX_EFA_GDA_WQE_SIZE / 8; i < q.wqe_size / 8; i++) dst[i] = 0;
}

/* Stores the WQE for slot into the ring. The request id is the slot's low 16 bits. */
EFA_GDA_DEV void efa_gda_write_wqe(const efa_gda_sq &q, uint32_t slot, struct efa_gda_rdma_desc d) {
    efa_gda_store_wqe(q, slot, efa_gda_wqe_of(d));
}
EFA_GDA_DEV void efa_gda_write_wqe(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, struct efa_gda_rdma_desc d) {
    efa_gda_write_wqe(efa_gda_sq_of(qp), slot, d);
}

/* Rings the doorbell for slots [slot, slot + n) once every earlier slot has been rung (skipping the wait
 * when the reservation already saw the doorbell at slot). The caller's WQE stores must be fenced (system
 * scope) before this; the fence here covers them. The register takes the producer counter's low 16 bits,
 * as rdma-core writes it. Returns NVSHMEMX_EFA_GDA_ERR_BAD_CQE, without ringing, when the queue became
 * unusable while it waited (an earlier slot's owner may have given up). */
EFA_GDA_DEV int efa_gda_ring(const efa_gda_sq &q, uint32_t slot, uint32_t n, uint32_t rung_seen) {
    nvshmemx_efa_gda_qp_t *qp = q.qp;
    if (rung_seen != slot)
        while (efa_gda_load(&qp->sq_rung) != slot) {
            if (efa_gda_load(&qp->fatal)) return NVSHMEMX_EFA_GDA_ERR_BAD_CQE;
            EFA_GDA_SPIN_PAUSE();
        }
    __threadfence_system();
    efa_gda_store(q.db, (slot + n) & 0xffffu);
    __threadfence_system();
    efa_gda_store(&qp->sq_rung, slot + n);
    return NVSHMEMX_EFA_GDA_OK;
}
EFA_GDA_DEV int efa_gda_ring(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, uint32_t n, uint32_t rung_seen) {
    return efa_gda_ring(efa_gda_sq_of(qp), slot, n, rung_seen);
}
EFA_GDA_DEV int efa_gda_ring(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, uint32_t n) { return efa_gda_ring(qp, slot, n, slot + 1); }

/* Waits until every slot below end completed (the retired prefix reached it). Returns 0, or
 * NVSHMEMX_EFA_GDA_ERR_BAD_CQE when the queue became unusable. */
EFA_GDA_DEV int efa_gda_wait_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t end) {
    for (;;) {
        const efa_gda_counters c = efa_gda_load_counters(qp);
        if ((int32_t)(c.retired - end) >= 0) break;
        if (c.fatal) return NVSHMEMX_EFA_GDA_ERR_BAD_CQE;
        efa_gda_poll_cq(qp);
        EFA_GDA_SPIN_PAUSE();
    }
    __threadfence_system();
    return NVSHMEMX_EFA_GDA_OK;
}

/* Posts one WQE: reserve, write, fence, ring. Returns 0 or why not; *end = the slot after it. */
EFA_GDA_DEV int efa_gda_post_one(const efa_gda_sq &q, const struct efa_gda_rdma_desc &d, uint32_t *end) {
    efa_gda_reservation res;
    int err = efa_gda_reserve(q, 1, &res);
    if (err) return err;
    efa_gda_write_wqe(q, res.slot, d);
    err = efa_gda_ring(q, res.slot, 1, res.rung_seen);
    if (end) *end = res.slot + 1;
    return err;
}
EFA_GDA_DEV int efa_gda_post_one(nvshmemx_efa_gda_qp_t *qp, const struct efa_gda_rdma_desc &d, uint32_t *end) {
    return efa_gda_post_one(efa_gda_sq_of(qp), d, end);
}

/* Waits until every WQE reserved before the call (the caller's own included) completed; returns the QP's
 * first error (an efa_io_comp_status value or NVSHMEMX_EFA_GDA_ERR_*) or 0. */
EFA_GDA_DEV int efa_gda_quiet_qp(nvshmemx_efa_gda_qp_t *qp) {
    const int err = efa_gda_wait_slots(qp, efa_gda_load(&qp->sq_reserved));
    return err ? err : (int)efa_gda_load(&qp->error);
}


/* --- rails ------------------------------------------------------------------------------------------ */

/* The calling warp's global index (1-D grids): the channel of the default rail policy. */
EFA_GDA_DEV uint32_t efa_gda_warp_channel() { return (uint32_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); }

/* The rail policy: rail = (pe + channel) % n_rails (0 with one rail). Spreads a kernel's warps over the
 * rails (each warp's posts to one PE stay on one rail) and starts different destinations on different rails.
 * The read of n_rails (read-only, at a fixed offset) is what choosing a rail costs. */
EFA_GDA_DEV uint32_t efa_gda_rail_of(const nvshmemx_efa_gda_device_state_t *s, int pe, uint32_t channel) {
    const uint32_t n = efa_gda_ro(&s->n_rails);
    return n > 1 ? ((uint32_t)pe + channel) % n : 0u;
}

/* Whether rail (named by a caller) is one GDA runs on. */
EFA_GDA_DEV bool efa_gda_rail_ok(const nvshmemx_efa_gda_device_state_t *s, uint32_t rail) {
    return rail < efa_gda_ro(&s->n_rails);
}

/* --- symmetric-address API over the device state ---------------------------------------------------- */

/* The current region table. fresh = false allows a copy of the pointer cached by this SM: a table is
 * never freed before finalize, so a stale one is a valid, older subset, and callers that miss in it ask
 * again with fresh = true (a region registered while this kernel runs). */
EFA_GDA_DEV const nvshmemx_efa_gda_regions_t *efa_gda_regions(const nvshmemx_efa_gda_device_state_t *s, bool fresh = true) {
    return fresh ? *(nvshmemx_efa_gda_regions_t *const volatile *)&s->regions : s->regions;
}

/* Row of region i on rail r (see nvshmemx_efa_gda_regions_t): [0] this PE's entry, [1 + pe] PE pe's. A region's
 * base and length are the same in every rail's row; only keys and validity differ. */
EFA_GDA_DEV const nvshmemx_efa_gda_region_t *efa_gda_region_row(const nvshmemx_efa_gda_regions_t *t, uint32_t n_pes, uint32_t n_rails,
                                                                uint32_t i, uint32_t rail) {
    return (const nvshmemx_efa_gda_region_t *)(t + 1) + ((size_t)i * n_rails + rail) * (1 + n_pes);
}

/* Index of the region holding address a, or -1. */
EFA_GDA_DEV int efa_gda_find_region(const nvshmemx_efa_gda_regions_t *t, uint32_t n_pes, uint32_t n_rails, uint32_t count, uint64_t a) {
    for (uint32_t i = 0; i < count; i++) {
        const nvshmemx_efa_gda_region_t *r = efa_gda_region_row(t, n_pes, n_rails, i, 0);
        if (a - efa_gda_ro(&r->base) < efa_gda_ro(&r->length)) return (int)i;
    }
    return -1;
}

/* The largest piece of a transfer starting at local (this PE) and sym (a symmetric address, reached on pe)
 * that stays inside one local region, one heap region and max bytes, with rail's keys. Row 0 of the rail is
 * read with the header (every global load costs a trip to L2 here: the system fences of a post invalidate
 * L1), so a transfer within the first region needs no more. */
struct efa_gda_piece {
    uint64_t local, remote, len;
    uint32_t lkey, rkey;
};
EFA_GDA_DEV int efa_gda_piece_at(const nvshmemx_efa_gda_regions_t *t, uint32_t n_pes, uint32_t rail, int pe, uint64_t local,
                                 uint64_t sym, uint64_t left, uint64_t max, efa_gda_piece *p) {
    const uint32_t count = efa_gda_ro(&t->count);
    const nvshmemx_efa_gda_region_t *row0 = (const nvshmemx_efa_gda_region_t *)(t + 1) + (size_t)rail * (1 + n_pes);
    nvshmemx_efa_gda_region_t L = efa_gda_ro(&row0[0]), R = efa_gda_ro(&row0[1 + pe]);
    uint64_t sbase = L.base;
    if (!count || local - L.base >= L.length || sym - L.base >= L.length) {
        const uint32_t n_rails = efa_gda_ro(&t->n_rails);
        const int li = efa_gda_find_region(t, n_pes, n_rails, count, local);
        if (li < 0) return NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION;
        const int si = efa_gda_find_region(t, n_pes, n_rails, count, sym);
        if (si < 0) return NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION;
        L = efa_gda_ro(efa_gda_region_row(t, n_pes, n_rails, (uint32_t)li, rail));
        const nvshmemx_efa_gda_region_t *srow = efa_gda_region_row(t, n_pes, n_rails, (uint32_t)si, rail);
        sbase = efa_gda_ro(&srow->base);
        R = efa_gda_ro(&srow[1 + pe]);
    }
    if (!L.valid || !R.valid) return NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE;
    const uint64_t soff = sym - sbase;
    if (soff >= R.length) return NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE;
    uint64_t len = left;
    len = min(len, L.base + L.length - local);
    len = min(len, R.length - soff);
    len = min(len, max);
    p->local = local;
    p->remote = R.base + soff;
    p->len = len;
    p->lkey = L.key;
    p->rkey = R.key;
    return NVSHMEMX_EFA_GDA_OK;
}

/* piece_at over the table as this SM last saw it (cached: read by the caller early), then, on a miss, over
 * the current one. */
EFA_GDA_DEV int efa_gda_find_piece(const nvshmemx_efa_gda_device_state_t *s, const nvshmemx_efa_gda_regions_t *cached,
                                   uint32_t n_pes, uint32_t rail, int pe, uint64_t local, uint64_t sym, uint64_t left,
                                   uint64_t max, efa_gda_piece *p) {
    const int err = efa_gda_piece_at(cached, n_pes, rail, pe, local, sym, left, max, p);
    return err ? efa_gda_piece_at(efa_gda_regions(s, true), n_pes, rail, pe, local, sym, left, max, p) : err;
}
EFA_GDA_DEV int efa_gda_find_piece(const nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe, uint64_t local, uint64_t sym,
                                   uint64_t left, uint64_t max, efa_gda_piece *p) {
    return efa_gda_find_piece(s, efa_gda_regions(s, false), efa_gda_ro((const uint32_t *)&s->n_pes), rail, pe, local, sym,
                              left, max, p);
}

/* The piece, from the hot regions of rail rl alone (see nvshmemx_efa_gda_hot_local_t): every load's address
 * comes from rl and fi (the peer's fast entry, fi < NVSHMEMX_EFA_GDA_FAST_PES), so they go out together, with
 * the slot's fetch-and-add. false: a region is not hot (or a slot is not filled yet, or retired); ask the
 * table. The remote region's length is this PE's: the host makes a region hot only where it has one length
 * everywhere. */
EFA_GDA_DEV bool efa_gda_hot_piece(const nvshmemx_efa_gda_rail_t *rl, uint32_t fi, uint64_t local, uint64_t sym, uint64_t left,
                                   uint64_t max, efa_gda_piece *p) {
    constexpr int K = NVSHMEMX_EFA_GDA_HOT_REGIONS;
    uint64_t base[K], len[K], key_word[K], rbase[K], rkey_word[K];
#pragma unroll
    for (int k = 0; k < K; k++) { /* every load first, so that they go out together */
        uint64_t unused;
        efa_gda_load2(&rl->hot[k].base, &base[k], &len[k]);
        efa_gda_load2(&rl->hot[k].lkey, &key_word[k], &unused);
        efa_gda_load2(&rl->fast[fi].hot[k].base, &rbase[k], &rkey_word[k]);
    }
    /* Branch-free selection (bitwise ands, selects): a branch would let the compiler sink a load into it. */
    bool have_local = false, have_sym = false;
    uint64_t local_end = 0, sym_base = 0, sym_end = 0, remote_base = 0;
    uint32_t lkey = 0, rkey = 0;
#pragma unroll
    for (int k = 0; k < K; k++) {
        /* key words: key in the low half, present in the high half (little endian, as GPUs and hosts are) */
        const bool filled = (base[k] != 0) & ((key_word[k] >> 32) != 0);
        const bool is_local = filled & (local - base[k] < len[k]);
        const bool is_sym = filled & (sym - base[k] < len[k]) & (rbase[k] != 0) & ((rkey_word[k] >> 32) != 0);
        have_local |= is_local;
        local_end = is_local ? base[k] + len[k] : local_end;
        lkey = is_local ? (uint32_t)key_word[k] : lkey;
        have_sym |= is_sym;
        sym_base = is_sym ? base[k] : sym_base;
        sym_end = is_sym ? base[k] + len[k] : sym_end;
        remote_base = is_sym ? rbase[k] : remote_base;
        rkey = is_sym ? (uint32_t)rkey_word[k] : rkey;
    }
    if (!have_local || !have_sym) return false;
    uint64_t n = left;
    n = min(n, local_end - local);
    n = min(n, sym_end - sym);
    n = min(n, max);
    p->local = local;
    p->remote = remote_base + (sym - sym_base);
    p->len = n;
    p->lkey = lkey;
    p->rkey = rkey;
    return true;
}

/* The piece for pe on rail (pe < n_pes, rail < n_rails, checked by the caller): hot regions first, then the
 * region table. */
EFA_GDA_DEV int efa_gda_lookup(const nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe, uint64_t local, uint64_t sym,
                               uint64_t left, uint64_t max, efa_gda_piece *p) {
    if ((uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES && efa_gda_hot_piece(&s->rail[rail], (uint32_t)pe, local, sym, left, max, p))
        return NVSHMEMX_EFA_GDA_OK;
    return efa_gda_find_piece(s, rail, pe, local, sym, left, max, p);
}

/* A PE's address on a rail: at a fixed offset for the first NVSHMEMX_EFA_GDA_FAST_PES PEs, through peers beyond. */
EFA_GDA_DEV nvshmemx_efa_gda_peer_t efa_gda_peer(const nvshmemx_efa_gda_rail_t *rl, int pe) {
    return (uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES ? efa_gda_ro(&rl->fast[pe].addr) : efa_gda_ro(&efa_gda_ro(&rl->peers)[pe]);
}

EFA_GDA_DEV struct efa_gda_rdma_desc efa_gda_desc(uint8_t op, nvshmemx_efa_gda_peer_t peer, const efa_gda_piece &p,
                                                 bool has_imm, uint32_t imm) {
    struct efa_gda_rdma_desc d;
    d.op = op;
    d.has_imm = has_imm ? 1 : 0;
    d.req_id = 0;
    d.imm = has_imm ? imm : 0;
    d.dest_qpn = peer.qpn;
    d.ah = peer.ah;
    d.qkey = peer.qkey;
    d.local_addr = p.local;
    d.lkey = p.lkey;
    d.remote_addr = p.remote;
    d.rkey = p.rkey;
    d.length = (uint32_t)p.len;
    return d;
}

/* Fills a reserved slot of rail rl whose post failed after the reservation (a bad PE or address found once
 * the lookup's loads arrived): later slots' doorbells wait for this one, so it must be written and rung. The
 * WQE moves nothing and completes OK: a 0-byte RDMA read on this PE's own QP of that rail (every PE inserts
 * itself into each rail's AV) from its own credit counters of that rail (registered for remote read, the key
 * every PE publishes) into them. A rail without a credit block is a host bug: trap rather than post a WQE
 * the NIC may fail. */
EFA_GDA_DEV void efa_gda_fill_slot(const nvshmemx_efa_gda_device_state_t *s, const nvshmemx_efa_gda_rail_t *rl, const efa_gda_sq &q,
                                   uint32_t slot, efa_gda_counters c) {
    const int me = (int)efa_gda_ro((const uint32_t *)&s->my_pe);
    const nvshmemx_efa_gda_credits_t *cr = efa_gda_ro(&rl->credits);
    if (!cr) {
        printf("nvshmem-efa: EFA GDA device state without a credit block: cannot fill a failed post's slot\n");
        __trap();
    }
    const nvshmemx_efa_gda_region_t own = efa_gda_ro(&efa_gda_ro(&cr->peer_consumed)[me]);
    efa_gda_piece p;
    p.local = (uint64_t)(uintptr_t)efa_gda_ro(&cr->consumed);
    p.lkey = efa_gda_ro(&cr->lkey);
    p.remote = own.base;
    p.rkey = own.key;
    p.len = 0;
    efa_gda_reservation res;
    if (efa_gda_claim(q, slot, 1, c, &res)) return; /* the queue became unusable: nothing is rung any more */
    efa_gda_write_wqe(q, slot, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_READ, efa_gda_peer(rl, me), p, false, 0));
    efa_gda_ring(q, slot, 1, res.rung_seen);
}

/* Credits for one immediate to pe on rail (see nvshmemx_efa_gda_credits_t). Refreshes them with an RDMA read
 * of the receiver's count on that rail when they run out; gives up with NVSHMEMX_EFA_GDA_ERR_NO_CREDITS after
 * credit_timeout_ns without the receiver taking any. */
EFA_GDA_DEV int efa_gda_refresh_credits(nvshmemx_efa_gda_device_state_t *s, nvshmemx_efa_gda_rail_t *rl, int pe) {
    nvshmemx_efa_gda_credits_t *c = rl->credits;
    const nvshmemx_efa_gda_region_t rc = c->peer_consumed[pe];
    if (!rc.valid) return NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE;
    efa_gda_piece p;
    p.local = (uint64_t)&c->landing[pe];
    p.lkey = c->lkey;
    p.remote = rc.base + (uint64_t)s->my_pe * sizeof(uint64_t);
    p.rkey = rc.key;
    p.len = sizeof(uint64_t);
    uint32_t end;
    int err = efa_gda_post_one(&rl->qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_READ, efa_gda_peer(rl, pe), p, false, 0), &end);
    if (!err) err = efa_gda_wait_slots(&rl->qp, end);
    if (err) return err;
    atomicAdd((unsigned long long *)&c->refreshes, 1ull);
    atomicMax((unsigned long long *)&c->seen[pe], (unsigned long long)efa_gda_load64(&c->landing[pe]));
    return NVSHMEMX_EFA_GDA_OK;
}

EFA_GDA_DEV int efa_gda_take_credit(nvshmemx_efa_gda_device_state_t *s, nvshmemx_efa_gda_rail_t *rl, int pe) {
    nvshmemx_efa_gda_credits_t *c = rl->credits;
    const uint32_t window = rl->imm_window;
    if (!c || window == 0) return NVSHMEMX_EFA_GDA_ERR_NO_CREDITS;
    uint64_t waiting_since = 0;
    for (;;) {
        const uint64_t sent = efa_gda_load64(&c->sent[pe]);
        if (sent - efa_gda_load64(&c->seen[pe]) < window) {
            if (atomicCAS((unsigned long long *)&c->sent[pe], (unsigned long long)sent, (unsigned long long)(sent + 1)) == sent)
                return NVSHMEMX_EFA_GDA_OK;
            continue;
        }
        const uint64_t now = efa_gda_now_ns();
        if (!waiting_since) waiting_since = now ? now : 1;
        else if (now - waiting_since > s->credit_timeout_ns) return NVSHMEMX_EFA_GDA_ERR_NO_CREDITS;
        if (atomicCAS(&c->lock[pe], 0u, 1u) == 0u) {
            const int err = efa_gda_refresh_credits(s, rl, pe);
            __threadfence();
            atomicExch(&c->lock[pe], 0u);
            if (err) return err;
        }
        EFA_GDA_SPIN_PAUSE();
    }
}

/* Posts bytes [off, bytes) of an RDMA read or write on rail, one WQE per piece (split at the max RDMA size
 * and at region ends). With has_imm, the immediate rides on the last piece, which is posted once every
 * earlier piece completed (EFA delivers pieces out of order; end: the slot after the last one posted; the
 * pieces share the rail, so its retired prefix covers them) and once a credit is held. */
EFA_GDA_DEV int efa_gda_rma_pieces(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, const efa_gda_sq &q, uint8_t op,
                                   nvshmemx_efa_gda_peer_t peer, uint64_t local, uint64_t sym, uint64_t bytes, uint64_t off,
                                   int pe, bool has_imm, uint32_t imm, uint32_t end) {
    for (;;) {
        efa_gda_piece p;
        int err = efa_gda_lookup(s, rail, pe, local + off, sym + off, bytes - off, q.max_rdma, &p);
        if (err) return err;
        const bool last = off + p.len == bytes;
        if (last && has_imm) {
            if (off) err = efa_gda_wait_slots(q.qp, end);
            if (!err) err = efa_gda_take_credit(s, &s->rail[rail], pe);
            if (err) return err;
        }
        err = efa_gda_post_one(q, efa_gda_desc(op, peer, p, last && has_imm, imm), &end);
        if (err || last) return err;
        off += p.len;
    }
}

/* Posts one RDMA read or write of any size on rail (< n_rails: the caller checked) from the calling thread:
 * one WQE per piece, every piece on that rail. Without an immediate, the first slot's fetch-and-add and every
 * load the first piece needs (the rail's queue constants and counters, n_pes, the peer's fast entry and the
 * hot regions of the rail; all at fixed offsets from s) go out in one round, so a post within the hot
 * regions costs one round trip to L2 before its WQE is stored. The slot is then this post's whatever the
 * lookup finds: when it fails (bad PE, unregistered or unreachable address), the slot is filled with a WQE
 * that moves nothing (efa_gda_fill_slot) and the error is returned. With an immediate nothing is reserved
 * before the credit is held: the credit wait may itself post (a refresh). */
EFA_GDA_DEV int efa_gda_rma_nbi_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, uint8_t op, void *local, const void *sym,
                                     uint64_t bytes, int pe, bool has_imm, uint32_t imm) {
    nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    nvshmemx_efa_gda_qp_t *qp = &rl->qp;
    const uint64_t l = (uint64_t)local, y = (uint64_t)sym;
    if (has_imm) {
        if ((uint32_t)pe >= efa_gda_ro((const uint32_t *)&s->n_pes)) return NVSHMEMX_EFA_GDA_ERR_BAD_PE;
        return efa_gda_rma_pieces(s, rail, efa_gda_sq_of(qp), op, efa_gda_peer(rl, pe), l, y, bytes, 0, pe, true, imm, 0);
    }
    const efa_gda_counters c = efa_gda_load_counters(qp);
    const uint32_t slot = efa_gda_fetch_slots(qp, 1);
    const efa_gda_sq q = efa_gda_sq_of(qp);
    const uint32_t n_pes = efa_gda_ro((const uint32_t *)&s->n_pes);
    const uint32_t fi = (uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES ? (uint32_t)pe : 0u; /* in bounds whatever pe is */
    nvshmemx_efa_gda_peer_t peer = efa_gda_ro(&rl->fast[fi].addr);
    efa_gda_piece p;
    const bool hot = efa_gda_hot_piece(rl, fi, l, y, bytes, q.max_rdma, &p);
    if (!hot || (uint32_t)pe >= n_pes || fi != (uint32_t)pe) {
        int err = (uint32_t)pe < n_pes ? NVSHMEMX_EFA_GDA_OK : NVSHMEMX_EFA_GDA_ERR_BAD_PE;
        if (!err) {
            if (fi != (uint32_t)pe) peer = efa_gda_peer(rl, pe);
            err = efa_gda_find_piece(s, rail, pe, l, y, bytes, q.max_rdma, &p);
        }
        if (err) {
            efa_gda_fill_slot(s, rl, q, slot, c);
            return err;
        }
    }
    efa_gda_reservation res;
    int err = efa_gda_claim(q, slot, 1, c, &res);
    if (err) return err;
    efa_gda_write_wqe(q, slot, efa_gda_desc(op, peer, p, false, 0));
    err = efa_gda_ring(q, slot, 1, res.rung_seen);
    if (err || p.len == bytes) return err;
    return efa_gda_rma_pieces(s, rail, q, op, peer, l, y, bytes, p.len, pe, false, 0, slot + 1);
}

/* On a rail the caller names (NVSHMEMX_EFA_GDA_ERR_BAD_RAIL unless rail < n_rails). */
EFA_GDA_DEV int efa_gda_rma_nbi_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, uint8_t op, void *local, const void *sym,
                                   uint64_t bytes, int pe, bool has_imm, uint32_t imm) {
    if (!efa_gda_rail_ok(s, rail)) return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    return efa_gda_rma_nbi_rail(s, rail, op, local, sym, bytes, pe, has_imm, imm);
}
/* On the rail of the policy (efa_gda_rail_of with the calling warp's channel). */
EFA_GDA_DEV int efa_gda_rma_nbi(nvshmemx_efa_gda_device_state_t *s, uint8_t op, void *local, const void *sym, uint64_t bytes,
                                int pe, bool has_imm, uint32_t imm) {
    return efa_gda_rma_nbi_rail(s, efa_gda_rail_of(s, pe, efa_gda_warp_channel()), op, local, sym, bytes, pe, has_imm, imm);
}

/* put: dest is a symmetric address, src a registered local buffer. */
EFA_GDA_DEV int efa_gda_put_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes, int pe) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, false, 0);
}
EFA_GDA_DEV int efa_gda_put_nbi_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src, uint64_t bytes,
                                   int pe) {
    return efa_gda_rma_nbi_on(s, rail, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, false, 0);
}
/* put with immediate: the peer sees imm in its receive CQ of that rail once the data is in place. Blocks
 * while the peer has imm_window of our immediates on that rail not taken (see nvshmemx_efa_gda_credits_t). */
EFA_GDA_DEV int efa_gda_put_imm_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes,
                                    int pe, uint32_t imm) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, true, imm);
}
EFA_GDA_DEV int efa_gda_put_imm_nbi_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                       uint64_t bytes, int pe, uint32_t imm) {
    return efa_gda_rma_nbi_on(s, rail, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, true, imm);
}
/* get: src is a symmetric address on pe, dest a registered local buffer. */
EFA_GDA_DEV int efa_gda_get_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes, int pe) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes, pe, false, 0);
}
EFA_GDA_DEV int efa_gda_get_nbi_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src, uint64_t bytes,
                                   int pe) {
    return efa_gda_rma_nbi_on(s, rail, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes, pe, false, 0);
}

/* Waits until every WQE reserved before the call on every rail (the caller's own included, whichever rails
 * they took) completed: first a snapshot of each rail's reserved count, then each rail's retired prefix
 * waited up to it. Returns the first error of any rail's queue (an efa_io_comp_status value or
 * NVSHMEMX_EFA_GDA_ERR_*), or 0. */
EFA_GDA_DEV int efa_gda_quiet_owned_queues(nvshmemx_efa_gda_device_state_t *s, uint32_t n_rails);
EFA_GDA_DEV int efa_gda_quiet(nvshmemx_efa_gda_device_state_t *s) {
    const uint32_t n = efa_gda_ro(&s->n_rails);
    if (n <= 1) {
        const int err = efa_gda_quiet_qp(&s->rail[0].qp);
        const int owned = efa_gda_ro(&s->rail[0].n_owned) ? efa_gda_quiet_owned_queues(s, 1) : 0;
        return err ? err : owned;
    }
    uint32_t end[NVSHMEMX_EFA_GDA_MAX_RAILS];
#pragma unroll
    for (uint32_t r = 0; r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++)
        if (r < n) end[r] = efa_gda_load(&s->rail[r].qp.sq_reserved);
    int first = 0;
#pragma unroll
    for (uint32_t r = 0; r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        if (r >= n) break;
        nvshmemx_efa_gda_qp_t *qp = &s->rail[r].qp;
        int err = efa_gda_wait_slots(qp, end[r]);
        if (!err) err = (int)efa_gda_load(&qp->error);
        if (!first) first = err;
    }
    const int owned = efa_gda_quiet_owned_queues(s, n);
    return first ? first : owned;
}
/* The owned queues' part of efa_gda_quiet: each queue's reserved count read just before waiting on it (later
 * than the call, so it covers everything reserved before the call). */
EFA_GDA_DEV int efa_gda_quiet_owned_queues(nvshmemx_efa_gda_device_state_t *s, uint32_t n_rails) {
    int first = 0;
    for (uint32_t r = 0; r < n_rails && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        const uint32_t n = efa_gda_ro(&s->rail[r].n_owned);
        nvshmemx_efa_gda_qp_t *owned = n ? efa_gda_ro(&s->rail[r].owned) : nullptr;
        for (uint32_t k = 0; k < n; k++) {
            const int err = efa_gda_quiet_qp(&owned[k]);
            if (!first) first = err;
        }
    }
    return first;
}
/* One rail only: what an operation ordered after the posts of that rail alone may use. */
EFA_GDA_DEV int efa_gda_quiet_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail) {
    return efa_gda_rail_ok(s, rail) ? efa_gda_quiet_qp(&s->rail[rail].qp) : (int)NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
}

/* --- signals ---------------------------------------------------------------------------------------------
 * A signal is an RDMA write of a 4- or 8-byte value that a receiver polls for (a count, a flag), so it must
 * never land before the data it announces. EFA completes and places out of order; what orders the signal
 * after its payload is the payload's completion: efa_gda_signal waits until every WQE reserved before it
 * completed, on every rail (the exact retired prefix of each, efa_gda_quiet), and only then posts the write,
 * on any rail.
 *
 * The value needs registered local memory (the NIC reads it by lkey) that stays unchanged until the write
 * completes: each signal takes the scratch entry of its own SQ slot on its rail (signal_src[slot %
 * sq_entries], see nvshmemx_efa_gda_rail_t), written after the slot is claimed. A write replaces the target;
 * it stands for an add only where the target is known to hold 0 and nothing else writes it before the
 * receiver has read it (the caller's invariant). */

/* Posts the write of value (bytes: 4 or 8, sym aligned to it) to symmetric address sym on pe, on rail (< n_rails,
 * checked by the caller), with no ordering against earlier posts. Like efa_gda_rma_nbi, a slot reserved for a
 * write whose lookup then fails is filled with a WQE that moves nothing. */
EFA_GDA_DEV int efa_gda_write_value_nbi_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *sym, uint64_t value,
                                             uint32_t bytes, int pe) {
    nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    nvshmemx_efa_gda_qp_t *qp = &rl->qp;
    uint64_t *const scratch = efa_gda_ro(&rl->signal_src);
    const uint64_t y = (uint64_t)sym;
    if (!scratch || (bytes != 4 && bytes != 8) || (y & (bytes - 1))) return NVSHMEMX_EFA_GDA_ERR_BAD_SIGNAL;
    const efa_gda_counters c = efa_gda_load_counters(qp);
    const uint32_t slot = efa_gda_fetch_slots(qp, 1);
    const efa_gda_sq q = efa_gda_sq_of(qp);
    efa_gda_piece p;
    /* The remote side as a put from sym to sym would see it: sym is in this PE's heap too. */
    int err = (uint32_t)pe < efa_gda_ro((const uint32_t *)&s->n_pes) ? (int)NVSHMEMX_EFA_GDA_OK : (int)NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    if (!err) err = efa_gda_lookup(s, rail, pe, y, y, bytes, q.max_rdma, &p);
    if (err == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION) err = NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION; /* sym was the local side */
    if (!err && p.len != bytes) err = NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE; /* aligned: cannot happen */
    if (err) {
        efa_gda_fill_slot(s, rl, q, slot, c);
        return err;
    }
    uint64_t *const entry = scratch + (slot & (q.entries - 1));
    p.local = (uint64_t)(uintptr_t)entry;
    p.lkey = efa_gda_ro(&rl->signal_lkey);
    const efa_gda_wqe_words w = efa_gda_wqe_of(efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, efa_gda_peer(rl, pe), p, false, 0));
    efa_gda_reservation res;
    err = efa_gda_claim(q, slot, 1, c, &res);
    if (err) return err;
    /* The slot's previous WQE has completed (claim): the NIC no longer reads this entry. The ring's system
     * fence orders this store before the doorbell. */
    efa_gda_store64(entry, value);
    efa_gda_store_wqe(q, slot, w);
    return efa_gda_ring(q, slot, 1, res.rung_seen);
}
EFA_GDA_DEV int efa_gda_write_value_nbi(nvshmemx_efa_gda_device_state_t *s, void *sym, uint64_t value, uint32_t bytes, int pe) {
    return efa_gda_write_value_nbi_rail(s, efa_gda_rail_of(s, pe, efa_gda_warp_channel()), sym, value, bytes, pe);
}
EFA_GDA_DEV int efa_gda_write_value_nbi_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *sym, uint64_t value,
                                           uint32_t bytes, int pe) {
    if (!efa_gda_rail_ok(s, rail)) return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    return efa_gda_write_value_nbi_rail(s, rail, sym, value, bytes, pe);
}

/* The signal of a payload: waits until every WQE reserved before the call completed on every rail (the
 * caller's payload, whichever rails it took, and any other thread's posts reserved earlier: never fewer than
 * the payload), then posts the write of value on the policy's rail. Payload posted by other threads is
 * covered when their posts happened before this call (a release they did after posting, acquired here, or a
 * barrier). Returns the first error of a queue or of the post. */
EFA_GDA_DEV int efa_gda_signal(nvshmemx_efa_gda_device_state_t *s, void *sym, uint64_t value, uint32_t bytes, int pe) {
    const int err = efa_gda_quiet(s);
    return err ? err : efa_gda_write_value_nbi(s, sym, value, bytes, pe);
}
EFA_GDA_DEV int efa_gda_signal_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *sym, uint64_t value, uint32_t bytes,
                                  int pe) {
    const int err = efa_gda_quiet(s);
    return err ? err : efa_gda_write_value_nbi_on(s, rail, sym, value, bytes, pe);
}

/* A prepared handle: a rail, a peer and a pair of regions (the one holding a symmetric address, the one
 * holding a local buffer) resolved once, kept in registers by the caller, for code that posts repeatedly to
 * the same peer. A put or get through it that fits both regions and one WQE loads nothing but the rail's queue
 * counters, with its slot's fetch-and-add, and builds its WQE while that is in flight; anything else goes the
 * general way on the handle's rail (efa_gda_rma_nbi_on). Valid while the regions stay registered; a handle
 * whose set-up failed sends every post the general way, which reports the error. */
struct efa_gda_handle {
    nvshmemx_efa_gda_device_state_t *s;
    efa_gda_sq q;
    nvshmemx_efa_gda_peer_t peer;
    int pe;
    uint32_t rail;
    uint32_t lkey, rkey;
    uint64_t local_base, local_len, sym_base, sym_len, remote_base;
};
EFA_GDA_DEV int efa_gda_handle_init_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe, const void *sym, const void *local,
                                       efa_gda_handle *h) {
    h->s = s;
    h->pe = pe;
    h->rail = rail;
    h->lkey = h->rkey = 0;
    h->local_base = h->local_len = h->sym_base = h->sym_len = h->remote_base = 0;
    if (!efa_gda_rail_ok(s, rail)) {
        h->q = efa_gda_sq_of(&s->rail[0].qp); /* never used: every post goes the general way, which refuses the rail */
        return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    }
    const nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    h->q = efa_gda_sq_of(&s->rail[rail].qp);
    const uint32_t n_pes = efa_gda_ro((const uint32_t *)&s->n_pes);
    if ((uint32_t)pe >= n_pes) return NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    h->peer = efa_gda_peer(rl, pe);
    const nvshmemx_efa_gda_regions_t *t = efa_gda_regions(s, true);
    const uint32_t count = efa_gda_ro(&t->count), n_rails = efa_gda_ro(&t->n_rails);
    const int li = efa_gda_find_region(t, n_pes, n_rails, count, (uint64_t)local);
    if (li < 0) return NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION;
    const int si = efa_gda_find_region(t, n_pes, n_rails, count, (uint64_t)sym);
    if (si < 0) return NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION;
    const nvshmemx_efa_gda_region_t L = efa_gda_ro(efa_gda_region_row(t, n_pes, n_rails, (uint32_t)li, rail));
    const nvshmemx_efa_gda_region_t S = efa_gda_ro(efa_gda_region_row(t, n_pes, n_rails, (uint32_t)si, rail));
    const nvshmemx_efa_gda_region_t R = efa_gda_ro(efa_gda_region_row(t, n_pes, n_rails, (uint32_t)si, rail) + 1 + pe);
    if (!L.valid || !R.valid) return NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE;
    h->lkey = L.key;
    h->rkey = R.key;
    h->local_base = L.base;
    h->local_len = L.length;
    h->sym_base = S.base;
    h->sym_len = min(S.length, R.length);
    h->remote_base = R.base;
    return NVSHMEMX_EFA_GDA_OK;
}
/* On the policy's rail for pe and the calling warp. */
EFA_GDA_DEV int efa_gda_handle_init(nvshmemx_efa_gda_device_state_t *s, int pe, const void *sym, const void *local,
                                    efa_gda_handle *h) {
    return efa_gda_handle_init_on(s, efa_gda_rail_of(s, pe, efa_gda_warp_channel()), pe, sym, local, h);
}
EFA_GDA_DEV int efa_gda_rma_nbi(const efa_gda_handle &h, uint8_t op, void *local, const void *sym, uint64_t bytes) {
    const uint64_t lo = (uint64_t)local - h.local_base, so = (uint64_t)sym - h.sym_base;
    if (lo >= h.local_len || bytes > h.local_len - lo || so >= h.sym_len || bytes > h.sym_len - so || bytes > h.q.max_rdma)
        return efa_gda_rma_nbi_on(h.s, h.rail, op, local, sym, bytes, h.pe, false, 0);
    const efa_gda_counters c = efa_gda_load_counters(h.q.qp);
    const uint32_t slot = efa_gda_fetch_slots(h.q.qp, 1);
    efa_gda_piece p;
    p.local = (uint64_t)local;
    p.remote = h.remote_base + so;
    p.len = bytes;
    p.lkey = h.lkey;
    p.rkey = h.rkey;
    const efa_gda_wqe_words w = efa_gda_wqe_of(efa_gda_desc(op, h.peer, p, false, 0));
    efa_gda_reservation res;
    const int err = efa_gda_claim(h.q, slot, 1, c, &res);
    if (err) return err;
    efa_gda_store_wqe(h.q, slot, w);
    return efa_gda_ring(h.q, slot, 1, res.rung_seen);
}
EFA_GDA_DEV int efa_gda_put_nbi(const efa_gda_handle &h, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(h, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes);
}
EFA_GDA_DEV int efa_gda_get_nbi(const efa_gda_handle &h, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(h, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes);
}

/* --- owned queues (ABI 6) ------------------------------------------------------------------------------
 * A queue one thread owns (nvshmemx_efa_gda_rail_t.owned), with a prepared handle's peer and regions: the
 * owner keeps the queue's next slot and the end of the free room it last saw in registers, so a put or get
 * that fits the handle's regions and one WQE stores its WQE and sq_reserved, fences and rings without a load
 * or an atomic before the stores; a larger one is split into max-RDMA-size pieces on the same queue. Only when
 * the room it saw runs out does it read the counters (and poll completions), as a shared post that finds the
 * queue full. A transfer outside the handle's regions goes the general way on the rail's shared queue. The
 * owner's quiet (efa_gda_quiet_owned) waits on its queue, and on the shared queue when one of its posts went
 * there since its last quiet; efa_gda_quiet and efa_gda_signal wait on every owned queue too.
 * One thread at a time: efa_gda_own claims a free queue of the rail, efa_gda_disown frees it (after the
 * owner's last post; its WQEs may still be in flight, and the next owner or any quiet still waits for them).
 * Claim queues outside the hot loop: the claim is a compare-and-swap per queue it tries. */
struct efa_gda_owned {
    efa_gda_handle h; /* the handle's q is the owned queue */
    uint32_t index;   /* which owned queue of the rail; ~0u when none is held */
    uint32_t next;    /* the next slot: sq_reserved, which only the owner changes */
    uint32_t room_end; /* slots below this were free when last read (retired + entries) */
    bool general;      /* a post went the general way (shared queue) since the owner's last quiet */
};
EFA_GDA_DEV int efa_gda_own_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe, const void *sym, const void *local,
                               efa_gda_owned *o) {
    o->index = ~0u;
    o->next = o->room_end = 0;
    o->general = false;
    const int err = efa_gda_handle_init_on(s, rail, pe, sym, local, &o->h);
    if (err) return err;
    const nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    const uint32_t n = efa_gda_ro(&rl->n_owned);
    uint32_t *owner = efa_gda_ro(&rl->owner);
    nvshmemx_efa_gda_qp_t *owned = efa_gda_ro(&rl->owned);
    for (uint32_t k = 0; k < n; k++) {
        if (efa_gda_load(&owner[k]) != 0u || atomicCAS(&owner[k], 0u, 1u) != 0u) continue;
        /* Acquire: the previous owner's counter stores, released before it freed the queue. */
        __threadfence();
        o->index = k;
        o->h.q = efa_gda_sq_of(&owned[k]);
        const efa_gda_counters c = efa_gda_load_counters(&owned[k]);
        o->next = c.reserved;
        o->room_end = c.retired + o->h.q.entries;
        return NVSHMEMX_EFA_GDA_OK;
    }
    return NVSHMEMX_EFA_GDA_ERR_NO_OWNED_QUEUE;
}
/* On the policy's rail for pe and the calling warp. */
EFA_GDA_DEV int efa_gda_own(nvshmemx_efa_gda_device_state_t *s, int pe, const void *sym, const void *local, efa_gda_owned *o) {
    return efa_gda_own_on(s, efa_gda_rail_of(s, pe, efa_gda_warp_channel()), pe, sym, local, o);
}
EFA_GDA_DEV void efa_gda_disown(efa_gda_owned *o) {
    if (o->index == ~0u) return;
    __threadfence(); /* release: this owner's counter stores before the queue is free */
    atomicExch(&efa_gda_ro(&o->h.s->rail[o->h.rail].owner)[o->index], 0u);
    o->index = ~0u;
}

/* Waits until n more slots of the owned queue are free (its earlier WQEs completed), polling completions. */
EFA_GDA_DEV int efa_gda_owned_room(efa_gda_owned &o, uint32_t n) {
    nvshmemx_efa_gda_qp_t *qp = o.h.q.qp;
    for (;;) {
        const efa_gda_counters c = efa_gda_load_counters(qp);
        if (c.fatal) return NVSHMEMX_EFA_GDA_ERR_BAD_CQE;
        o.room_end = c.retired + o.h.q.entries;
        if ((int32_t)(o.next + n - o.room_end) <= 0) return NVSHMEMX_EFA_GDA_OK;
        efa_gda_poll_cq(qp);
        EFA_GDA_SPIN_PAUSE();
    }
}

EFA_GDA_DEV int efa_gda_rma_nbi(efa_gda_owned &o, uint8_t op, void *local, const void *sym, uint64_t bytes) {
    const efa_gda_handle &h = o.h;
    const uint64_t lo = (uint64_t)local - h.local_base, so = (uint64_t)sym - h.sym_base;
    if (o.index == ~0u || lo >= h.local_len || bytes > h.local_len - lo || so >= h.sym_len || bytes > h.sym_len - so) {
        o.general = true;
        return efa_gda_rma_nbi_on(h.s, h.rail, op, local, sym, bytes, h.pe, false, 0);
    }
    /* One WQE per max-RDMA-size piece (one for all but huge transfers), each rung on its own: the doorbell
     * never covers more than one new WQE. */
    uint64_t done = 0;
    do {
        const uint64_t len = bytes - done < h.q.max_rdma ? bytes - done : h.q.max_rdma;
        const uint32_t slot = o.next;
        if ((int32_t)(slot + 1 - o.room_end) > 0) {
            const int err = efa_gda_owned_room(o, 1);
            if (err) return err;
        }
        efa_gda_piece p;
        p.local = (uint64_t)local + done;
        p.remote = h.remote_base + so + done;
        p.len = len;
        p.lkey = h.lkey;
        p.rkey = h.rkey;
        efa_gda_store_wqe(h.q, slot, efa_gda_wqe_of(efa_gda_desc(op, h.peer, p, false, 0)));
        /* sq_reserved before the doorbell: a completion of this slot is checked against it. */
        efa_gda_store(&h.q.qp->sq_reserved, slot + 1);
        __threadfence_system();
        efa_gda_store(h.q.db, (slot + 1) & 0xffffu);
        __threadfence_system();
        efa_gda_store(&h.q.qp->sq_rung, slot + 1);
        o.next = slot + 1;
        done += len;
    } while (done < bytes);
    return NVSHMEMX_EFA_GDA_OK;
}
EFA_GDA_DEV int efa_gda_put_nbi(efa_gda_owned &o, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(o, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes);
}
EFA_GDA_DEV int efa_gda_get_nbi(efa_gda_owned &o, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(o, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes);
}
/* The owner's quiet: every WQE it posted completed, on its queue and, when one of its posts went the general
 * way since its last quiet, on the rail's shared queue (everything reserved there so far, its own included). */
EFA_GDA_DEV int efa_gda_quiet_owned(efa_gda_owned &o) {
    if (o.index == ~0u) return efa_gda_quiet_rail(o.h.s, o.h.rail);
    int err = efa_gda_wait_slots(o.h.q.qp, o.next);
    if (!err) err = (int)efa_gda_load(&o.h.q.qp->error);
    if (o.general) {
        const int shared = efa_gda_quiet_rail(o.h.s, o.h.rail);
        if (!err) err = shared;
        o.general = false;
    }
    return err;
}

/* Stop the kernel with a message when err is set: for callers that have no way to report an error (DeepEP's
 * void IBGDA functions), so that a failed post or quiet is never silent. efa_gda_check names the operation
 * and its addresses; efa_gda_check_quiet the rail and request that failed first. */
EFA_GDA_DEV void efa_gda_check(int err, const char *op, const void *remote, const void *local, int pe, uint64_t bytes) {
    if (!err) return;
    printf("nvshmem-efa: EFA GDA %s failed: %s (0x%x); remote address %p on PE %d, local address %p, %llu bytes\n", op,
           efa_gda_strerror(err), err, remote, pe, local, (unsigned long long)bytes);
    __trap();
}
EFA_GDA_DEV void efa_gda_check_quiet(const nvshmemx_efa_gda_device_state_t *s, int err, const char *op, int pe) {
    if (!err) return;
    uint32_t rail = 0;
    for (uint32_t r = 0; r < s->n_rails && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++)
        if (efa_gda_load(&s->rail[r].qp.error)) {
            rail = r;
            break;
        }
    const nvshmemx_efa_gda_qp_t *qp = &s->rail[rail].qp;
    if (!efa_gda_load(&qp->error))
        for (uint32_t r = 0; r < s->n_rails && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++)
            for (uint32_t k = 0; k < s->rail[r].n_owned; k++)
                if (efa_gda_load(&s->rail[r].owned[k].error) && !efa_gda_load(&qp->error)) {
                    rail = r;
                    qp = &s->rail[r].owned[k];
                }
    printf("nvshmem-efa: EFA GDA %s (before signalling PE %d) failed: %s (0x%x); first failed request id %u, %u failed "
           "completions on rail %u (QP %u)\n",
           op, pe, efa_gda_strerror(err), err, efa_gda_load(&qp->error_req_id), efa_gda_load(&qp->error_count), rail, qp->qp_num);
    __trap();
}

/* Warp-level put with the shape of nvshmemx_putmem_nbi_warp: called by all 32 lanes with the same
 * arguments; lane 0 posts (on the policy's rail for pe and this warp, or on rail), every lane gets the result. */
EFA_GDA_DEV int efa_gda_put_nbi_warp(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes,
                                     int pe) {
    int err = 0;
    if ((threadIdx.x & 31) == 0) err = efa_gda_put_nbi(s, dest, src, bytes, pe);
    return __shfl_sync(0xffffffffu, err, 0);
}
EFA_GDA_DEV int efa_gda_put_nbi_warp_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, void *dest, const void *src,
                                        uint64_t bytes, int pe) {
    int err = 0;
    if ((threadIdx.x & 31) == 0) err = efa_gda_put_nbi_on(s, rail, dest, src, bytes, pe);
    return __shfl_sync(0xffffffffu, err, 0);
}

/* Warp batch on rail (< n_rails: the caller checked): every lane with want = true posts its own RDMA op,
 * which must fit one WQE (else that lane gets NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES); the lanes' WQEs go to
 * consecutive slots of that rail, written in parallel, under one doorbell per max_batch WQEs. Called by all
 * 32 lanes. Returns this lane's result. */
EFA_GDA_DEV int efa_gda_rma_nbi_warp_batch_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, bool want, uint8_t op,
                                                void *local, const void *sym, uint64_t bytes, int pe) {
    const unsigned lane = threadIdx.x & 31;
    const nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    const efa_gda_sq q = efa_gda_sq_of(&s->rail[rail].qp);
    struct efa_gda_rdma_desc d;
    int err = 0;
    if (want) {
        efa_gda_piece p;
        err = (uint32_t)pe >= efa_gda_ro((const uint32_t *)&s->n_pes) ? (int)NVSHMEMX_EFA_GDA_ERR_BAD_PE : 0;
        if (!err) err = efa_gda_lookup(s, rail, pe, (uint64_t)local, (uint64_t)sym, bytes, q.max_rdma, &p);
        if (!err && p.len != bytes) err = NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES;
        if (!err) d = efa_gda_desc(op, efa_gda_peer(rl, pe), p, false, 0);
    }
    const unsigned posting = __ballot_sync(0xffffffffu, want && err == 0);
    uint32_t group = q.max_batch < 32 ? q.max_batch : 32;
    if (group > q.entries) group = q.entries;
    for (uint32_t base = 0; base < 32; base += group) {
        const unsigned in_group = posting & (group >= 32 ? 0xffffffffu : (((1u << group) - 1u) << base));
        const uint32_t n = __popc(in_group);
        if (n == 0) continue;
        const unsigned leader = __ffs(in_group) - 1;
        efa_gda_reservation res = {0, 0};
        int rerr = 0;
        if (lane == leader) rerr = efa_gda_reserve(q, n, &res);
        rerr = __shfl_sync(0xffffffffu, rerr, leader);
        res.slot = __shfl_sync(0xffffffffu, res.slot, leader);
        if (rerr) {
            if (in_group & (1u << lane)) err = rerr;
            continue;
        }
        if (in_group & (1u << lane)) {
            efa_gda_write_wqe(q, res.slot + __popc(in_group & ((1u << lane) - 1u)), d);
            __threadfence_system();
        }
        __syncwarp();
        if (lane == leader) rerr = efa_gda_ring(q, res.slot, n, res.rung_seen);
        rerr = __shfl_sync(0xffffffffu, rerr, leader);
        if (rerr && (in_group & (1u << lane))) err = rerr;
    }
    return err;
}
/* On the rail of the warp's channel (the lanes may post to different PEs: the batch stays on one rail). */
EFA_GDA_DEV int efa_gda_rma_nbi_warp_batch(nvshmemx_efa_gda_device_state_t *s, bool want, uint8_t op, void *local,
                                           const void *sym, uint64_t bytes, int pe) {
    return efa_gda_rma_nbi_warp_batch_rail(s, efa_gda_rail_of(s, 0, efa_gda_warp_channel()), want, op, local, sym, bytes, pe);
}
EFA_GDA_DEV int efa_gda_rma_nbi_warp_batch_on(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, bool want, uint8_t op,
                                              void *local, const void *sym, uint64_t bytes, int pe) {
    if (!efa_gda_rail_ok(s, rail)) return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    return efa_gda_rma_nbi_warp_batch_rail(s, rail, want, op, local, sym, bytes, pe);
}

/* Looks up the PE that sent a receive completion on rail rl: its (address handle, QP) as query_addr gave them
 * for that PE on that rail. EFA reports ah 0xffff for a sender it has no address handle for; then the QP
 * number alone. */
EFA_GDA_DEV int efa_gda_sender(const nvshmemx_efa_gda_device_state_t *s, const nvshmemx_efa_gda_rail_t *rl,
                               nvshmemx_efa_gda_rx_cq_t *cq, uint16_t ah, uint16_t qpn) {
    const uint32_t hint = efa_gda_load(&cq->last_pe);
    const nvshmemx_efa_gda_peer_t *peers = rl->peers;
    if (hint < (uint32_t)s->n_pes && peers[hint].qpn == qpn && (ah == 0xffff || peers[hint].ah == ah)) return (int)hint;
    for (int pe = 0; pe < s->n_pes; pe++)
        if (peers[pe].qpn == qpn && (ah == 0xffff || peers[pe].ah == ah)) {
            efa_gda_store(&cq->last_pe, (uint32_t)pe);
            return pe;
        }
    return -1;
}

/* Receive side of put-with-immediate on one rail: takes one arrived immediate, if any. Returns 1 with *imm,
 * *bytes and *src_pe set, 0 when none is waiting (or another thread is taking one), or a negative error:
 * -status for a failed receive completion, -NVSHMEMX_EFA_GDA_ERR_BAD_CQE for a completion not for this QP or
 * from no known PE, -NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN when the NIC came round the CQ past entries not yet taken.
 * Errors are sticky in the rail's rx_cq->error.
 *
 * Overrun detection: a taken entry is marked by writing its flags byte with no queue type (the NIC always
 * writes one), keeping this pass's phase; the host zeroes the CQ before use. So at the head, an entry with
 * the other phase is "not written yet" when it carries no queue type and "written on a later pass" (an
 * overrun) when it does. Credits keep this from happening; the check makes it loud if a sender skips them. */
EFA_GDA_DEV int efa_gda_rx_poll_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, uint32_t *imm, uint32_t *bytes, int *src_pe) {
    const nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    nvshmemx_efa_gda_rx_cq_t *cq = rl->rx_cq;
    const uint32_t sticky = efa_gda_load(&cq->error);
    if (sticky) return -(int)sticky;
    if (atomicCAS(&cq->cq_lock, 0u, 1u) != 0u) return 0;
    __threadfence();
    const uint32_t head = efa_gda_load(&cq->cq_head);
    uint8_t *cqe = cq->cq_buf + (size_t)(head & (cq->cq_entries - 1)) * cq->cq_entry_size;
    const uint8_t flags = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET);
    const uint8_t expected = efa_gda_cq_expected_phase(head, cq->cq_log2);
    int got = 0;
    if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) == expected) {
        __threadfence_system();
        const uint8_t status = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_STATUS_OFFSET);
        const uint16_t qp_num = *(const volatile uint16_t *)(cqe + EFA_GDA_CQE_QP_NUM_OFFSET);
        const uint16_t ah = *(const volatile uint16_t *)(cqe + EFA_GDA_RX_CQE_AH_OFFSET);
        const uint16_t src_qpn = *(const volatile uint16_t *)(cqe + EFA_GDA_RX_CQE_SRC_QP_OFFSET);
        *imm = *(const volatile uint32_t *)(cqe + EFA_GDA_RX_CQE_IMM_OFFSET);
        uint32_t len = *(const volatile uint16_t *)(cqe + EFA_GDA_RX_CQE_LENGTH_OFFSET);
        if (cq->cq_entry_size >= sizeof(struct efa_io_rx_cdesc_ex))
            len |= (uint32_t)(*(const volatile uint16_t *)(cqe + offsetof(struct efa_io_rx_cdesc_ex, u))) << 16;
        *bytes = len;
        const int pe = efa_gda_sender(s, rl, cq, ah, src_qpn);
        if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) != EFA_IO_RECV_QUEUE || qp_num != (uint16_t)cq->qp_num || pe < 0) {
            got = -(int)NVSHMEMX_EFA_GDA_ERR_BAD_CQE;
        } else if (status != EFA_IO_COMP_STATUS_OK) {
            got = -(int)status;
        } else {
            *src_pe = pe;
            nvshmemx_efa_gda_credits_t *c = rl->credits;
            if (c) efa_gda_store64(&c->consumed[pe], efa_gda_load64(&c->consumed[pe]) + 1);
            got = 1;
        }
        *(volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET) = expected;  /* taken: this phase, no queue type */
        efa_gda_store(&cq->cq_head, head + 1);
    } else if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) != 0) {
        got = -(int)NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN;
    }
    if (got < 0) atomicCAS(&cq->error, 0u, (uint32_t)-got);
    __threadfence();
    atomicExch(&cq->cq_lock, 0u);
    return got;
}

/* Receive side over every rail: the first rail with an immediate (or an error), starting after the rail that
 * gave the last one, so that no rail is starved; the same results as efa_gda_rx_poll_rail. Immediates of
 * different rails are not ordered with each other (nor are those of one rail: EFA delivers out of order). */
EFA_GDA_DEV int efa_gda_rx_poll(nvshmemx_efa_gda_device_state_t *s, uint32_t *imm, uint32_t *bytes, int *src_pe) {
    const uint32_t n = efa_gda_ro(&s->n_rails);
    if (n <= 1) return efa_gda_rx_poll_rail(s, 0, imm, bytes, src_pe);
    const uint32_t start = efa_gda_load(&s->rx_next_rail);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t r = (start + i) % n;
        const int rc = efa_gda_rx_poll_rail(s, r, imm, bytes, src_pe);
        if (rc == 1) efa_gda_store(&s->rx_next_rail, r + 1);
        if (rc) return rc;
    }
    return 0;
}

#endif
