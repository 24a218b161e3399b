// device_api_order: the ordering NVSHMEM's device API promises, checked by the receiving PE, with nothing but
// NVSHMEM's own API (issue 23). In a build with the device API hooks (the default) and NVSHMEM_EFA_GDA_DEVICE_API=1 every remote operation here
// goes over EFA GDA (the atomic through NVSHMEM's proxy); with =0 all of it goes through the proxy. selftest's
// device_api check runs it under efaemu's placement modes (writes placed out of order and late, completions before
// placement), and neg_device_api runs it linked against device libraries with one ordering rule broken, where it must
// report a data error rather than pass.
//
// N >= 2 PEs in a ring, each both sender and receiver, started by `nvshmem-efa launch` (nvshmem_init's PMI-1
// bootstrap): PE r sends to r + d and checks what r - d sent it (mod N), d = 1 except where said. Tests, each ITERS
// rounds of a fresh pattern (round, sender, word) with an acknowledgement before the next round:
//   fence    thread scope: put data (nbi), nvshmem_fence, put a flag (nbi); the peer waits for the flag, checks data.
//   signal   warp scope: put-with-signal (SIGNAL_SET); the peer waits for the signal, checks data.
//   atomic   thread scope: put data (nbi), nvshmem_fence, atomic add on a counter (NVSHMEM's proxy: EFA has no
//            RDMA atomics); the peer waits for the counter, checks data.
//   xwarp_p       warp 0 puts data (nbi), the block syncs, then warp 1 calls nvshmem_fence and writes the flag with
//                 nvshmem_uint64_p: NVSHMEM's fence orders what the GPU sent the peer, whichever warp sent it. With a
//                 NIC per warp (review 3, finding 1) the flag could land first on a multi-rail build.
//   xwarp_signal  the same, warp 1 writing the flag as the signal of a put-with-signal (SIGNAL_SET) of one word.
//   proxy_fence_gda  thread scope: put data (nbi) from a buffer registered with nvshmemx_buffer_register (outside GDA's
//            regions: NVSHMEM's proxy carries it), nvshmem_fence, then put the flag (nbi) from symmetric memory (GDA).
//            The proxy's quiet means "queued towards the PE's PCIe" on the proxy's NIC only; on 2 NICs per PE
//            (PE_RAILS=2) that need not be the flag's GDA rail, so the fence must flush the proxy's PE through every
//            rail (review 3, finding 7).
//   barrier  block scope: put data (nbi), nvshmemx_barrier_all_block (a quiet, then the barrier); each checks what
//            was put to it. The data-checking program that synchronizes through NVSHMEM's barrier. With 4 PEs or more
//            d = 3: the put goes to a PE that is not the sender's neighbour in NVSHMEM's barrier, so only the barrier's
//            promise of every PE's completed puts (not a signal the receiver itself got from the sender) covers it.
//   barrier_lone  the same with one writer: PE 0 puts to PE 3 (n - 1 below 4 PEs), the others put nothing, then every
//            PE enters the barrier, PE 3 checks, and a second barrier keeps the next round's put after the check. PE 3
//            is signalled only by PEs that wrote nothing, so nothing but PE 0's quiet makes the data visible there
//            (review 3, finding 2). With every PE writing (barrier), each signaller's own flush before its proxy
//            signal lands the NIC's earlier writes too, and a quiet that flushes nothing goes unseen.
// Usage: device_api_order [ITERS (100)] [TEST...] (default: all but proxy_fence_gda, which runs only when named).
// Output: "PE<r> ok <test>: ..." or "PE<r> FAIL <test>: N data errors ... first at round R word W: got X want Y";
// exit 1 on any error, 2 on a setup error. Every wait is bounded (WAIT_S, default 30 s): a lost write is reported
// as a timeout, never a kernel that spins forever.
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <string>

// The device API's slot as this program's own module sees it (the host library copies it into every module that
// links the device library): "slot on" is what the hooks in this program test, so a run whose counters show neither
// GDA bytes nor proxy operations can tell "the slot never reached this module" from "the hooks were not compiled in".
#if __has_include(<nvshmem_efa/nvshmemx_efa_gda_api.h>)
#include <nvshmem_efa/nvshmemx_efa_gda_api.h>
#define DEVICE_API_ORDER_SLOT 1
extern __constant__ nvshmemx_efa_gda_api_slot_t nvshmemi_efa_gda_api_d;
__global__ void read_slot(unsigned *out) {
    out[0] = nvshmemi_efa_gda_api_d.abi, out[1] = nvshmemi_efa_gda_api_d.on, out[2] = nvshmemi_efa_gda_api_d.flags;
}
#endif

namespace {
#include "pe_common.cuh"

constexpr int kWords = 4096;  // 32 KiB a put: several WQEs for efaemu to place out of order
constexpr int kThreads = 128;

struct Sym {  // symmetric objects
    uint64_t *src;   // what this PE puts (rewritten every round)
    uint64_t *dst;   // what the peer puts here
    uint64_t *flag;  // fence: the peer's round, written after its data
    uint64_t *sig;   // signal: the peer's round, set by put-with-signal
    uint64_t *cnt;   // atomic: rounds, added by the peer after its data
    uint64_t *ack;   // the peer's "checked round R"
    uint64_t *tail;  // xwarp_signal: the one word its put-with-signal carries
    uint64_t *local; // proxy_fence_gda: the round's data in a registered local buffer (not symmetric: the proxy's path)
};

struct Report {  // written by the kernel, read by the host
    unsigned long long errors;
    int first_round, first_word;
    unsigned long long got, want;
    int timed_out;  // 1 + the round a wait gave up in
};

__device__ uint64_t pattern(int round, int pe, int w) {
    return (uint64_t)(round + 1) << 40 | (uint64_t)pe << 32 | (uint32_t)(w * 2654435761u);
}

__device__ uint64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Waits until *ivar >= want; false when WAIT_S passed first.
__device__ bool wait_ge(uint64_t *ivar, uint64_t want, uint64_t limit_ns) {
    const uint64_t end = now_ns() + limit_ns;
    while (!nvshmem_uint64_test(ivar, NVSHMEM_CMP_GE, want))
        if (now_ns() > end) return false;
    return true;
}

// The round's data, and in the word after it the fence test's flag value (a put's source must be symmetric memory
// to stay on GDA). Rewriting is safe: the last round's puts were completed by its handshake's quiet.
__device__ void fill(uint64_t *src, uint64_t *local, int round, int me) {
    for (int w = threadIdx.x; w < kWords; w += blockDim.x) {
        src[w] = pattern(round, me, w);
        if (local) local[w] = src[w];
    }
    if (threadIdx.x == 0) src[kWords] = round + 1;
    __syncthreads();
}

// The block checks dst against the peer's pattern of `round`.
__device__ void check(const Sym &s, Report *r, int round, int peer) {
    for (int w = threadIdx.x; w < kWords; w += blockDim.x) {
        const uint64_t got = ((volatile uint64_t *)s.dst)[w], want = pattern(round, peer, w);
        if (got != want && atomicAdd(&r->errors, 1ull) == 0) {
            r->first_round = round;
            r->first_word = w;
            r->got = got;
            r->want = want;
        }
    }
    __syncthreads();
}

// Acknowledge round to the sender, wait for the receiver's acknowledgement, and complete this PE's puts (their source
// is rewritten).
__device__ bool handshake(const Sym &s, Report *r, int round, int from, uint64_t limit_ns) {
    __shared__ int ok;
    if (threadIdx.x == 0) {
        nvshmemx_signal_op(s.ack, round + 1, NVSHMEM_SIGNAL_SET, from);
        ok = wait_ge(s.ack, round + 1, limit_ns);
        if (!ok && !r->timed_out) r->timed_out = round + 1;
        nvshmem_quiet();
    }
    __syncthreads();
    return ok;
}

enum Test { kFence, kSignal, kAtomic, kBarrier, kBarrierLone, kXwarpP, kXwarpSignal, kProxyFenceGda };

// Rounds are numbered across the tests (first .. first + iters - 1): the flags, signals, acknowledgements and data of
// an earlier test can never satisfy a later one's waits or checks, so nothing is reset between tests.
__global__ void run(Test t, Sym s, Report *r, int first, int iters, uint64_t limit_ns) {
    const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), d = t == kBarrier && n >= 4 ? 3 : 1;
    const int peer = (me + d) % n, from = (me - d + n) % n;  // whom this PE sends to, and whose data it checks
    __shared__ int arrived;
    for (int round = first; round < first + iters; round++) {
        fill(s.src, s.local, round, me);
        switch (t) {
            case kFence:
                if (threadIdx.x == 0) {
                    nvshmem_putmem_nbi(s.dst, s.src, kWords * sizeof(uint64_t), peer);
                    nvshmem_fence();
                    nvshmem_putmem_nbi(s.flag, &s.src[kWords], sizeof(uint64_t), peer);
                }
                break;
            case kSignal:
                if (threadIdx.x < 32)
                    nvshmemx_putmem_signal_nbi_warp(s.dst, s.src, kWords * sizeof(uint64_t), s.sig, round + 1, NVSHMEM_SIGNAL_SET, peer);
                break;
            case kAtomic:
                if (threadIdx.x == 0) {
                    nvshmem_putmem_nbi(s.dst, s.src, kWords * sizeof(uint64_t), peer);
                    nvshmem_fence();
                    nvshmem_uint64_atomic_add(s.cnt, 1, peer);
                }
                break;
            case kBarrier:
                nvshmemx_putmem_nbi_block(s.dst, s.src, kWords * sizeof(uint64_t), peer);
                nvshmemx_barrier_all_block();
                break;
            case kBarrierLone: {
                const int v = n >= 4 ? 3 : n - 1;  // PE 0's barrier signals go to PEs 1 and 2, not to PE 3
                if (me == 0) nvshmemx_putmem_nbi_block(s.dst, s.src, kWords * sizeof(uint64_t), v);
                nvshmemx_barrier_all_block();
                if (me == v) check(s, r, round, 0);
                nvshmemx_barrier_all_block();  // PE 0 rewrites its source and PE 3's data only after the check
                continue;
            }
            case kProxyFenceGda:
                if (threadIdx.x == 0) {
                    nvshmem_putmem_nbi(s.dst, s.local, kWords * sizeof(uint64_t), peer);  // the proxy (outside GDA's regions)
                    nvshmem_fence();
                    nvshmem_putmem_nbi(s.flag, &s.src[kWords], sizeof(uint64_t), peer);  // GDA, on the peer's rail
                }
                break;
            case kXwarpP:
            case kXwarpSignal:
                if (threadIdx.x == 0) nvshmem_putmem_nbi(s.dst, s.src, kWords * sizeof(uint64_t), peer);
                __syncthreads();
                if (threadIdx.x == 32) {  // another warp: on a build that spread warps over NICs, another NIC
                    nvshmem_fence();
                    if (t == kXwarpP) nvshmem_uint64_p(s.flag, round + 1, peer);
                    else nvshmem_putmem_signal_nbi(s.tail, &s.src[kWords], sizeof(uint64_t), s.sig, round + 1, NVSHMEM_SIGNAL_SET, peer);
                }
                break;
        }
        if (threadIdx.x == 0) {
            arrived = 1;
            if (t == kFence || t == kXwarpP || t == kProxyFenceGda) arrived = wait_ge(s.flag, round + 1, limit_ns);
            if (t == kSignal || t == kXwarpSignal) arrived = wait_ge(s.sig, round + 1, limit_ns);
            if (t == kAtomic) arrived = wait_ge(s.cnt, round - first + 1, limit_ns);  // the counter counts this test's adds
            if (!arrived && !r->timed_out) r->timed_out = round + 1;
            __threadfence();  // the data loads below come after the flag's
        }
        __syncthreads();
        if (!arrived) return;
        check(s, r, round, from);
        if (!handshake(s, r, round, from, limit_ns)) return;
    }
}

}  // namespace

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 100;
    const double wait_s = getenv("WAIT_S") ? atof(getenv("WAIT_S")) : 30;
    // NVSHMEM initializes in the current CUDA context, and there is none until CUDA is used (without one, its first
    // allocation fails: "nvshmem initialization failed"). Each PE sees its own GPU only.
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(nullptr));
    nvshmem_init();
    g_rank = nvshmem_my_pe();
    if (nvshmem_n_pes() < 2) {
        fail("setup", fmt("needs 2 PEs or more, has %d", nvshmem_n_pes()));
        return 2;
    }
    Sym s{};
    // src has one word more than a put carries: the fence test's flag value, kept in symmetric memory (a GDA source).
    s.src = (uint64_t *)nvshmem_malloc((kWords + 1) * sizeof(uint64_t));
    s.dst = (uint64_t *)nvshmem_malloc(kWords * sizeof(uint64_t));
    uint64_t *words = (uint64_t *)nvshmem_calloc(5, sizeof(uint64_t));
    if (!s.src || !s.dst || !words) {
        fail("setup", "nvshmem_malloc failed");
        return 2;
    }
#ifdef DEVICE_API_ORDER_SLOT
    {
        unsigned *slot;
        CUDA_OK(cudaMallocManaged(&slot, 3 * sizeof(unsigned)));
        read_slot<<<1, 1>>>(slot);
        CUDA_OK(cudaDeviceSynchronize());
        printf("PE%d slot abi %u on %u flags 0x%x (the device API's slot in this program's module)\n", g_rank, slot[0], slot[1], slot[2]);
        fflush(stdout);
        cudaFree(slot);
    }
#endif
    s.flag = words, s.sig = words + 1, s.cnt = words + 2, s.ack = words + 3, s.tail = words + 4;
    Report *r;
    CUDA_OK(cudaMallocManaged(&r, sizeof *r));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const struct { Test t; const char *name; } tests[] = {{kFence, "fence"},     {kSignal, "signal"},        {kAtomic, "atomic"},
                                                          {kBarrier, "barrier"}, {kBarrierLone, "barrier_lone"}, {kXwarpP, "xwarp_p"},
                                                          {kXwarpSignal, "xwarp_signal"}, {kProxyFenceGda, "proxy_fence_gda"}};
    // The tests named after ITERS; when none is, all but proxy_fence_gda, which needs nvshmemx_buffer_register and a
    // second NIC to mean anything, and runs only when named (device_api_order+rails, neg_device_api's no_proxy_flush).
    auto wanted = [&](const char *name) {
        if (argc <= 2) return strcmp(name, "proxy_fence_gda") != 0;
        for (int i = 2; i < argc; i++)
            if (!strcmp(argv[i], name)) return true;
        return false;
    };
    for (int i = 2; i < argc; i++) {
        bool known = false;
        for (const auto &t : tests) known = known || !strcmp(argv[i], t.name);
        if (!known) {
            fail("setup", fmt("no test %s (fence, signal, atomic, barrier, barrier_lone, xwarp_p, xwarp_signal, proxy_fence_gda)", argv[i]));
            return 2;
        }
    }
    // proxy_fence_gda's source, only when that test runs (a transport that refused the registration would otherwise
    // fail every test): device memory NVSHMEM knows only through nvshmemx_buffer_register, which it registers
    // local-only, so GDA does not (the patch registers for GDA what is not local-only): a put from it is the proxy's.
    if (wanted("proxy_fence_gda")) {
        CUDA_OK(cudaMalloc(&s.local, kWords * sizeof(uint64_t)));
        if (nvshmemx_buffer_register(s.local, kWords * sizeof(uint64_t)) != 0) {
            fail("setup", "nvshmemx_buffer_register of proxy_fence_gda's source failed");
            return 2;
        }
    }
    int first = 0;
    for (const auto &t : tests) {
        if (!wanted(t.name)) continue;
        memset(r, 0, sizeof *r);
        nvshmem_barrier_all();
        const double t0 = now_s();
        run<<<1, kThreads, 0, st>>>(t.t, s, r, first, iters, (uint64_t)(wait_s * 1e9));
        first += iters;
        cudaError_t e = cudaStreamSynchronize(st);
        if (e != cudaSuccess) {
            fail(t.name, fmt("kernel: %s", cudaGetErrorString(e)));
            return 2;
        }
        nvshmem_barrier_all();
        if (r->errors)
            fail(t.name, fmt("%llu data errors in %d rounds of %d B; first at round %d word %d: got 0x%016llx want 0x%016llx", r->errors,
                             iters, (int)(kWords * sizeof(uint64_t)), r->first_round - (first - iters), r->first_word, r->got, r->want));
        else if (r->timed_out)
            fail(t.name, fmt("a wait passed WAIT_S=%g s in round %d (a write never landed)", wait_s, r->timed_out - 1 - (first - iters)));
        else
            ok(fmt("%s: %d rounds of %d B checked, %.2f s", t.name, iters, (int)(kWords * sizeof(uint64_t)), now_s() - t0));
    }
    if (s.local) {
        nvshmemx_buffer_unregister(s.local);
        cudaFree(s.local);
    }
    nvshmem_free(s.src);
    nvshmem_free(s.dst);
    nvshmem_free(words);
    nvshmem_finalize();
    return g_failures ? 1 : 0;
}
