// Device-side cost of an EFA GDA post, as ratios measured in one kernel run (clock64, one thread or one
// warp, no NIC behind the queue: nothing completes, the SQ is large enough that nothing waits):
//   minimal      8 x 64-bit stores of a WQE + __threadfence_system + doorbell store + __threadfence_system,
//                into the same host-mapped SQ ring and doorbell page the post path writes
//   single post  efa_gda_put_nbi of 8 bytes: PE and region lookup, slot reservation (one atomic), WQE build
//                and stores, the same two fences around the doorbell, the doorbell hand-off
//   warp batch   efa_gda_rma_nbi_warp_batch with 32 lanes: 32 WQEs written in parallel under one doorbell
//                (max_batch 32) or two (max_batch 16)
// The three are interleaved round by round so clock drift and cache state affect them alike. Prints a
// markdown table; goals: single <= 1.15 x minimal, batch per WQE <= 0.30 x single.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I templates/transport_efa_gda -I <dir with efa_io_defs.h> \
//        bench/efa_gda_post_cost.cu -o efa_gda_post_cost
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "nvshmemx_efa_gda_device.cuh"

#define CK(call)                                                                                         \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(2);                                                                                     \
        }                                                                                                \
    } while (0)

namespace {

constexpr uint32_t kSq = 65536;
constexpr uint32_t kRounds = 32, kPerRound = 64;  // single posts: 2048; batches: 2048 per kind, 65536 WQEs in all
constexpr uint64_t kBuf = 1 << 20;

struct Samples {
    long long *minimal, *single, *batch32, *batch16;
};

__global__ void post_cost(nvshmemx_efa_gda_device_state_t *single_s, nvshmemx_efa_gda_device_state_t *b32,
                          nvshmemx_efa_gda_device_state_t *b16, uint8_t *buf, Samples out, int *err) {
    const unsigned lane = threadIdx.x & 31;
    nvshmemx_efa_gda_qp_t *qp = single_s->qp;
    volatile uint64_t *ring = (volatile uint64_t *)qp->sq_buf;
    volatile uint32_t *db = qp->sq_db;
    uint32_t minimal_slot = 0;
    for (uint32_t r = 0; r < kRounds; r++) {
        if (lane == 0) {
            // The minimal sequence: what any post must do for one WQE on this memory.
            for (uint32_t i = 0; i < kPerRound; i++) {
                const uint64_t w = 0x0101010101010101ull * (i + 1);
                volatile uint64_t *slot = ring + (size_t)(minimal_slot & (kSq - 1)) * 8;
                const long long t0 = clock64();
#pragma unroll
                for (int k = 0; k < 8; k++) slot[k] = w + k;
                __threadfence_system();
                *db = (minimal_slot + 1) & 0xffff;
                __threadfence_system();
                out.minimal[r * kPerRound + i] = clock64() - t0;
                minimal_slot++;
            }
            // The post path, whole.
            for (uint32_t i = 0; i < kPerRound; i++) {
                uint8_t *p = buf + (size_t)(i % 1024) * 64;
                const long long t0 = clock64();
                const int e = efa_gda_put_nbi(single_s, p + kBuf / 2, p, 8, 1);
                out.single[r * kPerRound + i] = clock64() - t0;
                if (e) atomicCAS(err, 0, e);
            }
        }
        __syncwarp();
        // 32 lanes, one WQE each.
        for (uint32_t i = 0; i < kPerRound; i++) {
            uint8_t *p = buf + (size_t)lane * 64 + (size_t)(i % 16) * 4096;
            __syncwarp();
            const long long t0 = clock64();
            const int e = efa_gda_rma_nbi_warp_batch(b32, true, NVSHMEMX_EFA_GDA_OP_WRITE, p, p + kBuf / 2, 8, 1);
            __syncwarp();
            const long long t1 = clock64();
            if (lane == 0) out.batch32[r * kPerRound + i] = t1 - t0;
            if (e) atomicCAS(err, 0, e);
        }
        for (uint32_t i = 0; i < kPerRound; i++) {
            uint8_t *p = buf + (size_t)lane * 64 + (size_t)(i % 16) * 4096;
            __syncwarp();
            const long long t0 = clock64();
            const int e = efa_gda_rma_nbi_warp_batch(b16, true, NVSHMEMX_EFA_GDA_OP_WRITE, p, p + kBuf / 2, 8, 1);
            __syncwarp();
            const long long t1 = clock64();
            if (lane == 0) out.batch16[r * kPerRound + i] = t1 - t0;
            if (e) atomicCAS(err, 0, e);
        }
    }
}

// Where a single post's cycles go: the minimal sequence with one more ingredient of the post path at a
// time, and the post path itself timed stage by stage (same steps as efa_gda_rma_nbi for one piece).
constexpr int kParts = 9;
__global__ void breakdown(nvshmemx_efa_gda_device_state_t *s, uint8_t *buf, uint32_t *gpu_word, long long *out) {
    nvshmemx_efa_gda_qp_t *qp = s->qp;
    volatile uint64_t *ring = (volatile uint64_t *)qp->sq_buf;
    volatile uint32_t *db = qp->sq_db;
    for (uint32_t i = 0; i < kPerRound * 4; i++) {
        long long *o = out + (size_t)i * kParts;
        volatile uint64_t *slot = ring + (size_t)((i + 40000) & (kSq - 1)) * 8;
        // 0: minimal
        long long t = clock64();
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = i + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        o[0] = clock64() - t;
        // 1: a CAS on GPU memory first (what reserving a slot costs on top)
        t = clock64();
        const uint32_t got = atomicCAS(gpu_word, i, i + 1);
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = got + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        o[1] = clock64() - t;
        // 2: minimal, then a store to GPU memory after the last fence (the doorbell hand-off), then minimal
        t = clock64();
        *(volatile uint32_t *)(gpu_word + 32) = i;
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = i + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        o[2] = clock64() - t;
        // 3..8: the post path, stage by stage
        t = clock64();
        const nvshmemx_efa_gda_peer_t peer = efa_gda_ro(&s->peers[1]);
        efa_gda_piece p;
        uint8_t *src = buf + (size_t)(i % 1024) * 64;
        int e = efa_gda_find_piece(s, 1, (uint64_t)src, (uint64_t)(src + kBuf / 2), 8, efa_gda_ro(&qp->max_rdma_size), &p);
        long long t1 = clock64();
        o[3] = t1 - t + (e ? 1000000 : 0) + (peer.qpn == 0xffff ? 1000000 : 0);
        efa_gda_reservation res;
        e = efa_gda_reserve(qp, 1, &res);
        long long t2 = clock64();
        o[4] = t2 - t1 + (e ? 1000000 : 0) + (res.slot > kSq ? 1000000 : 0);
        efa_gda_write_wqe(qp, res.slot, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, peer, p, false, 0));
        long long t3 = clock64();
        o[5] = t3 - t2;
        __threadfence_system();
        long long t4 = clock64();
        o[6] = t4 - t3;
        efa_gda_store(qp->sq_db, (res.slot + 1) & 0xffffu);
        __threadfence_system();
        long long t5 = clock64();
        o[7] = t5 - t4;
        efa_gda_store(&qp->sq_rung, res.slot + 1);
        o[8] = clock64() - t;
    }
}

struct Stat {
    double median, p10, p90, mean;
};
Stat stat(std::vector<long long> v, size_t skip) {
    v.erase(v.begin(), v.begin() + (long)skip);  // the first round warms caches and TLBs
    std::vector<long long> s = v;
    std::sort(s.begin(), s.end());
    double sum = 0;
    for (long long x : v) sum += (double)x;
    return {(double)s[s.size() / 2], (double)s[s.size() / 10], (double)s[s.size() * 9 / 10], sum / (double)v.size()};
}

}  // namespace

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    cudaDriverGetVersion(&driver);
    char date[32];
    const time_t now = time(nullptr);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    printf("device: %s (sm_%d%d, %d SMs, %.0f MHz), CUDA driver %d, %s\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, khz / 1000.0, driver, date);

    // The SQ ring and doorbell play the NIC BAR: host memory the GPU writes through a mapping, as in the proof.
    uint8_t *ring_h, *ring_d;
    uint32_t *db_h, *db_d;
    CK(cudaHostAlloc(&ring_h, (size_t)kSq * 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&ring_d, ring_h, 0));
    CK(cudaHostAlloc(&db_h, 4096, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&db_d, db_h, 0));
    uint8_t *buf;
    CK(cudaMalloc(&buf, kBuf));
    uint32_t *done;
    CK(cudaMalloc(&done, kSq * 4));
    std::vector<uint32_t> init(kSq);
    for (uint32_t i = 0; i < kSq; i++) init[i] = i - kSq;
    CK(cudaMemcpy(done, init.data(), kSq * 4, cudaMemcpyHostToDevice));

    // One region (the buffer), as PE 0 registered it and as PEs 0 and 1 did.
    struct {
        nvshmemx_efa_gda_regions_t head;
        nvshmemx_efa_gda_region_t row[3];
    } table = {{1, 2}, {{(uint64_t)buf, kBuf, 0x101, 1}, {(uint64_t)buf, kBuf, 0x201, 1}, {(uint64_t)buf, kBuf, 0x202, 1}}};
    static_assert(sizeof table == sizeof(nvshmemx_efa_gda_regions_t) + 3 * sizeof(nvshmemx_efa_gda_region_t), "inline rows");
    nvshmemx_efa_gda_regions_t *d_table;
    CK(cudaMalloc(&d_table, sizeof table));
    CK(cudaMemcpy(d_table, &table, sizeof table, cudaMemcpyHostToDevice));
    nvshmemx_efa_gda_peer_t peers[2] = {{1, 10, 0x5A5A}, {2, 11, 0x6B6B}};
    nvshmemx_efa_gda_peer_t *d_peers;
    CK(cudaMalloc(&d_peers, sizeof peers));
    CK(cudaMemcpy(d_peers, peers, sizeof peers, cudaMemcpyHostToDevice));

    // One queue state per measured path, each with its own counters over the same ring.
    auto make_state = [&](uint32_t max_batch) {
        nvshmemx_efa_gda_qp_t q = {};
        q.sq_buf = ring_d;
        q.sq_db = db_d;
        q.sq_entries = kSq;
        q.sq_log2 = 16;
        q.max_batch = max_batch;
        q.wqe_size = 64;
        q.cq_entries = kSq;
        q.cq_log2 = 16;
        q.cq_entry_size = 32;
        q.qp_num = 10;
        q.max_rdma_size = 1ull << 30;
        q.slot_done = done;
        nvshmemx_efa_gda_qp_t *d_q;
        CK(cudaMalloc(&d_q, sizeof q));
        CK(cudaMemcpy(d_q, &q, sizeof q, cudaMemcpyHostToDevice));
        nvshmemx_efa_gda_device_state_t s = {NVSHMEMX_EFA_GDA_ABI_VERSION, 0, 2, 0, d_q, nullptr, d_peers, d_table, nullptr, 0};
        nvshmemx_efa_gda_device_state_t *d_s;
        CK(cudaMalloc(&d_s, sizeof s));
        CK(cudaMemcpy(d_s, &s, sizeof s, cudaMemcpyHostToDevice));
        return d_s;
    };
    nvshmemx_efa_gda_device_state_t *s_single = make_state(16), *s32 = make_state(32), *s16 = make_state(16);

    const size_t n = (size_t)kRounds * kPerRound;
    Samples d_out;
    CK(cudaMalloc(&d_out.minimal, n * 8));
    CK(cudaMalloc(&d_out.single, n * 8));
    CK(cudaMalloc(&d_out.batch32, n * 8));
    CK(cudaMalloc(&d_out.batch16, n * 8));
    int *d_err;
    CK(cudaMalloc(&d_err, 4));
    CK(cudaMemset(d_err, 0, 4));
    post_cost<<<1, 32>>>(s_single, s32, s16, buf, d_out, d_err);
    CK(cudaDeviceSynchronize());
    int err;
    CK(cudaMemcpy(&err, d_err, 4, cudaMemcpyDeviceToHost));
    if (err) {
        printf("FAIL: a post returned device error 0x%x\n", err);
        return 1;
    }
    std::vector<long long> m(n), s1(n), b32(n), b16(n);
    CK(cudaMemcpy(m.data(), d_out.minimal, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(s1.data(), d_out.single, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b32.data(), d_out.batch32, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b16.data(), d_out.batch16, n * 8, cudaMemcpyDeviceToHost));
    const Stat sm = stat(m, kPerRound), ss = stat(s1, kPerRound), s32s = stat(b32, kPerRound), s16s = stat(b16, kPerRound);
    const double single_ratio = ss.median / sm.median;
    const double b32_ratio = s32s.median / 32 / ss.median, b16_ratio = s16s.median / 32 / ss.median;
    printf("\n%u rounds x %u of each, first round dropped; cycles per call (clock64): median [p10, p90], mean\n\n", kRounds, kPerRound);
    printf("| sequence | cycles per call | WQEs | cycles per WQE | ratio | goal |\n|---|---|---|---|---|---|\n");
    printf("| minimal: 8 x 64-bit stores + system fence + doorbell + system fence | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | 1.00 (reference) | |\n",
           sm.median, sm.p10, sm.p90, sm.mean, sm.median);
    printf("| single post: efa_gda_put_nbi, 8 B | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | %.2f x minimal | <= 1.15 (%s) |\n", ss.median,
           ss.p10, ss.p90, ss.mean, ss.median, single_ratio, single_ratio <= 1.15 ? "met" : "missed");
    printf("| warp batch, max_batch 32: 32 WQEs, 1 doorbell | %.0f [%.0f, %.0f], %.0f | 32 | %.0f | %.2f x single post | <= 0.30 (%s) |\n",
           s32s.median, s32s.p10, s32s.p90, s32s.mean, s32s.median / 32, b32_ratio, b32_ratio <= 0.30 ? "met" : "missed");
    printf("| warp batch, max_batch 16: 32 WQEs, 2 doorbells | %.0f [%.0f, %.0f], %.0f | 32 | %.0f | %.2f x single post | <= 0.30 (%s) |\n",
           s16s.median, s16s.p10, s16s.p90, s16s.mean, s16s.median / 32, b16_ratio, b16_ratio <= 0.30 ? "met" : "missed");
    printf("\nsingle post overhead over the minimal sequence: %.0f cycles (median)\n", ss.median - sm.median);

    // Breakdown, on a fresh queue state.
    nvshmemx_efa_gda_device_state_t *s_b = make_state(16);
    uint32_t *gpu_word;
    CK(cudaMalloc(&gpu_word, 4096));
    CK(cudaMemset(gpu_word, 0, 4096));
    const size_t nb = (size_t)kPerRound * 4 * kParts;
    long long *d_b;
    CK(cudaMalloc(&d_b, nb * 8));
    breakdown<<<1, 1>>>(s_b, buf, gpu_word, d_b);
    CK(cudaDeviceSynchronize());
    std::vector<long long> b(nb);
    CK(cudaMemcpy(b.data(), d_b, nb * 8, cudaMemcpyDeviceToHost));
    const char *names[kParts] = {"minimal sequence (as above)",
                                 "a CAS on GPU memory, then the minimal sequence",
                                 "a store to GPU memory, then the minimal sequence",
                                 "post path: peer and region lookup",
                                 "post path: slot reservation (fetch-add + counters)",
                                 "post path: WQE build and 8 stores (issue)",
                                 "post path: first system fence",
                                 "post path: doorbell store + second system fence",
                                 "post path: all of the above + doorbell hand-off store"};
    printf("\nbreakdown (one thread, %u samples each, first %u dropped): median cycles\n\n| part | cycles |\n|---|---|\n",
           kPerRound * 4, kPerRound);
    for (int k = 0; k < kParts; k++) {
        std::vector<long long> v;
        for (uint32_t i = 0; i < kPerRound * 4; i++) v.push_back(b[(size_t)i * kParts + k]);
        printf("| %s | %.0f |\n", names[k], stat(v, kPerRound).median);
    }
    return 0;
}
