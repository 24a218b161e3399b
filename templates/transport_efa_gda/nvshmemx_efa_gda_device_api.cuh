/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * NVSHMEM's own device API over EFA GDA. NVSHMEM sends every remote RMA, signal, atomic, quiet and fence of its
 * device API (collectives included) through the nvshmemi_transfer_* functions of transfer_device.cuh; the
 * nvshmem-efa patch hooks each call of them at the caller (nvshmemx_efa_gda_device_api_hooks.cuh):
 *
 *     if (nvshmemi_efa_gda_api_d.on) nvshmemi_efa_gda_api_<op>(...); else nvshmemi_transfer_<op>(...);
 *
 * so with GDA off a call pays one uniform constant load, its compare and a branch, and with it on the work happens
 * in the functions below, each a __noinline__ entry point defined in the device library
 * (nvshmemx_efa_gda_device_api_entries.cuh). Where the transfer functions are compiled into the application
 * (NVSHMEM_ENABLE_ALL_DEVICE_INLINING), the same line is first in each of their bodies instead.
 *
 * The slot (nvshmemi_efa_gda_api_d) is a __constant__ of NVSHMEM's device library (init_device.cu), one per
 * module: NVSHMEM returns its address as the transport state of the module and copies the host's value into
 * every module it registered. The host fills it once GDA is active on every PE and NVSHMEM_EFA_GDA_DEVICE_API
 * is not 0; a device library and a host library of different builds leave it zero: the proxy path.
 *
 * Which NIC: every GDA operation to PE p leaves through one rail, efa_gda_api_rail(p) (p mod the rails), whichever
 * thread or warp posts it. Fence and quiet are completion-based, and an EFA completion orders later writes only on its
 * own NIC: spread over NICs per warp, a flag after a fence could land before another warp's data.
 *
 * What takes which path, for a remote PE (NVLink peers never come here):
 *  - put and get (nbi and blocking; thread, warp and block scope: the group's first thread posts): GDA. An
 *    address outside the regions GDA registered (a local buffer NVSHMEM registered local-only, memory NVSHMEM
 *    does not know) goes through NVSHMEM's proxy, for that call only, counted by reason.
 *  - p: a GDA write of the value (4 or 8 bytes) where every PE's NICs deliver a write once; else, and for 1 and
 *    2 bytes, the proxy. g (every size): a GDA read into a scratch slot of this PE, then its completion; the
 *    proxy where the scratch could not be registered.
 *  - put with signal: the payload over GDA, then SET as a GDA write once the payload completed (where writes
 *    are delivered once), or SET/ADD through the proxy after the payload completed and was flushed.
 *  - atomics and signal_op: the proxy (efa-direct has no RDMA atomics), after every GDA write this PE posted
 *    completed and was flushed to that PE (efa_gda_quiet_flush), so the proxy's update, another requester
 *    than the GDA queue, cannot overtake GDA data the program ordered before it.
 *  - quiet: the GDA quiet of every queue, then a flush of every PE sent a GDA write since its last flush (quiet
 *    promises visibility at every PE, and NVSHMEM's barrier, a quiet then signals to its k-ary neighbours only,
 *    relies on it), then the proxy's quiet only if this PE sent the proxy anything since the last proxy quiet
 *    (counters in GPU memory: no read over PCIe when it sent nothing), then a flush of every PE the proxy wrote to
 *    since its last flush (proxy_unflushed).
 *  - fence: the GDA quiet and the proxy's as above, without the flush of GDA-written PEs (a fence orders, and every
 *    GDA write to a PE takes one NIC), but with the flush of every PE the proxy wrote to: on multi-rail NVSHMEM (AWS
 *    3.5.7+) the proxy's write leaves through a NIC of its choosing, and its quiet means "queued towards the PE's
 *    PCIe" on that NIC only, so a GDA write after the fence, on the PE's GDA rail, could land first (review 3,
 *    finding 7). A read through every rail lands it whichever NIC it took. The proxy's own fence only orders the
 *    proxy's operations.
 *
 * Every wait is bounded (NVSHMEM_EFA_GDA_TIMEOUT_MS); an operation that fails traps with a message naming the
 * operation, the PEs and the queue (efa_gda_check): the device API returns nothing a caller could check. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_API_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_API_CUH

#include "nvshmemx_efa_gda_api.h"
#include "nvshmemx_efa_gda_device.cuh"

/* Defined once, in NVSHMEM's device library (init_device.cu, patched). */
extern __constant__ nvshmemx_efa_gda_api_slot_t nvshmemi_efa_gda_api_d;

/* The rest calls NVSHMEM's proxy functions, which exist only in the device pass (as does transfer_device.cuh's
 * code that calls into this); the CPU test compiles it as plain C++. */
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__)

/* The entries (NVSHMEMX_EFA_GDA_API_ENTRY): out of line and external, so the callers' hooks link to the device
 * library's instantiations (its host library has its own copy for its on-stream kernels). Their helpers
 * (NVSHMEMX_EFA_GDA_API_FN): out of line, internal to the translation unit. */
#ifndef NVSHMEMX_EFA_GDA_API_FN
#if defined(__CUDACC__)
#define NVSHMEMX_EFA_GDA_API_FN static __device__ __noinline__
#define NVSHMEMX_EFA_GDA_API_ENTRY __device__ __noinline__
#else
#define NVSHMEMX_EFA_GDA_API_FN static __attribute__((noinline))
#define NVSHMEMX_EFA_GDA_API_ENTRY __attribute__((noinline))
#endif
#endif

/* --- the proxy side ------------------------------------------------------------------------------------- */

/* After an operation was handed to the proxy: counted, so the next quiet knows the proxy has work. Counted after
 * the hand-over, never before: a quiet that reads the count then covers every operation it counts. written_pe: the PE
 * a write lands at (put, p, non-fetching atomic, signal), marked in proxy_unflushed after the count, so a fence or
 * quiet that takes the mark and then quiets the proxy covers the write; -1 for a read or a fetching atomic, whose
 * result the caller waits for. */
EFA_GDA_DEV void efa_gda_api_sent_to_proxy(int reason, int written_pe) {
    nvshmemx_efa_gda_api_shared_t *sh = nvshmemi_efa_gda_api_d.shared;
    __threadfence();
    atomicAdd(&sh->proxy_issued, 1ull);
    atomicAdd(&sh->proxy_reason[reason], 1ull);
    unsigned int *w = sh->proxy_unflushed;
    if (!w || written_pe < 0) return;
    __threadfence();
    const unsigned int bit = 1u << (written_pe & 31);
    if (!(efa_gda_load(&w[written_pe >> 5]) & bit)) atomicOr(&w[written_pe >> 5], bit);
}

/* pe was sent a GDA write: marked until a quiet or a proxy operation to pe flushes it. Checked before it is set, so
 * the posts to a marked PE only read the word. Called after the post (a quiet that takes the mark covers it). */
EFA_GDA_DEV void efa_gda_api_wrote(int pe) {
    unsigned int *w = nvshmemi_efa_gda_api_d.shared->unflushed;
    const unsigned int bit = 1u << (pe & 31);
    if (w && !(efa_gda_load(&w[pe >> 5]) & bit)) atomicOr(&w[pe >> 5], bit);
}

/* Quiet's visibility at every PE (OpenSHMEM: puts "completed and visible to all PEs"; NVSHMEM's barrier is a quiet,
 * then signals to its k-ary neighbours only, so a PE that is not one learns of a put to it through others): every PE
 * marked by efa_gda_api_wrote is flushed, a read through each NIC, which a NIC serves after the writes it placed
 * before. Each word's marks are taken before a quiet that then covers every write they mark; a write marked after
 * stays marked for the next quiet. */
EFA_GDA_DEV void efa_gda_api_flush_written(nvshmemx_efa_gda_device_state_t *s) {
    unsigned int *w = nvshmemi_efa_gda_api_d.shared->unflushed;
#ifdef NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH
    w = nullptr;
#endif
    if (!w) return;
    const uint32_t words = ((uint32_t)s->n_pes + 31) / 32;
    for (uint32_t i = 0; i < words; i++) {
        if (!efa_gda_load(&w[i])) continue;
        unsigned int bits = atomicExch(&w[i], 0u);
        if (!bits) continue;
        efa_gda_check_quiet(s, efa_gda_quiet(s), "quiet", s->my_pe);
        for (; bits; bits &= bits - 1) {
            const int pe = (int)(i * 32 + (uint32_t)__ffs(bits) - 1);
            efa_gda_check_quiet(s, efa_gda_flush(s, pe), "flush at quiet (the PE's GDA writes visible there)", pe);
        }
    }
}

/* The sum of every GDA queue's reserved counter (shared and owned, every rail): changes with every GDA post. */
EFA_GDA_DEV unsigned int efa_gda_api_posted(nvshmemx_efa_gda_device_state_t *s) {
    const uint32_t n = efa_gda_ro(&s->n_rails);
    unsigned int sum = 0;
    for (uint32_t r = 0; r < n && r < NVSHMEMX_EFA_GDA_MAX_RAILS; r++) {
        sum += efa_gda_load(&s->rail[r].qp.sq_reserved);
        const uint32_t k = efa_gda_ro(&s->rail[r].n_owned);
        nvshmemx_efa_gda_qp_t *owned = k ? efa_gda_ro(&s->rail[r].owned) : nullptr;
        for (uint32_t i = 0; i < k; i++) sum += efa_gda_load(&owned[i].sq_reserved);
    }
    return sum;
}

/* What precedes every operation the device API hands to the proxy for pe, because the program may have ordered it
 * after earlier GDA writes (by a fence, or as the ADD of a put-with-signal), and a fence cannot know which PE comes
 * next: every GDA write completed (quiet) and, through the NICs it went by, placed at pe (flush: the proxy's write
 * comes from another requester, which a completed but unplaced GDA write could still be overtaken by). Skipped
 * while no GDA write was posted since the last flush to pe finished. */
NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_before_proxy(int pe) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    unsigned int *flushed = nvshmemi_efa_gda_api_d.shared->flushed_at;
    const unsigned int posted = efa_gda_api_posted(s);
    if (flushed && efa_gda_load(&flushed[pe]) == posted) return;
    /* pe's mark is taken first: every write it marks is covered by the quiet below, and flushed. */
    unsigned int *w = nvshmemi_efa_gda_api_d.shared->unflushed;
    if (w && (efa_gda_load(&w[pe >> 5]) & (1u << (pe & 31)))) atomicAnd(&w[pe >> 5], ~(1u << (pe & 31)));
#ifndef NVSHMEMX_EFA_GDA_API_TEST_NO_FLUSH_BEFORE_PROXY
    efa_gda_check_quiet(s, efa_gda_quiet_flush(s, pe), "quiet and flush before a proxy operation", pe);
#endif
    /* The flush posted one read per rail. If nothing else was posted meanwhile, everything counted now is covered
     * (the quiet snapshots later counters than `posted`); else leave the mark: the next proxy operation to pe
     * flushes again, which is only slower. */
    const unsigned int after = posted + efa_gda_ro(&s->n_rails);
    if (flushed && efa_gda_api_posted(s) == after) efa_gda_store(&flushed[pe], after);
}

/* The proxy's quiet, when it has work this PE's device API sent it. */
EFA_GDA_DEV void efa_gda_api_proxy_quiet_if_pending(bool use_membar) {
    nvshmemx_efa_gda_api_shared_t *sh = nvshmemi_efa_gda_api_d.shared;
    const unsigned long long issued = efa_gda_load64((const uint64_t *)&sh->proxy_issued);
    if (issued == efa_gda_load64((const uint64_t *)&sh->proxy_quieted)) return;
    nvshmemi_proxy_quiet(use_membar);
    atomicMax(&sh->proxy_quieted, issued);
}

/* Fence's and quiet's part for the proxy's writes: the proxy's quiet, then, for every PE it wrote to since the last
 * flush (proxy_unflushed), a read through each rail (efa_gda_flush), which that NIC serves after the writes it placed
 * before. On multi-rail NVSHMEM the proxy's NIC need not be the PE's GDA rail, and its quiet only means "queued
 * towards the PE's PCIe" on that NIC: without the flush, a GDA write after the fence could land first (review 3,
 * finding 7). Per word: the marks are taken, then the proxy is quieted (a mark is set after its operation was counted,
 * so the quiet covers it), then the PEs are flushed. A proxy quiet happens even where no PE is marked, if pending. */
EFA_GDA_DEV void efa_gda_api_proxy_quiet_flush(nvshmemx_efa_gda_device_state_t *s, bool use_membar) {
    unsigned int *w = nvshmemi_efa_gda_api_d.shared->proxy_unflushed;
#ifdef NVSHMEMX_EFA_GDA_API_TEST_NO_PROXY_FLUSH
    w = nullptr;
#endif
    if (w) {
        const uint32_t words = ((uint32_t)s->n_pes + 31) / 32;
        for (uint32_t i = 0; i < words; i++) {
            if (!efa_gda_load(&w[i])) continue;
            unsigned int bits = atomicExch(&w[i], 0u);
            if (!bits) continue;
            __threadfence();
            efa_gda_api_proxy_quiet_if_pending(use_membar);
            for (; bits; bits &= bits - 1) {
                const int pe = (int)(i * 32 + (uint32_t)__ffs(bits) - 1);
                efa_gda_check_quiet(s, efa_gda_flush(s, pe), "flush after the proxy's quiet (its writes there before later GDA writes)", pe);
            }
        }
    }
    efa_gda_api_proxy_quiet_if_pending(use_membar);
}

/* --- the leader's work ------------------------------------------------------------------------------------ */

/* The rail of every GDA operation to pe: one NIC per destination (the policy's rail with channel 0, pe mod the
 * rails), whichever thread posts. NVSHMEM's fence and quiet order and complete what the GPU issued to a PE, whoever
 * issued it, and a completion on EFA orders later writes only through its own NIC ("queued towards the receiver's
 * PCIe" there): with a warp's rail, warp B's flag after a fence could overtake warp A's data on another NIC (review 3,
 * finding 1). The negative control NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL takes the calling warp's, as before. */
EFA_GDA_DEV uint32_t efa_gda_api_rail(const nvshmemx_efa_gda_device_state_t *s, int pe) {
#ifdef NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL
    return efa_gda_rail_of(s, pe, efa_gda_warp_channel());
#else
    return efa_gda_rail_of(s, pe, 0u);
#endif
}

/* An error GDA can route around (through the proxy, for this call): the address was not in GDA's regions. */
EFA_GDA_DEV bool efa_gda_api_no_region(int err) {
    return err == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION || err == NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION ||
           err == NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE;
}

/* Posts a put or get on pe's rail (efa_gda_api_rail: every operation to one PE on one NIC, so a completion-based
 * fence or quiet orders it); false: it must go through the proxy, counted under *why. A get goes there where a GPU does not
 * order GPUDirect RDMA writes (no READS_OVER_GDA): it could see the read's completion before its data. Any other
 * failure traps. */
EFA_GDA_DEV bool efa_gda_api_post(void *rptr, void *lptr, size_t bytes, int pe, bool put, int *why) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    if (!bytes) return true;
    if (!put && !(nvshmemi_efa_gda_api_d.flags & NVSHMEMX_EFA_GDA_API_READS_OVER_GDA)) {
        *why = NVSHMEMX_EFA_GDA_API_PROXY_UNORDERED_READ;
        return false;
    }
    const uint32_t rail = efa_gda_api_rail(s, pe);
    const int err = put ? efa_gda_put_nbi_on(s, rail, rptr, lptr, bytes, pe) : efa_gda_get_nbi_on(s, rail, lptr, rptr, bytes, pe);
    *why = NVSHMEMX_EFA_GDA_API_PROXY_NO_REGION;
    if (efa_gda_api_no_region(err)) return false;
    efa_gda_check(s, err, put ? "put" : "get", rptr, lptr, pe, bytes);
    if (put) efa_gda_api_wrote(pe);
    return true;
}

NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_rma_nbi_leader(void *rptr, void *lptr, size_t bytes, int pe, bool put) {
    int why;
    if (efa_gda_api_post(rptr, lptr, bytes, pe, put, &why)) return;
    nvshmemi_efa_gda_api_before_proxy(pe);
    nvshmemi_proxy_rma_nbi(rptr, lptr, bytes, pe, put ? NVSHMEMI_OP_PUT : NVSHMEMI_OP_GET);
    efa_gda_api_sent_to_proxy(why, put ? pe : -1);
}

/* Blocking: the post, then its completion (the GDA quiet covers it; a get's data is in place at completion). */
NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_rma_leader(void *rptr, void *lptr, size_t bytes, int pe, bool put) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    int why;
    if (efa_gda_api_post(rptr, lptr, bytes, pe, put, &why)) {
        efa_gda_check_quiet(s, efa_gda_quiet(s), put ? "quiet of a blocking put" : "quiet of a blocking get", pe);
        return;
    }
    nvshmemi_efa_gda_api_before_proxy(pe);
    nvshmemi_proxy_rma_nbi(rptr, lptr, bytes, pe, put ? NVSHMEMI_OP_PUT : NVSHMEMI_OP_GET);
    efa_gda_api_sent_to_proxy(why, put ? pe : -1);
    efa_gda_api_proxy_quiet_if_pending(false);
}

/* A value write (p, or a SET signal) over GDA; false: it must go through the proxy. */
EFA_GDA_DEV bool efa_gda_api_write_value(void *rptr, uint64_t value, uint32_t bytes, int pe, bool after_payload) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    if (!(nvshmemi_efa_gda_api_d.flags & NVSHMEMX_EFA_GDA_API_VALUES_OVER_GDA) || (bytes != 4 && bytes != 8)) return false;
#ifdef NVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT
    after_payload = false;
#endif
    const uint32_t rail = efa_gda_api_rail(s, pe);
    const int err = after_payload ? efa_gda_signal_on(s, rail, rptr, value, bytes, pe) : efa_gda_write_value_nbi_on(s, rail, rptr, value, bytes, pe);
    if (efa_gda_api_no_region(err)) return false;
    efa_gda_check(s, err, after_payload ? "signal after its payload" : "p", rptr, nullptr, pe, bytes);
    efa_gda_api_wrote(pe);
    return true;
}

NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_p_leader(void *rptr, uint64_t value, uint32_t bytes, int pe) {
    if (efa_gda_api_write_value(rptr, value, bytes, pe, false)) return;
    /* Through the proxy, typed as the caller's value (the proxy stages it by size). */
    nvshmemi_efa_gda_api_before_proxy(pe);
    switch (bytes) {
        case 1: nvshmemi_proxy_rma_p<uint8_t>(rptr, (uint8_t)value, pe); break;
        case 2: nvshmemi_proxy_rma_p<uint16_t>(rptr, (uint16_t)value, pe); break;
        case 4: nvshmemi_proxy_rma_p<uint32_t>(rptr, (uint32_t)value, pe); break;
        default: nvshmemi_proxy_rma_p<uint64_t>(rptr, value, pe); break;
    }
    efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_VALUE, pe);
}

/* Put with signal by the group's first thread. The signal never lands before its payload: over GDA it is posted
 * once the payload completed (efa_gda_signal); through the proxy, once the payload completed and was flushed. */
NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_put_signal_leader(void *rptr, void *lptr, size_t bytes, void *sig_addr,
                                                                   uint64_t signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    int why;
    if (!efa_gda_api_post(rptr, lptr, bytes, pe, true, &why)) {
        /* The payload through the proxy: NVSHMEM's own sequence, all of it on the proxy. */
        nvshmemi_efa_gda_api_before_proxy(pe);
        nvshmemi_proxy_rma_nbi(rptr, lptr, bytes, pe, NVSHMEMI_OP_PUT);
        nvshmemi_proxy_fence();
        nvshmemi_proxy_amo_nonfetch<uint64_t>(sig_addr, signal, pe, sig_op);
        efa_gda_api_sent_to_proxy(why, pe);
        efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC, pe);
    } else if (sig_op != NVSHMEMI_AMO_SIGNAL_SET || !efa_gda_api_write_value(sig_addr, signal, 8, pe, true)) {
        nvshmemi_efa_gda_api_before_proxy(pe);
        nvshmemi_proxy_amo_nonfetch<uint64_t>(sig_addr, signal, pe, sig_op);
        efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC, pe);
    }
    if (!is_nbi) {
        efa_gda_check_quiet(s, efa_gda_quiet(s), "quiet of a blocking put with signal", pe);
        efa_gda_api_proxy_quiet_if_pending(false);
    }
}

/* Atomics: the proxy, after the GDA writes ordered before them are placed at pe. */
template <typename T>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op) {
    nvshmemi_efa_gda_api_before_proxy(pe);
    nvshmemi_proxy_amo_nonfetch<T>(rptr, value, pe, op);
    efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC, pe);
}
template <typename T>
NVSHMEMX_EFA_GDA_API_ENTRY T nvshmemi_efa_gda_api_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op) {
    nvshmemi_efa_gda_api_before_proxy(pe);
    T ret;
    nvshmemi_proxy_amo_fetch<T>(rptr, (void *)&ret, value, compare, pe, op);
    efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_ATOMIC, -1);
    return ret;
}

template <typename T>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_rma_p(void *rptr, const T value, int pe) {
    uint64_t v = 0;
    memcpy(&v, &value, sizeof(T));
    nvshmemi_efa_gda_api_p_leader(rptr, v, (uint32_t)sizeof(T), pe);
}
/* g: a GDA read of the value into a scratch slot of this PE (registered for GDA on its rails only), the GDA
 * quiet (a read's data is in place at its completion), then the slot's value. A slot is taken with its lock word,
 * starting from the calling thread's index, so the threads of a launch rarely contend; the wait for a slot is
 * bounded like every wait (its holder is itself inside a bounded quiet). false: through the proxy (no scratch, a GPU
 * that does not order GPUDirect RDMA writes, or the address is outside GDA's regions). */
NVSHMEMX_EFA_GDA_API_FN bool nvshmemi_efa_gda_api_g_leader(void *rptr, uint32_t bytes, int pe, uint64_t *out) {
    const uint32_t n = nvshmemi_efa_gda_api_d.flags & NVSHMEMX_EFA_GDA_API_READS_OVER_GDA ? nvshmemi_efa_gda_api_d.g_slots : 0u;
    if (!n) return false;
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    nvshmemx_efa_gda_api_shared_t *sh = nvshmemi_efa_gda_api_d.shared;
    uint32_t i = (uint32_t)(blockIdx.x * blockDim.x + threadIdx.x) % n;
    efa_gda_bound b = efa_gda_bound_of(efa_gda_ro(&s->timeout_ns));
    while (atomicCAS(&sh->g_lock[i], 0u, 1u) != 0u) {
        if (efa_gda_expired(b)) efa_gda_check(s, NVSHMEMX_EFA_GDA_ERR_TIMEOUT, "g (waiting for a scratch slot)", rptr, nullptr, pe, bytes);
        i = (i + 1) % n;
    }
    __threadfence();
    unsigned long long *slot = &sh->g_value[i];
    const int err = efa_gda_get_nbi_on(s, efa_gda_api_rail(s, pe), slot, rptr, bytes, pe);
    if (!err) efa_gda_check_quiet(s, efa_gda_quiet(s), "quiet of a g", pe);
    else if (!efa_gda_api_no_region(err)) efa_gda_check(s, err, "g", rptr, slot, pe, bytes);
    *out = err ? 0 : *(volatile unsigned long long *)slot;
    __threadfence();
    atomicExch(&sh->g_lock[i], 0u);
    return !err;
}

template <typename T>
NVSHMEMX_EFA_GDA_API_ENTRY T nvshmemi_efa_gda_api_rma_g(void *rptr, int pe) {
    uint64_t v = 0;
    T r;
    if (nvshmemi_efa_gda_api_g_leader(rptr, (uint32_t)sizeof(T), pe, &v)) {
        memcpy(&r, &v, sizeof(T));
        return r;
    }
    nvshmemi_efa_gda_api_before_proxy(pe);
    r = nvshmemi_proxy_rma_g<T>(rptr, pe); /* waits for its own completion */
    efa_gda_api_sent_to_proxy(NVSHMEMX_EFA_GDA_API_PROXY_GET_VALUE, -1);
    return r;
}

/* --- scopes: the group's first thread does the work, as NVSHMEM's proxy path does ------------------------- */

template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe) {
    if (!nvshmemi_thread_id_in_threadgroup<SCOPE>()) nvshmemi_efa_gda_api_rma_nbi_leader(rptr, lptr, bytes, pe, channel_op == NVSHMEMI_OP_PUT);
}
template <threadgroup_t SCOPE, nvshmemi_op_t channel_op>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_rma(void *rptr, void *lptr, size_t bytes, int pe) {
    if (!nvshmemi_thread_id_in_threadgroup<SCOPE>()) {
        nvshmemi_efa_gda_api_rma_leader(rptr, lptr, bytes, pe, channel_op == NVSHMEMI_OP_PUT);
        /* The source may be reused (or the fetched data read) by this thread; a group syncs after the call. */
        if (SCOPE == NVSHMEMI_THREADGROUP_THREAD) __threadfence_block();
    }
}
template <threadgroup_t SCOPE>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal,
                                                 nvshmemi_amo_t sig_op, int pe, bool is_nbi) {
    if (!nvshmemi_thread_id_in_threadgroup<SCOPE>()) {
        nvshmemi_efa_gda_api_put_signal_leader(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi);
        if (!is_nbi && SCOPE == NVSHMEMI_THREADGROUP_THREAD) __threadfence_block();
    }
}

NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_quiet_leader(bool use_membar) {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
    efa_gda_check_quiet(s, efa_gda_quiet(s), "quiet", s->my_pe);
    efa_gda_api_flush_written(s);
    efa_gda_api_proxy_quiet_flush(s, use_membar);
    if (use_membar) __threadfence_system();
}
template <threadgroup_t SCOPE>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_quiet(bool use_membar) {
    if (!nvshmemi_thread_id_in_threadgroup<SCOPE>()) nvshmemi_efa_gda_api_quiet_leader(use_membar);
    nvshmemi_threadgroup_sync<SCOPE>();
}

/* A fence is a quiet of both paths: EFA delivers writes in no order, and what the proxy sent must be done before
 * a GDA write ordered after it is posted, and placed where the proxy's NIC is not that write's (a flush of every PE
 * the proxy wrote to: efa_gda_api_proxy_quiet_flush). (A GDA write ordered before a proxy operation is handled by
 * that operation: nvshmemi_efa_gda_api_before_proxy.) */
NVSHMEMX_EFA_GDA_API_FN void nvshmemi_efa_gda_api_fence_leader() {
    nvshmemx_efa_gda_device_state_t *s = nvshmemi_efa_gda_api_d.state;
#ifndef NVSHMEMX_EFA_GDA_API_TEST_FENCE_NO_GDA_QUIET
    efa_gda_check_quiet(s, efa_gda_quiet(s), "fence", s->my_pe);
#endif
    efa_gda_api_proxy_quiet_flush(s, false);
}
template <threadgroup_t SCOPE>
NVSHMEMX_EFA_GDA_API_ENTRY void nvshmemi_efa_gda_api_fence() {
    if (!nvshmemi_thread_id_in_threadgroup<SCOPE>()) nvshmemi_efa_gda_api_fence_leader();
    nvshmemi_threadgroup_sync<SCOPE>();
}

#endif /* __CUDA_ARCH__ || !__CUDACC__ */
#endif
