/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): where a post goes. The rail policy
 * (efa_gda_rail_of), the region table and the hot regions, and the lookup of the piece of a transfer a WQE
 * carries (efa_gda_lookup). Loads only; nothing here waits. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_LOOKUP_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_LOOKUP_CUH

#include "nvshmemx_efa_gda_device_wqe.cuh"

/* --- rails ------------------------------------------------------------------------------------------ */

/* The calling warp's global index (1-D grids): the channel of the default rail policy. */
EFA_GDA_DEV uint32_t efa_gda_warp_channel() { return (uint32_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); }

/* x % n for a rail count n (1 .. NVSHMEMX_EFA_GDA_MAX_RAILS), without the integer divide: every address a post
 * loads from hangs on its rail, and a 32-bit % is a dozen dependent instructions (a float reciprocal, conversions,
 * two corrections) before the first of those loads can go out. 1, 2 and 4 are masks; 3 is the exact multiply by
 * 0xAAAAAAAB >> 33, which equals x / 3 for every 32-bit x. Anything else (a state this code does not know) takes the
 * divide, so the result is x % n for every n > 0; 0 gives 0, as the policy always did for n <= 1. */
static_assert(NVSHMEMX_EFA_GDA_MAX_RAILS <= 4, "efa_gda_mod_rails: a rail count above 4 needs its own exact multiply");
EFA_GDA_DEV uint32_t efa_gda_mod_rails(uint32_t x, uint32_t n) {
    if (n <= 1) return 0u;
    if (n == 3) return x - 3u * (uint32_t)(((uint64_t)x * 0xAAAAAAABull) >> 33);
    if ((n & (n - 1)) == 0) return x & (n - 1);
    return x % n;
}

/* The rail policy: rail = (pe + channel) % n_rails (0 with one rail). Spreads a kernel's warps over the
 * rails (each warp's posts to one PE stay on one rail) and starts different destinations on different rails.
 * The read of n_rails (read-only, at a fixed offset) is what choosing a rail costs; the remainder is a mask or a
 * multiply (efa_gda_mod_rails). */
EFA_GDA_DEV uint32_t efa_gda_rail_of(const nvshmemx_efa_gda_device_state_t *s, int pe, uint32_t channel) {
    return efa_gda_mod_rails((uint32_t)pe + channel, efa_gda_ro(&s->n_rails));
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

/* The words of the hot regions of rail rl and of its fast peer entry fi (fi < NVSHMEMX_EFA_GDA_FAST_PES), as a post
 * reads them (see nvshmemx_efa_gda_hot_local_t): for slot k, this PE's base and length, its key word (key in the low
 * half, present in the high half: little endian, as GPUs and hosts are), and the peer's base and key word. */
struct efa_gda_hot_words {
    uint64_t base[NVSHMEMX_EFA_GDA_HOT_REGIONS], len[NVSHMEMX_EFA_GDA_HOT_REGIONS], key_word[NVSHMEMX_EFA_GDA_HOT_REGIONS],
        rbase[NVSHMEMX_EFA_GDA_HOT_REGIONS], rkey_word[NVSHMEMX_EFA_GDA_HOT_REGIONS];
};
static_assert(NVSHMEMX_EFA_GDA_HOT_REGIONS == 3, "efa_gda_load_hot's inline PTX reads three hot slots");
static_assert(offsetof(nvshmemx_efa_gda_hot_local_t, length) == 8 && offsetof(nvshmemx_efa_gda_hot_local_t, lkey) == 16 &&
                  offsetof(nvshmemx_efa_gda_hot_remote_t, rkey) == 8 && sizeof(nvshmemx_efa_gda_hot_remote_t) == 16 &&
                  offsetof(nvshmemx_efa_gda_fast_peer_t, hot) == 16,
              "the offsets efa_gda_load_hot's inline PTX reads at");
/* Hot slots [first, end) of rl and fast entry fi into w. On the GPU in one inline PTX block of volatile loads (each
 * word read whole, before or after the host wrote it; no fence of the post path invalidates L1, so they go to L2):
 * nothing the compiler schedules can come between them, so they go out back to back and cost one round trip. */
EFA_GDA_DEV void efa_gda_load_hot(const nvshmemx_efa_gda_rail_t *rl, uint32_t fi, efa_gda_hot_words &w, int first = 0,
                                  int end = NVSHMEMX_EFA_GDA_HOT_REGIONS) {
#if defined(__CUDA_ARCH__)
    const nvshmemx_efa_gda_hot_local_t *L = rl->hot;
    const nvshmemx_efa_gda_hot_remote_t *R = rl->fast[fi].hot;
    if (first == 0 && end == 3) {
        asm volatile(
            "ld.volatile.global.v2.u64 {%0, %1}, [%15];\n\t"
            "ld.volatile.global.u64 %2, [%15+16];\n\t"
            "ld.volatile.global.v2.u64 {%3, %4}, [%16];\n\t"
            "ld.volatile.global.v2.u64 {%5, %6}, [%15+32];\n\t"
            "ld.volatile.global.u64 %7, [%15+48];\n\t"
            "ld.volatile.global.v2.u64 {%8, %9}, [%16+16];\n\t"
            "ld.volatile.global.v2.u64 {%10, %11}, [%15+64];\n\t"
            "ld.volatile.global.u64 %12, [%15+80];\n\t"
            "ld.volatile.global.v2.u64 {%13, %14}, [%16+32];"
            : "=l"(w.base[0]), "=l"(w.len[0]), "=l"(w.key_word[0]), "=l"(w.rbase[0]), "=l"(w.rkey_word[0]),
              "=l"(w.base[1]), "=l"(w.len[1]), "=l"(w.key_word[1]), "=l"(w.rbase[1]), "=l"(w.rkey_word[1]),
              "=l"(w.base[2]), "=l"(w.len[2]), "=l"(w.key_word[2]), "=l"(w.rbase[2]), "=l"(w.rkey_word[2])
            : "l"(L), "l"(R));
        return;
    }
#pragma unroll
    for (int k = 0; k < NVSHMEMX_EFA_GDA_HOT_REGIONS; k++) {
        if (k < first || k >= end) continue;
        asm volatile(
            "ld.volatile.global.v2.u64 {%0, %1}, [%5];\n\t"
            "ld.volatile.global.u64 %2, [%5+16];\n\t"
            "ld.volatile.global.v2.u64 {%3, %4}, [%6];"
            : "=l"(w.base[k]), "=l"(w.len[k]), "=l"(w.key_word[k]), "=l"(w.rbase[k]), "=l"(w.rkey_word[k])
            : "l"(&L[k]), "l"(&R[k]));
    }
#else
    for (int k = first; k < end; k++) {
        uint64_t unused;
        efa_gda_load2(&rl->hot[k].base, &w.base[k], &w.len[k]);
        efa_gda_load2(&rl->hot[k].lkey, &w.key_word[k], &unused);
        efa_gda_load2(&rl->fast[fi].hot[k].base, &w.rbase[k], &w.rkey_word[k]);
    }
#endif
}

/* The piece, from hot slots [0, end) of w (efa_gda_load_hot): false when a region is not hot there (or a slot is not
 * filled yet, or retired); then ask the table. The remote region's length is this PE's: the host makes a region hot
 * only where it has one length everywhere. */
EFA_GDA_DEV bool efa_gda_hot_select(const efa_gda_hot_words &w, uint64_t local, uint64_t sym, uint64_t left, uint64_t max,
                                    efa_gda_piece *p, int end = NVSHMEMX_EFA_GDA_HOT_REGIONS) {
    /* Branch-free selection (bitwise ands, selects): a branch would let the compiler sink a load into it. */
    bool have_local = false, have_sym = false;
    uint64_t local_end = 0, sym_base = 0, sym_end = 0, remote_base = 0;
    uint32_t lkey = 0, rkey = 0;
#pragma unroll
    for (int k = 0; k < NVSHMEMX_EFA_GDA_HOT_REGIONS; k++) {
        if (k >= end) break;
        const bool filled = (w.base[k] != 0) & ((w.key_word[k] >> 32) != 0);
        const bool is_local = filled & (local - w.base[k] < w.len[k]);
        const bool is_sym = filled & (sym - w.base[k] < w.len[k]) & (w.rbase[k] != 0) & ((w.rkey_word[k] >> 32) != 0);
        have_local |= is_local;
        local_end = is_local ? w.base[k] + w.len[k] : local_end;
        lkey = is_local ? (uint32_t)w.key_word[k] : lkey;
        have_sym |= is_sym;
        sym_base = is_sym ? w.base[k] : sym_base;
        sym_end = is_sym ? w.base[k] + w.len[k] : sym_end;
        remote_base = is_sym ? w.rbase[k] : remote_base;
        rkey = is_sym ? (uint32_t)w.rkey_word[k] : rkey;
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

/* The piece, from the hot regions of rail rl alone: every load's address comes from rl and fi (the peer's fast
 * entry, fi < NVSHMEMX_EFA_GDA_FAST_PES), so they go out together (efa_gda_load_hot). false: ask the table. */
EFA_GDA_DEV bool efa_gda_hot_piece(const nvshmemx_efa_gda_rail_t *rl, uint32_t fi, uint64_t local, uint64_t sym, uint64_t left,
                                   uint64_t max, efa_gda_piece *p) {
    efa_gda_hot_words w;
    efa_gda_load_hot(rl, fi, w);
    return efa_gda_hot_select(w, local, sym, left, max, p);
}

/* The piece for pe on rail (pe < n_pes, rail < n_rails, checked by the caller): hot regions first, then the
 * region table. */
EFA_GDA_DEV int efa_gda_lookup(const nvshmemx_efa_gda_device_state_t *s, uint32_t rail, int pe, uint64_t local, uint64_t sym,
                               uint64_t left, uint64_t max, efa_gda_piece *p) {
    if ((uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES && efa_gda_hot_piece(&s->rail[rail], (uint32_t)pe, local, sym, left, max, p))
        return NVSHMEMX_EFA_GDA_OK;
    return efa_gda_find_piece(s, rail, pe, local, sym, left, max, p);
}


#endif
