/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): stopping the kernel with a message when an
 * operation failed, for callers that have no way to report an error (DeepEP's void IBGDA functions), so that a
 * failed post, quiet or wait is never silent. The message names the operation, this PE and the PE it was for,
 * the queue that failed (rail, shared or owned, QP number), its first error and the PE that error's request was
 * addressed to, and the last completion the queue saw (retired prefix, CQ head, reserved and rung slots). */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_CHECK_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_CHECK_CUH

#include "nvshmemx_efa_gda_device_base.cuh"

/* The queue a failure is on: the first (shared queues, rail by rail, then owned queues) that is unusable
 * (qp.fatal: a timeout or a foreign completion), else the first with an error; NULL when none is (the error was
 * the operation's own: a bad address, PE or rail). */
struct efa_gda_failed_queue {
    const nvshmemx_efa_gda_qp_t *qp;
    uint32_t rail;
    int owned; /* which owned queue of the rail; -1: the rail's shared queue */
};
EFA_GDA_DEV efa_gda_failed_queue efa_gda_find_failed(const nvshmemx_efa_gda_device_state_t *s) {
    efa_gda_failed_queue f = {nullptr, 0, -1};
    const uint32_t n = s->n_rails < NVSHMEMX_EFA_GDA_MAX_RAILS ? s->n_rails : NVSHMEMX_EFA_GDA_MAX_RAILS;
    for (int pass = 0; pass < 2; pass++) /* pass 0: unusable queues; pass 1: queues with an error */
        for (uint32_t r = 0; r < n; r++)
            for (int k = -1; k < (int)s->rail[r].n_owned; k++) {
                const nvshmemx_efa_gda_qp_t *qp = k < 0 ? &s->rail[r].qp : &s->rail[r].owned[k];
                if (efa_gda_load(pass ? &qp->error : &qp->fatal)) {
                    f.qp = qp;
                    f.rail = r;
                    f.owned = k;
                    return f;
                }
            }
    return f;
}

/* One line about the failed queue, or that no queue failed. */
EFA_GDA_DEV void efa_gda_report_queue(const nvshmemx_efa_gda_device_state_t *s) {
    const efa_gda_failed_queue f = efa_gda_find_failed(s);
    if (!f.qp) {
        EFA_GDA_REPORT("nvshmem-efa: EFA GDA: no queue of PE %d is in error: the operation itself was refused\n", s->my_pe);
        return;
    }
    const nvshmemx_efa_gda_qp_t *qp = f.qp;
    const uint32_t error = efa_gda_load(&qp->error), fatal = efa_gda_load(&qp->fatal), error_pe = efa_gda_load(&qp->error_pe);
    const char *kind = f.owned < 0 ? "shared" : "owned";
    const int index = f.owned < 0 ? 0 : f.owned;
    const unsigned retired = efa_gda_load(&qp->sq_retired), cq_head = efa_gda_load(&qp->cq_head),
                   reserved = efa_gda_load(&qp->sq_reserved), rung = efa_gda_load(&qp->sq_rung);
    if (error_pe != ~0u)
        EFA_GDA_REPORT("nvshmem-efa: EFA GDA queue of PE %d: rail %u, %s queue %d, QP %u%s: first error %s (0x%x) on request id %u "
                       "addressed to PE %u, %u failed completions; last completions seen: retired prefix %u, CQ head %u, "
                       "reserved %u, rung %u\n",
                       s->my_pe, f.rail, kind, index, qp->qp_num, fatal ? " (unusable)" : "", efa_gda_strerror((int)error), error,
                       efa_gda_load(&qp->error_req_id), error_pe, efa_gda_load(&qp->error_count), retired, cq_head, reserved, rung);
    else
        EFA_GDA_REPORT("nvshmem-efa: EFA GDA queue of PE %d: rail %u, %s queue %d, QP %u%s: first error %s (0x%x) on request id %u "
                       "addressed to no known PE, %u failed completions; last completions seen: retired prefix %u, CQ head %u, "
                       "reserved %u, rung %u\n",
                       s->my_pe, f.rail, kind, index, qp->qp_num, fatal ? " (unusable)" : "", efa_gda_strerror((int)error), error,
                       efa_gda_load(&qp->error_req_id), efa_gda_load(&qp->error_count), retired, cq_head, reserved, rung);
}

/* efa_gda_check names the operation and its addresses; with the state, also the queue that failed. */
EFA_GDA_DEV void efa_gda_check(int err, const char *op, const void *remote, const void *local, int pe, uint64_t bytes) {
    if (!err) return;
    EFA_GDA_REPORT("nvshmem-efa: EFA GDA %s failed: %s (0x%x); remote address %p on PE %d, local address %p, %llu bytes\n", op,
                   efa_gda_strerror(err), err, remote, pe, local, (unsigned long long)bytes);
    __trap();
}
EFA_GDA_DEV void efa_gda_check(const nvshmemx_efa_gda_device_state_t *s, int err, const char *op, const void *remote,
                               const void *local, int pe, uint64_t bytes) {
    if (!err) return;
    EFA_GDA_REPORT("nvshmem-efa: EFA GDA %s on PE %d failed: %s (0x%x); remote address %p on PE %d, local address %p, %llu bytes\n",
                   op, s->my_pe, efa_gda_strerror(err), err, remote, pe, local, (unsigned long long)bytes);
    efa_gda_report_queue(s);
    __trap();
}
/* For a quiet, or a signal's wait, before signalling pe. */
EFA_GDA_DEV void efa_gda_check_quiet(const nvshmemx_efa_gda_device_state_t *s, int err, const char *op, int pe) {
    if (!err) return;
    EFA_GDA_REPORT("nvshmem-efa: EFA GDA %s on PE %d (before signalling PE %d) failed: %s (0x%x)\n", op, s->my_pe, pe,
                   efa_gda_strerror(err), err);
    efa_gda_report_queue(s);
    __trap();
}

#endif
