/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (include nvshmemx_efa_gda_device.cuh, which includes every part): what every other
 * part uses. The macros, the layout checks, the loads and stores, a send queue's counters and constants
 * (efa_gda_sq), the clock and the bound of a wait (efa_gda_bound), and the error texts. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_BASE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_BASE_CUH

#include <stdio.h>
#include <string.h>

#include "nvshmemx_efa_gda.h"
#include "nvshmemx_efa_gda_wqe.h"

#define EFA_GDA_DEV __device__ __forceinline__
/* Where the trap messages go: device printf; the host test build captures them. */
#ifndef EFA_GDA_REPORT
#define EFA_GDA_REPORT printf
#endif
/* Spin-wait hint: nothing on the GPU; the host test build (threads standing in for warps on few cores)
 * defines it to yield. */
#ifndef EFA_GDA_SPIN_PAUSE
#define EFA_GDA_SPIN_PAUSE()
#endif

static_assert(offsetof(nvshmemx_efa_gda_qp_t, sq_reserved) % 16 == 0, "the poster's counters are one 16-byte load");
static_assert(offsetof(nvshmemx_efa_gda_device_state_t, rail) % 64 == 0 && sizeof(nvshmemx_efa_gda_rail_t) % 64 == 0 &&
                  offsetof(nvshmemx_efa_gda_rail_t, qp) == 0,
              "each rail's queue sits at a fixed, aligned offset");
static_assert(offsetof(nvshmemx_efa_gda_device_state_t, rail[0].qp) == 64 && offsetof(nvshmemx_efa_gda_device_state_t, rail[0].hot) == 192 &&
                  offsetof(nvshmemx_efa_gda_device_state_t, rail[0].signal_src) == 288,
              "rail 0's queue, hot regions and signal scratch keep ABI 4's offsets");
static_assert(offsetof(nvshmemx_efa_gda_rail_t, hot) % 32 == 0 && sizeof(nvshmemx_efa_gda_hot_local_t) == 32,
              "hot entries are read with 16-byte loads");
static_assert(offsetof(nvshmemx_efa_gda_rail_t, fast) % 64 == 0 && sizeof(nvshmemx_efa_gda_fast_peer_t) == 64,
              "a fast peer entry is one 64-byte block");
static_assert(sizeof(nvshmemx_efa_gda_regions_t) == 16 && sizeof(nvshmemx_efa_gda_region_t) == 24,
              "region table header and entries");
static_assert(offsetof(nvshmemx_efa_gda_qp_t, sq_buf) == 0 && offsetof(nvshmemx_efa_gda_qp_t, sq_entries) == 16 &&
                  offsetof(nvshmemx_efa_gda_qp_t, wqe_size) == 28 && offsetof(nvshmemx_efa_gda_qp_t, cq_entry_size) == 48 &&
                  offsetof(nvshmemx_efa_gda_qp_t, max_rdma_size) == 56,
              "the queue constants are read with three 16-byte loads (efa_gda_sq_of)");
static_assert(offsetof(nvshmemx_efa_gda_qp_t, slot_done) == 64 && offsetof(nvshmemx_efa_gda_qp_t, slot_pe) == 72 &&
                  offsetof(nvshmemx_efa_gda_qp_t, error_pe) == 116 && sizeof(nvshmemx_efa_gda_qp_t) == 128,
              "slot_pe is read with slot_done in one 16-byte load; the queue stays 128 bytes (rail[0].hot is at 192)");
static_assert(offsetof(nvshmemx_efa_gda_device_state_t, timeout_ns) == 40, "ABI 7: timeout_ns took the first reserved word");

EFA_GDA_DEV uint32_t efa_gda_load(const uint32_t *p) { return *(const volatile uint32_t *)p; }
EFA_GDA_DEV uint64_t efa_gda_load64(const uint64_t *p) { return *(const volatile uint64_t *)p; }
EFA_GDA_DEV void efa_gda_store(uint32_t *p, uint32_t v) { *(volatile uint32_t *)p = v; }
EFA_GDA_DEV void efa_gda_store64(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; }

/* --- the post path's ordering towards the NIC --------------------------------------------------------------
 * A post stores its WQE into the SQ ring (the NIC's LLQ BAR, or host memory on softefa/efaemu), fences, stores the
 * doorbell, fences, and then hands the doorbell turn on (sq_rung, GPU memory). Why each fence is enough:
 * - WQE before doorbell: the fence before the doorbell store orders every earlier store of the thread (the WQE's
 *   words, the slot's PE note, a signal's scratch value) before every later one, at system scope, so the NIC has
 *   the whole WQE before it sees the doorbell that covers it. A warp batch's lanes each fence their own WQE before
 *   the leader rings (a fence orders only its own thread's stores).
 * - doorbell after earlier doorbells: the fence after the doorbell store orders it before the sq_rung store that
 *   lets the next slot's poster ring; that poster rings only after reading it (a load its doorbell store depends
 *   on, with its own fence between them), so doorbell values reach the NIC in slot order and never go back.
 * Neither needs sequential consistency (no poster orders a store before a load of another poster's store through
 * these fences: every hand-off is a store read by a later load), nor an acquire: a release fence orders every
 * earlier load and store of the thread before every later store, which is all both arguments use (the sq_rung
 * load a poster spins on comes before its fence, the doorbell store after it). The post path acquires nothing
 * through these fences: the counters and turns it reads are volatile loads, the hot slots too (efa_gda_load_hot),
 * and the constants are read-only. So the fence is fence.release.sys, not __threadfence_system's fence.sc.sys
 * (MEMBAR.SC.SYS) nor the fence.acq_rel.sys of NCCL's EFA GDA ring (gin_efa_gda.h, ringDoorbell): on one H200
 * the acquire half made every post fetch its constants again from L2 (n_rails first), and the release fence took
 * the shared post from 1.77x to 1.64x the minimal sequence and the owned one from 1.21x to 1.16x
 * (bench/results/efa-gda-post-cost.md, 2026-12-02). */
EFA_GDA_DEV void efa_gda_fence_nic() {
#if defined(__CUDA_ARCH__)
    asm volatile("fence.release.sys;" ::: "memory");
#else
    __threadfence_system();
#endif
}
/* Stores into the NIC's memory (SQ ring words, the doorbell): st.mmio.relaxed.sys, which the PTX ISA performs
 * exactly once, at the address written, never merged with another store (a volatile store promises that only among
 * volatile accesses), as NCCL's EFA path stores them. The host test build stores through volatile. */
EFA_GDA_DEV void efa_gda_mmio_store(uint32_t *p, uint32_t v) {
#if defined(__CUDA_ARCH__)
    asm volatile("st.mmio.relaxed.sys.global.b32 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "r"(v) : "memory");
#else
    *(volatile uint32_t *)p = v;
#endif
}
EFA_GDA_DEV void efa_gda_mmio_store64(uint64_t *p, uint64_t v) {
#if defined(__CUDA_ARCH__)
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "l"(v) : "memory");
#else
    *(volatile uint64_t *)p = v;
#endif
}

/* Fields that never change while kernels run (the host writes the state's constants, queue constants, peer
 * addresses and each region table before a kernel can see them) go through the read-only cache. */
EFA_GDA_DEV uint32_t efa_gda_ro(const uint32_t *p) {
#if defined(__CUDA_ARCH__)
    return __ldg(p);
#else
    return *p;
#endif
}
EFA_GDA_DEV uint64_t efa_gda_ro(const uint64_t *p) {
#if defined(__CUDA_ARCH__)
    return __ldg((const unsigned long long *)p);
#else
    return *p;
#endif
}
template <typename T>
EFA_GDA_DEV T *efa_gda_ro(T *const *p) {
    return (T *)(uintptr_t)efa_gda_ro((const uint64_t *)p);
}
/* Two read-only 64-bit words, 16-byte aligned, in one load. */
EFA_GDA_DEV void efa_gda_ro2(const void *p, uint64_t *a, uint64_t *b) {
#if defined(__CUDA_ARCH__)
    const ulonglong2 v = __ldg((const ulonglong2 *)p);
    *a = v.x;
    *b = v.y;
#else
    *a = ((const uint64_t *)p)[0];
    *b = ((const uint64_t *)p)[1];
#endif
}
/* Two 64-bit words the host may write while kernels run (hot slots), 16-byte aligned, in one volatile load: no
 * fence of the post path invalidates L1 (efa_gda_fence_nic is a release), so the load goes past it, and a slot
 * the host retired is not served from a line cached before. Each word is read whole, before or after the host
 * wrote it, and either is safe to use (nvshmemx_efa_gda_hot_local_t). */
EFA_GDA_DEV void efa_gda_load2(const void *p, uint64_t *a, uint64_t *b) {
#if defined(__CUDA_ARCH__)
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p));
#else
    *a = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
    *b = __atomic_load_n((const uint64_t *)p + 1, __ATOMIC_RELAXED);
#endif
}
EFA_GDA_DEV nvshmemx_efa_gda_region_t efa_gda_ro(const nvshmemx_efa_gda_region_t *r) {
    nvshmemx_efa_gda_region_t v;
    v.base = efa_gda_ro(&r->base);
    v.length = efa_gda_ro(&r->length);
    v.key = efa_gda_ro(&r->key);
    v.valid = efa_gda_ro(&r->valid);
    return v;
}
EFA_GDA_DEV nvshmemx_efa_gda_peer_t efa_gda_ro(const nvshmemx_efa_gda_peer_t *p) {
    const uint64_t w = efa_gda_ro((const uint64_t *)p);
    nvshmemx_efa_gda_peer_t v;
    memcpy(&v, &w, sizeof v);
    return v;
}

/* The counters a poster needs, read together. */
struct efa_gda_counters {
    uint32_t reserved, rung, retired, fatal;
};
EFA_GDA_DEV efa_gda_counters efa_gda_load_counters(const nvshmemx_efa_gda_qp_t *qp) {
    efa_gda_counters c;
#if defined(__CUDA_ARCH__)
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.reserved), "=r"(c.rung), "=r"(c.retired), "=r"(c.fatal)
                 : "l"(&qp->sq_reserved));
#else
    c.reserved = efa_gda_load(&qp->sq_reserved);
    c.rung = efa_gda_load(&qp->sq_rung);
    c.retired = efa_gda_load(&qp->sq_retired);
    c.fatal = efa_gda_load(&qp->fatal);
#endif
    return c;
}

/* Reserves n slots: the fetch-and-add on sq_reserved, as one plain atom (no warp aggregation: a post is one
 * lane's, and the aggregation's shuffle would wait for the atom before anything else could be issued). */
EFA_GDA_DEV uint32_t efa_gda_fetch_slots(nvshmemx_efa_gda_qp_t *qp, uint32_t n) {
#if defined(__CUDA_ARCH__)
    uint32_t old;
    asm volatile("atom.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(&qp->sq_reserved), "r"(n) : "memory");
    return old;
#else
    return atomicAdd(&qp->sq_reserved, n);
#endif
}

/* A send queue's constants, read once per operation (three 16-byte loads): every load after a post's
 * system fence misses L1 (the fence invalidates it) and costs a trip to L2, so none is left for later. */
struct efa_gda_sq {
    nvshmemx_efa_gda_qp_t *qp;
    uint8_t *buf;
    uint32_t *db;
    uint16_t *slot_pe; /* NULL: errors name no peer */
    uint32_t entries, log2, max_batch, wqe_size;
    uint64_t max_rdma;
    uint64_t timeout_ns; /* the bound of this queue's waits (efa_gda_bound); 0: none */
};
/* With timeout_ns as the bound of its waits. The state's queues are opened through efa_gda_sq_of(s, qp). */
EFA_GDA_DEV efa_gda_sq efa_gda_sq_of(nvshmemx_efa_gda_qp_t *qp, uint64_t timeout_ns) {
    efa_gda_sq q;
    uint64_t buf, db, e01, e23, unused, max_rdma, slot_done, slot_pe;
    efa_gda_ro2(&qp->sq_buf, &buf, &db);
    efa_gda_ro2(&qp->sq_entries, &e01, &e23);
    efa_gda_ro2(&qp->cq_entry_size, &unused, &max_rdma);
    efa_gda_ro2(&qp->slot_done, &slot_done, &slot_pe);
    (void)unused;
    (void)slot_done;
    q.qp = qp;
    q.slot_pe = (uint16_t *)(uintptr_t)slot_pe;
    q.timeout_ns = timeout_ns;
    q.buf = (uint8_t *)(uintptr_t)buf;
    q.db = (uint32_t *)(uintptr_t)db;
    q.entries = (uint32_t)e01;
    q.log2 = (uint32_t)(e01 >> 32);
    q.max_batch = (uint32_t)e23;
    q.wqe_size = (uint32_t)(e23 >> 32);
    q.max_rdma = max_rdma;
    return q;
}
/* Without a bound: the low-level form for code that drives a queue of its own (tests, benchmarks). */
EFA_GDA_DEV efa_gda_sq efa_gda_sq_of(nvshmemx_efa_gda_qp_t *qp) { return efa_gda_sq_of(qp, 0); }
/* A queue of the state s, its waits bounded by s->timeout_ns (read-only, at a fixed offset: it goes out with
 * the queue's own loads). */
EFA_GDA_DEV efa_gda_sq efa_gda_sq_of(const nvshmemx_efa_gda_device_state_t *s, nvshmemx_efa_gda_qp_t *qp) {
    return efa_gda_sq_of(qp, efa_gda_ro(&s->timeout_ns));
}

/* Nanoseconds from the GPU's global timer (the host test build supplies EFA_GDA_HOST_NOW_NS). */
EFA_GDA_DEV uint64_t efa_gda_now_ns() {
#if defined(__CUDA_ARCH__)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(EFA_GDA_HOST_NOW_NS)
    return EFA_GDA_HOST_NOW_NS();
#else
    return 0;
#endif
}

/* The bound of one wait (or of several in sequence, like a quiet over many queues: they share it): at most
 * timeout_ns without progress. A wait that can see progress reports it (efa_gda_progress: the retired prefix it
 * waits on moved) and its clock starts again, so a long wait over a backlog the NIC keeps completing (GB-sized puts,
 * an alltoall into a busy receiver) is a slow network, not ERR_TIMEOUT and a dead queue (review 3, finding 4). The
 * clock is read only once the wait has spun (most waits end before) and then every 16th spin, so a spin loop costs
 * no more than before. No clock (0): no bound. */
struct efa_gda_bound {
    uint64_t timeout_ns, start_ns;
    uint32_t spins, mark;
};
EFA_GDA_DEV efa_gda_bound efa_gda_bound_of(uint64_t timeout_ns) {
    efa_gda_bound b;
    b.timeout_ns = timeout_ns;
    b.start_ns = 0;
    b.spins = 0;
    b.mark = 0;
    return b;
}
/* The wait's measure of progress (a counter the NIC's completions move): when it changed since the last call, the
 * bound starts again. */
EFA_GDA_DEV void efa_gda_progress(efa_gda_bound &b, uint32_t mark) {
#ifdef NVSHMEMX_EFA_GDA_TEST_ELAPSED_BOUND /* the negative control: the bound on elapsed time it replaced */
    (void)b, (void)mark;
#else
    if (mark == b.mark) return;
    b.mark = mark;
    b.start_ns = 0;
#endif
}
/* Called on each spin of a wait: true once the wait has lasted past the bound. */
EFA_GDA_DEV bool efa_gda_expired(efa_gda_bound &b) {
    if (!b.timeout_ns || (b.spins++ & 15u) != 0) return false;
    const uint64_t now = efa_gda_now_ns();
    if (!now) return false;
    if (!b.start_ns) {
        b.start_ns = now;
        return false;
    }
    return now - b.start_ns > b.timeout_ns;
}

EFA_GDA_DEV const char *efa_gda_strerror(int err) {
    switch (err) {
    case NVSHMEMX_EFA_GDA_OK: return "success";
    case NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION: return "local buffer not in a region registered for GDA";
    case NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION: return "address not in the symmetric heap GDA registered";
    case NVSHMEMX_EFA_GDA_ERR_BAD_PE: return "PE out of range";
    case NVSHMEMX_EFA_GDA_ERR_TOO_MANY_WQES: return "more WQEs at once than max_batch or the send queue allow";
    case NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE: return "heap region GDA could not register on every PE (see nvshmemx_efa_gda_status)";
    case NVSHMEMX_EFA_GDA_ERR_BAD_CQE: return "a completion that is not this queue's: the GDA queue is unusable";
    case NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN: return "receive completions overwritten before they were taken";
    case NVSHMEMX_EFA_GDA_ERR_NO_CREDITS: return "the receiver took no immediates within the credit timeout";
    case NVSHMEMX_EFA_GDA_ERR_BAD_SIGNAL: return "signal not 4 or 8 aligned bytes, or the device state has no signal scratch (transport older than ABI 4)";
    case NVSHMEMX_EFA_GDA_ERR_BAD_RAIL: return "rail out of range (nvshmemx_efa_gda_rails)";
    case NVSHMEMX_EFA_GDA_ERR_NO_OWNED_QUEUE:
        return "no free owned queue on this rail (all taken, or NVSHMEM_EFA_GDA_OWNED_QUEUES is 0): disown one, or post on the shared queue";
    case NVSHMEMX_EFA_GDA_ERR_TIMEOUT:
        return "a wait passed NVSHMEM_EFA_GDA_TIMEOUT_MS (the NIC completed nothing more, or a peer stopped taking data): the queue is unusable";
    case EFA_IO_COMP_STATUS_FLUSHED: return "NIC: flushed (the queue pair is in error)";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR: return "NIC: QP internal error (malformed WQE)";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH: return "NIC: invalid address handle";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY: return "NIC: invalid lkey";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH: return "NIC: bad length";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS: return "NIC: remote bad address or rkey";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN: return "NIC: bad destination QP";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR: return "NIC: receiver not ready";
    case EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER: return "NIC: the target has not inserted this PE in its address vector";
    case EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE: return "NIC: remote unreachable";
    default: return err > 0 && err < 64 ? "NIC: error completion" : "unknown error";
    }
}

#endif
