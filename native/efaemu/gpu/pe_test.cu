// One PE of a 2-PE NVSHMEM job over efaemu, bootstrapped without MPI (NVSHMEM's unique-id bootstrap, the id
// passed through a file). Test-only; the orchestration (gpu/checks.sh, `nvshmem-efa selftest`) starts two of
// these, one per GPU, each seeing only its own GPU.
//
//   pe_test --rank R --uid-file F MODE
//   MODE perf   put bandwidth (PE 0 -> PE 1, nvshmemx_putmem_nbi_warp + quiet) and atomic latency (fetch-add and
//               add round trips), the target checks every byte and the final counter
//   MODE gda    nvshmemx_efa_gda_status() on both PEs, then kernels over the GDA device API: put (large, across
//               max-RDMA pieces; 8 warps concurrently), put with immediate + rx_poll (more than the credit window),
//               get, quiet ordering data before an NVSHMEM atomic that announces it, warp batch; byte-exact. With
//               --rails N (ABI 5 headers): GDA must run on N rails (nvshmemx_efa_gda_rails() and the state), the
//               warps' posts spread over every rail by the device API's policy, every rail's queue completes
//               exactly, and the NICs efaemu0 .. efaemu<N-1> of the private sysfs sit at this PE's GPU. With
//               --owned N (ABI 6 headers, NVSHMEM_EFA_GDA_OWNED_QUEUES=N): the state holds N owned queues on rail 0,
//               and 8 warps each own one, put 32 x 4 KiB through it and quiet it; exact per queue, byte-exact
//   MODE lazy   PE 0 launches a kernel for the first time while another kernel waits for PE 1's atomic add (which
//               over efaemu needs CUDA calls of the emulator and softgdr in PE 0's process): how long the launch took
//               and whether the add arrived meanwhile (it cannot under lazy module loading; CUDA_MODULE_LOADING=EAGER)
//   MODE ignore_error  the negative control of a kernel that ignores NIC errors: PE 0 puts 1024 x 4 KiB to PE 1 and
//               quiets, ignoring every return value, then announces the data with an NVSHMEM atomic and reports
//               success; PE 1 checks every byte. Passes without injected failures; EFAEMU_FAIL_EVERY must make PE 1 fail
//   MODE pe_errors  a failure stays with its PE (review 3, finding 6): PE 1 refuses GDA writes sent to it
//               (EFAEMU_FAIL_AS_TARGET=gda in its environment); PE 0 puts to PE 1, then to itself over GDA: its wait
//               for PE 1 reports the failure, its wait for itself returns 0, and its own data lands
//   MODE init   init, print the GDA status, finalize (negative controls)
// The target's waits in gda and ignore_error are bounded by NVSHMEM_EFA_GDA_TIMEOUT_MS when it is set (the product's
// own bound, so that under EFAEMU_SILENT_AFTER_ERROR every process ends within it), else 60 s.
// Lines: "PE<r> ok <check> [: evidence]" / "PE<r> FAIL <check>: why" / "PE<r> RESULT <name> <value>". Exit 0 when
// every check of this PE passed.
#include <cuda_runtime.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <link.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#ifdef PE_TEST_GDA
#include <nvshmem_efa/nvshmemx_efa_gda_device.cuh>
#endif
#include <ctype.h>
#include <limits.h>
#include <strings.h>

namespace {

#include "pe_common.cuh"

int g_rails = 0;  // --rails N (0: not asked)
int g_owned = 0;  // --owned N (0: not asked)

// How long the test's own waits for a peer last: the product's bound when it is set, so that a check of that
// bound sees every process end within it (the target's waits are this test's, not the product's).
uint64_t wait_bound_ns() {
    const char *v = getenv("NVSHMEM_EFA_GDA_TIMEOUT_MS");
    const long long ms = v ? atoll(v) : 0;
    return ms > 0 ? (uint64_t)ms * 1000000ull : 60ull * 1000000000ull;
}


// The GDA host API lives in NVSHMEM's libfabric transport, a plugin loaded RTLD_LOCAL: find it by module.
void *transport_symbol(const char *name) {
    struct Found {
        const char *name;
        void *sym;
    } found = {name, nullptr};
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) -> int {
            auto *f = static_cast<Found *>(data);
            if (!info->dlpi_name || !strstr(info->dlpi_name, "nvshmem_transport_libfabric")) return 0;
            void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
            if (h) f->sym = dlsym(h, f->name);
            return f->sym != nullptr;
        },
        &found);
    return found.sym;
}

std::string gda_status() {
    auto fn = reinterpret_cast<const char *(*)()>(transport_symbol("nvshmemx_efa_gda_status"));
    return fn ? fn() : std::string("(no nvshmemx_efa_gda_status in the loaded libfabric transport)");
}

__host__ __device__ inline uint8_t pattern(int pe, uint64_t i) { return (uint8_t)(i * 131 + (i >> 11) + 17 * pe + 5); }

__global__ void fill(uint8_t *p, uint64_t n, int pe) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pattern(pe, i);
}

// Counts bytes of p[0, n) that differ from pattern(pe, base + i).
__global__ void count_bad(const uint8_t *p, uint64_t n, int pe, uint64_t base, unsigned long long *bad) {
    unsigned long long mine = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        mine += p[i] != pattern(pe, base + i);
    if (mine) atomicAdd(bad, mine);
}

uint64_t bad_bytes(const uint8_t *p, uint64_t n, int pe, uint64_t base) {
    unsigned long long *d;
    CUDA_OK(cudaMalloc(&d, sizeof *d));
    CUDA_OK(cudaMemset(d, 0, sizeof *d));
    count_bad<<<132, 256>>>(p, n, pe, base, d);
    unsigned long long h = 0;
    CUDA_OK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(d));
    return h;
}

// ---- perf (GDA off: NVSHMEM's own libfabric path) -------------------------------------------------------------

__global__ void put_loop(uint8_t *dst, const uint8_t *src, uint64_t bytes, int iters, int peer) {
    for (int i = 0; i < iters; i++) nvshmemx_putmem_nbi_warp(dst, src, bytes, peer);
    nvshmem_quiet();
}

__global__ void amo_loop(uint64_t *ctr, int iters, int peer, bool fetch, uint64_t *last) {
    uint64_t v = 0;
    for (int i = 0; i < iters; i++) {
        if (fetch) v = nvshmem_uint64_atomic_fetch_add(ctr, 1, peer);
        else nvshmem_uint64_atomic_add(ctr, 1, peer);
    }
    nvshmem_quiet();
    *last = v;
}

int perf() {
    const uint64_t kMax = 4 << 20;
    auto *dst = static_cast<uint8_t *>(nvshmem_malloc(kMax));
    auto *src = static_cast<uint8_t *>(nvshmem_malloc(kMax));
    auto *ctr = static_cast<uint64_t *>(nvshmem_malloc(sizeof(uint64_t)));
    uint64_t *last;
    CUDA_OK(cudaMalloc(&last, sizeof *last));
    CUDA_OK(cudaMemset(dst, 0, kMax));
    CUDA_OK(cudaMemset(ctr, 0, sizeof(uint64_t)));
    fill<<<132, 256>>>(src, kMax, g_rank);
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    struct Size {
        uint64_t bytes;
        int iters;
    } sizes[] = {{4096, 64}, {65536, 32}, {1 << 20, 16}, {4 << 20, 8}};
    for (const Size &s : sizes) {
        if (g_rank == 0) {
            cudaEventRecord(a);
            put_loop<<<1, 32>>>(dst, src, s.bytes, s.iters, 1);
            cudaEventRecord(b);
            CUDA_OK(cudaEventSynchronize(b));
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            line("RESULT", fmt("put_bw bytes=%llu iters=%d GB/s=%.3f us_per_put=%.1f", (unsigned long long)s.bytes, s.iters,
                                s.bytes * (double)s.iters / (ms * 1e6), ms * 1e3 / s.iters));
        }
        nvshmem_barrier_all();
        if (g_rank == 1) {
            const uint64_t bad = bad_bytes(dst, s.bytes, 0, 0);
            expect(bad == 0, fmt("put of %llu bytes from PE 0 landed byte-exact", (unsigned long long)s.bytes),
                   fmt("%llu bytes differ", (unsigned long long)bad));
        }
        nvshmem_barrier_all();
    }
    const int kAmo = 200;
    for (int fetch = 1; fetch >= 0; fetch--) {
        if (g_rank == 0) {
            cudaEventRecord(a);
            amo_loop<<<1, 1>>>(ctr, kAmo, 1, fetch, last);
            cudaEventRecord(b);
            CUDA_OK(cudaEventSynchronize(b));
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            uint64_t v = 0;
            CUDA_OK(cudaMemcpy(&v, last, sizeof v, cudaMemcpyDeviceToHost));
            line("RESULT", fmt("atomic_latency op=%s iters=%d us=%.2f", fetch ? "fetch_add" : "add", kAmo, ms * 1e3 / kAmo));
            if (fetch) expect(v == kAmo - 1, "the last fetch-add returned the count before it (199)", fmt("%llu", (unsigned long long)v));
        }
        nvshmem_barrier_all();
        if (g_rank == 1) {
            uint64_t v = 0;
            CUDA_OK(cudaMemcpy(&v, ctr, sizeof v, cudaMemcpyDeviceToHost));
            const uint64_t want = fetch ? kAmo : 2 * kAmo;
            expect(v == want, fmt("target counter after %s x %d: %llu", fetch ? "fetch_add" : "add", kAmo, (unsigned long long)want),
                   fmt("%llu", (unsigned long long)v));
        }
        nvshmem_barrier_all();
    }
    nvshmem_free(ctr);
    nvshmem_free(src);
    nvshmem_free(dst);
    return 0;
}

// ---- lazy: a kernel first launched while another waits on the network ----------------------------------------
//
// PE 0 launches wait_flag (spins until PE 1's atomic add reaches its flag, at most kLazyWaitS), then launches a kernel
// it never launched before. Under CUDA lazy loading that launch loads the kernel, which may synchronize the context:
// the launch waits for wait_flag. PE 1's add reaches PE 0 through NVSHMEM's proxy (a staged atomic the proxy
// applies through GDRCopy): on a NIC with a real GDRCopy nothing there calls CUDA, but over efaemu the proxy's
// softgdr access and the engine's copies are CUDA calls in PE 0's context, so they wait behind that load. The mode
// reports how long the launch took and whether the flag arrived while it waited.

constexpr double kLazyWaitS = 15.0;

__device__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void wait_flag(volatile int *flag, int want, double seconds, int *seen, unsigned long long *waited_ns) {
    const uint64_t t0 = globaltimer_ns();
    uint64_t t = t0;
    while (*flag < want && (t = globaltimer_ns()) - t0 < (uint64_t)(seconds * 1e9)) {
    }
    *seen = *flag >= want;
    *waited_ns = t - t0;
}

__global__ void signal_peer(int *flag, int peer) { nvshmem_int_atomic_add(flag, 1, peer); }

__global__ void lazy_probe(int *out) { *out = 42; }  // launched once, by PE 0, while wait_flag spins

int lazy() {
    auto *flag = static_cast<int *>(nvshmem_malloc(sizeof(int)));
    CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
    int *seen, *probe;
    unsigned long long *waited;
    CUDA_OK(cudaMalloc(&seen, sizeof(int)));
    CUDA_OK(cudaMalloc(&probe, sizeof(int)));
    CUDA_OK(cudaMalloc(&waited, sizeof *waited));
    CUDA_OK(cudaDeviceSynchronize());
    const char *mode = getenv("CUDA_MODULE_LOADING");
    line("RESULT", fmt("cuda_module_loading %s", mode ? mode : "(unset: lazy by default since CUDA 12.2)"));
    nvshmem_barrier_all();
    if (g_rank == 0) {
        cudaStream_t s1, s2;
        CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
        CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        wait_flag<<<1, 1, 0, s1>>>(flag, 1, kLazyWaitS, seen, waited);
        usleep(200000);  // wait_flag is spinning
        const double t0 = now_s();
        lazy_probe<<<1, 1, 0, s2>>>(probe);
        const double launch = now_s() - t0;
        CUDA_OK(cudaStreamSynchronize(s1));
        CUDA_OK(cudaStreamSynchronize(s2));
        int h_seen = 0, h_probe = 0;
        unsigned long long h_waited = 0;
        CUDA_OK(cudaMemcpy(&h_seen, seen, sizeof h_seen, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&h_probe, probe, sizeof h_probe, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&h_waited, waited, sizeof h_waited, cudaMemcpyDeviceToHost));
        line("RESULT", fmt("lazy_launch_seconds %.3f flag_seen %d flag_wait_seconds %.3f", launch, h_seen, h_waited / 1e9));
        expect(h_probe == 42, "the first launch of a kernel ran");
        expect(h_seen == 1,
               "PE 1's atomic add (through NVSHMEM's proxy and softgdr) reached a kernel spinning on it while this PE "
               "launched a kernel for the first time",
               fmt("not within %.0f s; the first launch took %.1f s (it waited for the spinning kernel: lazy module "
                   "loading synchronizes the context, and the emulator's CUDA copies wait behind it; run with "
                   "CUDA_MODULE_LOADING=EAGER)", kLazyWaitS, launch));
        CUDA_OK(cudaStreamDestroy(s1));
        CUDA_OK(cudaStreamDestroy(s2));
    } else {
        usleep(1500000);  // PE 0 is in its first launch by now
        signal_peer<<<1, 1>>>(flag, 0);
        CUDA_OK(cudaDeviceSynchronize());
        nvshmem_quiet();
        ok("PE 1 sent its atomic add to PE 0's flag");
    }
    nvshmem_barrier_all();
    CUDA_OK(cudaFree(seen));
    CUDA_OK(cudaFree(probe));
    CUDA_OK(cudaFree(waited));
    nvshmem_free(flag);
    return 0;
}

#ifdef PE_TEST_GDA
// ---- gda -----------------------------------------------------------------------------------------------------

constexpr uint64_t M = 1ull << 20;
// Layout of each PE's 24 MiB symmetric buffer (source and destination ranges apart).
constexpr uint64_t kSrc = 0, kBig = 8 * M, kWarps = 12 * M, kImm = 14 * M, kGetDst = 15 * M, kQuiet = 16 * M,
                   kBatch = 20 * M, kSpan = 24 * M;
constexpr uint64_t kBigLen = 3 * M + 12345;   // crosses no region end but is split by max RDMA size only if small
constexpr int kWarpCount = 8, kPerWarp = 32;  // concurrent puts
constexpr uint64_t kWarpPut = 4096;
constexpr int kImms = 700;                    // more than a receiver's credit window (RX CQ / n_pes)
constexpr int kQuietRounds = 50;
constexpr uint64_t kQuietLen = 256 << 10;

struct Result {
    int put, warps, imm, get, quiet, batch;
    unsigned long long flag_wait_bad;
    int owned;              // first error of the owned-queue kernel
    unsigned owned_queues;  // bit k: a warp held owned queue k
};
constexpr uint64_t kOwnedDst = 21 * M;  // 8 warps x 32 x 4 KiB through owned queues (from kSrc + 6 MiB)

__global__ void gda_initiator(nvshmemx_efa_gda_device_state_t *s, uint8_t *base, int *flag, Result *r) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    // put: one large transfer, then 8 warps x 32 puts concurrently.
    if (threadIdx.x == 0) r->put = efa_gda_put_nbi(s, base + kBig, base + kSrc, kBigLen, 1);
    __syncthreads();
    int werr = 0;
    for (int i = 0; i < kPerWarp; i++) {
        const uint64_t off = ((uint64_t)warp * kPerWarp + i) * kWarpPut;
        werr |= efa_gda_put_nbi_warp(s, base + kWarps + off, base + kSrc + M + off, kWarpPut, 1);
    }
    if (lane == 0 && werr) atomicOr(&r->warps, werr);
    __syncthreads();
    // warp batch: 32 lanes, one 128-byte put each, under shared doorbells.
    if (warp == 0) {
        const int e = efa_gda_rma_nbi_warp_batch(s, true, NVSHMEMX_EFA_GDA_OP_WRITE, base + kSrc + 2 * M + lane * 128,
                                                 base + kBatch + lane * 128, 128, 1);
        if (e) atomicOr(&r->batch, e);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int q = efa_gda_quiet(s);
        if (q && !r->put) r->put = q;
        // put with immediate: more than the window; the receiver takes them as they come.
        int ie = 0;
        for (int i = 0; i < kImms && !ie; i++) ie = efa_gda_put_imm_nbi(s, base + kImm + i * 8, base + kSrc + 3 * M + i * 8, 8, 1, 0x5000 + i);
        if (!ie) ie = efa_gda_quiet(s);
        r->imm = ie;
        // get: PE 1's bytes at [kSrc + 4M, +1M) into our kGetDst.
        int ge = efa_gda_get_nbi(s, base + kGetDst, base + kSrc + 4 * M, M, 1);
        if (!ge) ge = efa_gda_quiet(s);
        r->get = ge;
        // quiet and flush order data before an announcement that takes another path (NVSHMEM's atomic via its
        // proxy, applied by the target's CPU), as the DeepEP shim does: the target checks the data as soon as it sees
        // the flag. A quiet alone is not enough (the completion means "queued towards the target's PCIe"): under
        // EFAEMU_PLACE_DEFER_US the flag overtook 12384 sampled bytes (bench/results/unkind-efaemu-gpu.md).
        // Two buffers, alternating: round i reuses round i - 2's buffer only once PE 1 acknowledged checking it
        // (flag[1], its NVSHMEM add), else PE 1 could find round i + 2's bytes where it checks round i's.
        int qe = 0;
        for (int i = 0; i < kQuietRounds && !qe; i++) {
            const uint64_t t0 = efa_gda_now_ns();
            while (i >= 2 && *(volatile int *)(flag + 1) < i - 1 && efa_gda_now_ns() - t0 < 60000000000ull) {
            }
            if (i >= 2 && *(volatile int *)(flag + 1) < i - 1) qe = NVSHMEMX_EFA_GDA_ERR_TIMEOUT;
            if (!qe) qe = efa_gda_put_nbi(s, base + kQuiet + (i % 2) * kQuietLen, base + kSrc + 5 * M + (uint64_t)i * 4096, kQuietLen, 1);
            if (!qe) qe = efa_gda_quiet_flush(s, 1);
            nvshmem_fence();
            nvshmem_int_atomic_add(flag, 1, 1);
        }
        r->quiet = qe;
        nvshmem_quiet();
    }
}

#if NVSHMEMX_EFA_GDA_ABI_VERSION >= 6
// Each warp owns a queue of rail 0 (lane 0 posts), puts 32 x 4 KiB through it, quiets it and frees it.
__global__ void gda_owned(nvshmemx_efa_gda_device_state_t *s, uint8_t *base, Result *r) {
    const int warp = threadIdx.x / 32;
    if ((threadIdx.x & 31) != 0) return;
    efa_gda_owned o;
    int e = efa_gda_own_on(s, 0, 1, base + kOwnedDst, base + kSrc, &o);
    if (!e) atomicOr(&r->owned_queues, 1u << o.index);
    for (int i = 0; i < kPerWarp && !e; i++) {
        const uint64_t off = ((uint64_t)warp * kPerWarp + i) * kWarpPut;
        e = efa_gda_put_nbi(o, base + kOwnedDst + off, base + kSrc + 6 * M + off, kWarpPut);
    }
    const int q = efa_gda_quiet_owned(o);
    if (!e) e = q;
    efa_gda_disown(&o);
    if (e) atomicCAS(&r->owned, 0, e);
}
#endif

__global__ void gda_target(nvshmemx_efa_gda_device_state_t *s, uint8_t *base, int *flag, Result *r, uint64_t wait_ns) {
    if (threadIdx.x != 0) return;
    // Immediates: take all, in order of arrival; each carries its index.
    int got = 0, err = 0;
    unsigned seen_sum = 0;
    const uint64_t start = efa_gda_now_ns();
    while (got < kImms && !err) {
        uint32_t imm, bytes;
        int pe;
        const int rc = efa_gda_rx_poll(s, &imm, &bytes, &pe);
        if (rc < 0) err = -rc;
        else if (rc == 1) {
            if (pe != 0 || bytes != 8 || imm < 0x5000 || imm >= 0x5000 + kImms) err = 0x7001;
            seen_sum += imm - 0x5000;
            got++;
        }
        if (efa_gda_now_ns() - start > wait_ns) err = 0x7002;  // fail loudly, never hang
    }
    if (!err && seen_sum != (unsigned)(kImms * (kImms - 1) / 2)) err = 0x7003;
    r->imm = err;
    // Quiet rounds: as soon as the flag says round i landed, its data must be there.
    unsigned long long bad = 0;
    for (int i = 0; i < kQuietRounds; i++) {
        const uint64_t t0 = efa_gda_now_ns();
        while (*(volatile int *)flag < i + 1 && efa_gda_now_ns() - t0 < wait_ns) {
        }
        if (*(volatile int *)flag < i + 1) {  // the flag never came: counted as every sampled byte missing
            bad += kQuietRounds - i;
            break;
        }
        // Acquire: the flag was read with volatile loads, the data must not come from what this thread's earlier
        // reads of the same buffer (round i - 2) left in L1 (nvshmem_int_wait_until did both; a plain spin does not).
        __threadfence_system();
        const volatile uint8_t *p = base + kQuiet + (i % 2) * kQuietLen;
        for (uint64_t k = 0; k < kQuietLen; k += 1021) bad += p[k] != pattern(0, kSrc + 5 * M + (uint64_t)i * 4096 + k);
        bad += p[kQuietLen - 1] != pattern(0, kSrc + 5 * M + (uint64_t)i * 4096 + kQuietLen - 1);
        nvshmem_int_atomic_add(flag + 1, 1, 0);  // round i checked: PE 0 may reuse its buffer
    }
    r->flag_wait_bad = bad;
}

// The host's spelling of a device result: an EFA status or an NVSHMEMX_EFA_GDA_ERR_* code.
std::string gda_err(int e) { return fmt("%s0x%x", e > 0 && e < 64 ? "EFA status " : "error ", e); }

// The state's queues, whichever ABI the headers are: ABI 5 has one per rail, ABI 4 (NVSHMEM built before rails)
// one in the state itself.
#if NVSHMEMX_EFA_GDA_ABI_VERSION >= 5
uint32_t state_rails(const nvshmemx_efa_gda_device_state_t &s) { return s.n_rails; }
const nvshmemx_efa_gda_qp_t &state_qp(const nvshmemx_efa_gda_device_state_t &s, uint32_t k) { return s.rail[k].qp; }
uint32_t state_imm_window(const nvshmemx_efa_gda_device_state_t &s) { return s.rail[0].imm_window; }
#else
uint32_t state_rails(const nvshmemx_efa_gda_device_state_t &) { return 1; }
const nvshmemx_efa_gda_qp_t &state_qp(const nvshmemx_efa_gda_device_state_t &s, uint32_t) { return s.qp; }
uint32_t state_imm_window(const nvshmemx_efa_gda_device_state_t &s) { return s.imm_window; }
#endif

// How NVSHMEM finds a NIC's PCIe place: /sys/class/infiniband/<nic>/device (multi-rail NVSHMEM picks the NICs
// nearest to the PE's GPU). Whether efaemu0 .. efaemu<n-1> all sit at this PE's GPU.
bool nics_at_my_gpu(int n, std::string *evidence) {
    char bus[32] = "";
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) {
        *evidence = "cudaDeviceGetPCIBusId failed";
        return false;
    }
    for (char *c = bus; *c; c++) *c = (char)tolower(*c);
    bool all = true;
    *evidence = std::string("GPU ") + bus;
    for (int k = 0; k < n; k++) {
        const std::string link = "/sys/class/infiniband/efaemu" + std::to_string(k) + "/device";
        char real[PATH_MAX];
        const char *at = realpath(link.c_str(), real);
        const std::string where = at ? std::string(real) : std::string("(does not resolve)");
        const bool here = at && where.size() >= strlen(bus) && strcasecmp(where.c_str() + where.size() - strlen(bus), bus) == 0;
        *evidence += "; efaemu" + std::to_string(k) + " -> " + where;
        all &= here;
    }
    return all;
}

// The transport's GDA device state (nvshmemx_efa_gda_get_device_state), or NULL.
nvshmemx_efa_gda_device_state_t *gda_device_state() {
    auto get_state = reinterpret_cast<nvshmemx_efa_gda_device_state_t *(*)()>(transport_symbol("nvshmemx_efa_gda_get_device_state"));
    return get_state ? get_state() : nullptr;
}
// The same for the modes that cannot run without it: the PE fails and exits, saying the GDA status.
nvshmemx_efa_gda_device_state_t *gda_device_state_or_exit() {
    nvshmemx_efa_gda_device_state_t *s = gda_device_state();
    if (!s) {
        fail("GDA device state", "nvshmemx_efa_gda_get_device_state() returned NULL: " + gda_status());
        _exit(1);
    }
    return s;
}

int gda() {
    const std::string st = gda_status();
    line("RESULT", "gda_status " + st);
    expect(st.rfind("EFA GDA active", 0) == 0, "nvshmemx_efa_gda_status() says active", st);
    if (g_rails) {
        auto rails_fn = reinterpret_cast<int (*)()>(transport_symbol("nvshmemx_efa_gda_rails"));
        const int rails = rails_fn ? rails_fn() : -1;
        line("RESULT", fmt("gda_rails %d", rails));
        expect(rails == g_rails, fmt("GDA runs on %d rails (nvshmemx_efa_gda_rails)", g_rails),
               rails < 0 ? std::string("the loaded transport has no nvshmemx_efa_gda_rails (built before rails: ABI < 5)")
                         : fmt("%d rail(s); the status says why: %s", rails, st.c_str()));
        std::string where;
        expect(nics_at_my_gpu(g_rails, &where), fmt("NICs efaemu0 .. efaemu%d sit at this PE's GPU (%s)", g_rails - 1, where.c_str()), where);
#if NVSHMEMX_EFA_GDA_ABI_VERSION < 5
        fail("rails", fmt("pe_test was built against GDA device headers of ABI %d (no rails); rebuild it against the NVSHMEM under test",
                          NVSHMEMX_EFA_GDA_ABI_VERSION));
#endif
    }
    nvshmemx_efa_gda_device_state_t *s = gda_device_state();
    if (!s) {
        fail("GDA device state", "nvshmemx_efa_gda_get_device_state() returned NULL");
        return 1;
    }
    auto *base = static_cast<uint8_t *>(nvshmem_malloc(kSpan));
    auto *flag = static_cast<int *>(nvshmem_malloc(2 * sizeof(int)));  // [0] the round flag, [1] PE 1's acknowledgements
    CUDA_OK(cudaMemset(flag, 0, 2 * sizeof(int)));
    CUDA_OK(cudaMemset(base + 8 * M, 0, kSpan - 8 * M));
    fill<<<132, 256>>>(base, 8 * M, g_rank);
    Result *r;
    CUDA_OK(cudaMalloc(&r, sizeof *r));
    CUDA_OK(cudaMemset(r, 0, sizeof *r));
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    const double t0 = now_s();
    line("RESULT", fmt("kernel_start_unix %.3f", wall_s()));
    if (g_rank == 0) gda_initiator<<<1, 32 * kWarpCount>>>(s, base, flag, r);
    else gda_target<<<1, 32>>>(s, base, flag, r, wait_bound_ns());
    cudaError_t ke = cudaDeviceSynchronize();
#if NVSHMEMX_EFA_GDA_ABI_VERSION >= 6
    if (g_owned && g_rank == 0 && ke == cudaSuccess) {
        gda_owned<<<1, 32 * kWarpCount>>>(s, base, r);
        ke = cudaDeviceSynchronize();
    }
#endif
    expect(ke == cudaSuccess, "GDA kernels finished (no trap)", cudaGetErrorString(ke));
    Result h{};
    CUDA_OK(cudaMemcpy(&h, r, sizeof h, cudaMemcpyDeviceToHost));
    line("RESULT", fmt("gda_kernel_seconds %.2f", now_s() - t0));
    // Reported before any collective: after a failure the peer may wait for data that never comes, and a barrier
    // here would hide the failure behind a hang.
    // The state with its queues (ABI 5: about 260 KiB with the fixed peer entries of every rail: on the heap).
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> hsp(new nvshmemx_efa_gda_device_state_t());
    const nvshmemx_efa_gda_device_state_t &hs = *hsp;
    CUDA_OK(cudaMemcpy(hsp.get(), s, sizeof hs, cudaMemcpyDeviceToHost));
    const uint32_t n_rails = state_rails(hs);
    if (g_rank == 0) {
        expect(h.put == 0, "put of 3 MiB (+12345 B) posted and quiet", gda_err(h.put));
        expect(h.warps == 0, "8 warps x 32 concurrent 4 KiB puts (put_nbi_warp)", fmt("0x%x", h.warps));
        expect(h.batch == 0, "warp batch: 32 lanes, one doorbell per max_batch", fmt("0x%x", h.batch));
        expect(h.imm == 0, fmt("%d puts with immediate, more than the credit window of %u", kImms, state_imm_window(hs)), gda_err(h.imm));
        expect(h.get == 0, "get of 1 MiB", gda_err(h.get));
        expect(h.quiet == 0, fmt("%d x (256 KiB put, quiet, NVSHMEM atomic flag)", kQuietRounds), gda_err(h.quiet));
        const uint64_t bad = bad_bytes(base + kGetDst, M, 1, kSrc + 4 * M);
        expect(bad == 0, "get returned PE 1's bytes, byte-exact", fmt("%llu bytes differ", (unsigned long long)bad));
        // Exact per rail: each rail's retired prefix, CQ head and request ids cover exactly its own WQEs.
        std::string per_rail;
        uint32_t total = 0, idle_rails = 0;
        bool exact = true;
        for (uint32_t k = 0; k < n_rails; k++) {
            const nvshmemx_efa_gda_qp_t &qp = state_qp(hs, k);
            uint64_t want = 0;
            for (uint32_t i = 0; i < qp.sq_reserved; i++) want += (uint16_t)i;
            exact &= qp.sq_retired == qp.sq_reserved && qp.cq_head == qp.sq_reserved && qp.req_id_sum == want && qp.error == 0;
            per_rail += fmt("%s%u", k ? "," : "", qp.sq_reserved);
            total += qp.sq_reserved;
            idle_rails += qp.sq_reserved == 0;
            if (!exact)
                per_rail += fmt(" (rail %u: reserved %u retired %u cq_head %u req_sum %llu/%llu error %u)", k, qp.sq_reserved, qp.sq_retired,
                                qp.cq_head, (unsigned long long)qp.req_id_sum, (unsigned long long)want, qp.error);
        }
        line("RESULT", fmt("gda_rail_wqes %s", per_rail.c_str()));
        expect(exact, fmt("every WQE completed exactly once on its rail, no error (%u WQEs on %u rail%s: %s)", total, n_rails,
                          n_rails == 1 ? "" : "s", per_rail.c_str()),
               per_rail);
        if (g_rails > 1)
            expect(idle_rails == 0, fmt("the warps' posts spread over all %u rails (WQEs per rail %s)", n_rails, per_rail.c_str()), per_rail);
        if (g_owned) {
#if NVSHMEMX_EFA_GDA_ABI_VERSION >= 6
            const uint32_t n = hs.rail[0].n_owned;
            std::vector<nvshmemx_efa_gda_qp_t> oq(n);
            if (n) CUDA_OK(cudaMemcpy(oq.data(), hs.rail[0].owned, n * sizeof oq[0], cudaMemcpyDeviceToHost));
            std::string per;
            bool oexact = n == (uint32_t)g_owned;
            uint32_t used = 0;
            for (uint32_t k = 0; k < n; k++) {
                uint64_t want = 0;
                for (uint32_t i = 0; i < oq[k].sq_reserved; i++) want += (uint16_t)i;
                oexact &= oq[k].sq_retired == oq[k].sq_reserved && oq[k].cq_head == oq[k].sq_reserved && oq[k].req_id_sum == want &&
                          oq[k].error == 0;
                used += oq[k].sq_reserved;
                per += fmt("%s%u", k ? "," : "", oq[k].sq_reserved);
            }
            line("RESULT", fmt("gda_owned_wqes %s", per.c_str()));
            expect(h.owned == 0 && __builtin_popcount(h.owned_queues) == kWarpCount,
                   fmt("%d warps each owned a queue, put %d x 4 KiB through it and quieted it", kWarpCount, kPerWarp),
                   fmt("%s, queues held 0x%x", gda_err(h.owned).c_str(), h.owned_queues));
            expect(oexact && used == (uint32_t)(kWarpCount * kPerWarp),
                   fmt("%d owned queues on rail 0; every WQE on them completed exactly once (WQEs per queue %s)", g_owned, per.c_str()), per);
#else
            fail("owned queues", fmt("pe_test was built against GDA device headers of ABI %d (no owned queues); rebuild it against the "
                                     "NVSHMEM under test", NVSHMEMX_EFA_GDA_ABI_VERSION));
#endif
        }
    } else {
        expect(h.imm == 0, fmt("%d immediates taken from PE 0 (rx_poll), each once", kImms), fmt("0x%x", h.imm));
        expect(h.flag_wait_bad == 0, "data ordered before the flag in every quiet round",
               fmt("%llu sampled bytes missing when the flag arrived", h.flag_wait_bad));
    }
    if (g_failures) {
        line("RESULT", fmt("failures %d (ending at once: the peer may be waiting for what failed)", g_failures));
        _exit(1);
    }
    nvshmem_barrier_all();
    if (g_rank == 1) {
        uint64_t bad;
        bad = bad_bytes(base + kBig, kBigLen, 0, kSrc);
        expect(bad == 0, "the 3 MiB put landed byte-exact", fmt("%llu bytes differ", (unsigned long long)bad));
        bad = 0;
        for (int w = 0; w < kWarpCount; w++)
            bad += bad_bytes(base + kWarps + (uint64_t)w * kPerWarp * kWarpPut, kPerWarp * kWarpPut, 0,
                             kSrc + M + (uint64_t)w * kPerWarp * kWarpPut);
        expect(bad == 0, "the 256 concurrent warp puts landed byte-exact", fmt("%llu bytes differ", (unsigned long long)bad));
        bad = bad_bytes(base + kBatch, 32 * 128, 0, kSrc + 2 * M);
        expect(bad == 0, "the warp batch landed byte-exact", fmt("%llu bytes differ", (unsigned long long)bad));
        bad = 0;
        for (int i = 0; i < kImms; i++) bad += bad_bytes(base + kImm + i * 8, 8, 0, kSrc + 3 * M + i * 8);
        expect(bad == 0, "the data of every put with immediate landed", fmt("%llu bytes differ", (unsigned long long)bad));
        if (g_owned) {
            bad = bad_bytes(base + kOwnedDst, (uint64_t)kWarpCount * kPerWarp * kWarpPut, 0, kSrc + 6 * M);
            expect(bad == 0, "the puts through owned queues landed byte-exact", fmt("%llu bytes differ", (unsigned long long)bad));
        }
    }
    nvshmem_barrier_all();
    nvshmem_free(flag);
    nvshmem_free(base);
    return 0;
}

// ---- ignore_error: a kernel that ignores NIC errors (a negative control) ---------------------------------------
constexpr int kIgnorePuts = 1024;
__global__ void ignore_error_kernel(nvshmemx_efa_gda_device_state_t *s, uint8_t *base, int *flag) {
    if (threadIdx.x != 0) return;
    // The bug under test: every return value is dropped, so a failed completion goes unnoticed.
    for (int i = 0; i < kIgnorePuts; i++) {
        (void)efa_gda_put_nbi(s, base + kQuiet + (uint64_t)i * 4096, base + kSrc + (uint64_t)i * 4096, 4096, 1);
        if (i % 64 == 63) (void)efa_gda_quiet(s);
    }
    (void)efa_gda_quiet(s);
    nvshmem_fence();
    nvshmem_int_atomic_add(flag, 1, 1);
    nvshmem_quiet();
}

int ignore_error() {
    nvshmemx_efa_gda_device_state_t *s = gda_device_state_or_exit();
    auto *base = static_cast<uint8_t *>(nvshmem_malloc(kSpan));
    auto *flag = static_cast<int *>(nvshmem_malloc(sizeof(int)));
    CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
    CUDA_OK(cudaMemset(base + 8 * M, 0, kSpan - 8 * M));
    fill<<<132, 256>>>(base, 8 * M, g_rank);
    // Everything PE 1 allocates, before the barrier (as gda does): nothing of the run's own set-up overlaps PE 0's writes.
    int *seen;
    unsigned long long *waited;
    CUDA_OK(cudaMalloc(&seen, sizeof(int)));
    CUDA_OK(cudaMalloc(&waited, sizeof *waited));
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    line("RESULT", fmt("kernel_start_unix %.3f", wall_s()));
    if (g_rank == 0) {
        ignore_error_kernel<<<1, 32>>>(s, base, flag);
        const cudaError_t ke = cudaDeviceSynchronize();
        line("RESULT", fmt("ignore_error_kernel_end_unix %.3f", wall_s()));
        expect(ke == cudaSuccess, fmt("ignore_error: the kernel put %d x 4 KiB, ignored every return value and reported success", kIgnorePuts),
               cudaGetErrorString(ke));
    } else {
        wait_flag<<<1, 1>>>(flag, 1, wait_bound_ns() / 1e9, seen, waited);
        const cudaError_t ke = cudaDeviceSynchronize();
        expect(ke == cudaSuccess, "ignore_error: the wait for PE 0's announcement ended", cudaGetErrorString(ke));
        line("RESULT", fmt("ignore_error_wait_end_unix %.3f", wall_s()));
        int h_seen = 0;
        CUDA_OK(cudaMemcpy(&h_seen, seen, sizeof h_seen, cudaMemcpyDeviceToHost));
        const uint64_t bad = h_seen ? bad_bytes(base + kQuiet, (uint64_t)kIgnorePuts * 4096, 0, kSrc) : 0;
        expect(h_seen && bad == 0, "ignore_error: every byte PE 0's kernel said it sent landed",
               h_seen ? fmt("%llu of %d bytes missing: the kernel reported success over a NIC error", (unsigned long long)bad, kIgnorePuts * 4096)
                      : std::string("PE 0's announcement never came"));
    }
    if (g_failures) {
        line("RESULT", fmt("failures %d", g_failures));
        _exit(1);
    }
    return 0;
}

// ---- pe_errors: a failure stays with the PE it belongs to (review 3, finding 6) ---------------------------------
// rc: [0] the put to PE 1, [1] the wait for PE 1, [2] the put to PE 0 after it, [3] the wait for PE 0, [4] the wait
// for PE 1 again. One thread posts and waits, each on the rail the device API's policy gives the PE.
constexpr uint64_t kPeErrorsLen = 64 << 10;
__global__ void pe_errors_kernel(nvshmemx_efa_gda_device_state_t *s, uint8_t *base, int *rc) {
    if (threadIdx.x != 0) return;
    const uint32_t to1 = efa_gda_rail_of(s, 1, 0), to0 = efa_gda_rail_of(s, 0, 0);
    rc[0] = efa_gda_put_nbi_on(s, to1, base + kQuiet, base + kSrc, kPeErrorsLen, 1);
    rc[1] = efa_gda_quiet_rail_pe(s, to1, 1);
    rc[2] = efa_gda_put_nbi_on(s, to0, base + kQuiet, base + kSrc, kPeErrorsLen, 0);
    rc[3] = efa_gda_quiet_rail_pe(s, to0, 0);
    rc[4] = efa_gda_quiet_rail_pe(s, to1, 1);
}

// The end without a collective: once PE 1 has failed, every quiet of all PEs on PE 0 (nvshmem_barrier_all's, finalize's)
// reports PE 1's error and traps, as it must (run 4 on 1x H200: PE 0's closing barrier trapped with "NIC: error
// completion (0xd)" after both checks passed). The PEs part through a file beside the unique id instead, then end.
void pe_errors_part(const char *uid_file) {
    const std::string done = std::string(uid_file) + ".pe_errors.done";
    if (g_rank == 0) {
        FILE *f = fopen(done.c_str(), "w");
        if (!f || fclose(f) != 0) fail("pe_errors: telling PE 1 the checks ended", done);
    } else {
        const double end = now_s() + wait_bound_ns() / 1e9 + 30;
        while (access(done.c_str(), F_OK) != 0 && now_s() < end) usleep(20000);
        if (access(done.c_str(), F_OK) != 0) fail("pe_errors: PE 0's end", done + " did not appear within the bound");
    }
    line("RESULT", fmt("failures %d", g_failures));
    _exit(g_failures ? 1 : 0);
}

int pe_errors(const char *uid_file) {
    nvshmemx_efa_gda_device_state_t *s = gda_device_state_or_exit();
    auto *base = static_cast<uint8_t *>(nvshmem_malloc(kSpan));
    CUDA_OK(cudaMemset(base + 8 * M, 0, kSpan - 8 * M));
    fill<<<132, 256>>>(base, 8 * M, g_rank);
    int *rc;
    CUDA_OK(cudaMalloc(&rc, 5 * sizeof(int)));
    CUDA_OK(cudaMemset(rc, 0xff, 5 * sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    if (g_rank == 0) {
        line("RESULT", "gda_status " + gda_status());
        pe_errors_kernel<<<1, 32>>>(s, base, rc);
        const cudaError_t ke = cudaDeviceSynchronize();
        int h[5] = {-1, -1, -1, -1, -1};
        if (ke == cudaSuccess) CUDA_OK(cudaMemcpy(h, rc, sizeof h, cudaMemcpyDeviceToHost));
        const std::string got = fmt("kernel %s; put to PE 1 %d, wait for PE 1 %d, put to PE 0 %d, wait for PE 0 %d, wait for PE 1 again %d",
                                    cudaGetErrorString(ke), h[0], h[1], h[2], h[3], h[4]);
        line("RESULT", "pe_errors " + got);
        const uint64_t bad = ke == cudaSuccess ? bad_bytes(base + kQuiet, kPeErrorsLen, 0, kSrc) : kPeErrorsLen;
        expect(ke == cudaSuccess && h[0] == 0 && h[1] > 0 && h[1] < 0x100 && h[4] == h[1],
               "pe_errors: PE 1 refusing, the wait for PE 1 reports its failed completion", got);
        expect(ke == cudaSuccess && h[2] == 0 && h[3] == 0 && bad == 0,
               fmt("pe_errors: after PE 1's failure, a %llu B put to PE 0 posts, its wait returns 0 and every byte landed",
                   (unsigned long long)kPeErrorsLen),
               fmt("%s; %llu bytes wrong", got.c_str(), (unsigned long long)bad));
    }
    pe_errors_part(uid_file);
    return 0;
}
#endif

}  // namespace

int main(int argc, char **argv) {
    const char *uid = nullptr, *mode = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rank") && i + 1 < argc) g_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rails") && i + 1 < argc) g_rails = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--owned") && i + 1 < argc) g_owned = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--uid-file") && i + 1 < argc) uid = argv[++i];
        else mode = argv[i];
    }
    if (g_rank < 0 || g_rank > 1 || !uid || !mode) {
        fprintf(stderr, "usage: pe_test --rank 0|1 --uid-file FILE [--rails N] [--owned N] perf|lazy|gda|ignore_error|pe_errors|init\n");
        return 2;
    }
    int dev = -1;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaGetDevice(&dev));
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    expect(ndev == 1, "this PE sees exactly one GPU (CUDA_VISIBLE_DEVICES), so NVLink cannot carry its traffic",
           fmt("%d visible", ndev));
    bootstrap(uid);
    // PEs time-sliced on one GPU (issue 34) must not be an "MPG run" to NVSHMEM (its limited mode exits in collectives):
    // each is a host of its own. The checks read this line.
    const int st = nvshmemx_init_status();
    line("RESULT", fmt("init_status %s", st == NVSHMEM_STATUS_IS_INITIALIZED ? "initialized"
                                         : st == NVSHMEM_STATUS_LIMITED_MPG  ? "limited_mpg"
                                         : st == NVSHMEM_STATUS_FULL_MPG     ? "full_mpg"
                                                                             : "other"));
    const std::string m = mode;
    if (m == "perf") perf();
    else if (m == "lazy") lazy();
#ifdef PE_TEST_GDA
    else if (m == "gda") gda();
    else if (m == "ignore_error") ignore_error();
    else if (m == "pe_errors") pe_errors(uid);
#endif
    else if (m == "init") line("RESULT", "gda_status " + gda_status());
    else fail("mode", m + " is not built into this pe_test");
    nvshmem_barrier_all();
    nvshmem_finalize();
    line("RESULT", fmt("failures %d", g_failures));
    return g_failures ? 1 : 0;
}
