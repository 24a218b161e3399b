/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): one send queue. Its completions (efa_gda_poll_cq:
 * the retired prefix, errors with the request and peer they name), slot reservation and claim, the doorbell
 * in slot order, and the waits on it: for a prefix of its slots (efa_gda_wait_slots), or for the slots of a
 * prefix addressed to one PE (efa_gda_wait_pe_slots). Every wait is bounded (efa_gda_sq.timeout_ns, or the
 * efa_gda_bound it is given): past the bound it marks the queue timed out (efa_gda_time_out) and returns
 * NVSHMEMX_EFA_GDA_ERR_TIMEOUT; a marked queue (qp.fatal) fails every later wait at once. A failed completion
 * stays with the PE it was addressed to where the queue keeps PEs (efa_gda_pe_errors); a local one marks the queue. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_QUEUE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_QUEUE_CUH

#include "nvshmemx_efa_gda_device_wqe.cuh"

/* The PE slot's WQE was addressed to (qp->slot_pe), ~0u when the queue keeps none. Read on error paths only. */
EFA_GDA_DEV uint32_t efa_gda_slot_pe(const nvshmemx_efa_gda_qp_t *qp, uint32_t slot) {
    const uint16_t *pes = efa_gda_ro(&qp->slot_pe);
    if (!pes) return ~0u;
    const uint16_t pe = *(const volatile uint16_t *)&pes[slot & (efa_gda_ro(&qp->sq_entries) - 1)];
    return pe == 0xffffu ? ~0u : pe;
}

/* ABI 8: each PE's first failed completion on this queue, [n_pes] words after slot_pe; NULL where the queue notes
 * no PEs (its errors are the queue's). */
EFA_GDA_DEV uint32_t *efa_gda_pe_errors(const uint16_t *slot_pe, uint32_t entries) {
    return slot_pe ? (uint32_t *)(slot_pe + entries) : nullptr;
}
EFA_GDA_DEV uint32_t *efa_gda_pe_errors(const nvshmemx_efa_gda_qp_t *qp) {
    return efa_gda_pe_errors(efa_gda_ro(&qp->slot_pe), efa_gda_ro(&qp->sq_entries));
}
/* Statuses that say the peer refused or did not answer (REMOTE_ERROR_*, UNRESP_REMOTE, UNREACH_REMOTE): the PE's
 * failure, not the queue's. The others (FLUSHED and the LOCAL_ERROR_* of the QP's own WQEs, or a status this code
 * does not know) are the queue's. */
EFA_GDA_DEV bool efa_gda_status_of_peer(uint32_t status) {
    return status >= EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS && status <= EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE;
}

/* Makes err the queue's first error, with the request id and the PE it names, unless it has one already. */
EFA_GDA_DEV void efa_gda_record_first(nvshmemx_efa_gda_qp_t *qp, uint32_t err, uint32_t req_id, uint32_t pe) {
    if (atomicCAS(&qp->error, 0u, err) == 0u) {
        efa_gda_store(&qp->error_req_id, req_id);
        efa_gda_store(&qp->error_pe, pe);
    }
}
EFA_GDA_DEV int efa_gda_set_fatal_why(nvshmemx_efa_gda_qp_t *qp, uint32_t why);
/* A failed completion of request req_id (in slot), addressed to the PE slot_pe names: the queue's first error (the
 * report names it), and, where the queue keeps errors per PE, that PE's when the peer caused it. A local failure,
 * or a peer's that names no PE on a queue that keeps PEs, makes the queue unusable: every PE's wait must hear it. */
EFA_GDA_DEV void efa_gda_record_error(nvshmemx_efa_gda_qp_t *qp, uint32_t err, uint32_t req_id, uint32_t slot) {
    const uint32_t pe = efa_gda_slot_pe(qp, slot);
    efa_gda_record_first(qp, err, req_id, pe);
    atomicAdd(&qp->error_count, 1u);
    uint32_t *per_pe = efa_gda_pe_errors(qp);
    const bool peer = efa_gda_status_of_peer(err);
#ifndef NVSHMEMX_EFA_GDA_TEST_QUEUE_WIDE_ERRORS
    if (per_pe && peer && pe != ~0u) atomicCAS(&per_pe[pe], 0u, err);
    else if (per_pe || !peer) efa_gda_set_fatal_why(qp, err);
#else
    /* Negative control: every failure stays the queue's, as before ABI 8 (a dead peer fails every PE's wait). */
    (void)per_pe, (void)peer;
#endif
}
/* What a wait for pe's WQEs on qp reports besides its own outcome: why the queue is unusable (qp.fatal: a local
 * failure, even one whose WQEs the wait found completed), else pe's first failure where the queue keeps errors per
 * PE, else the queue's first error, whichever PE it named. */
/* The word that holds what a wait for pe reports besides qp.fatal: pe's first failure where the queue keeps errors per
 * PE (slot_pe, entries: the queue's constants), else the queue's first error. */
EFA_GDA_DEV const uint32_t *efa_gda_error_word(const nvshmemx_efa_gda_qp_t *qp, const uint16_t *slot_pe, uint32_t entries, int pe) {
#ifndef NVSHMEMX_EFA_GDA_TEST_QUEUE_WIDE_ERRORS
    const uint32_t *per_pe = efa_gda_pe_errors(slot_pe, entries);
    if (per_pe && (uint32_t)pe < 0xffffu) return &per_pe[pe];
#endif
    (void)slot_pe, (void)entries, (void)pe;
    return &qp->error;
}
EFA_GDA_DEV int efa_gda_error_of_pe(const nvshmemx_efa_gda_qp_t *qp, int pe) {
#ifndef NVSHMEMX_EFA_GDA_TEST_QUEUE_WIDE_ERRORS
    const uint32_t fatal = efa_gda_load(&qp->fatal);
    if (fatal) return (int)fatal;
#endif
    return (int)efa_gda_load(efa_gda_error_word(qp, efa_gda_ro(&qp->slot_pe), efa_gda_ro(&qp->sq_entries), pe));
}

/* Makes the queue unusable for the reason why (BAD_CQE or TIMEOUT): every wait on it returns why at once from
 * now on, and the CQ poller stops. Returns the reason the queue carries (the first one given). */
EFA_GDA_DEV int efa_gda_set_fatal_why(nvshmemx_efa_gda_qp_t *qp, uint32_t why) {
    __threadfence();
    atomicCAS(&qp->fatal, 0u, why);
    return (int)efa_gda_load(&qp->fatal);
}
/* A completion that cannot be this queue's (its request id names no slot in flight: no peer). */
EFA_GDA_DEV void efa_gda_set_fatal(nvshmemx_efa_gda_qp_t *qp, uint32_t req_id) {
    efa_gda_record_first(qp, NVSHMEMX_EFA_GDA_ERR_BAD_CQE, req_id, ~0u);
    atomicAdd(&qp->error_count, 1u);
    efa_gda_set_fatal_why(qp, NVSHMEMX_EFA_GDA_ERR_BAD_CQE);
}
/* A wait on qp passed its bound while slot had not completed: the NIC never completed it; its request id and
 * PE (when in_flight: else nothing was, and no PE is named) become the queue's first error unless it has one.
 * Returns what the wait returns. */
EFA_GDA_DEV int efa_gda_time_out_at(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, bool in_flight) {
    efa_gda_record_first(qp, NVSHMEMX_EFA_GDA_ERR_TIMEOUT, (uint16_t)slot, in_flight ? efa_gda_slot_pe(qp, slot) : ~0u);
    return efa_gda_set_fatal_why(qp, NVSHMEMX_EFA_GDA_ERR_TIMEOUT);
}
/* For a wait on the whole queue: the oldest slot not completed (the retired prefix) is the one named. */
EFA_GDA_DEV int efa_gda_time_out(nvshmemx_efa_gda_qp_t *qp) {
    const uint32_t oldest = efa_gda_load(&qp->sq_retired);
    return efa_gda_time_out_at(qp, oldest, efa_gda_load(&qp->sq_reserved) != oldest);
}

/* Consumes the TX completions that have arrived, marks their slots done and advances the retired prefix;
 * one poller at a time (others return at once). A failed completion records the NIC's status as the QP's
 * error. */
/* Whether the CQE at the consumer position holds a completion not taken yet (its phase is the one expected there):
 * what a waiter checks before it takes the poller's lock, so that a spin with nothing arrived costs two loads and no
 * atomic (review 3, finding 8). A stale cq_head (another poller moved on) only errs towards taking the lock, which
 * then reads the current head: the CQE at an old head keeps the phase it was written with until the NIC wraps the
 * ring past the current head. */
EFA_GDA_DEV bool efa_gda_cq_ready(const nvshmemx_efa_gda_qp_t *qp) {
    const uint32_t head = efa_gda_load(&qp->cq_head);
    const uint8_t *cqe = qp->cq_buf + (size_t)(head & (qp->cq_entries - 1)) * qp->cq_entry_size;
    const uint8_t flags = *(const volatile uint8_t *)(cqe + EFA_GDA_CQE_FLAGS_OFFSET);
    return EFA_GDA_GET(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) == efa_gda_cq_expected_phase(head, qp->cq_log2);
}

EFA_GDA_DEV void efa_gda_poll_cq(nvshmemx_efa_gda_qp_t *qp) {
    /* Nothing arrived: leave on two loads. Then a plain load of the lock first (test and test-and-set): waiters that
     * find it taken leave on a load, and queue no atomics on its line ahead of the holder's release. */
    if (!efa_gda_cq_ready(qp)) return;
    if (efa_gda_load(&qp->cq_lock) != 0u || atomicCAS(&qp->cq_lock, 0u, 1u) != 0u) return;
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
        if (status != EFA_IO_COMP_STATUS_OK) efa_gda_record_error(qp, status, req_id, slot);
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
 * gets there. Gives up when the queue became unusable (returns why: qp.fatal) or, past q.timeout_ns, with
 * NVSHMEMX_EFA_GDA_ERR_TIMEOUT (the NIC completed nothing: an SQ that stays full). */
EFA_GDA_DEV int efa_gda_claim(const efa_gda_sq &q, uint32_t slot, uint32_t n, efa_gda_counters c, efa_gda_reservation *res) {
    nvshmemx_efa_gda_qp_t *qp = q.qp;
    efa_gda_bound b = efa_gda_bound_of(q.timeout_ns);
    res->slot = slot; /* set on every path (registers): callers read it only on success */
    res->rung_seen = c.rung;
    for (;;) {
        if (c.fatal) return (int)c.fatal;
        const bool room = slot + n - c.retired <= q.entries;
        if (room && slot + n - c.rung <= q.max_batch) {
            res->slot = slot;
            res->rung_seen = c.rung;
            return NVSHMEMX_EFA_GDA_OK;
        }
        if (!room) efa_gda_poll_cq(qp);
        efa_gda_progress(b, c.retired);
        if (efa_gda_expired(b)) return efa_gda_time_out(qp);
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

/* Rings the doorbell for slots [slot, slot + n) once every earlier slot has been rung (skipping the wait
 * when the reservation already saw the doorbell at slot). The fence here covers the caller's own WQE stores;
 * other threads' WQEs under this doorbell must be fenced by their writers (a warp batch's lanes). The register
 * takes the producer counter's low 16 bits, as rdma-core writes it. Returns why the queue became unusable (qp.fatal), without ringing, when it did
 * while this waited (an earlier slot's owner may have given up), and NVSHMEMX_EFA_GDA_ERR_TIMEOUT when the
 * earlier slots were not rung within q.timeout_ns. */
EFA_GDA_DEV int efa_gda_ring(const efa_gda_sq &q, uint32_t slot, uint32_t n, uint32_t rung_seen) {
    nvshmemx_efa_gda_qp_t *qp = q.qp;
    if (rung_seen != slot) {
        efa_gda_bound b = efa_gda_bound_of(q.timeout_ns);
        for (uint32_t rung; (rung = efa_gda_load(&qp->sq_rung)) != slot;) {
            const uint32_t fatal = efa_gda_load(&qp->fatal);
            if (fatal) return (int)fatal;
            efa_gda_progress(b, rung);  /* earlier slots being rung: their owners are getting on */
            if (efa_gda_expired(b)) return efa_gda_time_out(qp);
            EFA_GDA_SPIN_PAUSE();
        }
    }
    /* WQEs before the doorbell, the doorbell before the hand-off: efa_gda_fence_nic says why each is enough. */
    efa_gda_fence_nic();
    efa_gda_mmio_store(q.db, (slot + n) & 0xffffu);
    efa_gda_fence_nic();
    efa_gda_store(&qp->sq_rung, slot + n);
    return NVSHMEMX_EFA_GDA_OK;
}
EFA_GDA_DEV int efa_gda_ring(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, uint32_t n, uint32_t rung_seen) {
    return efa_gda_ring(efa_gda_sq_of(qp), slot, n, rung_seen);
}
EFA_GDA_DEV int efa_gda_ring(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, uint32_t n) { return efa_gda_ring(qp, slot, n, slot + 1); }

/* Waits until every slot below end completed (the retired prefix reached it), within the bound b (which
 * several waits in sequence may share). Returns 0, or why the queue became unusable (qp.fatal), or
 * NVSHMEMX_EFA_GDA_ERR_TIMEOUT when b ran out first (the queue is then marked: efa_gda_time_out). */
EFA_GDA_DEV int efa_gda_wait_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t end, efa_gda_bound &b) {
    for (;;) {
        const efa_gda_counters c = efa_gda_load_counters(qp);
        if ((int32_t)(c.retired - end) >= 0) break;
        if (c.fatal) return (int)c.fatal;
        efa_gda_poll_cq(qp);
        efa_gda_progress(b, c.retired);
        if (efa_gda_expired(b)) return efa_gda_time_out(qp);
        EFA_GDA_SPIN_PAUSE();
    }
    __threadfence_system();
    return NVSHMEMX_EFA_GDA_OK;
}
EFA_GDA_DEV int efa_gda_wait_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t end, uint64_t timeout_ns) {
    efa_gda_bound b = efa_gda_bound_of(timeout_ns);
    return efa_gda_wait_slots(qp, end, b);
}
/* Without a bound: the low-level form (tests, benchmarks). */
EFA_GDA_DEV int efa_gda_wait_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t end) { return efa_gda_wait_slots(qp, end, (uint64_t)0); }

/* Whether a wait for pe's slots may pass slot (in flight, in [retired, end)): it completed, or its WQE is
 * addressed to another PE. No PE noted (0xffff: a low-level post that names none, or an entry not used yet)
 * may be pe's: it is waited for. */
EFA_GDA_DEV bool efa_gda_slot_passes(const uint32_t *done, const uint16_t *pes, uint32_t mask, uint32_t slot, uint16_t pe) {
    const uint16_t to = *(const volatile uint16_t *)&pes[slot & mask];
    if (to != pe && to != 0xffffu) return true;
    return efa_gda_load(&done[slot & mask]) == slot;
}

/* Waits until every slot below end that is addressed to pe completed (slot_done), within the bound b; slots
 * addressed to other PEs are not waited for. What a signal to pe on this queue needs when its payload went to
 * pe alone. Returns as efa_gda_wait_slots does: 0, qp.fatal, or NVSHMEMX_EFA_GDA_ERR_TIMEOUT with the queue
 * marked, its error naming the slot of pe that did not complete (the oldest one may be another PE's). Waits
 * for the whole prefix (efa_gda_wait_slots) where the queue notes no PEs (slot_pe NULL) or pe cannot be noted
 * (not in [0, 0xffff)).
 *
 * Why skipping is safe: a slot in [retired, end) is in flight, so its ring entry in slot_pe is its own once its
 * poster noted it, and stays so until it completes (the entry's next slot is claimed only after this one
 * retired). Every poster notes before it writes the WQE (efa_gda_note_pe). The payload the caller covers was
 * posted, and so noted, before the call (DeepEP orders its posts before the signal: the posters' release, the
 * signaller's acquire); a slot whose note is not written yet (its poster between reserve and note; the entry
 * may still hold an older slot's PE) belongs to a post concurrent with this call, not to that payload, so
 * skipping it and waiting for it are both safe. An entry that names another PE is therefore either another
 * PE's WQE or a covered WQE that already completed. Every post of this API notes its PE (the low-level
 * efa_gda_post_one forms note none: 0xffff, waited for); code that stores WQEs itself without efa_gda_note_pe
 * (benchmarks, tests) leaves a stale entry and must wait with efa_gda_wait_slots.
 *
 * lo only moves forward: past the retired prefix, and past slots that completed or are another PE's (decided
 * once: whatever their entry says later is a newer slot's). Each spin rechecks from lo, so a wait costs the
 * slots in flight once, plus one check per spin. */
EFA_GDA_DEV int efa_gda_wait_pe_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t end, int pe, efa_gda_bound &b) {
    const uint16_t *pes = efa_gda_ro(&qp->slot_pe);
    if (!pes || (uint32_t)pe >= 0xffffu) return efa_gda_wait_slots(qp, end, b);
    const uint32_t *done = efa_gda_ro(&qp->slot_done);
    const uint32_t mask = efa_gda_ro(&qp->sq_entries) - 1;
    uint32_t lo = efa_gda_load(&qp->sq_retired);
    for (;;) {
        const efa_gda_counters c = efa_gda_load_counters(qp);
        if ((int32_t)(c.retired - lo) > 0) lo = c.retired;
        while ((int32_t)(end - lo) > 0 && efa_gda_slot_passes(done, pes, mask, lo, (uint16_t)pe)) lo++;
        if ((int32_t)(end - lo) <= 0) break;
        if (c.fatal) return (int)c.fatal;
        efa_gda_poll_cq(qp);
        efa_gda_progress(b, lo);
        if (efa_gda_expired(b)) return efa_gda_time_out_at(qp, lo, true);
        EFA_GDA_SPIN_PAUSE();
    }
    __threadfence_system();
    return NVSHMEMX_EFA_GDA_OK;
}

/* Posts one WQE addressed to pe: reserve, write, fence, ring. Returns 0 or why not; *end = the slot after it. */
EFA_GDA_DEV int efa_gda_post_one(const efa_gda_sq &q, const struct efa_gda_rdma_desc &d, uint32_t *end, int pe) {
    efa_gda_reservation res;
    int err = efa_gda_reserve(q, 1, &res);
    if (err) return err;
    efa_gda_note_pe(q, res.slot, pe);
    efa_gda_write_wqe(q, res.slot, d);
    err = efa_gda_ring(q, res.slot, 1, res.rung_seen);
    if (end) *end = res.slot + 1;
    return err;
}
/* The low-level forms (no bound unless q has one, no peer noted). */
EFA_GDA_DEV int efa_gda_post_one(const efa_gda_sq &q, const struct efa_gda_rdma_desc &d, uint32_t *end) {
    return efa_gda_post_one(q, d, end, -1);
}
EFA_GDA_DEV int efa_gda_post_one(nvshmemx_efa_gda_qp_t *qp, const struct efa_gda_rdma_desc &d, uint32_t *end) {
    return efa_gda_post_one(efa_gda_sq_of(qp), d, end, -1);
}

/* Waits until every WQE reserved before the call (the caller's own included) completed, within b; returns
 * the QP's first error (an efa_io_comp_status value or NVSHMEMX_EFA_GDA_ERR_*), the reason it became unusable,
 * NVSHMEMX_EFA_GDA_ERR_TIMEOUT, or 0. */
EFA_GDA_DEV int efa_gda_quiet_qp(nvshmemx_efa_gda_qp_t *qp, efa_gda_bound &b) {
    const int err = efa_gda_wait_slots(qp, efa_gda_load(&qp->sq_reserved), b);
    return err ? err : (int)efa_gda_load(&qp->error);
}
EFA_GDA_DEV int efa_gda_quiet_qp(nvshmemx_efa_gda_qp_t *qp, uint64_t timeout_ns) {
    efa_gda_bound b = efa_gda_bound_of(timeout_ns);
    return efa_gda_quiet_qp(qp, b);
}
/* Without a bound: the low-level form. */
EFA_GDA_DEV int efa_gda_quiet_qp(nvshmemx_efa_gda_qp_t *qp) { return efa_gda_quiet_qp(qp, (uint64_t)0); }


#endif
