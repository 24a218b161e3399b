// DeepEP's remote protocols through the DeepEP EFA shim (templates/deepep_efa/nvshmem_efa_shim.cuh, standalone), as
// one PE of a 2-PE NVSHMEM job over efaemu (test-only; gpu/checks.sh starts two, one GPU each, bootstrapped like
// pe_test). Rebuilding DeepEP per negative control takes minutes; this program is built once per shim switch
// (-DNVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL, -DNVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL) in seconds.
//
//   deepep_pattern --rank R --uid-file F [--rails N] [--rounds K] ll|normal
//   ll      the low-latency pattern (internode_ll.cu): per round, each expert block's warps put their tokens to the
//           peer (nvshmemi_ibgda_put_nbi_warp, qp_id = the expert, message_idx = the token), then one thread sends
//           the count (nvshmem_efa_shim_signal_add_zeroed_single_writer, value -tokens-1); the peer waits for the
//           count and checks every token byte at once. Buffers and signal slots alternate between rounds (DeepEP's
//           buffer i / i^1) and the receiver zeroes a slot before it sends its own next count, so a slot holds 0
//           when the next write arrives. A count seen before its tokens landed is the failure this catches.
//   normal  normal mode across requesters (internode.cu): chunks over GDA into the peer's ring, then the tail
//           (nvshmemi_ibgda_amo_nonfetch_add: GDA quiet, nvshmem_fence, NVSHMEM's atomic add, applied by the
//           target's CPU proxy); the receiver polls the tail, checks the chunks the tail covers, returns credit
//           through the head counter the same way.
// Lines: "PE<r> ok <check>: evidence" / "PE<r> FAIL <check>: why" / "PE<r> RESULT <name> <value>"; exit 0 when every
// check of this PE passed. Every wait is bounded (--wait-s, default 30): a lost signal fails, never hangs.
#define NVSHMEM_EFA_SHIM_STANDALONE
#define NVSHMEM_EFA_SHIM_GDA
#define NVSHMEM_EFA_SHIM_DEFINE_STATE
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "nvshmem_efa_shim.cuh"

// This PE's rank for device code, copied in once after init.
__device__ int g_rank_dev;
__device__ __forceinline__ int g_rank_d() { return g_rank_dev; }

namespace {

#include "pe_common.cuh"

__device__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// The byte a token carries: depends on the round, so a token of round r - 2 left in the buffer is wrong in round r.
__host__ __device__ inline uint8_t token_byte(int src_pe, int round, int expert, int token, int i) {
    return (uint8_t)(round * 131 + expert * 29 + token * 7 + i + src_pe * 53 + 1);
}

// What a block found: the first round whose signal arrived before its bytes, or a wait that ran out.
struct Outcome {
    unsigned long long bad_bytes;
    int first_bad_round, first_bad_expert, first_bad_token, timed_out_round, rounds_done;
};

// ---- ll ------------------------------------------------------------------------------------------------------
constexpr int kExperts = 4;      // blocks; qp_id = expert, so with 2 rails the experts spread over both
constexpr int kTokens = 64;      // tokens per expert per round
constexpr int kTokenBytes = 7168;  // DeepEP's hidden 7168 in FP8 (plus scales elsewhere)
constexpr int kWarps = 8;

struct LlBuffers {
    uint8_t *recv;  // [2][kExperts][kTokens][kTokenBytes], written by the peer
    uint8_t *send;  // [2][kExperts][kTokens][kTokenBytes], this PE's source (registered: symmetric)
    int *count;     // [2][kExperts], written by the peer's signal
};
__device__ size_t ll_off(int buf, int e, int t) { return (((size_t)buf * kExperts + e) * kTokens + t) * kTokenBytes; }

__global__ void ll_kernel(LlBuffers b, int rounds, int peer, uint64_t wait_ns, Outcome *out) {
    const int e = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    __shared__ int bad_shared, stop;
    Outcome &o = out[e];
    if (threadIdx.x == 0) stop = 0;
    for (int r = 0; r < rounds; r++) {
        const int buf = r & 1;
        // The tokens of this round into this PE's source buffer, visible to the NIC before the posts.
        for (int t = warp; t < kTokens; t += kWarps)
            for (int i = lane; i < kTokenBytes; i += 32) b.send[ll_off(buf, e, t) + i] = token_byte(g_rank_d(), r, e, t, i);
        __threadfence_system();
        __syncthreads();
        for (int t = warp; t < kTokens; t += kWarps)
            deep_ep::nvshmemi_ibgda_put_nbi_warp(reinterpret_cast<uint64_t>(b.recv + ll_off(buf, e, t)),
                                                 reinterpret_cast<uint64_t>(b.send + ll_off(buf, e, t)), kTokenBytes, peer, e, lane, t);
        __syncthreads();  // every warp's posts before the count, as DeepEP orders them
        if (threadIdx.x == 0) {
            deep_ep::nvshmem_efa_shim_signal_add_zeroed_single_writer(b.count + buf * kExperts + e, -kTokens - 1, peer, e);
            // The peer's count for this round, then its tokens at once.
            volatile int *c = b.count + buf * kExperts + e;
            const uint64_t t0 = globaltimer_ns();
            while (*c == 0 && globaltimer_ns() - t0 < wait_ns) {
            }
            if (*c == 0) {
                o.timed_out_round = r;
                stop = 1;
            } else if (*c != -kTokens - 1) {
                o.first_bad_round = o.first_bad_round < 0 ? r : o.first_bad_round;
                o.bad_bytes += 1;  // a count that is not DeepEP's value (a replayed or torn signal)
            }
            bad_shared = 0;
        }
        __syncthreads();
        if (stop) break;
        int mine = 0, first_t = -1;
        for (int t = warp; t < kTokens; t += kWarps)
            for (int i = lane; i < kTokenBytes; i += 32) {
                const bool bad = *reinterpret_cast<volatile uint8_t *>(b.recv + ll_off(buf, e, t) + i) != token_byte(1 - g_rank_d(), r, e, t, i);
                mine += bad;
                if (bad && first_t < 0) first_t = t;
            }
        if (mine) {
            atomicAdd(&bad_shared, mine);
            atomicCAS(&o.first_bad_token, -1, first_t);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (bad_shared && o.first_bad_round < 0) {
                o.first_bad_round = r;
                o.first_bad_expert = e;
            }
            o.bad_bytes += bad_shared;
            // Zeroed before this PE sends its next count, hence before the peer can write this slot again (r + 2).
            b.count[buf * kExperts + e] = 0;
            __threadfence_system();
            o.rounds_done = r + 1;
        }
        __syncthreads();
    }
    deep_ep::nvshmemi_ibgda_quiet(peer, 0);
}

// ---- normal --------------------------------------------------------------------------------------------------
constexpr int kSlots = 16;           // ring slots per peer (DeepEP's num_max_rdma_chunked_recv_tokens, in chunks)
constexpr int kChunkBytes = 16384;   // one chunk of tokens
constexpr int kPerIssue = 3;         // chunks per tail add (DeepEP issues num_max_rdma_chunked_send_tokens)

struct NormalBuffers {
    uint8_t *ring;       // [kSlots][kChunkBytes], written by the peer
    uint8_t *src;        // [kSlots][kChunkBytes], this PE's source
    uint64_t *tail;      // added by the peer (proxy atomic): chunks it has sent
    uint64_t *head;      // added by the peer: chunks of ours it has consumed
};
__host__ __device__ inline uint8_t chunk_byte(int src_pe, uint64_t chunk, int i) { return (uint8_t)(chunk * 97 + i * 3 + src_pe * 41 + 7); }

// Block 0 sends (one warp), block 1 receives (one warp): DeepEP's RDMA sender and forwarder roles.
__global__ void normal_kernel(NormalBuffers b, uint64_t chunks, int peer, uint64_t wait_ns, Outcome *out) {
    const int lane = threadIdx.x & 31;
    Outcome &o = out[blockIdx.x];
    if (blockIdx.x == 0) {
        for (uint64_t sent = 0; sent < chunks;) {
            const uint64_t n = chunks - sent < kPerIssue ? chunks - sent : kPerIssue;
            const uint64_t t0 = globaltimer_ns();
            while (sent + n - *reinterpret_cast<volatile uint64_t *>(b.head) > kSlots && globaltimer_ns() - t0 < wait_ns) {
            }
            if (sent + n - *reinterpret_cast<volatile uint64_t *>(b.head) > kSlots) {
                if (lane == 0) o.timed_out_round = (int)sent;
                return;
            }
            for (uint64_t c = sent; c < sent + n; c++) {
                uint8_t *s = b.src + (c % kSlots) * kChunkBytes;
                for (int i = lane; i < kChunkBytes; i += 32) s[i] = chunk_byte(g_rank_d(), c, i);
                __threadfence_system();
                __syncwarp();
                deep_ep::nvshmemi_ibgda_put_nbi_warp<true>(reinterpret_cast<uint64_t>(b.ring + (c % kSlots) * kChunkBytes),
                                                           reinterpret_cast<uint64_t>(s), kChunkBytes, peer, 0, lane, 0);
            }
            __syncwarp();
            // internode.cu's tail update: the shim orders the GDA chunks (quiet, fence) before NVSHMEM's add.
            if (lane == 0) deep_ep::nvshmemi_ibgda_amo_nonfetch_add(b.tail, (int)n, peer, 0);
            __syncwarp();
            sent += n;
            if (lane == 0) o.rounds_done = (int)sent;
        }
        return;
    }
    uint64_t consumed = 0;
    while (consumed < chunks) {
        const uint64_t t0 = globaltimer_ns();
        uint64_t tail;
        while ((tail = *reinterpret_cast<volatile uint64_t *>(b.tail)) == consumed && globaltimer_ns() - t0 < wait_ns) {
        }
        if (tail == consumed) {
            if (lane == 0) o.timed_out_round = (int)consumed;
            return;
        }
        unsigned long long bad = 0;
        for (uint64_t c = consumed; c < tail; c++) {
            const volatile uint8_t *p = b.ring + (c % kSlots) * kChunkBytes;
            for (int i = lane; i < kChunkBytes; i += 32) bad += p[i] != chunk_byte(1 - g_rank_d(), c, i);
        }
        for (int d = 16; d; d >>= 1) bad += __shfl_xor_sync(0xffffffff, bad, d);
        if (lane == 0) {
            if (bad && o.first_bad_round < 0) o.first_bad_round = (int)consumed;
            o.bad_bytes += bad;
            deep_ep::nvshmemi_ibgda_amo_nonfetch_add(b.head, (int)(tail - consumed), peer, 0);
            o.rounds_done = (int)tail;
        }
        __syncwarp();
        consumed = tail;
    }
}


Outcome *outcomes(int n) {
    Outcome *o;
    CUDA_OK(cudaMalloc(&o, n * sizeof *o));
    Outcome init{0, -1, -1, -1, -1, 0};
    for (int i = 0; i < n; i++) CUDA_OK(cudaMemcpy(o + i, &init, sizeof init, cudaMemcpyHostToDevice));
    return o;
}

std::string describe(const Outcome &h) {
    return fmt("%llu bytes wrong when the signal arrived, first in round %d (expert %d, token %d); %d rounds done; wait ran out in round %d",
               h.bad_bytes, h.first_bad_round, h.first_bad_expert, h.first_bad_token, h.rounds_done, h.timed_out_round);
}

int ll(int rounds, uint64_t wait_ns) {
    const size_t bytes = 2ull * kExperts * kTokens * kTokenBytes;
    LlBuffers b{static_cast<uint8_t *>(nvshmem_malloc(bytes)), static_cast<uint8_t *>(nvshmem_malloc(bytes)),
                static_cast<int *>(nvshmem_malloc(2 * kExperts * sizeof(int)))};
    CUDA_OK(cudaMemset(b.recv, 0, bytes));
    CUDA_OK(cudaMemset(b.count, 0, 2 * kExperts * sizeof(int)));
    Outcome *o = outcomes(kExperts);
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    const double t0 = now_s();
    ll_kernel<<<kExperts, 32 * kWarps>>>(b, rounds, 1 - g_rank, wait_ns, o);
    const cudaError_t ke = cudaDeviceSynchronize();
    expect(ke == cudaSuccess, "ll kernel finished (no trap)", cudaGetErrorString(ke));
    Outcome h[kExperts];
    CUDA_OK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    Outcome sum{0, -1, -1, -1, -1, rounds};
    for (const Outcome &x : h) {
        sum.bad_bytes += x.bad_bytes;
        if (x.first_bad_round >= 0 && (sum.first_bad_round < 0 || x.first_bad_round < sum.first_bad_round)) sum = {sum.bad_bytes, x.first_bad_round, x.first_bad_expert, x.first_bad_token, sum.timed_out_round, sum.rounds_done};
        if (x.timed_out_round >= 0) sum.timed_out_round = x.timed_out_round;
        sum.rounds_done = x.rounds_done < sum.rounds_done ? x.rounds_done : sum.rounds_done;
    }
    line("RESULT", fmt("ll_seconds %.2f", now_s() - t0));
    expect(sum.bad_bytes == 0 && sum.timed_out_round < 0 && sum.rounds_done == rounds,
           fmt("ll_pattern: %d rounds x %d experts x %d tokens of %d B: every token byte there when its count signal arrived", rounds,
               kExperts, kTokens, kTokenBytes),
           describe(sum));
    return 0;
}

int normal(int rounds, uint64_t wait_ns) {
    const uint64_t chunks = (uint64_t)rounds * kPerIssue;
    NormalBuffers b{static_cast<uint8_t *>(nvshmem_malloc(kSlots * kChunkBytes)), static_cast<uint8_t *>(nvshmem_malloc(kSlots * kChunkBytes)),
                    static_cast<uint64_t *>(nvshmem_malloc(sizeof(uint64_t))), static_cast<uint64_t *>(nvshmem_malloc(sizeof(uint64_t)))};
    CUDA_OK(cudaMemset(b.ring, 0, kSlots * kChunkBytes));
    CUDA_OK(cudaMemset(b.tail, 0, sizeof(uint64_t)));
    CUDA_OK(cudaMemset(b.head, 0, sizeof(uint64_t)));
    Outcome *o = outcomes(2);
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    const double t0 = now_s();
    normal_kernel<<<2, 32>>>(b, chunks, 1 - g_rank, wait_ns, o);
    const cudaError_t ke = cudaDeviceSynchronize();
    expect(ke == cudaSuccess, "normal kernel finished (no trap)", cudaGetErrorString(ke));
    Outcome h[2];
    CUDA_OK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    line("RESULT", fmt("normal_seconds %.2f", now_s() - t0));
    expect(h[0].timed_out_round < 0 && h[0].rounds_done == (int)chunks, fmt("normal_mode: sent %llu chunks of %d B, tail by proxy atomics",
           (unsigned long long)chunks, kChunkBytes), fmt("sender: %d chunks sent; the head did not free a slot within the wait at chunk %d",
           h[0].rounds_done, h[0].timed_out_round));
    expect(h[1].bad_bytes == 0 && h[1].timed_out_round < 0 && h[1].rounds_done == (int)chunks,
           fmt("normal_mode: every chunk there when the tail (NVSHMEM's proxy atomic, another requester than the NIC) covered it"),
           fmt("%llu bytes wrong when the tail covered them, first at chunk %d; %d chunks consumed; the tail stopped at %d",
               h[1].bad_bytes, h[1].first_bad_round, h[1].rounds_done, h[1].timed_out_round));
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const char *uid = nullptr, *mode = nullptr;
    int rails = 0, rounds = 0;
    double wait_s = 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rank") && i + 1 < argc) g_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--uid-file") && i + 1 < argc) uid = argv[++i];
        else if (!strcmp(argv[i], "--rails") && i + 1 < argc) rails = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--wait-s") && i + 1 < argc) wait_s = atof(argv[++i]);
        else mode = argv[i];
    }
    if (g_rank < 0 || g_rank > 1 || !uid || !mode || (strcmp(mode, "ll") && strcmp(mode, "normal"))) {
        fprintf(stderr, "usage: deepep_pattern --rank 0|1 --uid-file FILE [--rails N] [--rounds K] [--wait-s S] ll|normal\n");
        return 2;
    }
    CUDA_OK(cudaSetDevice(0));
    bootstrap(uid);
    CUDA_OK(cudaMemcpyToSymbol(g_rank_dev, &g_rank, sizeof g_rank));
    // Which shim this is: the product, or a negative control (checks.sh refuses a control that is not one).
    const char *sw = nvshmem_efa_shim::test_switch();
    line("RESULT", std::string("shim_build ") + (sw ? sw : "product"));
    expect(nvshmem_efa_shim::init_state() == 0, "nvshmem_efa_shim::init_state()", "failed (its line on stderr says why)");
    nvshmem_efa_shim::State st{};
    CUDA_OK(cudaMemcpyFromSymbol(&st, nvshmem_efa_shim::state_d, sizeof st));
    uint32_t n_rails = 0;
    if (st.gda) CUDA_OK(cudaMemcpy(&n_rails, &st.gda->n_rails, sizeof n_rails, cudaMemcpyDeviceToHost));
    line("RESULT", fmt("shim_gda %s rails %u signals_over_gda %d", st.gda ? "active" : "off", n_rails, st.signals_over_gda));
    expect(st.gda != nullptr, "the shim's EFA GDA path is active", "not active: the test would prove nothing about GDA (stderr says why)");
    if (rails) expect((int)n_rails == rails, fmt("GDA on %d rails", rails), fmt("%u rails", n_rails));
    if (g_failures) {
        line("RESULT", fmt("failures %d", g_failures));
        _exit(1);
    }
    const uint64_t wait_ns = (uint64_t)(wait_s * 1e9);
    if (!strcmp(mode, "ll")) ll(rounds ? rounds : 200, wait_ns);
    else normal(rounds ? rounds : 400, wait_ns);
    line("RESULT", fmt("failures %d", g_failures));
    if (g_failures) _exit(1);  // the peer may wait for what failed: no collective after a failure
    nvshmem_barrier_all();
    nvshmem_finalize();
    return 0;
}
