// GPU proof of the EFA GDA device path against the software EFA, which completes out of order.
//
//   efa_gda_proof [--quick] [--reorder SPEC] [--seed N]      the proof (default reorder large:65536:8)
//   (any mode) --idle-us N: how long the software EFA holds reordered WQEs when no doorbell comes (default
//   200; raise it under compute-sanitizer, whose slowed kernels otherwise leave every queue idle)
//   efa_gda_proof --concurrent-quiet new|old|owned [--quick]  quiet under concurrency: new, count-based, or
//                                                             each checker on a queue of its own (efa_gda_owned)
//   efa_gda_proof --signals new|old [--quick]                 DeepEP-shaped signals: after completion, or right after the post
//   efa_gda_proof --bench [--reorder SPEC]                    posted WQEs/s through the software EFA
//   efa_gda_proof --trap-test                                 a failed post traps with a message
//
// Proof: for 1, 4 and 32 posting warps, rounds of RDMA write / read / write-with-immediate and warp batches
// (1 B .. 4 MiB, random offsets, disjoint destinations per round) go from PE 0 to PE 1 through a 256-slot SQ
// (max_batch 16, max RDMA size 1 MiB) over a heap registered as three regions, so transfers split at 1 MiB
// and at a region end; immediates are flow controlled by credits (window 256, refreshed by RDMA reads).
// After each round one thread quiets, PE 1 drains its immediates, every destination byte is compared with
// its source (gaps must still hold the poison), every immediate is checked, and the WQE count and
// request-id sum are compared with what was posted. Then negative cases.
// Concurrent quiet: 1, 4 and 32 warps doing "256 KiB put -> quiet -> check the target" while 32 or more
// other warps keep posting a 64 B put every millisecond, with large writes completing after 32 later WQEs;
// exit 0 only when no check saw the target unwritten (the count-based quiet of the previous release is kept
// here, test-only, to show that it does). With owned, each checker warp owns a queue (ABI 6): its large put
// and 4 small puts after it (which overtake it) go through that queue, and the owner's quiet must cover them.
// Signals: DeepEP's low-latency dispatch shaped on the GPU. Token warps put tokens (8 KiB and 2 KiB, so that the
// short ones overtake) to their expert's next slot and bump the expert's finish counter (release); a signal warp
// per expert waits for it (acquire) and writes the count (-n - 1) to the expert's slot with efa_gda_signal (new:
// after every earlier WQE completed) or efa_gda_write_value_nbi (old: right after the post, forbidden); a
// receiver warp polls the count slots and checks, whenever one is non-zero, that all n tokens are in place. The
// host zeroes the slots between rounds (another phase). Exit 0 only when no count was seen before its tokens.
// Exit status 0 only when every check passed and the emulator saw no unexpected protocol violation.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "../backends/cuda_memory.h"
#include "../softefa.h"
#include "nvshmemx_efa_gda_device.cuh"

using softefa::CudaMemory;
using softefa::Device;

#define CK(call) SOFTEFA_CUDA(call)

namespace {

constexpr uint64_t kBuf = 64ull << 20;
constexpr uint64_t kSplit = 40ull << 20;  // dst is registered as [0, 40 MiB) and [40 MiB, 64 MiB)
constexpr uint32_t kSq = 256, kCq = 256, kRx = 512, kMaxBatch = 16, kImmPerRound = 200;
constexpr uint64_t kMaxRdma = 1ull << 20;
constexpr uint32_t kLkeySrc = 0x101, kLkeyDstLo = 0x102, kLkeyDstHi = 0x103;
constexpr uint32_t kRkeySrc = 0x201, kRkeyDstLo = 0x202, kRkeyDstHi = 0x203;
constexpr uint32_t kRkeyCredits = 0x300, kLkeyCredits0 = 0x301, kRkeyCredits0 = 0x302, kLkeySignal = 0x401;
constexpr uint8_t kPoison = 0xA5;

enum OpType : uint8_t { kWrite = 0, kRead = 1, kWriteImm = 2, kBatch = 3 };

struct Op {
    uint8_t type;
    uint32_t imm;
    uint64_t src_off, dst_off, len;
};
// A warp task: one op posted by the warp (lane 0), or up to 32 small ops posted by the lanes under shared
// doorbells.
struct Task {
    uint32_t first, count;
};

__device__ int g_first_err;

__device__ __host__ uint8_t src_byte(uint64_t i, uint32_t seed) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 29;
    return (uint8_t)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

__global__ void fill_src(uint8_t *p, uint64_t n, uint32_t seed) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = src_byte(i, seed);
}

__device__ void note_err(int e) {
    if (e) atomicCAS(&g_first_err, 0, e);
}

__global__ void post_round(nvshmemx_efa_gda_device_state_t *s, uint8_t *src, uint8_t *dst, const Op *ops,
                           const Task *tasks, uint32_t ntasks, uint32_t nwarps) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint32_t lane = threadIdx.x & 31;
    for (uint32_t t = warp; t < ntasks; t += nwarps) {
        const Task task = tasks[t];
        const Op &o0 = ops[task.first];
        if (o0.type == kBatch) {
            const bool want = lane < task.count;
            const Op &o = ops[task.first + (want ? lane : 0)];
            int e = efa_gda_rma_nbi_warp_batch(s, want, NVSHMEMX_EFA_GDA_OP_WRITE, src + o.src_off, dst + o.dst_off,
                                               o.len, 1);
            if (want) note_err(e);
        } else if (o0.type == kWrite) {
            note_err(efa_gda_put_nbi_warp(s, dst + o0.dst_off, src + o0.src_off, o0.len, 1));
        } else if (lane == 0) {
            if (o0.type == kRead) note_err(efa_gda_get_nbi(s, dst + o0.dst_off, src + o0.src_off, o0.len, 1));
            else note_err(efa_gda_put_imm_nbi(s, dst + o0.dst_off, src + o0.src_off, o0.len, 1, o0.imm));
        }
        __syncwarp();
    }
}

// PE 0 quiets, then PE 1 takes expected_imm immediates from its receive CQ.
__global__ void quiet_and_drain(nvshmemx_efa_gda_device_state_t *s0, nvshmemx_efa_gda_device_state_t *s1,
                                uint32_t expected_imm, unsigned long long *imm_sum, uint32_t *imm_count, int *quiet_ret) {
    *quiet_ret = efa_gda_quiet(s0);
    uint32_t got = 0;
    unsigned long long sum = 0;
    while (got < expected_imm) {
        uint32_t imm, bytes;
        int pe = -1;
        const int r = efa_gda_rx_poll(s1, &imm, &bytes, &pe);
        if (r < 0 || (r == 1 && pe != 0)) {
            *quiet_ret = r < 0 ? -r : 0x7777;
            break;
        }
        if (r == 1) {
            got++;
            sum += imm ^ ((unsigned long long)bytes << 32);
        }
    }
    *imm_sum = sum;
    *imm_count = got;
}

// Every op range must hold its source bytes (one block per op).
__global__ void verify_ranges(const uint8_t *dst, const Op *ops, uint32_t nops, uint32_t seed, unsigned long long *bad) {
    for (uint32_t k = blockIdx.x; k < nops; k += gridDim.x) {
        const Op o = ops[k];
        for (uint64_t i = threadIdx.x; i < o.len; i += blockDim.x)
            if (dst[o.dst_off + i] != src_byte(o.src_off + i, seed)) atomicAdd(bad, 1ull);
    }
}

__global__ void verify_gaps(const uint8_t *dst, const uint8_t *covered, uint64_t n, unsigned long long *bad) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        if (!covered[i] && dst[i] != kPoison) atomicAdd(bad, 1ull);
}

__device__ efa_gda_piece raw_piece(uint64_t local, uint32_t lkey, uint64_t remote, uint32_t rkey, uint64_t len) {
    efa_gda_piece p;
    p.local = local;
    p.lkey = lkey;
    p.remote = remote;
    p.rkey = rkey;
    p.len = len;
    return p;
}

// Raw single-WQE post, bypassing the splitter and the region lookup, for the negative cases.
__global__ void post_raw(nvshmemx_efa_gda_device_state_t *s, uint64_t local, uint32_t lkey, uint64_t remote, uint32_t rkey,
                         uint64_t len, int *quiet_ret) {
    uint32_t end;
    int e = efa_gda_post_one(&s->rail[0].qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, s->rail[0].peers[1], raw_piece(local, lkey, remote, rkey, len),
                                                 false, 0),
                             &end);
    *quiet_ret = e ? e : efa_gda_quiet(s);
}

// Symmetric put then quiet (the device's own checks).
__global__ void put_quiet(nvshmemx_efa_gda_device_state_t *s, void *dest, const void *src, uint64_t len, int *ret, int pe = 1) {
    int e = efa_gda_put_nbi(s, dest, src, len, pe);
    *ret = e ? e : efa_gda_quiet(s);
}

// A deliberately wrong poster: stages 2 * max_batch WQEs, holds them ~2 ms, then rings them with one
// doorbell. The software EFA must call this out.
__global__ void post_overbatch(nvshmemx_efa_gda_device_state_t *s, uint8_t *src, uint8_t *dst, int *quiet_ret) {
    nvshmemx_efa_gda_qp_t *qp = &s->rail[0].qp;
    const uint32_t n = 2 * qp->max_batch;
    const uint32_t slot = atomicAdd(&qp->sq_reserved, n);
    for (uint32_t i = 0; i < n; i++)
        efa_gda_write_wqe(qp, slot + i,
                          efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, s->rail[0].peers[1],
                                       raw_piece((uint64_t)(src + 8 * i), kLkeySrc, (uint64_t)(dst + 8 * i), kRkeyDstLo, 8), false, 0));
    __threadfence_system();
    const long long t0 = clock64();
    while (clock64() - t0 < 4000000) {
    }
    efa_gda_ring(qp, slot, n);
    *quiet_ret = efa_gda_quiet(s);
}

// Credits: warp 0 of block 0 sends n immediates; block 1 takes them, sleeping between takes so the sender
// runs out of credits; a receiver that never takes any (take_every_ns = 0) leaves the sender to time out.
__global__ void credits_kernel(nvshmemx_efa_gda_device_state_t *s0, nvshmemx_efa_gda_device_state_t *s1, uint8_t *src,
                               uint8_t *dst, uint32_t n, uint64_t take_every_ns, int *send_ret, uint32_t *received,
                               int *recv_ret) {
    if (threadIdx.x != 0) return;
    if (blockIdx.x == 0) {
        int e = 0;
        uint32_t i = 0;
        for (; i < n && !e; i++) e = efa_gda_put_imm_nbi(s0, dst + 64 * (i % 1024), src, 64, 1, 0xC0DE0000u + i);
        send_ret[0] = e;
        send_ret[1] = (int)(e ? i - 1 : i);
        return;
    }
    if (take_every_ns == 0) return;
    uint32_t got = 0;
    const uint64_t give_up = efa_gda_now_ns() + 20000000000ull;  // a sender that stopped must not hang the receiver
    while (got < n) {
        if (efa_gda_now_ns() > give_up) {
            *recv_ret = -NVSHMEMX_EFA_GDA_ERR_TIMEOUT;
            break;
        }
        const uint64_t t0 = efa_gda_now_ns();
        while (efa_gda_now_ns() - t0 < take_every_ns) {
        }
        uint32_t imm, bytes;
        int pe;
        const int r = efa_gda_rx_poll(s1, &imm, &bytes, &pe);
        if (r < 0) {
            *recv_ret = r;
            break;
        }
        if (r == 1) got++;
    }
    *received = got;
}

// Immediates past the receiver's window, with credits skipped: the receiver's CQ overruns on purpose.
__global__ void overrun_kernel(nvshmemx_efa_gda_device_state_t *s0, nvshmemx_efa_gda_device_state_t *s1, uint8_t *src,
                               uint8_t *dst, uint32_t n, int *post_ret, int *poll_ret) {
    uint32_t end;
    int e = 0;
    for (uint32_t i = 0; i < n && !e; i++)
        e = efa_gda_post_one(&s0->rail[0].qp, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, s0->rail[0].peers[1],
                                                  raw_piece((uint64_t)src, kLkeySrc, (uint64_t)dst, kRkeyDstLo, 8), true, i),
                             &end);
    *post_ret = e ? e : efa_gda_quiet(s0);
    uint32_t imm, bytes;
    int pe;
    *poll_ret = efa_gda_rx_poll(s1, &imm, &bytes, &pe);
}

// The count-based quiet of the previous release ("as many completions as WQEs reserved when it started"),
// kept only so the concurrent test can show it returning before the caller's own WQE completed.
__device__ int count_based_quiet(nvshmemx_efa_gda_qp_t *qp) {
    const uint32_t target = efa_gda_load(&qp->sq_reserved);
    while ((int32_t)(efa_gda_load(&qp->cq_head) - target) < 0) efa_gda_poll_cq(qp);
    __threadfence_system();
    return (int)efa_gda_load(&qp->error);
}

// Warps [0, checkers): per iteration, fill their 256 KiB source with a fresh pattern, put it, quiet (new or
// count-based), and check the target. The other warps post a 64 B put every gap_ns until every checker is
// done: paced, so that the SQ keeps room and other warps' completions keep arriving while a large write is
// held, which is when a count can be satisfied by the wrong WQEs.
enum QuietMode { kQuietNew = 0, kQuietCountBased = 1, kQuietOwned = 2 };
__global__ void concurrent_quiet_kernel(nvshmemx_efa_gda_device_state_t *s, uint8_t *src, uint8_t *dst, uint32_t checkers,
                                        uint32_t iters, uint64_t large, int mode, uint64_t gap_ns, unsigned *done,
                                        unsigned long long *early, int *err) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint32_t lane = threadIdx.x & 31;
    if (warp < checkers) {
        uint64_t *from = (uint64_t *)(src + warp * large);
        const uint8_t *to = dst + warp * large;
        efa_gda_owned o;
        if (mode == kQuietOwned && lane == 0) {
            const int e = efa_gda_own(s, 1, to, from, &o);
            if (e) atomicCAS(err, 0, e);
        }
        for (uint32_t it = 0; it < iters; it++) {
            const uint8_t pattern = (uint8_t)(it * 37 + warp + 1);
            const uint64_t word = 0x0101010101010101ull * pattern;
            for (uint64_t i = lane; i < large / 8; i += 32) from[i] = word;
            __threadfence();
            __syncwarp();
            int e = 0;
            if (lane == 0 && mode == kQuietOwned) {
                e = efa_gda_put_nbi(o, (void *)to, from, large);
                // Small puts after it on its own queue: they complete first (large writes wait for 32 later WQEs).
                for (int j = 0; j < 4 && !e; j++)
                    e = efa_gda_put_nbi(o, (void *)(dst + (14ull << 20) + warp * 256 + j * 64), from, 64);
                const int q = efa_gda_quiet_owned(o);
                if (!e) e = q;
            } else if (lane == 0) {
                e = efa_gda_put_nbi(s, (void *)to, from, large, 1);
                const int q = mode == kQuietCountBased ? count_based_quiet(&s->rail[0].qp) : efa_gda_quiet(s);
                if (!e) e = q;
            }
            e = __shfl_sync(0xffffffffu, e, 0);
            if (e) atomicCAS(err, 0, e);
            bool bad = false;
            for (uint64_t i = lane * 4096; i < large; i += 32 * 4096) bad |= *(const volatile uint8_t *)(to + i) != pattern;
            if (lane == 0) bad |= *(const volatile uint8_t *)(to + large - 1) != pattern;
            if (__any_sync(0xffffffffu, bad) && lane == 0) atomicAdd(early, 1ull);
        }
        if (mode == kQuietOwned && lane == 0) efa_gda_disown(&o);
        if (lane == 0) atomicAdd(done, 1u);
    } else if (lane == 0) {
        const uint64_t base = (32 + 8) * large + (uint64_t)(warp - checkers) * 65536;
        for (uint64_t i = 0; *(volatile unsigned *)done < checkers; i++) {
            const int e = efa_gda_put_nbi(s, dst + base + (i % 1000) * 64, src + base, 64, 1);
            if (e) {
                atomicCAS(err, 0, e);
                break;
            }
            const uint64_t t0 = efa_gda_now_ns();
            while (efa_gda_now_ns() - t0 < gap_ns && *(volatile unsigned *)done < checkers) {
            }
        }
    }
}

__global__ void final_quiet(nvshmemx_efa_gda_device_state_t *s, int *err) {
    const int e = efa_gda_quiet(s);
    if (e) atomicCAS(err, 0, e);
}

// A failed post through efa_gda_check (what the DeepEP shim does) stops the kernel with a message.
__global__ void trap_kernel(nvshmemx_efa_gda_device_state_t *s, uint8_t *unregistered, uint8_t *dst) {
    const int e = efa_gda_put_nbi_warp(s, dst, unregistered, 64, 1);
    if ((threadIdx.x & 31) == 0) efa_gda_check(e, "put_nbi_warp", dst, unregistered, 1, 64);
}

__global__ void bench_post(nvshmemx_efa_gda_device_state_t *s, uint8_t *src, uint8_t *dst, uint64_t len, uint32_t per_warp,
                           uint32_t nwarps) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if ((threadIdx.x & 31) != 0 || warp >= nwarps) return;
    const uint64_t span = kSplit / nwarps;
    for (uint32_t i = 0; i < per_warp; i++) {
        const uint64_t off = warp * span + (i * len) % (span - len);
        note_err(efa_gda_put_nbi(s, dst + off, src + off, len, 1));
    }
}

// A send queue as the software EFA serves it: kSq slots of 64 B rung through db, completions into kCq 32-byte
// entries at cq, RDMA split at kMaxRdma; its address (qpn, ah, qkey) as peers use it.
softefa::QpConfig send_queue(uint8_t *sq, volatile uint32_t *db, uint8_t *cq, uint16_t qpn, uint16_t ah, uint32_t qkey) {
    softefa::QpConfig c = {};
    c.sq = sq;
    c.db = db;
    c.sq_entries = kSq;
    c.max_batch = kMaxBatch;
    c.cq = cq;
    c.cq_entries = kCq;
    c.cq_entry_size = 32;
    c.qpn = qpn;
    c.ah = ah;
    c.qkey = qkey;
    c.max_rdma_size = kMaxRdma;
    return c;
}

struct Rig {
    CudaMemory mem{0};
    Device emu{mem};
    uint8_t *src = nullptr, *dst = nullptr, *covered = nullptr;
    uint8_t *sq_host = nullptr, *sq_dev = nullptr;
    uint32_t *db_host = nullptr, *db_dev = nullptr;
    uint8_t *cq = nullptr, *rx_cq_buf = nullptr;
    uint32_t *slot_done = nullptr;
    nvshmemx_efa_gda_qp_t *qp = nullptr, *qp1 = nullptr;  // in the device states
    nvshmemx_efa_gda_rx_cq_t *rx = nullptr;
    nvshmemx_efa_gda_peer_t *peers = nullptr;
    nvshmemx_efa_gda_region_t *regions_mem = nullptr;
    nvshmemx_efa_gda_regions_t *table = nullptr;
    uint64_t *cred_words = nullptr;  // PE 0: consumed, sent, seen, landing [2 each]; PE 1 the same
    uint64_t *signal_src = nullptr;  // PE 0's signal scratch, one word per SQ slot
    uint32_t *cred_locks = nullptr;
    nvshmemx_efa_gda_region_t *peer_consumed = nullptr;  // [2] for PE 0, [2] for PE 1
    nvshmemx_efa_gda_credits_t *credits = nullptr;        // [2]
    nvshmemx_efa_gda_device_state_t *state = nullptr, *state1 = nullptr;
    nvshmemx_efa_gda_device_state_t host_state{}, host_state1{};
    int qp_a = 0, qp_b = 0;
    // Owned queues of PE 0 (ABI 6), each its own QP (qpn 20 + k) with its ring, GPU CQ and slot marks.
    uint32_t n_owned = 0;
    nvshmemx_efa_gda_qp_t *owned = nullptr;
    uint32_t *owner = nullptr;

    explicit Rig(const softefa::Reorder &reorder, uint32_t n_owned_ = 0) : n_owned(n_owned_) {
        CK(cudaMalloc(&src, kBuf));
        CK(cudaMalloc(&dst, kBuf));
        CK(cudaMalloc(&covered, kBuf));
        // The SQ ring and doorbell play the NIC BAR: host memory the GPU writes through a mapping.
        CK(cudaHostAlloc(&sq_host, kSq * 64, cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&sq_dev, sq_host, 0));
        CK(cudaHostAlloc(&db_host, 4096, cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&db_dev, db_host, 0));
        memset(sq_host, 0, kSq * 64);
        memset(db_host, 0, 4096);
        CK(cudaMalloc(&cq, kCq * 32));
        CK(cudaMemset(cq, 0, kCq * 32));
        CK(cudaMalloc(&rx_cq_buf, kRx * 32));
        CK(cudaMemset(rx_cq_buf, 0, kRx * 32));
        std::vector<uint32_t> done(kSq);
        for (uint32_t i = 0; i < kSq; i++) done[i] = i - kSq;
        CK(cudaMalloc(&slot_done, kSq * 4));
        CK(cudaMemcpy(slot_done, done.data(), kSq * 4, cudaMemcpyHostToDevice));

        nvshmemx_efa_gda_qp_t q = {};
        q.sq_buf = sq_dev;
        q.sq_db = db_dev;
        q.sq_entries = kSq;
        q.sq_log2 = 8;
        q.max_batch = kMaxBatch;
        q.wqe_size = 64;
        q.cq_buf = cq;
        q.cq_entries = kCq;
        q.cq_log2 = 8;
        q.cq_entry_size = 32;
        q.qp_num = 10;
        q.max_rdma_size = kMaxRdma;
        q.slot_done = slot_done;
        host_state.rail[0].qp = q;
        q.qp_num = 11;  // PE 1 never posts; its QP number is what its receive CQEs carry
        host_state1.rail[0].qp = q;
        nvshmemx_efa_gda_rx_cq_t r = {};
        r.cq_buf = rx_cq_buf;
        r.cq_entries = kRx;
        r.cq_log2 = 9;
        r.cq_entry_size = 32;
        r.qp_num = 11;
        CK(cudaMalloc(&rx, sizeof r));
        CK(cudaMemcpy(rx, &r, sizeof r, cudaMemcpyHostToDevice));

        nvshmemx_efa_gda_peer_t p[2] = {{1, 10, 0x5A5A}, {2, 11, 0x6B6B}};
        CK(cudaMalloc(&peers, sizeof p));
        CK(cudaMemcpy(peers, p, sizeof p, cudaMemcpyHostToDevice));
        // Regions src, dst [0, 40 MiB), dst [40 MiB, 64 MiB), one row each: PE 0's entry (lkey), PE 0's view
        // and PE 1's view with the rkey (PE 1 holds the same buffers: the two views are the same).
        std::vector<nvshmemx_efa_gda_region_t> reg = {
            {(uint64_t)src, kBuf, kLkeySrc, 1}, {(uint64_t)src, kBuf, kRkeySrc, 1}, {(uint64_t)src, kBuf, kRkeySrc, 1},
            {(uint64_t)dst, kSplit, kLkeyDstLo, 1}, {(uint64_t)dst, kSplit, kRkeyDstLo, 1}, {(uint64_t)dst, kSplit, kRkeyDstLo, 1},
            {(uint64_t)dst + kSplit, kBuf - kSplit, kLkeyDstHi, 1}, {(uint64_t)dst + kSplit, kBuf - kSplit, kRkeyDstHi, 1},
            {(uint64_t)dst + kSplit, kBuf - kSplit, kRkeyDstHi, 1}};
        const nvshmemx_efa_gda_regions_t head = {3, 2, 1, 0};
        CK(cudaMalloc(&table, sizeof head + reg.size() * sizeof reg[0]));
        CK(cudaMemcpy(table, &head, sizeof head, cudaMemcpyHostToDevice));
        regions_mem = (nvshmemx_efa_gda_region_t *)(table + 1);
        CK(cudaMemcpy(regions_mem, reg.data(), reg.size() * sizeof reg[0], cudaMemcpyHostToDevice));

        CK(cudaMalloc(&cred_words, 16 * 8));
        CK(cudaMemset(cred_words, 0, 16 * 8));
        CK(cudaMalloc(&cred_locks, 4 * 4));
        CK(cudaMemset(cred_locks, 0, 16));
        // PE 0's view of its own consumed[] (a refused post's filler reads 0 bytes of it) and of PE 1's.
        nvshmemx_efa_gda_region_t pc[4] = {{(uint64_t)cred_words, 16, kRkeyCredits0, 1}, {(uint64_t)(cred_words + 8), 16, kRkeyCredits, 1},
                                           {0, 0, 0, 0}, {0, 0, 0, 0}};
        CK(cudaMalloc(&peer_consumed, sizeof pc));
        CK(cudaMemcpy(peer_consumed, pc, sizeof pc, cudaMemcpyHostToDevice));
        nvshmemx_efa_gda_credits_t c[2] = {};
        for (int pe = 0; pe < 2; pe++) {
            uint64_t *w = cred_words + 8 * pe;
            c[pe].consumed = w;
            c[pe].sent = w + 2;
            c[pe].seen = w + 4;
            c[pe].landing = w + 6;
            c[pe].lock = cred_locks + 2 * pe;
            c[pe].lkey = kLkeyCredits0;
            c[pe].peer_consumed = peer_consumed + 2 * pe;
        }
        CK(cudaMalloc(&credits, sizeof c));
        CK(cudaMemcpy(credits, c, sizeof c, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&signal_src, kSq * 8));
        CK(cudaMemset(signal_src, 0, kSq * 8));

        for (nvshmemx_efa_gda_device_state_t *h : {&host_state, &host_state1}) {
            h->abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
            h->n_pes = 2;
            h->n_rails = 1;
            h->rail[0].imm_window = kRx / 2;
            h->rail[0].peers = peers;
            h->regions = table;
            h->credit_timeout_ns = 10000000000ull;
            for (int pe = 0; pe < 2; pe++) h->rail[0].fast[pe].addr = p[pe];
        }
        host_state.my_pe = 0;
        host_state.rail[0].credits = credits;
        host_state.rail[0].signal_src = signal_src;
        host_state.rail[0].signal_lkey = kLkeySignal;
        host_state1.my_pe = 1;
        host_state1.rail[0].rx_cq = rx;
        host_state1.rail[0].credits = credits + 1;
        // The three regions in hot slots 0..2 of PE 0, as the host fills them (every PE's view the same length).
        for (int k = 0; k < 3; k++) {
            const nvshmemx_efa_gda_region_t *row = &reg[3 * k];
            host_state.rail[0].hot[k] = {row[0].base, row[0].length, row[0].key, 1, 0};
            for (int pe = 0; pe < 2; pe++) host_state.rail[0].fast[pe].hot[k] = {row[1 + pe].base, row[1 + pe].key, 1};
        }
        std::vector<softefa::QpConfig> owned_cfg;
        if (n_owned) {
            std::vector<nvshmemx_efa_gda_qp_t> oq(n_owned);
            for (uint32_t k = 0; k < n_owned; k++) {
                uint8_t *ring_h, *ring_d, *ocq;
                uint32_t *odb_h, *odb_d, *odone;
                CK(cudaHostAlloc(&ring_h, kSq * 64, cudaHostAllocMapped));
                CK(cudaHostGetDevicePointer((void **)&ring_d, ring_h, 0));
                memset(ring_h, 0, kSq * 64);
                CK(cudaHostAlloc(&odb_h, 4096, cudaHostAllocMapped));
                CK(cudaHostGetDevicePointer((void **)&odb_d, odb_h, 0));
                memset(odb_h, 0, 4096);
                CK(cudaMalloc(&ocq, kCq * 32));
                CK(cudaMemset(ocq, 0, kCq * 32));
                CK(cudaMalloc(&odone, kSq * 4));
                CK(cudaMemcpy(odone, done.data(), kSq * 4, cudaMemcpyHostToDevice));
                oq[k] = host_state.rail[0].qp;
                oq[k].sq_buf = ring_d;
                oq[k].sq_db = odb_d;
                oq[k].cq_buf = ocq;
                oq[k].qp_num = 20 + k;
                oq[k].slot_done = odone;
                owned_cfg.push_back(send_queue(ring_h, odb_h, ocq, (uint16_t)(20 + k), 1, 0x5A5A));
            }
            CK(cudaMalloc(&owned, n_owned * sizeof oq[0]));
            CK(cudaMemcpy(owned, oq.data(), n_owned * sizeof oq[0], cudaMemcpyHostToDevice));
            CK(cudaMalloc(&owner, n_owned * 4));
            CK(cudaMemset(owner, 0, n_owned * 4));
            host_state.rail[0].owned = owned;
            host_state.rail[0].owner = owner;
            host_state.rail[0].n_owned = n_owned;
        }
        CK(cudaMalloc(&state, sizeof host_state));
        CK(cudaMalloc(&state1, sizeof host_state1));
        qp = &state->rail[0].qp;
        qp1 = &state1->rail[0].qp;
        CK(cudaMemcpy(state, &host_state, sizeof host_state, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(state1, &host_state1, sizeof host_state1, cudaMemcpyHostToDevice));

        // The NIC's view: PE 1 is the target QP at ah 2 / qpn 11, with the remote keys.
        emu.add_region({kLkeySrc, (uint64_t)src, kBuf, false, false});
        emu.add_region({kLkeyDstLo, (uint64_t)dst, kSplit, false, false});
        emu.add_region({kLkeyDstHi, (uint64_t)dst + kSplit, kBuf - kSplit, false, false});
        // Remote read and write, as NVSHMEM registers its heap: a refused post's filler is a 0-byte write into the next
        // PE's first region (efa_gda_fill_slot), which is this one (1x H200: write-protected, every filler failed).
        emu.add_region({kRkeySrc, (uint64_t)src, kBuf, true, true});
        emu.add_region({kRkeyDstLo, (uint64_t)dst, kSplit, false, true});
        emu.add_region({kRkeyDstHi, (uint64_t)dst + kSplit, kBuf - kSplit, false, true});
        emu.add_region({kRkeyCredits, (uint64_t)(cred_words + 8), 16, true, false});
        emu.add_region({kRkeyCredits0, (uint64_t)cred_words, 16, true, false});
        emu.add_region({kLkeyCredits0, (uint64_t)cred_words, 64, false, false});
        emu.add_region({kLkeySignal, (uint64_t)signal_src, kSq * 8, false, false});
        qp_a = emu.add_qp(send_queue(sq_host, db_host, cq, 10, 1, 0x5A5A));
        static uint32_t idle_db = 0;  // the target posts nothing
        static uint8_t idle_sq[kSq * 64];
        static uint8_t *idle_cq = nullptr;
        CK(cudaMalloc(&idle_cq, kCq * 32));
        softefa::QpConfig b = send_queue(idle_sq, &idle_db, idle_cq, 11, 2, 0x6B6B);
        b.rx_cq = rx_cq_buf;
        b.rx_cq_entries = kRx;
        b.rx_cq_entry_size = 32;
        // The NIC cannot see the GPU consumer; the model reads it to report an overrun.
        b.rx_consumed = [this] { return mem.read_u32(&rx->cq_head); };
        qp_b = emu.add_qp(b);
        emu.av_insert(qp_b, 1, 10);  // PE 1 inserted PE 0 before any RMA
        emu.av_insert(qp_a, 1, 10);  // and PE 0 itself, as the host inserts every PE
        for (const softefa::QpConfig &c : owned_cfg) {
            emu.add_qp(c);
            emu.av_insert(qp_b, 1, c.qpn);  // PE 1 inserted PE 0's owned queues too
        }
        emu.set_reorder(reorder);
        emu.start();
    }
    ~Rig() { emu.stop(); }
    // The header before the rails (the queues' counters are the device's own from the start).
    void upload_state() {
        const size_t head = offsetof(nvshmemx_efa_gda_device_state_t, rail);
        CK(cudaMemcpy(state, &host_state, head, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(state1, &host_state1, head, cudaMemcpyHostToDevice));
    }
    nvshmemx_efa_gda_qp_t read_qp() {
        nvshmemx_efa_gda_qp_t q;
        CK(cudaMemcpy(&q, qp, sizeof q, cudaMemcpyDeviceToHost));
        return q;
    }
    // Fills (1) or retires (0) PE 0's hot slot k, as the host does: one 4-byte store.
    void set_hot_present(int k, uint32_t v) {
        host_state.rail[0].hot[k].present = v;
        CK(cudaMemcpy(&state->rail[0].hot[k].present, &v, 4, cudaMemcpyHostToDevice));
    }
    uint64_t refreshes() {
        nvshmemx_efa_gda_credits_t c;
        CK(cudaMemcpy(&c, credits, sizeof c, cudaMemcpyDeviceToHost));
        return c.refreshes;
    }
    void clear_error() {
        nvshmemx_efa_gda_qp_t q = read_qp();
        q.error = 0;
        q.error_req_id = 0;
        q.error_count = 0;
        q.fatal = 0;  // a local failure made it unusable: the next case starts on a usable queue
        CK(cudaMemcpy(qp, &q, sizeof q, cudaMemcpyHostToDevice));
    }
};

Rig *g_rig = nullptr;
// Violations raised on purpose by negative cases: [begin, end) index ranges of the model's list.
std::vector<std::pair<size_t, size_t>> g_expected;
size_t expected_count() {
    size_t n = 0;
    for (auto &r : g_expected) n += r.second - r.first;
    return n;
}
void dump_hang(const char *what);

// Waits for the default stream with a watchdog, so a device-side hang becomes a failure with context.
bool wait_gpu(const char *what, double limit_s = 60) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        cudaError_t e = cudaStreamQuery(0);
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
            exit(2);
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) {
            dump_hang(what);
            printf("RESULT: FAIL (device-side hang in %s after %.0f s)\n", what, limit_s);
            fflush(stdout);
            _exit(3);  // a hung kernel would block every CUDA call on the way out
        }
        usleep(100);
    }
}

// Reads the device-side queue state through a stream that does not wait for the hung kernel.
void dump_hang(const char *what) {
    Rig &r = *g_rig;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    nvshmemx_efa_gda_qp_t q;
    uint8_t cqe[64];
    CK(cudaMemcpyAsync(&q, r.qp, sizeof q, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(cqe, r.cq, sizeof cqe, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    // No emulator accessor here: a stuck emulator would hold its lock.
    printf("HANG in %s: device reserved=%u rung=%u retired=%u cq_head=%u fatal=%u lock=%u error=%u | doorbell(host)=%u | "
           "cqe0 flags=%02x status=%u | sq slot0 ctrl1=%02x ctrl2=%02x\n",
           what, q.sq_reserved, q.sq_rung, q.sq_retired, q.cq_head, q.fatal, q.cq_lock, q.error, *r.db_host, cqe[3], cqe[2],
           r.sq_host[2], r.sq_host[3]);
}

uint64_t log_uniform_size(std::mt19937_64 &rng) {
    std::uniform_real_distribution<double> u(0.0, 22.0);  // 2^0 .. 2^22 = 4 MiB
    uint64_t n = (uint64_t)std::pow(2.0, u(rng));
    return std::max<uint64_t>(1, std::min<uint64_t>(n, 4ull << 20));
}

// Pieces the device makes of a transfer whose dst-side range is [dst_off, dst_off + len): split at the
// dst region end and at the max RDMA size, greedily, as efa_gda_rma_nbi does. Returns the count and the
// last piece's length.
uint64_t pieces(uint64_t dst_off, uint64_t len, uint64_t *last) {
    uint64_t n = 0, o = dst_off, left = len;
    do {
        uint64_t p = std::min(left, kMaxRdma);
        if (o < kSplit) p = std::min(p, kSplit - o);
        o += p;
        left -= p;
        *last = p;
        n++;
    } while (left > 0);
    return n;
}

struct Totals {
    uint64_t ops = 0, wqes = 0, bytes = 0, rounds = 0, imms = 0;
};

int run_config(Rig &rig, uint32_t nwarps, uint32_t rounds, uint32_t seed, std::mt19937_64 &rng, Totals &tot) {
    const uint32_t threads = nwarps >= 8 ? 256 : nwarps * 32;
    const uint32_t blocks = (nwarps * 32 + threads - 1) / threads;
    Op *d_ops;
    Task *d_tasks;
    CK(cudaMalloc(&d_ops, 4096 * sizeof(Op)));
    CK(cudaMalloc(&d_tasks, 4096 * sizeof(Task)));
    unsigned long long *d_bad, *d_imm_sum;
    uint32_t *d_imm_count;
    int *d_quiet;
    CK(cudaMalloc(&d_bad, 8));
    CK(cudaMalloc(&d_imm_sum, 8));
    CK(cudaMalloc(&d_imm_count, 4));
    CK(cudaMalloc(&d_quiet, 4));
    int failures = 0;
    std::vector<uint8_t> covered(kBuf);
    for (uint32_t round = 0; round < rounds; round++) {
        std::vector<Op> ops;
        std::vector<Task> tasks;
        uint64_t cursor = rng() % 4096;
        uint32_t imm_count = 0;
        unsigned long long imm_sum = 0;
        uint64_t wqes = 0;
        std::fill(covered.begin(), covered.end(), 0);
        auto room = [&](uint64_t len) { return cursor + len + 4096 < kBuf; };
        auto place = [&](uint8_t type, uint64_t len) {
            Op o{};
            o.type = type;
            o.len = len;
            o.src_off = rng() % (kBuf - len);
            o.dst_off = cursor;
            o.imm = (uint32_t)rng();
            cursor += len + rng() % 4096;
            memset(covered.data() + o.dst_off, 1, len);
            ops.push_back(o);
            uint64_t last;
            wqes += pieces(o.dst_off, len, &last);
            return o;
        };
        while (ops.size() < 3000 && tasks.size() < 400) {
            const int kind = (int)(rng() % 4);
            if (kind == kBatch) {
                const uint32_t count = 1 + rng() % 32;
                const uint32_t first = (uint32_t)ops.size();
                uint32_t placed = 0;
                for (; placed < count; placed++) {
                    const uint64_t len = 1 + rng() % 65536;
                    if (cursor < kSplit && cursor + len > kSplit) cursor = kSplit;  // a batch lane posts one WQE
                    if (!room(len)) break;
                    place(kBatch, len);
                }
                if (placed) tasks.push_back({first, placed});
                if (placed < count) break;
            } else {
                const uint64_t len = log_uniform_size(rng);
                if (!room(len)) break;
                if (kind == kWriteImm && imm_count >= kImmPerRound) continue;
                Op o = place((uint8_t)kind, len);
                tasks.push_back({(uint32_t)ops.size() - 1, 1});
                if (kind == kWriteImm) {
                    imm_count++;
                    uint64_t last;
                    pieces(o.dst_off, len, &last);
                    imm_sum += o.imm ^ ((unsigned long long)last << 32);
                }
            }
        }
        CK(cudaMemset(rig.dst, kPoison, kBuf));
        CK(cudaMemcpy(rig.covered, covered.data(), kBuf, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_ops, ops.data(), ops.size() * sizeof(Op), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_tasks, tasks.data(), tasks.size() * sizeof(Task), cudaMemcpyHostToDevice));
        CK(cudaMemset(d_bad, 0, 8));
        const uint64_t refreshes_before = rig.refreshes();
        post_round<<<blocks, threads>>>(rig.state, rig.src, rig.dst, d_ops, d_tasks, (uint32_t)tasks.size(), nwarps);
        quiet_and_drain<<<1, 1>>>(rig.state, rig.state1, imm_count, d_imm_sum, d_imm_count, d_quiet);
        if (!wait_gpu("post+quiet")) return failures + 1;
        verify_ranges<<<1024, 256>>>(rig.dst, d_ops, (uint32_t)ops.size(), seed, d_bad);
        verify_gaps<<<1024, 256>>>(rig.dst, rig.covered, kBuf, d_bad);
        if (!wait_gpu("verify")) return failures + 1;
        unsigned long long bad, got_sum;
        uint32_t got_imms;
        int quiet_ret, first_err;
        CK(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&got_sum, d_imm_sum, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&got_imms, d_imm_count, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&quiet_ret, d_quiet, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpyFromSymbol(&first_err, g_first_err, 4));
        const nvshmemx_efa_gda_qp_t q = rig.read_qp();
        wqes += rig.refreshes() - refreshes_before;  // credit reads are WQEs too
        const uint64_t expect_wqes = tot.wqes + wqes;
        uint64_t req_sum = 0;
        for (uint64_t sl = 0; sl < expect_wqes; sl++) req_sum += sl & 0xffff;
        std::string why;
        if (bad) why += " " + std::to_string(bad) + " wrong destination bytes;";
        if (quiet_ret || first_err) why += " device error " + std::to_string(quiet_ret) + "/" + std::to_string(first_err) + ";";
        if (got_imms != imm_count || got_sum != imm_sum)
            why += " immediates " + std::to_string(got_imms) + "/" + std::to_string(imm_count) + (got_sum != imm_sum ? " (wrong values)" : "") + ";";
        if (q.sq_reserved != (uint32_t)expect_wqes || q.sq_retired != (uint32_t)expect_wqes || q.sq_rung != (uint32_t)expect_wqes ||
            q.cq_head != (uint32_t)expect_wqes)
            why += " WQEs reserved/rung/retired/consumed " + std::to_string(q.sq_reserved) + "/" + std::to_string(q.sq_rung) + "/" +
                   std::to_string(q.sq_retired) + "/" + std::to_string(q.cq_head) + " want " + std::to_string(expect_wqes) + ";";
        if (q.req_id_sum != req_sum) why += " request-id sum differs (a WQE completed twice or never);";
        if (!why.empty()) {
            printf("FAIL warps=%u round=%u:%s\n", nwarps, round, why.c_str());
            failures++;
            break;
        }
        tot.ops += ops.size();
        tot.wqes += wqes;
        tot.imms += imm_count;
        for (auto &o : ops) tot.bytes += o.len;
        tot.rounds++;
    }
    cudaFree(d_ops);
    cudaFree(d_tasks);
    cudaFree(d_bad);
    cudaFree(d_imm_sum);
    cudaFree(d_imm_count);
    cudaFree(d_quiet);
    return failures;
}

int negative_cases(Rig &rig) {
    int failures = 0;
    int *d_ret, ret;
    CK(cudaMalloc(&d_ret, 64));
    auto report = [&](bool ok, const std::string &what) {
        printf("%s negative: %s\n", ok ? "ok" : "FAIL", what.c_str());
        failures += !ok;
    };
    auto expect = [&](const char *name, int want, uint32_t want_count = 1) {
        if (!wait_gpu(name)) {
            failures++;
            return;
        }
        CK(cudaMemcpy(&ret, d_ret, 4, cudaMemcpyDeviceToHost));
        const nvshmemx_efa_gda_qp_t q = rig.read_qp();
        // A local failure (statuses 1..6) makes the queue unusable (ABI 8); a peer's, on this queue that notes no PEs,
        // stays the queue's error without doing so.
        const uint32_t want_fatal = want >= 1 && want <= 6 ? (uint32_t)want : 0u;
        const bool ok = ret == want && (want >= 0x100 || (q.error == (uint32_t)want && q.error_count == want_count && q.fatal == want_fatal));
        report(ok, std::string(name) + " -> device error " + std::to_string(ret) + " (want " + std::to_string(want) +
                       "), error_count " + std::to_string(q.error_count) + ", fatal " + std::to_string(q.fatal) + " (want " +
                       std::to_string(want_fatal) + ")");
        rig.clear_error();
    };
    CK(cudaMemset(rig.dst, kPoison, 4096));
    post_raw<<<1, 1>>>(rig.state, (uint64_t)rig.src, 0x7777, (uint64_t)rig.dst, kRkeyDstLo, 64, d_ret);
    expect("bad lkey", EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY);
    post_raw<<<1, 1>>>(rig.state, (uint64_t)rig.src, kLkeySrc, (uint64_t)rig.dst, kRkeyDstLo, kMaxRdma + 1, d_ret);
    expect("oversize WQE (max RDMA size + 1)", EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH);
    post_raw<<<1, 1>>>(rig.state, (uint64_t)rig.src, kLkeySrc, (uint64_t)rig.dst + kSplit - 8, kRkeyDstLo, 64, d_ret);
    expect("remote range past the region", EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS);
    rig.emu.av_remove(rig.qp_b, 1, 10);
    post_raw<<<1, 1>>>(rig.state, (uint64_t)rig.src, kLkeySrc, (uint64_t)rig.dst, kRkeyDstLo, 64, d_ret);
    expect("target without the initiator in its AV", EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER);
    rig.emu.av_insert(rig.qp_b, 1, 10);
    uint8_t head[4096];
    CK(cudaMemcpy(head, rig.dst, 4096, cudaMemcpyDeviceToHost));
    bool untouched = true;
    for (uint8_t b : head) untouched &= b == kPoison;
    report(untouched, "failed WQEs moved no data");

    // Device-side refusals. A refused post already holds the slot it reserved with its lookup's loads: the
    // slot is filled with a WQE that moves nothing (a 0-byte read of PE 0's own credit counters), which
    // must complete OK, move no byte and leave the queue going.
    const softefa::Stats refused_before = rig.emu.stats();
    const nvshmemx_efa_gda_qp_t q_before = rig.read_qp();
    CK(cudaMemset(rig.dst, kPoison, 4096));
    CK(cudaMemset(rig.dst + kSplit, kPoison, 4096));
    uint8_t *outside;
    CK(cudaMalloc(&outside, 4096));
    put_quiet<<<1, 1>>>(rig.state, rig.dst, outside, 64, d_ret);
    expect("source in no registered region", NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION);
    put_quiet<<<1, 1>>>(rig.state, outside, rig.src, 64, d_ret);
    expect("destination outside the symmetric heap", NVSHMEMX_EFA_GDA_ERR_NO_REMOTE_REGION);
    for (int pe : {2, -1, 1 << 30}) {  // memcheck: the fixed-offset peer entry is read in bounds whatever pe is
        put_quiet<<<1, 1>>>(rig.state, rig.dst, rig.src, 64, d_ret, pe);
        expect(("PE " + std::to_string(pe) + " of 2").c_str(), NVSHMEMX_EFA_GDA_ERR_BAD_PE);
    }
    nvshmemx_efa_gda_region_t hi;  // row 2 (dst [40 MiB, 64 MiB)), PE 1's entry
    CK(cudaMemcpy(&hi, rig.regions_mem + 2 * 3 + 2, sizeof hi, cudaMemcpyDeviceToHost));
    nvshmemx_efa_gda_region_t dead = hi;
    dead.valid = 0;
    CK(cudaMemcpy(rig.regions_mem + 2 * 3 + 2, &dead, sizeof dead, cudaMemcpyHostToDevice));
    rig.set_hot_present(2, 0);  // an unreachable region is never hot
    put_quiet<<<1, 1>>>(rig.state, rig.dst + kSplit + 64, rig.src, 64, d_ret);
    expect("destination in a region PE 1 could not register", NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE);
    CK(cudaMemcpy(rig.regions_mem + 2 * 3 + 2, &hi, sizeof hi, cudaMemcpyHostToDevice));
    rig.set_hot_present(2, 1);
    CK(cudaMemset(d_ret, 0, 4));
    final_quiet<<<1, 1>>>(rig.state, d_ret);
    if (!wait_gpu("quiet after the refusals")) return failures + 1;
    CK(cudaMemcpy(&ret, d_ret, 4, cudaMemcpyDeviceToHost));
    {
        const nvshmemx_efa_gda_qp_t q = rig.read_qp();
        const softefa::Stats st = rig.emu.stats();
        uint8_t lo[4096], hi_bytes[4096];
        CK(cudaMemcpy(lo, rig.dst, 4096, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hi_bytes, rig.dst + kSplit, 4096, cudaMemcpyDeviceToHost));
        bool poisoned = true;
        for (int i = 0; i < 4096; i++) poisoned &= lo[i] == kPoison && hi_bytes[i] == kPoison;
        const uint32_t filled = q.sq_reserved - q_before.sq_reserved;
        report(ret == 0 && q.error == 0 && filled == 6 && q.sq_retired == q.sq_reserved && st.wqes - refused_before.wqes == 6 &&
                   st.errors == refused_before.errors && st.bytes == refused_before.bytes && poisoned && !rig.emu.qp_in_error(rig.qp_a),
               "6 refused posts: " + std::to_string(filled) + " slots filled, " + std::to_string(st.wqes - refused_before.wqes) +
                   " WQEs completed with " + std::to_string(st.errors - refused_before.errors) + " errors and " +
                   std::to_string(st.bytes - refused_before.bytes) + " bytes moved, quiet " + std::to_string(ret) +
                   ", targets untouched " + std::to_string(poisoned));
    }

    // Credits. Drain anything left, then a sender of 4 x window immediates against a receiver taking one
    // every 20 us: all arrive, the sender refreshed its credits, no overrun.
    const uint32_t window = kRx / 2;
    uint32_t *d_received;
    CK(cudaMalloc(&d_received, 4));
    CK(cudaMemset(d_received, 0, 4));
    CK(cudaMemset(d_ret, 0, 64));
    const uint64_t refreshes_before = rig.refreshes();
    const uint64_t overruns_before = rig.emu.stats().rx_overruns;
    credits_kernel<<<2, 32>>>(rig.state, rig.state1, rig.src, rig.dst, 4 * window, 20000, d_ret, d_received, d_ret + 4);
    if (!wait_gpu("credits")) return failures + 1;
    int send[2], recv_ret;
    uint32_t received;
    CK(cudaMemcpy(send, d_ret, 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&recv_ret, d_ret + 4, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&received, d_received, 4, cudaMemcpyDeviceToHost));
    const uint64_t refreshed = rig.refreshes() - refreshes_before;
    report(send[0] == 0 && (uint32_t)send[1] == 4 * window && received == 4 * window && recv_ret == 0 && refreshed > 0 &&
               rig.emu.stats().rx_overruns == overruns_before,
           "credits: " + std::to_string(4 * window) + " immediates to a slow receiver (window " + std::to_string(window) +
               "): sent " + std::to_string(send[1]) + ", received " + std::to_string(received) + ", credit reads " +
               std::to_string(refreshed) + ", RX overruns " + std::to_string(rig.emu.stats().rx_overruns - overruns_before));
    // A receiver that takes nothing: the sender stops at the window and fails with NO_CREDITS (timeout 50 ms).
    rig.host_state.credit_timeout_ns = 50000000;
    rig.upload_state();
    CK(cudaMemset(d_ret, 0, 64));
    credits_kernel<<<2, 32>>>(rig.state, rig.state1, rig.src, rig.dst, 2 * window, 0, d_ret, d_received, d_ret + 4);
    if (!wait_gpu("credits timeout")) return failures + 1;
    CK(cudaMemcpy(send, d_ret, 8, cudaMemcpyDeviceToHost));
    report(send[0] == NVSHMEMX_EFA_GDA_ERR_NO_CREDITS && (uint32_t)send[1] == window &&
               rig.emu.stats().rx_overruns == overruns_before,
           "credits: a receiver that takes nothing stops the sender at the window (" + std::to_string(send[1]) +
               " sent) with ERR_NO_CREDITS (" + std::to_string(send[0]) + "), its CQ intact");
    rig.host_state.credit_timeout_ns = 10000000000ull;
    rig.upload_state();

    // Overrun on purpose: kRx + 8 more immediates with the credits skipped while PE 1 takes nothing.
    CK(cudaMemset(d_ret, 0, 64));
    const size_t vb = rig.emu.violations().size();
    overrun_kernel<<<1, 1>>>(rig.state, rig.state1, rig.src, rig.dst, kRx + 8, d_ret, d_ret + 1);
    if (!wait_gpu("RX overrun")) return failures + 1;
    int oret[2];
    CK(cudaMemcpy(oret, d_ret, 8, cudaMemcpyDeviceToHost));
    auto v = rig.emu.violations();
    bool named = v.size() > vb;
    for (size_t i = vb; i < v.size(); i++) named &= v[i].what.find("RX CQ overrun") != std::string::npos;
    report(oret[0] == 0 && oret[1] == -NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN && named,
           "RX overrun on purpose: rx_poll returns " + std::to_string(oret[1]) + " (want -" +
               std::to_string(NVSHMEMX_EFA_GDA_ERR_RX_OVERRUN) + "), the software EFA reports " + std::to_string(v.size() - vb) +
               (named ? ": " + v.back().what : ""));
    g_expected.push_back({vb, v.size()});

    // Breaking max_batch puts the QP in the error state (send_queue.h), so it comes last, before the QP error case.
    const size_t before = rig.emu.violations().size();
    post_overbatch<<<1, 1>>>(rig.state, rig.src, rig.dst, d_ret);
    if (!wait_gpu("over-batched doorbell")) return failures + 1;
    v = rig.emu.violations();
    bool caught = v.size() > before;
    for (size_t i = before; i < v.size(); i++) caught &= v[i].what.find("written past doorbell") != std::string::npos;
    report(caught, "a poster staging " + std::to_string(2 * kMaxBatch) + " WQEs under one doorbell (max_batch " +
                       std::to_string(kMaxBatch) + ") is reported by the software EFA" + (caught ? ": " + v.back().what : ""));
    g_expected.push_back({before, v.size()});
    rig.clear_error();  // its QP_INTERNAL_ERROR made the queue unusable (ABI 8); the NIC's QP stays in error

    // QP error: everything after it completes FLUSHED and moves nothing.
    rig.emu.set_qp_error(rig.qp_a);
    CK(cudaMemset(rig.dst, kPoison, 4096));
    put_quiet<<<1, 1>>>(rig.state, rig.dst, rig.src, 64, d_ret);
    expect("after a QP error", EFA_IO_COMP_STATUS_FLUSHED);
    CK(cudaMemcpy(head, rig.dst, 4096, cudaMemcpyDeviceToHost));
    untouched = true;
    for (uint8_t b : head) untouched &= b == kPoison;
    report(untouched, "the flushed WQE moved no data");
    cudaFree(d_ret);
    cudaFree(d_received);
    cudaFree(outside);
    return failures;
}

int concurrent_quiet(Rig &rig, int mode, bool quick) {
    const uint64_t large = 256 << 10;
    unsigned *d_done;
    unsigned long long *d_early;
    int *d_err;
    CK(cudaMalloc(&d_done, 4));
    CK(cudaMalloc(&d_early, 8));
    CK(cudaMalloc(&d_err, 4));
    int failures = 0;
    printf("quiet under test: %s\n", mode == kQuietCountBased ? "count-based (previous release, test-only copy)"
                                     : mode == kQuietOwned     ? "each checker's own queue (efa_gda_owned, efa_gda_quiet_owned)"
                                                               : "retired prefix (this release)");
    for (uint32_t checkers : {1u, 4u, 32u}) {
        const uint32_t iters = quick ? 4 : (checkers == 32 ? 8 : 32);
        const uint32_t warps = checkers + 32;
        CK(cudaMemset(d_done, 0, 4));
        CK(cudaMemset(d_early, 0, 8));
        CK(cudaMemset(d_err, 0, 4));
        const auto t0 = std::chrono::steady_clock::now();
        concurrent_quiet_kernel<<<(warps + 7) / 8, 256>>>(rig.state, rig.src, rig.dst, checkers, iters, large, mode,
                                                           1000000, d_done, d_early, d_err);
        final_quiet<<<1, 1>>>(rig.state, d_err);
        if (!wait_gpu("concurrent quiet", 120)) return failures + 1;
        unsigned long long early;
        CK(cudaMemcpy(&early, d_early, 8, cudaMemcpyDeviceToHost));
        int err;
        CK(cudaMemcpy(&err, d_err, 4, cudaMemcpyDeviceToHost));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const bool ok = early == 0 && err == 0;
        printf("%s checkers=%u (+%u warps posting a 64 B put every ms): %llu of %u checks saw the target unwritten after quiet, device error %d, %.1f s\n",
               ok ? "ok" : "FAIL", checkers, (warps + 7) / 8 * 8 - checkers, early, checkers * iters, err, s);
        failures += !ok;
    }
    const softefa::Stats st = rig.emu.stats();
    printf("reordering: %llu completions overtook an earlier WQE, at most %llu held\n", (unsigned long long)st.reordered,
           (unsigned long long)st.max_held);
    cudaFree(d_done);
    cudaFree(d_early);
    cudaFree(d_err);
    return failures;
}

// ---- signals (DeepEP's low-latency dispatch, shaped) ------------------------------------------------------
constexpr uint32_t kSigExperts = 16, kSigTokens = 64, kSigTokenWarps = 8, kSigSignalWarps = 4;
constexpr uint64_t kSigToken = 8192, kSigCounts = 30ull << 20;  // counts in dst's first region, past the tokens
__device__ __host__ inline uint64_t sig_area(uint32_t e, uint32_t slot) { return (uint64_t)(e * kSigTokens + slot) * kSigToken; }
__device__ __host__ inline uint64_t sig_len(uint32_t slot) { return slot % 2 ? kSigToken / 4 : kSigToken; }
__device__ __host__ inline uint32_t sig_expert(uint32_t t, uint32_t round) { return (t * 5 + round * 3) % kSigExperts; }
__device__ __host__ inline uint8_t sig_pattern(uint32_t round, uint32_t e, uint32_t slot) { return (uint8_t)(round * 29 + e * 7 + slot * 3 + 1); }

__global__ void signal_round(nvshmemx_efa_gda_device_state_t *s, uint8_t *src, uint8_t *dst, uint32_t round, int after_completion,
                             unsigned *next_slot, unsigned *finished, const unsigned *expected, unsigned long long *stale,
                             unsigned long long *wrong, unsigned *seen, int *err) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
    if (warp < kSigTokenWarps) {
        for (uint32_t t = warp; t < kSigTokens; t += kSigTokenWarps) {
            const uint32_t e = sig_expert(t, round);
            uint32_t slot = lane == 0 ? atomicAdd(&next_slot[e], 1u) : 0;
            slot = __shfl_sync(0xffffffffu, slot, 0);
            uint8_t *from = src + (uint64_t)t * kSigToken;
            const uint64_t len = sig_len(slot);
            for (uint64_t i = lane; i < len; i += 32) from[i] = sig_pattern(round, e, slot);
            __threadfence();
            __syncwarp();
            const int perr = efa_gda_put_nbi_warp(s, dst + sig_area(e, slot), from, len, 1);
            if (lane == 0) {
                if (perr) atomicCAS(err, 0, perr);
                __threadfence();  // the post before the count's release, as DeepEP's atomic_add_release_global
                atomicAdd(&finished[e], 1u);
            }
        }
    } else if (warp < kSigTokenWarps + kSigSignalWarps) {
        if (lane != 0) return;
        for (uint32_t e = warp - kSigTokenWarps; e < kSigExperts; e += kSigSignalWarps) {
            while (*(volatile unsigned *)&finished[e] != expected[e]) {
            }
            __threadfence();
            void *slot = dst + kSigCounts + e * sizeof(int);
            const uint64_t v = (uint32_t)(-(int)expected[e] - 1);
            const int r = after_completion ? efa_gda_signal(s, slot, v, 4, 1) : efa_gda_write_value_nbi(s, slot, v, 4, 1);
            if (r) atomicCAS(err, 0, r);
        }
    } else if (warp == kSigTokenWarps + kSigSignalWarps && lane == 0) {
        bool done[kSigExperts] = {};
        uint32_t n_seen = 0;
        const uint64_t t0 = efa_gda_now_ns();
        while (n_seen < kSigExperts && efa_gda_now_ns() - t0 < 20000000000ull) {
            for (uint32_t e = 0; e < kSigExperts; e++) {
                if (done[e]) continue;
                const int v = *(const volatile int *)(dst + kSigCounts + e * sizeof(int));
                if (v == 0) continue;
                done[e] = true;
                n_seen++;
                const uint32_t n = (uint32_t)(-v - 1);
                if (n != expected[e]) atomicAdd(wrong, 1ull);
                for (uint32_t i = 0; i < n && i < kSigTokens; i++) {
                    const volatile uint8_t *at = dst + sig_area(e, i);
                    const uint8_t want = sig_pattern(round, e, i);
                    const uint64_t len = sig_len(i);
                    if (at[0] != want || at[len / 2] != want || at[len - 1] != want) atomicAdd(stale, 1ull);
                }
            }
        }
        *seen = n_seen;
    }
}

int signals(Rig &rig, bool after_completion, bool quick) {
    unsigned *d_u;             // next_slot[E], finished[E], expected[E], seen
    unsigned long long *d_ull; // stale, wrong
    int *d_err;
    CK(cudaMalloc(&d_u, (3 * kSigExperts + 1) * 4));
    CK(cudaMalloc(&d_ull, 16));
    CK(cudaMalloc(&d_err, 4));
    CK(cudaMemset(d_ull, 0, 16));
    CK(cudaMemset(d_err, 0, 4));
    const uint32_t rounds = quick ? 4 : 24;
    printf("signals under test: %s\n", after_completion ? "efa_gda_signal (the write after every earlier WQE completed)"
                                                        : "efa_gda_write_value_nbi right after the payload was posted (forbidden)");
    uint32_t seen_total = 0;
    for (uint32_t round = 0; round < rounds; round++) {
        unsigned host[3 * kSigExperts + 1] = {};
        for (uint32_t t = 0; t < kSigTokens; t++) host[2 * kSigExperts + sig_expert(t, round)]++;
        CK(cudaMemcpy(d_u, host, sizeof host, cudaMemcpyHostToDevice));
        CK(cudaMemset(rig.dst + kSigCounts, 0, kSigExperts * sizeof(int)));  // the other phase: the slots back to 0
        CK(cudaDeviceSynchronize());
        const uint32_t warps = kSigTokenWarps + kSigSignalWarps + 1;
        signal_round<<<(warps + 7) / 8, 256>>>(rig.state, rig.src, rig.dst, round, after_completion, d_u, d_u + kSigExperts,
                                               d_u + 2 * kSigExperts, d_ull, d_ull + 1, d_u + 3 * kSigExperts, d_err);
        final_quiet<<<1, 1>>>(rig.state, d_err);  // sources are reused next round
        if (!wait_gpu("signals", 60)) return 1;
        unsigned seen;
        CK(cudaMemcpy(&seen, d_u + 3 * kSigExperts, 4, cudaMemcpyDeviceToHost));
        seen_total += seen;
    }
    unsigned long long sw[2];
    int err;
    CK(cudaMemcpy(sw, d_ull, 16, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&err, d_err, 4, cudaMemcpyDeviceToHost));
    const bool ok = sw[0] == 0 && sw[1] == 0 && err == 0 && seen_total == rounds * kSigExperts;
    printf("%s signals: %u rounds, %u counts seen of %u, %llu tokens not in place when their count was seen, %llu wrong counts, "
           "device error %d\n", ok ? "ok" : "FAIL", rounds, seen_total, rounds * kSigExperts, sw[0], sw[1], err);
    cudaFree(d_u);
    cudaFree(d_ull);
    cudaFree(d_err);
    return ok ? 0 : 1;
}

int bench(Rig &rig) {
    printf("\n| warps | size | WQEs | ops/s | GB/s |\n|---|---|---|---|---|\n");
    unsigned long long *d_scratch;  // imm sum, imm count, quiet result
    CK(cudaMalloc(&d_scratch, 32));
    for (uint32_t nwarps : {1u, 4u, 32u}) {
        for (uint64_t len : {8ull, 65536ull}) {
            const uint32_t per_warp = 8192 / nwarps;
            const auto t0 = std::chrono::steady_clock::now();
            bench_post<<<(nwarps * 32 + 255) / 256, nwarps >= 8 ? 256 : nwarps * 32>>>(rig.state, rig.src, rig.dst, len, per_warp, nwarps);
            quiet_and_drain<<<1, 1>>>(rig.state, rig.state1, 0, d_scratch, (uint32_t *)(d_scratch + 1), (int *)(d_scratch + 2));
            if (!wait_gpu("bench")) return 1;
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double posts = (double)per_warp * nwarps;
            printf("| %u | %llu B | %.0f | %.0f | %.3f |\n", nwarps, (unsigned long long)len, posts, posts / s, posts * (double)len / s / 1e9);
        }
    }
    printf("(bounded by the software EFA, which serves each WQE with cudaMemcpyAsync calls from one host thread; the "
           "device-side cost of a post is measured by bench/efa-gda-post-cost.sh)\n");
    cudaFree(d_scratch);
    int first_err;
    CK(cudaMemcpyFromSymbol(&first_err, g_first_err, 4));
    return first_err ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false, do_bench = false, trap = false;
    const char *concurrent = nullptr, *signals_mode = nullptr;
    std::string reorder_spec = "large:65536:8";
    uint32_t seed = 12345, idle_us = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--bench")) do_bench = true;
        else if (!strcmp(argv[i], "--trap-test")) trap = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reorder") && i + 1 < argc) reorder_spec = argv[++i];
        else if (!strcmp(argv[i], "--idle-us") && i + 1 < argc) idle_us = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--concurrent-quiet") && i + 1 < argc) concurrent = argv[++i];
        else if (!strcmp(argv[i], "--signals") && i + 1 < argc) signals_mode = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--bench] [--trap-test] [--seed N] [--reorder SPEC] [--idle-us N] [--concurrent-quiet new|old|owned] [--signals new|old]\n", argv[0]);
            return 2;
        }
    }
    softefa::Reorder reorder;
    std::string why;
    if (!softefa::parse_reorder(reorder_spec, &reorder, &why)) {
        fprintf(stderr, "%s\n", why.c_str());
        return 2;
    }
    if (concurrent && strcmp(concurrent, "new") && strcmp(concurrent, "old") && strcmp(concurrent, "owned")) {
        fprintf(stderr, "--concurrent-quiet takes new, old or owned\n");
        return 2;
    }
    if (concurrent && !softefa::parse_reorder("large:65536:32", &reorder, &why)) return 2;
    if (signals_mode && strcmp(signals_mode, "new") && strcmp(signals_mode, "old")) {
        fprintf(stderr, "--signals takes new or old\n");
        return 2;
    }
    // Signals: the 8 KiB tokens are held until 16 later WQEs completed (the 2 KiB ones and the counts overtake).
    if (signals_mode && reorder_spec == "large:65536:8" && !softefa::parse_reorder("large:4096:16", &reorder, &why)) return 2;
    reorder.idle_us = idle_us;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    // With lazy module loading, the first use of a kernel (ours or the runtime's copy kernels) may wait for
    // the device to go idle, which never happens while a post kernel spins on completions the emulator's
    // copies produce. Load everything up front.
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d); software EFA completion order: %s (held at most %u us while idle)\n", prop.name,
           prop.major, prop.minor, softefa::to_string(reorder).c_str(), reorder.idle_us);
    Rig rig(reorder, concurrent && !strcmp(concurrent, "owned") ? 32 : 0);
    g_rig = &rig;
    fill_src<<<1024, 256>>>(rig.src, kBuf, seed);
    CK(cudaDeviceSynchronize());
    // Exercise every copy kind the emulator uses once, before any kernel waits on it.
    CK(cudaMemcpy(rig.dst, rig.src, 4096, cudaMemcpyDefault));
    CK(cudaMemcpy(rig.cq, rig.sq_host, 64, cudaMemcpyHostToDevice));
    CK(cudaMemset(rig.cq, 0, kCq * 32));
    CK(cudaDeviceSynchronize());
    int failures = 0;
    if (trap) {
        // The refused post rings a filler WQE just before the kernel traps; a software EFA serving it would
        // write its completion into a context the trap has killed. Nothing here needs the NIC: stop it.
        rig.emu.stop();
        uint8_t *outside;
        CK(cudaMalloc(&outside, 4096));
        trap_kernel<<<1, 32>>>(rig.state, outside, rig.dst);
        const cudaError_t e = cudaDeviceSynchronize();
        printf("kernel ended with: %s\n", cudaGetErrorString(e));
        const bool trapped = e != cudaSuccess;
        printf("%s\n", trapped ? "RESULT: PASS (the failed post stopped the kernel)" : "RESULT: FAIL (no trap)");
        fflush(stdout);
        _exit(trapped ? 0 : 1);  // the context is gone: skip the emulator's teardown
    } else if (concurrent) {
        failures += concurrent_quiet(rig, !strcmp(concurrent, "old") ? kQuietCountBased : !strcmp(concurrent, "owned") ? kQuietOwned : kQuietNew,
                                     quick);
    } else if (signals_mode) {
        failures += signals(rig, !strcmp(signals_mode, "new"), quick);
    } else if (do_bench) {
        failures += bench(rig);
    } else {
        std::mt19937_64 rng(seed);
        Totals tot;
        for (uint32_t nwarps : {1u, 4u, 32u}) {
            Totals t;
            t.wqes = tot.wqes;
            const auto t0 = std::chrono::steady_clock::now();
            const int f = run_config(rig, nwarps, quick ? 3 : 40, seed, rng, t);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            printf("%s warps=%u: %llu ops (%llu WQEs, %llu immediates) in %llu rounds, %.2f GiB checked, %.1f s\n",
                   f ? "FAIL" : "ok", nwarps, (unsigned long long)t.ops, (unsigned long long)(t.wqes - tot.wqes),
                   (unsigned long long)t.imms, (unsigned long long)t.rounds, t.bytes / 1073741824.0, s);
            failures += f;
            tot.ops += t.ops;
            tot.bytes += t.bytes;
            tot.wqes = t.wqes;
            if (f) break;
        }
        printf("total: %llu ops, %llu WQEs, %.1f SQ ring wraps\n", (unsigned long long)tot.ops, (unsigned long long)tot.wqes,
               tot.wqes / (double)kSq);
        if (!failures) failures += negative_cases(rig);
    }
    rig.emu.stop();
    const auto v = rig.emu.violations();
    const size_t expected = expected_count(), unexpected = v.size() - expected;
    size_t shown = 0;
    for (size_t i = 0; i < v.size() && shown < 20; i++) {
        bool on_purpose = false;
        for (auto &r : g_expected) on_purpose |= i >= r.first && i < r.second;
        if (!on_purpose) {
            printf("VIOLATION qp %u slot %u: %s\n", v[i].qpn, v[i].slot, v[i].what.c_str());
            shown++;
        }
    }
    const softefa::Stats st = rig.emu.stats();
    printf("software EFA: %llu WQEs served, %llu doorbell values seen, %llu error completions (%llu flushed, %llu unknown peer), "
           "%llu completions out of order (at most %llu held), %llu RX overruns, %zu protocol violations (%zu raised on purpose)\n",
           (unsigned long long)st.wqes, (unsigned long long)st.doorbells, (unsigned long long)st.errors,
           (unsigned long long)st.flushed, (unsigned long long)st.unknown_peer, (unsigned long long)st.reordered,
           (unsigned long long)st.max_held, (unsigned long long)st.rx_overruns, v.size(), expected);
    failures += (int)unexpected;
    // (The throughput bench posts WQEs of one size per run, which no mode reorders.)
    if (!do_bench && reorder.mode != softefa::Reorder::InOrder && st.reordered == 0) {
        printf("FAIL: reordering was requested but no completion came out of order\n");
        failures++;
    }
    printf("%s\n", failures ? "RESULT: FAIL" : "RESULT: PASS");
    return failures ? 1 : 0;
}
