/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * GPU-initiated RDMA over EFA: kernels write WQEs straight into the NIC's send queue and ring its doorbell.
 * Include from CUDA code; pass the pointer from nvshmemx_efa_gda_get_device_state() to the kernel.
 *
 * Rules this code keeps (the NIC and docs/research/efa_gda.md §2 set them):
 *  - a WQE is 64 bytes written with 64-bit stores; meta_desc, first, last and comp_req are always set;
 *  - the phase bit of slot s is bit 0 of (s >> log2(entries)), 0 on the first pass;
 *  - the doorbell takes the free-running 32-bit producer counter, only ever grows, is rung in slot order,
 *    and never covers more than max_batch WQEs written since the last ring;
 *  - a slot is reused only after as many completions were consumed (SQ-full waits on the CQ);
 *  - RDMA messages larger than the device's max RDMA size are split.
 *
 * Concurrency: any number of threads may post at once (slots are reserved with atomicCAS and doorbells
 * handed over in slot order). Completions are counted, and EFA completes out of order, so quiet() means
 * "as many completions as WQEs reserved when it started": exact when the threads whose puts it must cover
 * have stopped posting (after a block or grid barrier, which is how DeepEP-style kernels call it). */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_CUH

#include "nvshmemx_efa_gda.h"
#include "nvshmemx_efa_gda_wqe.h"

#define EFA_GDA_DEV __device__ __forceinline__

EFA_GDA_DEV uint32_t efa_gda_load(const uint32_t *p) { return *(const volatile uint32_t *)p; }
EFA_GDA_DEV void efa_gda_store(uint32_t *p, uint32_t v) { *(volatile uint32_t *)p = v; }

EFA_GDA_DEV void efa_gda_record_error(nvshmemx_efa_gda_qp_t *qp, uint32_t err, uint32_t req_id) {
    if (atomicCAS(&qp->error, 0u, err) == 0u) efa_gda_store(&qp->error_req_id, req_id);
    atomicAdd(&qp->error_count, 1u);
}

/* Consumes the TX completions that have arrived; one poller at a time (others return 0 at once). A failed
 * completion records the NIC's status as the QP's error. Returns how many completions were consumed. */
EFA_GDA_DEV uint32_t efa_gda_poll_cq(nvshmemx_efa_gda_qp_t *qp) {
    if (atomicCAS(&qp->cq_lock, 0u, 1u) != 0u) return 0;
    __threadfence();
    uint32_t head = efa_gda_load(&qp->cq_head);
    const uint32_t mask = qp->cq_entries - 1;
    uint32_t n = 0;
    uint64_t req_sum = 0;
    for (;;) {
        const uint8_t *cqe = qp->cq_buf + (size_t)(head & mask) * qp->cq_entry_size;
        const uint8_t flags = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET);
        if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) != efa_gda_cq_expected_phase(head, qp->cq_log2)) break;
        /* The NIC writes the phase last; read the body only after seeing it. */
        __threadfence_system();
        const uint8_t status = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_STATUS_OFFSET);
        const uint16_t req_id = *(const volatile uint16_t *)(cqe + EFA_GDA_CQE_REQ_ID_OFFSET);
        if (status != EFA_IO_COMP_STATUS_OK) efa_gda_record_error(qp, status, req_id);
        req_sum += req_id;
        head++;
        n++;
    }
    if (n) {
        qp->req_id_sum += req_sum;
        efa_gda_store(&qp->cq_head, head);
        __threadfence();
        atomicAdd(&qp->sq_completed, n);
    }
    __threadfence();
    atomicExch(&qp->cq_lock, 0u);
    return n;
}

/* Reserves n consecutive slots (n <= max_batch). Waits while the SQ is full (polling completions) or while
 * the WQEs reserved but not yet rung would exceed max_batch. Returns the first slot number. */
EFA_GDA_DEV uint32_t efa_gda_reserve(nvshmemx_efa_gda_qp_t *qp, uint32_t n) {
    for (;;) {
        const uint32_t r = efa_gda_load(&qp->sq_reserved);
        const uint32_t rung = efa_gda_load(&qp->sq_rung);
        const uint32_t done = efa_gda_load(&qp->sq_completed);
        const bool room = r + n - done <= qp->sq_entries;
        if (room && r + n - rung <= qp->max_batch) {
            if (atomicCAS(&qp->sq_reserved, r, r + n) == r) return r;
        } else if (!room) {
            efa_gda_poll_cq(qp);
        }
    }
}

/* Stores one WQE for slot into the ring. The request id is the slot's low 16 bits. */
EFA_GDA_DEV void efa_gda_write_wqe(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, struct efa_gda_rdma_desc d) {
    union efa_gda_wqe_words w;
    d.req_id = (uint16_t)slot;
    efa_gda_build_rdma_wqe(&w, &d, efa_gda_sq_phase(slot, qp->sq_log2));
    volatile uint64_t *dst =
        (volatile uint64_t *)(qp->sq_buf + (size_t)(slot & (qp->sq_entries - 1)) * NVSHMEMX_EFA_GDA_WQE_SIZE);
#pragma unroll
    for (int i = 0; i < NVSHMEMX_EFA_GDA_WQE_SIZE / 8; i++) dst[i] = w.q[i];
}

/* Rings the doorbell for slots [slot, slot + n) once every earlier slot has been rung. The caller's WQE
 * stores must be fenced (system scope) before this. */
EFA_GDA_DEV void efa_gda_ring(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, uint32_t n) {
    while (efa_gda_load(&qp->sq_rung) != slot) {
    }
    __threadfence_system();
    efa_gda_store(qp->sq_db, slot + n);
    __threadfence_system();
    efa_gda_store(&qp->sq_rung, slot + n);
}

/* Posts one RDMA read or write of any size from the calling thread, split into max-RDMA-size WQEs and into
 * doorbells of at most max_batch WQEs. With has_imm, only the last WQE carries the immediate, and it is
 * posted after the earlier pieces completed, because EFA delivers WQEs out of order. */
EFA_GDA_DEV int efa_gda_post_rdma(nvshmemx_efa_gda_qp_t *qp, uint8_t op, nvshmemx_efa_gda_peer_t peer,
                                  uint64_t local_addr, uint32_t lkey, uint64_t remote_addr, uint32_t rkey,
                                  uint64_t bytes, bool has_imm, uint32_t imm) {
    const uint64_t chunk = qp->max_rdma_size;
    uint64_t pieces = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
    uint64_t off = 0;
    while (pieces > 0) {
        const bool imm_last = has_imm && pieces > 1;
        uint32_t n = (uint32_t)min((uint64_t)qp->max_batch, imm_last ? pieces - 1 : pieces);
        const uint32_t slot = efa_gda_reserve(qp, n);
        for (uint32_t i = 0; i < n; i++) {
            struct efa_gda_rdma_desc d;
            const uint64_t len = min(chunk, bytes - off);
            d.op = op;
            d.has_imm = has_imm && pieces - i == 1;
            d.req_id = 0;
            d.imm = imm;
            d.dest_qpn = peer.qpn;
            d.ah = peer.ah;
            d.qkey = peer.qkey;
            d.local_addr = local_addr + off;
            d.lkey = lkey;
            d.remote_addr = remote_addr + off;
            d.rkey = rkey;
            d.length = (uint32_t)len;
            efa_gda_write_wqe(qp, slot + i, d);
            off += len;
        }
        efa_gda_ring(qp, slot, n);
        pieces -= n;
        if (has_imm && pieces == 1) {
            const uint32_t target = efa_gda_load(&qp->sq_reserved);
            while ((int32_t)(efa_gda_load(&qp->sq_completed) - target) < 0) efa_gda_poll_cq(qp);
        }
    }
    return NVSHMEMX_EFA_GDA_OK;
}

/* Waits until as many completions were consumed as WQEs were reserved when it was called; returns the QP's
 * first error (an efa_io_comp_status value) or 0. */
EFA_GDA_DEV int efa_gda_quiet_qp(nvshmemx_efa_gda_qp_t *qp) {
    const uint32_t target = efa_gda_load(&qp->sq_reserved);
    while ((int32_t)(efa_gda_load(&qp->sq_completed) - target) < 0) efa_gda_poll_cq(qp);
    __threadfence_system();
    return (int)efa_gda_load(&qp->error);
}

/* --- symmetric-address API over the device state ---------------------------------------------------- */

EFA_GDA_DEV int efa_gda_local_key(const nvshmemx_efa_gda_device_state_t *s, const void *p, uint64_t bytes,
                                  uint32_t *lkey, uint32_t *region) {
    const uint64_t a = (uint64_t)p;
    for (uint32_t i = 0; i < s->num_regions; i++) {
        const nvshmemx_efa_gda_region_t &r = s->local[i];
        if (r.valid && a >= r.base && a - r.base <= r.length && bytes <= r.length - (a - r.base)) {
            *lkey = r.key;
            *region = i;
            return NVSHMEMX_EFA_GDA_OK;
        }
    }
    return NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION;
}

/* The peer's address and rkey for the symmetric address sym (an address of this PE's heap). */
EFA_GDA_DEV int efa_gda_remote(const nvshmemx_efa_gda_device_state_t *s, int pe, const void *sym, uint64_t bytes,
                               uint64_t *raddr, uint32_t *rkey, nvshmemx_efa_gda_peer_t *peer) {
    if (pe < 0 || pe >= s->n_pes) return NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    uint32_t lkey, region;
    if (efa_gda_local_key(s, sym, bytes, &lkey, &region) != NVSHMEMX_EFA_GDA_OK) return NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION;
    const nvshmemx_efa_gda_region_t &r = s->remote[(size_t)pe * NVSHMEMX_EFA_GDA_MAX_REGIONS + region];
    if (!r.valid) return NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION;
    *raddr = r.base + ((uint64_t)sym - s->local[region].base);
    *rkey = r.key;
    *peer = s->peers[pe];
    return NVSHMEMX_EFA_GDA_OK;
}

EFA_GDA_DEV int efa_gda_rma_nbi(nvshmemx_efa_gda_device_state_t *s, uint8_t op, void *local, const void *sym,
                                uint64_t bytes, int pe, bool has_imm, uint32_t imm) {
    uint32_t lkey, region, rkey;
    uint64_t raddr;
    nvshmemx_efa_gda_peer_t peer;
    int err = efa_gda_local_key(s, local, bytes, &lkey, &region);
    if (err) return err;
    err = efa_gda_remote(s, pe, sym, bytes, &raddr, &rkey, &peer);
    if (err) return err;
    return efa_gda_post_rdma(s->qp, op, peer, (uint64_t)local, lkey, raddr, rkey, bytes, has_imm, imm);
}

/* put: dest is a symmetric address, src a registered local buffer. */
EFA_GDA_DEV int efa_gda_put_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes, int pe) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, false, 0);
}
/* put with immediate: the peer sees imm in its receive CQ once the data is in place. */
EFA_GDA_DEV int efa_gda_put_imm_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes,
                                    int pe, uint32_t imm) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes, pe, true, imm);
}
/* get: src is a symmetric address on pe, dest a registered local buffer. */
EFA_GDA_DEV int efa_gda_get_nbi(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes, int pe) {
    return efa_gda_rma_nbi(s, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes, pe, false, 0);
}
EFA_GDA_DEV int efa_gda_quiet(nvshmemx_efa_gda_device_state_t *s) { return efa_gda_quiet_qp(s->qp); }

/* Warp-level put with the shape of nvshmemx_putmem_nbi_warp: called by all 32 lanes with the same
 * arguments; lane 0 posts, every lane gets the result. */
EFA_GDA_DEV int efa_gda_put_nbi_warp(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t bytes,
                                     int pe) {
    int err = 0;
    if ((threadIdx.x & 31) == 0) err = efa_gda_put_nbi(s, dest, src, bytes, pe);
    return __shfl_sync(0xffffffffu, err, 0);
}

/* Warp batch: every lane with want = true posts its own RDMA op (bytes <= max RDMA size); the lanes' WQEs
 * go to consecutive slots, written in parallel, under one doorbell per max_batch WQEs. Called by all 32
 * lanes. Returns this lane's result. */
EFA_GDA_DEV int efa_gda_rma_nbi_warp_batch(nvshmemx_efa_gda_device_state_t *s, bool want, uint8_t op, void *local,
                                           const void *sym, uint64_t bytes, int pe) {
    const unsigned lane = threadIdx.x & 31;
    nvshmemx_efa_gda_qp_t *qp = s->qp;
    struct efa_gda_rdma_desc d;
    int err = 0;
    if (want) {
        uint32_t lkey, region, rkey;
        uint64_t raddr;
        nvshmemx_efa_gda_peer_t peer;
        err = bytes > qp->max_rdma_size ? (int)NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES : 0;
        if (!err) err = efa_gda_local_key(s, local, bytes, &lkey, &region);
        if (!err) err = efa_gda_remote(s, pe, sym, bytes, &raddr, &rkey, &peer);
        if (!err) {
            d.op = op;
            d.has_imm = 0;
            d.req_id = 0;
            d.imm = 0;
            d.dest_qpn = peer.qpn;
            d.ah = peer.ah;
            d.qkey = peer.qkey;
            d.local_addr = (uint64_t)local;
            d.lkey = lkey;
            d.remote_addr = raddr;
            d.rkey = rkey;
            d.length = (uint32_t)bytes;
        }
    }
    const unsigned posting = __ballot_sync(0xffffffffu, want && err == 0);
    const uint32_t group = qp->max_batch < 32 ? qp->max_batch : 32;
    for (uint32_t base = 0; base < 32; base += group) {
        const unsigned in_group = posting & (group >= 32 ? 0xffffffffu : (((1u << group) - 1u) << base));
        const uint32_t n = __popc(in_group);
        if (n == 0) continue;
        const unsigned leader = __ffs(in_group) - 1;
        uint32_t slot = 0;
        if (lane == leader) slot = efa_gda_reserve(qp, n);
        slot = __shfl_sync(0xffffffffu, slot, leader);
        if (in_group & (1u << lane)) {
            efa_gda_write_wqe(qp, slot + __popc(in_group & ((1u << lane) - 1u)), d);
            __threadfence_system();
        }
        __syncwarp();
        if (lane == leader) efa_gda_ring(qp, slot, n);
        __syncwarp();
    }
    return err;
}

/* Receive side of put-with-immediate: takes one arrived immediate, if any. Returns 1 with *imm and *bytes
 * set, 0 when none is waiting, negative with the NIC status on a failed receive completion. */
EFA_GDA_DEV int efa_gda_rx_poll(nvshmemx_efa_gda_rx_cq_t *cq, uint32_t *imm, uint32_t *bytes) {
    if (atomicCAS(&cq->cq_lock, 0u, 1u) != 0u) return 0;
    __threadfence();
    const uint32_t head = efa_gda_load(&cq->cq_head);
    const uint8_t *cqe = cq->cq_buf + (size_t)(head & (cq->cq_entries - 1)) * cq->cq_entry_size;
    const uint8_t flags = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET);
    int got = 0;
    if (EFA_GDA_GET(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) == efa_gda_cq_expected_phase(head, cq->cq_log2)) {
        __threadfence_system();
        const uint8_t status = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_STATUS_OFFSET);
        *imm = *(const volatile uint32_t *)(cqe + EFA_GDA_RX_CQE_IMM_OFFSET);
        uint32_t len = *(const volatile uint16_t *)(cqe + EFA_GDA_RX_CQE_LENGTH_OFFSET);
        if (cq->cq_entry_size >= sizeof(struct efa_io_rx_cdesc_ex))
            len |= (uint32_t)(*(const volatile uint16_t *)(cqe + offsetof(struct efa_io_rx_cdesc_ex, u))) << 16;
        *bytes = len;
        got = status == EFA_IO_COMP_STATUS_OK ? 1 : -(int)status;
        if (got < 0) atomicCAS(&cq->error, 0u, (uint32_t)status);
        efa_gda_store(&cq->cq_head, head + 1);
    }
    __threadfence();
    atomicExch(&cq->cq_lock, 0u);
    return got;
}

#endif
