/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): completion. efa_gda_quiet waits until everything
 * reserved before it completed on every rail and every owned queue, efa_gda_quiet_rail on one rail's shared
 * queue, efa_gda_quiet_rail_pe for what of that queue is addressed to one PE; efa_gda_signal posts a value
 * once its payload completed. Every quiet is bounded by the state's timeout_ns (NVSHMEMX_EFA_GDA_ERR_TIMEOUT). */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_QUIET_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_QUIET_CUH

#include "nvshmemx_efa_gda_device_post.cuh"

/* Waits until every WQE reserved before the call on every rail (the caller's own included, whichever rails
 * they took) completed: first a snapshot of each rail's reserved count, then each rail's retired prefix
 * waited up to it. Returns the first error of any rail's queue (an efa_io_comp_status value or
 * NVSHMEMX_EFA_GDA_ERR_*), or 0. The whole quiet, every queue together, is bounded by the state's timeout_ns:
 * a queue still waited on when it runs out is marked timed out (NVSHMEMX_EFA_GDA_ERR_TIMEOUT). */
EFA_GDA_DEV int efa_gda_quiet_owned_queues(nvshmemx_efa_gda_device_state_t *s, uint32_t n_rails, efa_gda_bound &b);
EFA_GDA_DEV int efa_gda_quiet(nvshmemx_efa_gda_device_state_t *s) {
    const uint32_t n = efa_gda_ro(&s->n_rails);
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    if (n <= 1) {
        const int err = efa_gda_quiet_qp(&s->rail[0].qp, b);
        const int owned = efa_gda_ro(&s->rail[0].n_owned) ? efa_gda_quiet_owned_queues(s, 1, b) : 0;
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
        int err = efa_gda_wait_slots(qp, end[r], b);
        if (!err) err = (int)efa_gda_load(&qp->error);
        if (!first) first = err;
    }
    const int owned = efa_gda_quiet_owned_queues(s, n, b);
    return first ? first : owned;
}
/* The owned queues' part of efa_gda_quiet: each queue's reserved count read just before waiting on it (later
 * than the call, so it covers everything reserved before the call). */
EFA_GDA_DEV int efa_gda_quiet_owned_queues(nvshmemx_efa_gda_device_state_t *s, uint32_t n_rails, efa_gda_bound &b) {
    int first = 0;
    for (uint32_t r = 0; r < n_rails && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        const uint32_t n = efa_gda_ro(&s->rail[r].n_owned);
        nvshmemx_efa_gda_qp_t *owned = n ? efa_gda_ro(&s->rail[r].owned) : nullptr;
        for (uint32_t k = 0; k < n; k++) {
            const int err = efa_gda_quiet_qp(&owned[k], b);
            if (!first) first = err;
        }
    }
    return first;
}
/* One rail only: what an operation ordered after the posts of that rail alone may use. Bounded like
 * efa_gda_quiet. */
EFA_GDA_DEV int efa_gda_quiet_rail(nvshmemx_efa_gda_device_state_t *s, uint32_t rail) {
    return efa_gda_rail_ok(s, rail) ? efa_gda_quiet_qp(&s->rail[rail].qp, efa_gda_ro(&s->timeout_ns)) : (int)NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
}
/* One rail and one peer: waits until every WQE reserved on that rail's shared queue before the call and
 * addressed to pe completed (efa_gda_wait_pe_slots); WQEs to other PEs are not waited for, so a peer whose
 * NIC is slow or stalled does not hold a signal to another. What a signal to pe may use when its payload went
 * to pe on that rail alone, posted before the call. Bounded like efa_gda_quiet. Returns the wait's error (the
 * queue's reason when a local failure made it unusable), else pe's first failed completion (efa_gda_error_of_pe:
 * another PE's failure is not this PE's), or 0; NVSHMEMX_EFA_GDA_ERR_BAD_RAIL or NVSHMEMX_EFA_GDA_ERR_BAD_PE before
 * waiting. */
EFA_GDA_DEV int efa_gda_quiet_rail_pe(nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe) {
    if (!efa_gda_rail_ok(s, rail)) return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    if ((uint32_t)pe >= efa_gda_ro((const uint32_t *)&s->n_pes)) return NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    nvshmemx_efa_gda_qp_t *qp = &s->rail[rail].qp;
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    const int err = efa_gda_wait_pe_slots(qp, efa_gda_load(&qp->sq_reserved), pe, b);
    return err ? err : efa_gda_error_of_pe(qp, pe);
}


/* Before data GDA placed at pe is announced by another requester than its NIC (an NVSHMEM proxy operation, which
 * the target's CPU applies; normal mode's tail add; a low-latency signal sent through NVSHMEM): a completion says
 * only that the write is queued towards the target's PCIe (NCCL gin_efa_gda.h, putImplMode), so the CPU's store
 * could overtake it. An RDMA read through the same NIC cannot: a read does not pass the NIC's earlier posted
 * writes. So, after a quiet, read 8 bytes of pe's credit word on every rail (each rail is another NIC at pe) and
 * wait for each read. The credit lock keeps this read from racing a credit refresh for the landing word; a
 * refresh already running may have been issued before our quiet, so we wait for it and read anew. Bounded by
 * timeout_ns like every wait. Returns the first error. */
EFA_GDA_DEV int efa_gda_flush(nvshmemx_efa_gda_device_state_t *s, int pe) {
    if (pe < 0 || pe >= s->n_pes) return NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    const uint32_t n = efa_gda_ro(&s->n_rails);
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    for (uint32_t r = 0; r < n && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        nvshmemx_efa_gda_rail_t *rl = &s->rail[r];
        nvshmemx_efa_gda_credits_t *c = rl->credits;
        if (!c) return NVSHMEMX_EFA_GDA_ERR_NO_CREDITS;
        while (atomicCAS(&c->lock[pe], 0u, 1u) != 0u) {
            if (efa_gda_expired(b)) return NVSHMEMX_EFA_GDA_ERR_TIMEOUT;
            EFA_GDA_SPIN_PAUSE();
        }
        const int err = efa_gda_refresh_credits(s, rl, pe);
        __threadfence();
        atomicExch(&c->lock[pe], 0u);
        if (err) return err;
    }
    return NVSHMEMX_EFA_GDA_OK;
}

/* A quiet, then efa_gda_flush to pe: what must precede announcing GDA data at pe through NVSHMEM. */
EFA_GDA_DEV int efa_gda_quiet_flush(nvshmemx_efa_gda_device_state_t *s, int pe) {
    const int err = efa_gda_quiet(s);
    return err ? err : efa_gda_flush(s, pe);
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

#endif
