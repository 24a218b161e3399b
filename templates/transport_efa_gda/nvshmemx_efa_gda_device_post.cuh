/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): posting. RDMA reads and writes of any size on a
 * rail (efa_gda_put_nbi, efa_gda_get_nbi, with an immediate efa_gda_put_imm_nbi, and their *_on forms), the
 * filler of a slot whose post was refused after it was reserved (efa_gda_fill_slot), the write of a value from a
 * slot's scratch entry (efa_gda_write_value_nbi, what a signal posts), a prepared handle (efa_gda_handle), and
 * the warp forms. Each wait a post makes (slot claim, doorbell turn) is bounded by the state's timeout_ns. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_POST_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_POST_CUH

#include "nvshmemx_efa_gda_device_lookup.cuh"
#include "nvshmemx_efa_gda_device_queue.cuh"
#include "nvshmemx_efa_gda_device_rx.cuh"

/* Fills a reserved slot of rail whose post failed after the reservation (a bad PE or address found once the
 * lookup's loads arrived): later slots' doorbells wait for this one, so it must be written and rung. The WQE
 * moves nothing and completes OK on a real EFA: a 0-byte RDMA write to a peer (the next PE), into the start of
 * its first heap region as that rail registered it, the form NCCL's EFA GDA path posts for an empty put. Not a
 * read from this PE itself, as before: a QP addressing its own address is loopback, which EFA's documentation
 * does not promise, and a write with no bytes and no immediate is unobservable at the peer. Where that region
 * is not reachable on the peer (valid = 0, or no region yet), a 0-byte RDMA read of the peer's credit counters
 * (registered for remote read on every rail, the key every PE publishes). A rail without a credit block is a
 * host bug: trap rather than post a WQE the NIC may fail. */
EFA_GDA_DEV void efa_gda_fill_slot(const nvshmemx_efa_gda_device_state_t *s, uint32_t rail, const nvshmemx_efa_gda_rail_t *rl,
                                   const efa_gda_sq &q, uint32_t slot, efa_gda_counters c) {
    const uint32_t n_pes = efa_gda_ro((const uint32_t *)&s->n_pes);
    const uint32_t me = efa_gda_ro((const uint32_t *)&s->my_pe);
    const int peer = (int)(n_pes > 1 ? (me + 1) % n_pes : me);
    const nvshmemx_efa_gda_regions_t *t = efa_gda_regions(s, false);
    const nvshmemx_efa_gda_region_t *row = efa_gda_region_row(t, n_pes, efa_gda_ro(&t->n_rails), 0, rail);
    const nvshmemx_efa_gda_region_t L = efa_gda_ro(&row[0]), R = efa_gda_ro(&row[1 + peer]);
    efa_gda_piece p;
    p.len = 0;
    uint8_t op = NVSHMEMX_EFA_GDA_OP_WRITE;
    if (efa_gda_ro(&t->count) && L.valid && R.valid) {
        p.local = L.base;
        p.lkey = L.key;
        p.remote = R.base;
        p.rkey = R.key;
    } else {
        const nvshmemx_efa_gda_credits_t *cr = efa_gda_ro(&rl->credits);
        if (!cr) {
            EFA_GDA_REPORT("nvshmem-efa: EFA GDA device state without a credit block on rail %u: cannot fill a failed post's slot\n", rail);
            __trap();
        }
        const nvshmemx_efa_gda_region_t theirs = efa_gda_ro(&efa_gda_ro(&cr->peer_consumed)[peer]);
        op = NVSHMEMX_EFA_GDA_OP_READ;
        p.local = (uint64_t)(uintptr_t)efa_gda_ro(&cr->consumed);
        p.lkey = efa_gda_ro(&cr->lkey);
        p.remote = theirs.base;
        p.rkey = theirs.key;
    }
    efa_gda_reservation res;
    if (efa_gda_claim(q, slot, 1, c, &res)) return; /* the queue became unusable: nothing is rung any more */
    efa_gda_note_pe(q, slot, peer);
    efa_gda_write_wqe(q, slot, efa_gda_desc(op, efa_gda_peer(rl, peer), p, false, 0));
    efa_gda_ring(q, slot, 1, res.rung_seen);
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
            if (off) err = efa_gda_wait_slots(q.qp, end, q.timeout_ns);
            if (!err) err = efa_gda_take_credit(s, &s->rail[rail], pe);
            if (err) return err;
        }
        err = efa_gda_post_one(q, efa_gda_desc(op, peer, p, last && has_imm, imm), &end, pe);
        if (err || last) return err;
        off += p.len;
    }
}

/* What a post reads first, in one round: the queue's counters, hot slot 0 of rail rl and fast entry fi, and last the
 * slot's fetch-and-add: every load before the atom, as efa_gda_reserve issues the counters first, so that no load
 * the memory system might keep behind the atom's round trip costs a second one (the atom, three instructions later,
 * is the round trip the post waits for anyway). Hot slot 0 is the slot the host fills first, with the heap's first
 * region, where NVSHMEM's and DeepEP's buffers are (the common case: efa_gda_hot_slot0 then needs nothing more; a
 * miss reads slots 1 and up, efa_gda_load_hot). Three words of one slot instead of every slot's: fewer loads for the
 * LSU to issue before the post's first dependent step, and a selection over one slot. On the GPU in one inline PTX
 * block, so that the compiler can put nothing between them that waits for one of them: they go out back to back and
 * the post pays one trip to L2 for all of them. */
EFA_GDA_DEV void efa_gda_post_loads(nvshmemx_efa_gda_qp_t *qp, const nvshmemx_efa_gda_rail_t *rl, uint32_t fi, efa_gda_counters *c,
                                    uint32_t *slot, efa_gda_hot_words &w) {
#if defined(__CUDA_ARCH__)
    asm volatile(
        "ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%10];\n\t"
        "ld.volatile.global.v2.u64 {%5, %6}, [%11];\n\t"
        "ld.volatile.global.u64 %7, [%11+16];\n\t"
        "ld.volatile.global.v2.u64 {%8, %9}, [%12];\n\t"
        "atom.global.add.u32 %4, [%10], 1;"
        : "=r"(c->reserved), "=r"(c->rung), "=r"(c->retired), "=r"(c->fatal), "=r"(*slot),
          "=l"(w.base[0]), "=l"(w.len[0]), "=l"(w.key_word[0]), "=l"(w.rbase[0]), "=l"(w.rkey_word[0])
        : "l"(&qp->sq_reserved), "l"(rl->hot), "l"(rl->fast[fi].hot)
        : "memory");
#else
    *c = efa_gda_load_counters(qp);
    *slot = efa_gda_fetch_slots(qp, 1);
    efa_gda_load_hot(rl, fi, w, 0, 1);
#endif
}
/* The piece from the hot regions, slot 0 first (w holds it: efa_gda_post_loads); only when both sides are not in it,
 * the other slots, read now (a second round trip, for a region the host made hot later). The same piece as
 * efa_gda_hot_piece: a region is in one slot at most while it is present (the host retires a slot before its region
 * goes; a slot retired while this reads it is safe to use either way, nvshmemx_efa_gda_hot_local_t). */
EFA_GDA_DEV bool efa_gda_hot_slot0(const nvshmemx_efa_gda_rail_t *rl, uint32_t fi, efa_gda_hot_words &w, uint64_t local, uint64_t sym,
                                   uint64_t left, uint64_t max, efa_gda_piece *p) {
    if (efa_gda_hot_select(w, local, sym, left, max, p, 1)) return true;
    efa_gda_load_hot(rl, fi, w, 1);
    return efa_gda_hot_select(w, local, sym, left, max, p);
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
        return efa_gda_rma_pieces(s, rail, efa_gda_sq_of(s, qp), op, efa_gda_peer(rl, pe), l, y, bytes, 0, pe, true, imm, 0);
    }
    const uint32_t fi = (uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES ? (uint32_t)pe : 0u; /* in bounds whatever pe is */
    efa_gda_counters c;
    uint32_t slot;
    efa_gda_hot_words w;
    efa_gda_post_loads(qp, rl, fi, &c, &slot, w);
    const efa_gda_sq q = efa_gda_sq_of(s, qp);
    const uint32_t n_pes = efa_gda_ro((const uint32_t *)&s->n_pes);
    nvshmemx_efa_gda_peer_t peer = efa_gda_ro(&rl->fast[fi].addr);
    efa_gda_piece p;
    const bool hot = efa_gda_hot_slot0(rl, fi, w, l, y, bytes, q.max_rdma, &p);
    if (!hot || (uint32_t)pe >= n_pes || fi != (uint32_t)pe) {
        int err = (uint32_t)pe < n_pes ? NVSHMEMX_EFA_GDA_OK : NVSHMEMX_EFA_GDA_ERR_BAD_PE;
        if (!err) {
            if (fi != (uint32_t)pe) peer = efa_gda_peer(rl, pe);
            err = efa_gda_find_piece(s, rail, pe, l, y, bytes, q.max_rdma, &p);
        }
        if (err) {
            efa_gda_fill_slot(s, rail, rl, q, slot, c);
            return err;
        }
    }
    efa_gda_reservation res;
    int err = efa_gda_claim(q, slot, 1, c, &res);
    if (err) return err;
    efa_gda_note_pe(q, slot, pe);
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
    const efa_gda_sq q = efa_gda_sq_of(s, qp);
    efa_gda_piece p;
    /* The remote side as a put from sym to sym would see it: sym is in this PE's heap too. */
    int err = (uint32_t)pe < efa_gda_ro((const uint32_t *)&s->n_pes) ? (int)NVSHMEMX_EFA_GDA_OK : (int)NVSHMEMX_EFA_GDA_ERR_BAD_PE;
    if (!err) err = efa_gda_lookup(s, rail, pe, y, y, bytes, q.max_rdma, &p);
    if (err == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION) err = NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION; /* sym was the local side */
    if (!err && p.len != bytes) err = NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE; /* aligned: cannot happen */
    if (err) {
        efa_gda_fill_slot(s, rail, rl, q, slot, c);
        return err;
    }
    uint64_t *const entry = scratch + (slot & (q.entries - 1));
    p.local = (uint64_t)(uintptr_t)entry;
    p.lkey = efa_gda_ro(&rl->signal_lkey);
    const efa_gda_wqe_words w = efa_gda_wqe_of(efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, efa_gda_peer(rl, pe), p, false, 0));
    efa_gda_reservation res;
    err = efa_gda_claim(q, slot, 1, c, &res);
    if (err) return err;
    /* The slot's previous WQE has completed (claim): the NIC no longer reads this entry. The ring's fence
     * orders this store before the doorbell. */
    efa_gda_store64(entry, value);
    efa_gda_note_pe(q, slot, pe);
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
        h->q = efa_gda_sq_of(s, &s->rail[0].qp); /* never used: every post goes the general way, which refuses the rail */
        return NVSHMEMX_EFA_GDA_ERR_BAD_RAIL;
    }
    const nvshmemx_efa_gda_rail_t *rl = &s->rail[rail];
    h->q = efa_gda_sq_of(s, &s->rail[rail].qp);
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
    efa_gda_note_pe(h.q, slot, h.pe);
    efa_gda_store_wqe(h.q, slot, w);
    return efa_gda_ring(h.q, slot, 1, res.rung_seen);
}
EFA_GDA_DEV int efa_gda_put_nbi(const efa_gda_handle &h, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(h, NVSHMEMX_EFA_GDA_OP_WRITE, (void *)src, dest, bytes);
}
EFA_GDA_DEV int efa_gda_get_nbi(const efa_gda_handle &h, void *dest, const void *src, uint64_t bytes) {
    return efa_gda_rma_nbi(h, NVSHMEMX_EFA_GDA_OP_READ, dest, src, bytes);
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
    const efa_gda_sq q = efa_gda_sq_of(s, &s->rail[rail].qp);
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
            const uint32_t slot = res.slot + __popc(in_group & ((1u << lane) - 1u));
            efa_gda_note_pe(q, slot, pe);
            efa_gda_write_wqe(q, slot, d);
            efa_gda_fence_nic(); /* this lane's WQE before the leader's doorbell (a fence orders its own thread's stores) */
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


#endif
