// Device-side cost of an EFA GDA post, as ratios measured in one kernel run (clock64, one thread or one
// warp, no NIC behind the queue: nothing completes, the SQ is large enough that nothing waits):
//   minimal      8 x 64-bit stores of a WQE + __threadfence_system + doorbell store + __threadfence_system,
//                into the same host-mapped SQ ring and doorbell page the post path writes
//   single post  efa_gda_put_nbi of 8 bytes: PE and region lookup, slot reservation (one atomic), WQE build
//                and stores, two fences around the doorbell (the templates' own: __threadfence_system until
//                f38, fence.release.sys since; the minimal keeps __threadfence_system, the reference of every
//                earlier result, and the breakdown's last row times it with the post's stores and fences), the
//                doorbell hand-off; three ways: the
//                general call on a hot region (the common case), through a prepared handle, and the general
//                call on a region that is only in the region table (no hot slot filled); and through an owned
//                queue (efa_gda_owned, ABI 6: the slot from a counter in registers, no atomic)
//   warp batch   efa_gda_rma_nbi_warp_batch with 32 lanes: 32 WQEs written in parallel under one doorbell
//                (max_batch 32) or two (max_batch 16)
// The three are interleaved round by round so clock drift and cache state affect them alike. Prints a
// markdown table; goals (issue 38): single <= 1.25 x minimal, through a handle <= 1.15, through an owned queue
// <= 1.10; batch per WQE <= 0.30 x single.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I templates/transport_efa_gda -I <dir with efa_io_defs.h> \
//        bench/efa_gda_post_cost.cu -o efa_gda_post_cost
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
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
    long long *minimal, *single, *handle, *table, *owned, *batch32, *batch16;
};

__global__ void post_cost(nvshmemx_efa_gda_device_state_t *single_s, nvshmemx_efa_gda_device_state_t *cold_s,
                          nvshmemx_efa_gda_device_state_t *owned_s, nvshmemx_efa_gda_device_state_t *b32,
                          nvshmemx_efa_gda_device_state_t *b16, uint8_t *buf, Samples out, int *err, bool with_owned) {
    const unsigned lane = threadIdx.x & 31;
    nvshmemx_efa_gda_qp_t *qp = &single_s->rail[0].qp;
    volatile uint64_t *ring = (volatile uint64_t *)qp->sq_buf;
    volatile uint32_t *db = qp->sq_db;
    uint32_t minimal_slot = 0;
    // An owned queue, claimed once (outside the timed part) with a handle for PE 1 and the buffer's region.
    efa_gda_owned o;
    if (lane == 0)
        if (const int e = efa_gda_own(owned_s, 1, buf + kBuf / 2, buf, &o)) atomicCAS(err, 0, e);
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
            // The post path, whole: the general call on a hot region.
            for (uint32_t i = 0; i < kPerRound; i++) {
                uint8_t *p = buf + (size_t)(i % 1024) * 64;
                const long long t0 = clock64();
                const int e = efa_gda_put_nbi(single_s, p + kBuf / 2, p, 8, 1);
                out.single[r * kPerRound + i] = clock64() - t0;
                if (e) atomicCAS(err, 0, e);
            }
            // Through a handle prepared once (outside the timed part) for PE 1 and the buffer's region.
            efa_gda_handle h;
            if (const int e = efa_gda_handle_init(single_s, 1, buf + kBuf / 2, buf, &h)) atomicCAS(err, 0, e);
            for (uint32_t i = 0; i < kPerRound; i++) {
                uint8_t *p = buf + (size_t)(i % 1024) * 64;
                const long long t0 = clock64();
                const int e = efa_gda_put_nbi(h, p + kBuf / 2, p, 8);
                out.handle[r * kPerRound + i] = clock64() - t0;
                if (e) atomicCAS(err, 0, e);
            }
            // The general call where no hot slot holds the region (the region table's two dependent rounds).
            for (uint32_t i = 0; i < kPerRound; i++) {
                uint8_t *p = buf + (size_t)(i % 1024) * 64;
                const long long t0 = clock64();
                const int e = efa_gda_put_nbi(cold_s, p + kBuf / 2, p, 8, 1);
                out.table[r * kPerRound + i] = clock64() - t0;
                if (e) atomicCAS(err, 0, e);
            }
            // Through the owned queue (--no-owned leaves it out, to see whether its posts into the same ring move
            // the shared rows).
            for (uint32_t i = 0; with_owned && i < kPerRound; i++) {
                uint8_t *p = buf + (size_t)(i % 1024) * 64;
                const long long t0 = clock64();
                const int e = efa_gda_put_nbi(o, p + kBuf / 2, p, 8);
                out.owned[r * kPerRound + i] = clock64() - t0;
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
// time, and the post path itself timed stage by stage (the steps of efa_gda_rma_nbi for one hot piece).
constexpr int kParts = 12;
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void fence_release_sys() { asm volatile("fence.release.sys;" ::: "memory"); }
// Written here, not taken from the templates, so that the bench builds against templates from before they had it.
__device__ __forceinline__ void mmio_store64(volatile uint64_t *p, uint64_t v) {
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(__cvta_generic_to_global((void *)p)), "l"(v) : "memory");
}
__device__ __forceinline__ void mmio_store32(volatile uint32_t *p, uint32_t v) {
    asm volatile("st.mmio.relaxed.sys.global.b32 [%0], %1;" ::"l"(__cvta_generic_to_global((void *)p)), "r"(v) : "memory");
}
__global__ void breakdown(nvshmemx_efa_gda_device_state_t *s, uint8_t *buf, uint32_t *gpu_word, long long *out) {
    nvshmemx_efa_gda_qp_t *qp = &s->rail[0].qp;
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
        // 1: a fetch-and-add on GPU memory whose result places the WQE (what reserving a slot costs on top)
        t = clock64();
        const uint32_t got = efa_gda_fetch_slots((nvshmemx_efa_gda_qp_t *)((uint8_t *)gpu_word - offsetof(nvshmemx_efa_gda_qp_t, sq_reserved)), 1);
        volatile uint64_t *at = ring + (size_t)((got + 50000) & (kSq - 1)) * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) at[k] = i + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        o[1] = clock64() - t;
        // 2: minimal, then a store to GPU memory after the last fence (the doorbell hand-off)
        t = clock64();
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = i + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        *(volatile uint32_t *)(gpu_word + 32) = i;
        o[2] = clock64() - t;
        // 3: the minimal sequence with acquire-release + release fences instead of sequentially consistent
        // ones (for the record: the post path keeps __threadfence_system)
        t = clock64();
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = i + k;
        fence_acq_rel_sys();
        *db = i & 0xffff;
        fence_release_sys();
        o[3] = clock64() - t;
        // 4..10: the post path, stage by stage
        t = clock64();
        uint8_t *src = buf + (size_t)(i % 1024) * 64;
        const efa_gda_counters c = efa_gda_load_counters(qp);
        const uint32_t sl = efa_gda_fetch_slots(qp, 1);
        const efa_gda_sq q = efa_gda_sq_of(qp);
        const uint32_t n_pes = efa_gda_ro((const uint32_t *)&s->n_pes);
        const nvshmemx_efa_gda_peer_t peer = efa_gda_ro(&s->rail[0].fast[1].addr);
        efa_gda_piece p;
        const bool hot = efa_gda_hot_piece(&s->rail[0], 1, (uint64_t)src, (uint64_t)(src + kBuf / 2), 8, q.max_rdma, &p);
        const bool ok = hot && n_pes == 2 && peer.qpn != 0xffff && sl < (1u << 30);
        long long t1 = clock64();
        o[4] = t1 - t + (ok ? 0 : 1000000);
        efa_gda_reservation res;
        const int e = efa_gda_claim(q, sl, 1, c, &res);
        long long t2 = clock64();
        o[5] = t2 - t1 + (e ? 1000000 : 0);
        efa_gda_write_wqe(q, sl, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, peer, p, false, 0));
        long long t3 = clock64();
        o[6] = t3 - t2;
        __threadfence_system();
        long long t4 = clock64();
        o[7] = t4 - t3;
        efa_gda_store(q.db, (sl + 1) & 0xffffu);
        __threadfence_system();
        long long t5 = clock64();
        o[8] = t5 - t4;
        efa_gda_store(&qp->sq_rung, sl + 1);
        o[9] = clock64() - t;
        // 10: the minimal sequence again, right after a post (nothing left in flight from the breakdown)
        t = clock64();
#pragma unroll
        for (int k = 0; k < 8; k++) slot[k] = i + k;
        __threadfence_system();
        *db = i & 0xffff;
        __threadfence_system();
        o[10] = clock64() - t;
        // 11: the minimal sequence stored and fenced as the post path does since f38 (st.mmio, fence.release.sys
        // twice): how much of a post's gain over the reference is the fence kind alone
        t = clock64();
#pragma unroll
        for (int k = 0; k < 8; k++) mmio_store64(slot + k, i + k);
        fence_release_sys();
        mmio_store32(db, i & 0xffff);
        fence_release_sys();
        o[11] = clock64() - t;
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

int main(int argc, char **argv) {
    bool with_owned = true;
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--no-owned") with_owned = false;
        else {
            fprintf(stderr, "usage: %s [--no-owned]\n", argv[0]);
            return 2;
        }
    }
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
#ifdef POST_COST_TEMPLATES
    // Which templates the binary was built against (bench/efa-gda-post-cost-pair.sh builds two).
    printf("templates: %s\n", POST_COST_TEMPLATES);
#endif

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
    } table = {{1, 2, 1, 0}, {{(uint64_t)buf, kBuf, 0x101, 1}, {(uint64_t)buf, kBuf, 0x201, 1}, {(uint64_t)buf, kBuf, 0x202, 1}}};
    static_assert(sizeof table == sizeof(nvshmemx_efa_gda_regions_t) + 3 * sizeof(nvshmemx_efa_gda_region_t), "inline rows");
    nvshmemx_efa_gda_regions_t *d_table;
    CK(cudaMalloc(&d_table, sizeof table));
    CK(cudaMemcpy(d_table, &table, sizeof table, cudaMemcpyHostToDevice));
    nvshmemx_efa_gda_peer_t peers[2] = {{1, 10, 0x5A5A}, {2, 11, 0x6B6B}};
    nvshmemx_efa_gda_peer_t *d_peers;
    CK(cudaMalloc(&d_peers, sizeof peers));
    CK(cudaMemcpy(d_peers, peers, sizeof peers, cudaMemcpyHostToDevice));
    // The credit block the state must have (nothing here fails a post, so nothing reads it).
    uint64_t *cred_words;
    CK(cudaMalloc(&cred_words, 8 * 8));
    CK(cudaMemset(cred_words, 0, 8 * 8));
    nvshmemx_efa_gda_region_t pc[2] = {{(uint64_t)cred_words, 16, 0x300, 1}, {(uint64_t)cred_words, 16, 0x300, 1}};
    nvshmemx_efa_gda_region_t *d_pc;
    CK(cudaMalloc(&d_pc, sizeof pc));
    CK(cudaMemcpy(d_pc, pc, sizeof pc, cudaMemcpyHostToDevice));
    nvshmemx_efa_gda_credits_t cred = {};
    cred.consumed = cred_words;
    cred.sent = cred_words + 2;
    cred.seen = cred_words + 4;
    cred.landing = cred_words + 6;
    cred.lkey = 0x300;
    cred.peer_consumed = d_pc;
    nvshmemx_efa_gda_credits_t *d_cred;
    CK(cudaMalloc(&d_cred, sizeof cred));
    CK(cudaMemcpy(d_cred, &cred, sizeof cred, cudaMemcpyHostToDevice));

    // One device state per measured path, each with its own queue counters over the same ring; hot: the
    // buffer's region is in hot slot 0 (as the host makes the heap's first regions), else only in the table.
    // The owned queue: its own counters and slot marks over the same ring (nothing completes here).
    uint32_t *owned_done, *d_owner;
    CK(cudaMalloc(&owned_done, kSq * 4));
    CK(cudaMemcpy(owned_done, init.data(), kSq * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_owner, 4));
    CK(cudaMemset(d_owner, 0, 4));
    nvshmemx_efa_gda_qp_t *d_owned;
    CK(cudaMalloc(&d_owned, sizeof(nvshmemx_efa_gda_qp_t)));
    auto make_state = [&](uint32_t max_batch, bool hot, bool owned = false) {
        static nvshmemx_efa_gda_device_state_t s;  // about 260 KiB: not on the stack
        memset(&s, 0, sizeof s);
        s.abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
        s.my_pe = 0;
        s.n_pes = 2;
        s.n_rails = 1;
        s.rail[0].peers = d_peers;
        s.regions = d_table;
        s.rail[0].credits = d_cred;
        nvshmemx_efa_gda_qp_t &q = s.rail[0].qp;
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
        for (int pe = 0; pe < 2; pe++) s.rail[0].fast[pe].addr = peers[pe];
        if (hot) {
            s.rail[0].hot[0] = {(uint64_t)buf, kBuf, 0x101, 1, 0};
            s.rail[0].fast[0].hot[0] = {(uint64_t)buf, 0x201, 1};
            s.rail[0].fast[1].hot[0] = {(uint64_t)buf, 0x202, 1};
        }
        if (owned) {
            nvshmemx_efa_gda_qp_t oq = q;
            oq.qp_num = 12;
            oq.slot_done = owned_done;
            CK(cudaMemcpy(d_owned, &oq, sizeof oq, cudaMemcpyHostToDevice));
            s.rail[0].owned = d_owned;
            s.rail[0].owner = d_owner;
            s.rail[0].n_owned = 1;
        }
        nvshmemx_efa_gda_device_state_t *d_s;
        CK(cudaMalloc(&d_s, sizeof s));
        CK(cudaMemcpy(d_s, &s, sizeof s, cudaMemcpyHostToDevice));
        return d_s;
    };
    nvshmemx_efa_gda_device_state_t *s_single = make_state(16, true), *s_cold = make_state(16, false),
                                    *s32 = make_state(32, true), *s16 = make_state(16, true), *s_owned = make_state(16, true, true);

    const size_t n = (size_t)kRounds * kPerRound;
    Samples d_out;
    for (long long **p : {&d_out.minimal, &d_out.single, &d_out.handle, &d_out.table, &d_out.owned, &d_out.batch32, &d_out.batch16})
        CK(cudaMalloc(p, n * 8));
    int *d_err;
    CK(cudaMalloc(&d_err, 4));
    CK(cudaMemset(d_err, 0, 4));
    post_cost<<<1, 32>>>(s_single, s_cold, s_owned, s32, s16, buf, d_out, d_err, with_owned);
    CK(cudaDeviceSynchronize());
    int err;
    CK(cudaMemcpy(&err, d_err, 4, cudaMemcpyDeviceToHost));
    if (err) {
        printf("FAIL: a post returned device error 0x%x\n", err);
        return 1;
    }
    auto fetch = [&](long long *d) {
        std::vector<long long> v(n);
        CK(cudaMemcpy(v.data(), d, n * 8, cudaMemcpyDeviceToHost));
        return stat(v, kPerRound);
    };
    const Stat sm = fetch(d_out.minimal), ss = fetch(d_out.single), sh = fetch(d_out.handle), st = fetch(d_out.table),
               so = fetch(d_out.owned), s32s = fetch(d_out.batch32), s16s = fetch(d_out.batch16);
    const double single_ratio = ss.median / sm.median, handle_ratio = sh.median / sm.median, table_ratio = st.median / sm.median,
                 owned_ratio = so.median / sm.median;
    const double b32_ratio = s32s.median / 32 / ss.median, b16_ratio = s16s.median / 32 / ss.median;
    printf("\n%u rounds x %u of each, first round dropped; cycles per call (clock64): median [p10, p90], mean\n\n", kRounds, kPerRound);
    printf("| sequence | cycles per call | WQEs | cycles per WQE | ratio | goal |\n|---|---|---|---|---|---|\n");
    printf("| minimal: 8 x 64-bit stores + system fence + doorbell + system fence | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | 1.00 (reference) | |\n",
           sm.median, sm.p10, sm.p90, sm.mean, sm.median);
    printf("| single post: efa_gda_put_nbi, 8 B, hot region | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | %.2f x minimal | <= 1.25 (%s) |\n", ss.median,
           ss.p10, ss.p90, ss.mean, ss.median, single_ratio, single_ratio <= 1.25 ? "met" : "missed");
    printf("| single post through a prepared handle: efa_gda_put_nbi(handle), 8 B | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | %.2f x minimal | <= 1.15 (%s) |\n",
           sh.median, sh.p10, sh.p90, sh.mean, sh.median, handle_ratio, handle_ratio <= 1.15 ? "met" : "missed");
    printf("| single post, region only in the region table (no hot slot) | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | %.2f x minimal | |\n",
           st.median, st.p10, st.p90, st.mean, st.median, table_ratio);
    if (with_owned)
        printf("| single post through an owned queue: efa_gda_put_nbi(owned), 8 B | %.0f [%.0f, %.0f], %.0f | 1 | %.0f | %.2f x minimal | <= 1.10 (%s) |\n",
               so.median, so.p10, so.p90, so.mean, so.median, owned_ratio, owned_ratio <= 1.10 ? "met" : "missed");
    else
        printf("| single post through an owned queue | not run (--no-owned) | | | | |\n");
    printf("| warp batch, max_batch 32: 32 WQEs, 1 doorbell | %.0f [%.0f, %.0f], %.0f | 32 | %.0f | %.2f x single post | <= 0.30 (%s) |\n",
           s32s.median, s32s.p10, s32s.p90, s32s.mean, s32s.median / 32, b32_ratio, b32_ratio <= 0.30 ? "met" : "missed");
    printf("| warp batch, max_batch 16: 32 WQEs, 2 doorbells | %.0f [%.0f, %.0f], %.0f | 32 | %.0f | %.2f x single post | <= 0.30 (%s) |\n",
           s16s.median, s16s.p10, s16s.p90, s16s.mean, s16s.median / 32, b16_ratio, b16_ratio <= 0.30 ? "met" : "missed");
    printf("\nsingle post overhead over the minimal sequence: %.0f cycles (median), through a handle %.0f", ss.median - sm.median,
           sh.median - sm.median);
    if (with_owned) printf(", through an owned queue %.0f", so.median - sm.median);
    printf("\n");

    // Breakdown, on a fresh queue state.
    nvshmemx_efa_gda_device_state_t *s_b = make_state(16, true);
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
                                 "a fetch-and-add on GPU memory placing the WQE, then the minimal sequence",
                                 "the minimal sequence, then a store to GPU memory (the hand-off)",
                                 "the minimal sequence with fence.acq_rel.sys + fence.release.sys (not used)",
                                 "post path: fetch-and-add + every load, one round (hot region)",
                                 "post path: claim (room and batch-window checks, no wait)",
                                 "post path: WQE build and 8 stores (issue)",
                                 "post path: first system fence",
                                 "post path: doorbell store + second system fence",
                                 "post path: all of the above + doorbell hand-off store",
                                 "minimal sequence right after a post",
                                 "the minimal sequence with st.mmio stores and fence.release.sys twice (the post path's since f38)"};
    printf("\nbreakdown (one thread, %u samples each, first %u dropped): median cycles\n\n| part | cycles |\n|---|---|\n",
           kPerRound * 4, kPerRound);
    for (int k = 0; k < kParts; k++) {
        std::vector<long long> v;
        for (uint32_t i = 0; i < kPerRound * 4; i++) v.push_back(b[(size_t)i * kParts + k]);
        printf("| %s | %.0f |\n", names[k], stat(v, kPerRound).median);
    }
    return 0;
}
