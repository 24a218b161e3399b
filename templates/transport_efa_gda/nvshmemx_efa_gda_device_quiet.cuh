/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): completion. efa_gda_quiet waits until everything
 * reserved before it completed on every rail and every owned queue, efa_gda_quiet_rail on one rail's shared
 * queue; efa_gda_signal posts a value once its payload completed. Every quiet is bounded by the state's
 * timeout_ns (NVSHMEMX_EFA_GDA_ERR_TIMEOUT). */
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
