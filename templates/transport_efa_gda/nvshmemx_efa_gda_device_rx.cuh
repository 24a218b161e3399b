/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): write-with-immediate. The sender's credits
 * (efa_gda_take_credit: at most imm_window immediates a receiver has not taken, refreshed by an RDMA read of its
 * count), and the receiver: efa_gda_rx_poll takes one arrived immediate without waiting, efa_gda_rx_wait waits
 * for one within the state's timeout_ns. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_RX_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_RX_CUH

#include "nvshmemx_efa_gda_device_lookup.cuh"
#include "nvshmemx_efa_gda_device_queue.cuh"

/* Credits for one immediate to pe on rail (see nvshmemx_efa_gda_credits_t). Refreshes them with an RDMA read
 * of the receiver's count on that rail when they run out; gives up with NVSHMEMX_EFA_GDA_ERR_NO_CREDITS after
 * credit_timeout_ns without the receiver taking any. The refresh's post and its wait are bounded by the
 * state's timeout_ns like every other (NVSHMEMX_EFA_GDA_ERR_TIMEOUT: the read never completed). */
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
    const efa_gda_sq q = efa_gda_sq_of(s, &rl->qp);
    int err = efa_gda_post_one(q, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_READ, efa_gda_peer(rl, pe), p, false, 0), &end, pe);
    if (!err) err = efa_gda_wait_slots(&rl->qp, end, q.timeout_ns);
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

/* Waits for one immediate on rail (efa_gda_rx_wait_rail) or on any rail (efa_gda_rx_wait) for at most the state's
 * timeout_ns: the results of efa_gda_rx_poll, or -NVSHMEMX_EFA_GDA_ERR_TIMEOUT when none came in time. A
 * timeout is sticky on the receive CQs it waited on (rx_cq->error), as an error is: a sender that stopped is not
 * waited for twice. */
EFA_GDA_DEV int efa_gda_rx_time_out(nvshmemx_efa_gda_device_state_t *s, uint32_t first, uint32_t end) {
    for (uint32_t r = first; r < end; r++) atomicCAS(&efa_gda_ro(&s->rail[r].rx_cq)->error, 0u, (uint32_t)NVSHMEMX_EFA_GDA_ERR_TIMEOUT);
    return -(int)NVSHMEMX_EFA_GDA_ERR_TIMEOUT;
}
EFA_GDA_DEV int efa_gda_rx_wait_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, uint32_t *imm, uint32_t *bytes, int *src_pe) {
    if (!efa_gda_rail_ok(s, rail)) return -(int)NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    for (;;) {
        const int rc = efa_gda_rx_poll_rail(s, rail, imm, bytes, src_pe);
        if (rc) return rc;
        if (efa_gda_expired(b)) return efa_gda_rx_time_out(s, rail, rail + 1);
        EFA_GDA_SPIN_PAUSE();
    }
}
EFA_GDA_DEV int efa_gda_rx_wait(nvshmemx_efa_gda_device_state_t *s, uint32_t *imm, uint32_t *bytes, int *src_pe) {
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    for (;;) {
        const int rc = efa_gda_rx_poll(s, imm, bytes, src_pe);
        if (rc) return rc;
        if (efa_gda_expired(b)) return efa_gda_rx_time_out(s, 0, efa_gda_ro(&s->n_rails));
        EFA_GDA_SPIN_PAUSE();
    }
}

#endif
