/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): owned queues (ABI 6). A queue one thread owns posts
 * from counters in the owner's registers (efa_gda_own, efa_gda_put_nbi/efa_gda_get_nbi on an efa_gda_owned,
 * efa_gda_quiet_owned, efa_gda_disown). A queue in error refuses its owner's posts; its room and quiet waits
 * are bounded by the state's timeout_ns. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_OWNED_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_OWNED_CUH

#include "nvshmemx_efa_gda_device_post.cuh"
#include "nvshmemx_efa_gda_device_quiet.cuh"

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
        o->h.q = efa_gda_sq_of(s, &owned[k]);
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

/* Waits until n more slots of the owned queue are free (its earlier WQEs completed), polling completions,
 * within the state's timeout_ns (NVSHMEMX_EFA_GDA_ERR_TIMEOUT, the queue marked). Returns why the queue is
 * unusable (qp.fatal) when it is. */
EFA_GDA_DEV int efa_gda_owned_room(efa_gda_owned &o, uint32_t n) {
    nvshmemx_efa_gda_qp_t *qp = o.h.q.qp;
    efa_gda_bound b = efa_gda_bound_of(o.h.q.timeout_ns);
    for (;;) {
        const efa_gda_counters c = efa_gda_load_counters(qp);
        if (c.fatal) return (int)c.fatal;
        o.room_end = c.retired + o.h.q.entries;
        if ((int32_t)(o.next + n - o.room_end) <= 0) return NVSHMEMX_EFA_GDA_OK;
        efa_gda_poll_cq(qp);
        efa_gda_progress(b, c.retired);
        if (efa_gda_expired(b)) return efa_gda_time_out(qp);
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
        /* A queue in error refuses the post: unusable (fatal: a local failure, a foreign completion, a timeout),
         * or a completion to the handle's PE failed (the owner hears of it now, not at a quiet that waits for WQEs
         * that will not complete; another PE's failure does not stop it). Two loads whose addresses are in
         * registers (the handle's queue constants): one round trip, issued before the WQE is built and stored, so
         * only what is left of it after the build and the stores delays the post. */
        const uint32_t fatal = efa_gda_load(&h.q.qp->fatal),
                       error = efa_gda_load(efa_gda_error_word(h.q.qp, h.q.slot_pe, h.q.entries, h.pe));
        efa_gda_piece p;
        p.local = (uint64_t)local + done;
        p.remote = h.remote_base + so + done;
        p.len = len;
        p.lkey = h.lkey;
        p.rkey = h.rkey;
        efa_gda_note_pe(h.q, slot, h.pe);
        efa_gda_store_wqe(h.q, slot, efa_gda_wqe_of(efa_gda_desc(op, h.peer, p, false, 0)));
        if (fatal | error) return fatal ? (int)fatal : (int)error; /* the slot stays unrung; the next post reuses it */
        /* sq_reserved before the doorbell: a completion of this slot is checked against it. */
        efa_gda_store(&h.q.qp->sq_reserved, slot + 1);
        /* As efa_gda_ring rings (efa_gda_fence_nic says why each fence is enough): the owner is the only poster, so
         * the doorbell turn is its own program order. */
        efa_gda_fence_nic();
        efa_gda_mmio_store(h.q.db, (slot + 1) & 0xffffu);
        efa_gda_fence_nic();
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
    int err = efa_gda_wait_slots(o.h.q.qp, o.next, o.h.q.timeout_ns);
    if (!err) err = (int)efa_gda_load(&o.h.q.qp->error);
    if (o.general) {
        const int shared = efa_gda_quiet_rail(o.h.s, o.h.rail);
        if (!err) err = shared;
        o.general = false;
    }
    return err;
}


#endif
