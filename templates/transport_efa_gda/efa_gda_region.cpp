/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Heap regions: every region NVSHMEM registers is registered on every GDA rail, its keys exchanged with all PEs,
 * and a new region table published. A region some PE could not register on some rail is unreachable on that
 * rail only (device posts that pick that rail fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE), and is never
 * hot.
 *
 * While kernels run, the device state changes only by replacing its regions pointer with a new, fully written
 * table (one aligned 8-byte copy on a private stream; old tables stay until finalize) and by filling a hot
 * region slot once (the peers' entries, then ours, on every rail) or retiring it (clearing one word per rail). */
#include "efa_gda_internal.h"

#if defined(FI_EFA_GDA_OPS)

#include <stddef.h>
#include <string.h>

namespace efa_gda {

/* Closes a region's registrations (one per rail; a rail that could not register it holds none). */
void close_mrs(const std::vector<struct fid_mr *> &mrs) {
    for (struct fid_mr *mr : mrs)
        if (mr) fi_close(&mr->fid);
}

CUdeviceptr rail_offset(size_t k) {
    return offsetof(nvshmemx_efa_gda_device_state_t, rail) + k * sizeof(nvshmemx_efa_gda_rail_t);
}

/* Publishes the current region list: a new table (header, then per region one row of 1 + n_pes entries per
 * rail, at least one row per rail) written in full, then the state's regions pointer replaced with one aligned
 * 8-byte copy. A kernel sees the old table or the new one, never a mix; old tables stay allocated until
 * finalize. */
const char *publish_regions(Gda &s) {
    const uint32_t count = (uint32_t)s.regions.size(), n = (uint32_t)s.boot.n_pes, rails = (uint32_t)s.n_rails();
    const size_t rows = (size_t)(count ? count : 1) * rails;
    const size_t bytes = sizeof(nvshmemx_efa_gda_regions_t) + rows * (1 + n) * sizeof(nvshmemx_efa_gda_region_t);
    std::vector<uint8_t> buf(bytes, 0);
    CUdeviceptr t = 0;
    CUresult r = s.cu.memAlloc(&t, bytes);
    if (r != CUDA_SUCCESS) return s.cu.name(r);
    s.tables.push_back(t);
    nvshmemx_efa_gda_regions_t head = {};
    head.count = count;
    head.n_pes = n;
    head.n_rails = rails;
    memcpy(buf.data(), &head, sizeof head);
    nvshmemx_efa_gda_region_t *entry = (nvshmemx_efa_gda_region_t *)(buf.data() + sizeof head);
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t k = 0; k < rails; k++) {
            nvshmemx_efa_gda_region_t *row = entry + ((size_t)i * rails + k) * (1 + n);
            row[0] = s.regions[i].local[k];
            for (uint32_t pe = 0; pe < n; pe++) row[1 + pe] = s.regions[i].remote[k][pe];
        }
    r = upload(s, t, buf.data(), bytes);
    if (r == CUDA_SUCCESS) {
        const uint64_t ptr = (uint64_t)t;
        r = upload(s, s.d_state + offsetof(nvshmemx_efa_gda_device_state_t, regions), &ptr, sizeof ptr);
    }
    if (r == CUDA_SUCCESS) s.host_state.regions = (nvshmemx_efa_gda_regions_t *)(uintptr_t)t;
    return r == CUDA_SUCCESS ? nullptr : s.cu.name(r);
}

/* Fills a free hot slot with a region reachable on every PE and every rail and of one length everywhere
 * (see nvshmemx_efa_gda_hot_local_t): on each rail the peers' entries first, then ours, each upload finished
 * before the next. Returns nullptr (also when no slot is free or the region does not qualify) or why the
 * upload failed. */
static const char *fill_hot_slot(Gda &s, const Region &reg) {
    const uint32_t n = (uint32_t)s.boot.n_pes;
    const size_t rails = s.n_rails();
    for (size_t k = 0; k < rails; k++) {
        if (!reg.local[k].valid) return nullptr;
        for (uint32_t pe = 0; pe < n; pe++)
            if (!reg.remote[k][pe].valid || reg.remote[k][pe].length != reg.local[k].length) return nullptr;
    }
    int slot = 0;
    while (slot < NVSHMEMX_EFA_GDA_HOT_REGIONS && s.hot_used[slot]) slot++;
    if (slot == NVSHMEMX_EFA_GDA_HOT_REGIONS) return nullptr;
    s.hot_used[slot] = true;
    const uint32_t fast = n < NVSHMEMX_EFA_GDA_FAST_PES ? n : NVSHMEMX_EFA_GDA_FAST_PES;
    for (size_t k = 0; k < rails; k++) {
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        for (uint32_t pe = 0; pe < fast; pe++) h.fast[pe].hot[slot] = {reg.remote[k][pe].base, reg.remote[k][pe].key, 1};
        CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, fast), h.fast,
                            fast * sizeof(nvshmemx_efa_gda_fast_peer_t));
        if (r != CUDA_SUCCESS) return s.cu.name(r);
    }
    for (size_t k = 0; k < rails; k++) {
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        h.hot[slot] = {reg.local[k].base, reg.local[k].length, reg.local[k].key, 1, 0};
        const CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, hot) + slot * sizeof(nvshmemx_efa_gda_hot_local_t),
                                  &h.hot[slot], sizeof h.hot[slot]);
        if (r != CUDA_SUCCESS) return s.cu.name(r);
    }
    s.hot_buf[slot] = reg.buf;
    return nullptr;
}

/* Retires the hot slot holding buf, if any: one 4-byte store of present = 0 per rail (kernels then use the
 * table). */
static const char *retire_hot_slot(Gda &s, void *buf) {
    for (int slot = 0; slot < NVSHMEMX_EFA_GDA_HOT_REGIONS; slot++) {
        if (!s.hot_used[slot] || s.hot_buf[slot] != buf) continue;
        s.hot_buf[slot] = nullptr;
        for (size_t k = 0; k < s.n_rails(); k++) {
            nvshmemx_efa_gda_hot_local_t &h = s.host_state.rail[k].hot[slot];
            h.present = 0;
            const CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, hot) +
                                             slot * sizeof(nvshmemx_efa_gda_hot_local_t) + offsetof(nvshmemx_efa_gda_hot_local_t, present),
                                      &h.present, sizeof h.present);
            if (r != CUDA_SUCCESS) return s.cu.name(r);
        }
        return nullptr;
    }
    return nullptr;
}

}  // namespace efa_gda

using namespace efa_gda;

void nvshmemt_efa_gda_register_region(void *buf, size_t length) {
    if (!g_active) return;
    Gda &s = *g;
    const size_t rails = s.n_rails();
    Region reg;
    reg.buf = buf;
    reg.length = length;
    reg.mr.assign(rails, nullptr);
    RegionInfo mine = {};
    mine.base = (uint64_t)(uintptr_t)buf;
    mine.length = (uint64_t)length;
    std::vector<uint64_t> lkey(rails, FI_KEY_NOTAVAIL);
    std::vector<int> rc(rails, 0);
    for (size_t k = 0; k < rails; k++) {
        Rail &rl = s.rail(k);
        rc[k] = register_mr(s, rl, buf, length, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, &reg.mr[k]);
        if (rc[k] == 0) {
            lkey[k] = rl.ops->get_mr_lkey(reg.mr[k]);
            mine.rkey[k] = (uint32_t)fi_mr_key(reg.mr[k]);
            mine.ok[k] = lkey[k] != FI_KEY_NOTAVAIL;
        }
    }
    /* Collective like the registration that called us: every PE contributes, even after a local failure. */
    std::vector<RegionInfo> all(s.boot.n_pes);
    const bool gathered = s.boot.allgather(&mine, all.data(), (int)sizeof mine, s.boot.ctx) == 0;
    reg.local.resize(rails);
    reg.remote.assign(rails, std::vector<nvshmemx_efa_gda_region_t>(s.boot.n_pes));
    for (size_t k = 0; k < rails; k++) {
        reg.local[k] = {mine.base, mine.length, (uint32_t)lkey[k], mine.ok[k] && gathered ? 1u : 0u};
        int failed = -1;
        for (int pe = 0; pe < s.boot.n_pes; pe++) {
            reg.remote[k][pe] = {all[pe].base, all[pe].length, all[pe].rkey[k], all[pe].ok[k] && gathered ? 1u : 0u};
            if (!reg.remote[k][pe].valid) failed = pe;
        }
        /* The range stays in the table with valid = 0 on this rail, so a kernel touching it there gets
         * NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE instead of a silent miss. */
        if (!gathered || failed >= 0 || !reg.local[k].valid) {
            char where[128] = "";
            if (rails > 1) snprintf(where, sizeof where, " on rail %zu (%s)", k, s.rail(k).name.c_str());
            set_status("EFA GDA active, but heap region %p (%zu bytes) is unreachable by GDA%s: %s", buf, length, where,
                       !gathered ? "the all-gather of its keys failed"
                       : !reg.local[k].valid ? (rc[k] ? fi_strerror(-rc[k]) : "no lkey for its registration")
                                             : "another PE could not register it (its log says why)");
            fprintf(stderr, "nvshmem-efa: %s; GDA operations on it fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE\n", g_status);
        }
    }
    s.regions.push_back(reg);
    const char *err = publish_regions(s);
    if (err) {
        set_status("EFA GDA active, but publishing region %p failed (%s): GDA cannot reach it", buf, err);
        fprintf(stderr, "nvshmem-efa: %s\n", g_status);
    } else if ((err = fill_hot_slot(s, reg))) {
        /* The table has it: posts to it still work, one lookup round slower. */
        fprintf(stderr, "nvshmem-efa: EFA GDA: writing region %p to a hot slot failed (%s)\n", buf, err);
    }
}

/* A buffer of this PE's that GDA posts may use as their local side only (the device API's g scratch): registered on
 * every rail and added to the region table with no peer's view (valid = 0 in every PE's column, so a remote address
 * in it is unreachable). Not collective: no PE waits for another. nullptr, or why it is not usable; a rail that
 * could not register it makes a post through that rail fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE. */
const char *efa_gda::register_local_region(Gda &s, void *buf, size_t length) {
    const size_t rails = s.n_rails();
    Region reg;
    reg.buf = buf;
    reg.length = length;
    reg.mr.assign(rails, nullptr);
    reg.local.resize(rails);
    reg.remote.assign(rails, std::vector<nvshmemx_efa_gda_region_t>(s.boot.n_pes));
    const char *why = nullptr;
    for (size_t k = 0; k < rails; k++) {
        const int rc = register_mr(s, s.rail(k), buf, length, FI_READ | FI_WRITE, &reg.mr[k]);
        const uint64_t lkey = rc == 0 ? s.rail(k).ops->get_mr_lkey(reg.mr[k]) : FI_KEY_NOTAVAIL;
        reg.local[k] = {(uint64_t)(uintptr_t)buf, (uint64_t)length, (uint32_t)lkey, lkey != FI_KEY_NOTAVAIL ? 1u : 0u};
        for (int pe = 0; pe < s.boot.n_pes; pe++) reg.remote[k][pe] = {(uint64_t)(uintptr_t)buf, (uint64_t)length, 0, 0};
        if (!reg.local[k].valid && !why) why = rc ? fi_strerror(-rc) : "no lkey for its registration";
    }
    if (!why) {
        s.regions.push_back(reg);
        if (!(why = publish_regions(s))) return nullptr;
        s.regions.pop_back();
    }
    close_mrs(reg.mr);
    return why;
}

void nvshmemt_efa_gda_release_region(void *buf) {
    if (!g_active) return;
    Gda &s = *g;
    for (size_t i = 0; i < s.regions.size(); i++) {
        if (s.regions[i].buf != buf) continue;
        const std::vector<struct fid_mr *> mrs = s.regions[i].mr;
        s.regions.erase(s.regions.begin() + (long)i);
        /* Kernels stop seeing the region before its registrations go. */
        const char *err = retire_hot_slot(s, buf);
        if (err) fprintf(stderr, "nvshmem-efa: EFA GDA: retiring the hot slot of %p failed (%s)\n", buf, err);
        err = publish_regions(s);
        if (err) fprintf(stderr, "nvshmem-efa: EFA GDA: publishing the region table after releasing %p failed (%s)\n", buf, err);
        close_mrs(mrs);
        return;
    }
}

#endif
