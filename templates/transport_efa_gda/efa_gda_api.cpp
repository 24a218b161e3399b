/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * The slot of NVSHMEM's device API over GDA (nvshmemx_efa_gda_api.h, nvshmemx_efa_gda_device_api.cuh). NVSHMEM's
 * host library asks for it once it connected this transport (transport.cpp, patched) and copies it into the
 * __constant__ slot of every module that links NVSHMEM's device library. On while GDA is active and
 * NVSHMEM_EFA_GDA_DEVICE_API is 1 (the default); the first call adds which to the status line. Compiled whether
 * or not libfabric has the GDA ops: without them GDA is never active and the slot stays off. */
#include "efa_gda_internal.h"
#include "nvshmemx_efa_gda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVSHMEM_EFA_GDA_DEVICE_API_ENV "NVSHMEM_EFA_GDA_DEVICE_API"
#define NVSHMEM_EFA_GDA_DEVICE_API_REPORT_ENV "NVSHMEM_EFA_GDA_DEVICE_API_REPORT"

using namespace efa_gda;

#if !defined(FI_EFA_GDA_OPS)

extern "C" int nvshmemx_efa_gda_get_api_slot(nvshmemx_efa_gda_api_slot_t *slot) {
    if (!slot) return -1;
    memset(slot, 0, sizeof *slot);
    return 0;
}

#else

/* With NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1, at finalize: the status line (which path the device API took) and what
 * went through NVSHMEM's proxy while it was on, by reason. For programs that cannot ask themselves (NVSHMEM's
 * perftests, unmodified): selftest reads it from their output. */
void efa_gda::report_api_at_fini(Gda &s) {
    const char *v = getenv(NVSHMEM_EFA_GDA_DEVICE_API_REPORT_ENV);
    if (!v || strcmp(v, "1")) return;
    fprintf(stderr, "nvshmem-efa: PE %d at finalize: %s\n", s.boot.my_pe, g_status);
    if (!s.d_api) return;
    nvshmemx_efa_gda_api_shared_t h;
    CUresult r = s.cu.memcpyDtoH(&h, s.d_api, sizeof h);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "nvshmem-efa: PE %d: reading the device API's counters failed (CUDA error %d)\n", s.boot.my_pe, (int)r);
        return;
    }
    fprintf(stderr,
            "nvshmem-efa: PE %d: NVSHMEM device API proxy operations %llu (outside GDA regions %llu, p or value writes %llu, "
            "g %llu, atomics and signal adds %llu, reads without GPU write ordering %llu); proxy quiets covered %llu\n",
            s.boot.my_pe, h.proxy_issued, h.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_NO_REGION], h.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_VALUE],
            h.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_GET_VALUE], h.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC],
            h.proxy_reason[NVSHMEMX_EFA_GDA_API_PROXY_UNORDERED_READ], h.proxy_quieted);
}

namespace efa_gda {
namespace {

/* 1 (the default) or 0; anything else is off, and says so: a typo must not pass for a choice. */
bool api_requested(char *why, size_t whylen) {
    const char *v = getenv(NVSHMEM_EFA_GDA_DEVICE_API_ENV);
    if (!v || !*v || !strcmp(v, "1")) return true;
    if (!strcmp(v, "0")) snprintf(why, whylen, "off (%s=0)", NVSHMEM_EFA_GDA_DEVICE_API_ENV);
    else snprintf(why, whylen, "off: %s=%s is neither 0 nor 1", NVSHMEM_EFA_GDA_DEVICE_API_ENV, v);
    return false;
}

/* Appended to the status line once: while the line start-up set still carries it, a later call adds nothing. */
const char kApiNote[] = "; NVSHMEM device API over GDA ";
void note_api(const char *what) {
    if (strstr(g_status, kApiNote)) return;
    const size_t n = strlen(g_status);
    snprintf(g_status + n, sizeof g_status - n, "%s%s", kApiNote, what);
}

/* g over GDA: its reads land in slots of this PE's own memory, registered for GDA as a local-only region. 1024
 * slots: threads pick one from their index, so up to that many concurrent g rarely wait for one another. */
constexpr uint32_t kGSlots = 1024;

/* g's scratch (kGSlots values, then their lock words), allocated and registered once; h gets where it is. nullptr,
 * or why g goes through NVSHMEM's proxy. */
const char *start_g(Gda &s, nvshmemx_efa_gda_api_shared_t &h) {
    const size_t values = kGSlots * sizeof(unsigned long long), bytes = values + kGSlots * sizeof(unsigned int);
    if (!s.d_api_g) {
        CUdeviceptr d = 0;
        CUresult r = s.cu.memAlloc(&d, bytes);
        if (r == CUDA_SUCCESS) r = s.cu.memsetD8(d, 0, bytes);
        if (r != CUDA_SUCCESS) {
            if (d) s.cu.memFree(d);
            return s.cu.name(r);
        }
        if (const char *why = register_local_region(s, (void *)(uintptr_t)d, values)) {
            s.cu.memFree(d);
            return why;
        }
        s.d_api_g = d;
    }
    h.g_value = (unsigned long long *)(uintptr_t)s.d_api_g;
    h.g_lock = (unsigned int *)(uintptr_t)(s.d_api_g + values);
    return nullptr;
}

}  // namespace
}  // namespace efa_gda

extern "C" int nvshmemx_efa_gda_get_api_slot(nvshmemx_efa_gda_api_slot_t *slot) {
    if (!slot) return -1;
    memset(slot, 0, sizeof *slot);
    if (!g_active || !g) return 0;
    char why[200];
    if (!api_requested(why, sizeof why)) {
        note_api(why);
        return 0;
    }
    const char *g_why = nullptr;
    if (!g->d_api) {
        /* The shared block, then flushed_at[n_pes], then the unflushed bits, then the proxy's unflushed bits: zero, but
         * for the pointers to them and to g's scratch. */
        const size_t n_pes = (size_t)g->boot.n_pes, words = (n_pes + 31) / 32;
        const size_t bytes = sizeof(nvshmemx_efa_gda_api_shared_t) + (n_pes + 2 * words) * sizeof(unsigned int);
        CUdeviceptr d = 0;
        nvshmemx_efa_gda_api_shared_t h;
        memset(&h, 0, sizeof h);
        CUresult r = g->cu.memAlloc(&d, bytes);
        if (r == CUDA_SUCCESS) {
            h.flushed_at = (unsigned int *)(uintptr_t)(d + sizeof h);
            h.unflushed = h.flushed_at + n_pes;
            h.proxy_unflushed = h.unflushed + words;
            g_why = start_g(*g, h);
            r = g->cu.memsetD8(d, 0, bytes);
        }
        if (r == CUDA_SUCCESS) r = upload(*g, d, &h, sizeof h);
        if (r != CUDA_SUCCESS) {
            if (d) g->cu.memFree(d);
            snprintf(why, sizeof why, "off: allocating its %zu-byte block of GPU memory failed (CUDA error %d)", bytes, (int)r);
            note_api(why);
            return -1;
        }
        g->d_api = d;
    }
    slot->abi = NVSHMEMX_EFA_GDA_API_ABI;
    slot->on = 1;
    slot->state = (nvshmemx_efa_gda_device_state_t *)(uintptr_t)g->d_state;
    slot->shared = (nvshmemx_efa_gda_api_shared_t *)(uintptr_t)g->d_api;
    /* Values and reads over GDA rely on every PE's GPU seeing an RDMA write's data no later than what follows it (the
     * agreed GPUDirect RDMA write ordering, >= OWNER: g_signals_ordered); values also on writes landing once. */
    slot->flags = (g_signals_ordered && g_delivered_once ? NVSHMEMX_EFA_GDA_API_VALUES_OVER_GDA : 0u) |
                  (g_signals_ordered ? NVSHMEMX_EFA_GDA_API_READS_OVER_GDA : 0u);
    slot->g_slots = g->d_api_g && g_signals_ordered ? kGSlots : 0u;
    char note[600];
    if (!g_signals_ordered)
        snprintf(note, sizeof note, "on (puts as GDA writes; p, SET signals, g and get through NVSHMEM's proxy: %s)", g_signals_why);
    else
        snprintf(note, sizeof note, "on (%s; %s%s)",
                 g_delivered_once ? "p and SET signals as GDA writes: every NIC delivers a write once"
                                  : "p and SET signals through NVSHMEM's proxy: a write may land twice",
                 g->d_api_g ? "g as GDA reads, get too" : "get as GDA reads; g through NVSHMEM's proxy: its GDA scratch could not be registered: ",
                 g->d_api_g ? "" : (g_why ? g_why : "unknown"));
    note_api(note);
    return 0;
}

#endif
