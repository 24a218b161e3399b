// One PE of the put table of `nvshmem-efa bench` (bench/gda-signals/bench.sh starts two, one per GPU): PE 0 puts
// to PE 1 over a range of message sizes, once through the EFA GDA device path (efa_gda_put_nbi_warp, then
// efa_gda_quiet) and once through NVSHMEM's own path (nvshmemx_putmem_nbi_warp, then nvshmem_quiet: NVSHMEM's CPU
// proxy on its libfabric transport), in the same process, from the same symmetric buffers. PE 1 checks every
// byte of the last put of each size and mode. Bootstrapped without MPI: NVSHMEM's unique-id bootstrap, the id
// passed through a file. Mode `api` is NVSHMEM's own path again, under its own name: in a build with the device API hooks run
// with NVSHMEM_EFA_GDA_DEVICE_API=1 it is NVSHMEM's device API over GDA (bench.sh runs it as a process of its own,
// the proxy column with the switch at 0).
//
//   put_bw --rank 0|1 --uid-file FILE [--sizes 256,1024,...] [--modes gda,proxy,api] [--bytes-per-size N]
//
// Output (PE 0): "ROW <bytes> <mode> <iters> <us per put> <GB/s>"; both PEs: "CHECK <bytes> <mode> ok|bad <n>",
// "SKIP <mode> <why>", "INFO <text>", "FAIL <why>". Exit 0 when every put landed byte-exact.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <nvshmem_efa/nvshmemx_efa_gda_device.cuh>

namespace {

int g_rank = -1, g_failures = 0;

void say(const char *kind, const char *fmt, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    printf("%s %s\n", kind, b);
    fflush(stdout);
}

#define CUDA_OK(call)                                                           \
    do {                                                                        \
        cudaError_t e_ = (call);                                                \
        if (e_ != cudaSuccess) {                                                \
            say("FAIL", "PE %d: %s: %s", g_rank, #call, cudaGetErrorString(e_)); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void bootstrap(const char *uid_file) {
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (g_rank == 0) {
        if (nvshmemx_get_uniqueid(&id) != 0) {
            say("FAIL", "nvshmemx_get_uniqueid failed");
            exit(1);
        }
        const std::string tmp = std::string(uid_file) + ".tmp";
        FILE *f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), uid_file) != 0) {
            say("FAIL", "cannot write the unique id to %s", uid_file);
            exit(1);
        }
    } else {
        const double end = now_s() + 120;
        for (;;) {
            FILE *f = fopen(uid_file, "rb");
            if (f) {
                const bool got = fread(&id, sizeof id, 1, f) == 1;
                fclose(f);
                if (got) break;
            }
            if (now_s() > end) {
                say("FAIL", "the unique id did not appear in %s within 120 s (PE 0 failed?)", uid_file);
                exit(1);
            }
            usleep(20000);
        }
    }
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_set_attr_uniqueid_args(g_rank, 2, &id, &attr);
    if (int rc = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr)) {
        say("FAIL", "PE %d: nvshmemx_init_attr failed (%d); NVSHMEM_DEBUG=INFO says why", g_rank, rc);
        exit(1);
    }
    if (nvshmem_n_pes() != 2) {
        say("FAIL", "NVSHMEM started %d PEs, want 2", nvshmem_n_pes());
        exit(1);
    }
}

// The GDA host API lives in NVSHMEM's libfabric transport, a plugin loaded RTLD_LOCAL: found by module.
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

__host__ __device__ inline uint8_t pattern(uint64_t i, uint32_t salt) { return (uint8_t)(i * 131 + (i >> 12) + salt * 29 + 7); }

__global__ void fill(uint8_t *p, uint64_t n, uint32_t salt) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) p[i] = pattern(i, salt);
}

__global__ void count_bad(const uint8_t *p, uint64_t n, uint32_t salt, unsigned long long *bad) {
    unsigned long long mine = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        mine += p[i] != pattern(i, salt);
    if (mine) atomicAdd(bad, mine);
}

// One warp posts iters puts of bytes each from src to dst on PE peer, then waits for all of them. err: the first
// GDA error (the put table reports it instead of timing a failure).
__global__ void gda_puts(nvshmemx_efa_gda_device_state_t *s, uint8_t *dst, const uint8_t *src, uint64_t bytes, int iters, int peer,
                         int *err) {
    int e = 0;
    for (int i = 0; i < iters && !e; i++) e = efa_gda_put_nbi_warp(s, dst, src, bytes, peer);
    if (threadIdx.x == 0) {
        const int q = efa_gda_quiet(s);
        *err = e ? e : q;
        if (*err) printf("FAIL gda put of %llu bytes: %s (0x%x)\n", (unsigned long long)bytes, efa_gda_strerror(*err), *err);
    }
}

__global__ void proxy_puts(uint8_t *dst, const uint8_t *src, uint64_t bytes, int iters, int peer) {
    for (int i = 0; i < iters; i++) nvshmemx_putmem_nbi_warp(dst, src, bytes, peer);
    nvshmem_quiet();
}

std::vector<uint64_t> parse_sizes(const char *list) {
    std::vector<uint64_t> v;
    for (const char *p = list; *p;) {
        char *end;
        uint64_t n = strtoull(p, &end, 10);
        if (*end == 'K' || *end == 'k') n <<= 10, end++;
        else if (*end == 'M' || *end == 'm') n <<= 20, end++;
        if (end == p || n == 0) {
            say("FAIL", "--sizes: cannot read \"%s\"", p);
            exit(2);
        }
        v.push_back(n);
        p = *end == ',' ? end + 1 : end;
    }
    return v;
}

}  // namespace

int main(int argc, char **argv) {
    const char *uid = nullptr, *sizes_arg = "256,1K,4K,16K,64K,256K,1M,4M,16M,64M", *modes = "gda,proxy";
    uint64_t per_size = 256ull << 20;  // bytes moved per size and mode (iterations = this / size, 4 .. 400)
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--rank" && v) g_rank = atoi(argv[++i]);
        else if (a == "--uid-file" && v) uid = argv[++i];
        else if (a == "--sizes" && v) sizes_arg = argv[++i];
        else if (a == "--modes" && v) modes = argv[++i];
        else if (a == "--bytes-per-size" && v) per_size = strtoull(argv[++i], nullptr, 10);
        else {
            fprintf(stderr, "usage: put_bw --rank 0|1 --uid-file FILE [--sizes LIST] [--modes gda,proxy,api] [--bytes-per-size N]\n");
            return 2;
        }
    }
    if ((g_rank != 0 && g_rank != 1) || !uid) {
        fprintf(stderr, "put_bw: --rank 0|1 and --uid-file are required\n");
        return 2;
    }
    const std::vector<uint64_t> sizes = parse_sizes(sizes_arg);
    uint64_t max = 0;
    for (uint64_t s : sizes) max = s > max ? s : max;
    // NVSHMEM starts on the current CUDA device and fails without one (seen on 2x H200: init returned an error, the
    // first nvshmem_malloc then exited). Each process sees one GPU.
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
        say("FAIL", "PE %d: no usable CUDA device (cudaSetDevice(0))", g_rank);
        return 1;
    }
    bootstrap(uid);

    auto status = reinterpret_cast<const char *(*)()>(transport_symbol("nvshmemx_efa_gda_status"));
    auto get_state = reinterpret_cast<nvshmemx_efa_gda_device_state_t *(*)()>(transport_symbol("nvshmemx_efa_gda_get_device_state"));
    nvshmemx_efa_gda_device_state_t *gda = get_state ? get_state() : nullptr;
    say("INFO", "PE %d: %s", g_rank, status ? status() : "no EFA GDA transport in the loaded NVSHMEM");
    const bool want_gda = strstr(modes, "gda") != nullptr, want_proxy = strstr(modes, "proxy") != nullptr, want_api = strstr(modes, "api") != nullptr;
    if (want_gda && !gda && g_rank == 0) say("SKIP", "gda %s", status ? status() : "no EFA GDA transport in the loaded NVSHMEM");

    auto *src = static_cast<uint8_t *>(nvshmem_malloc(max));
    auto *dst = static_cast<uint8_t *>(nvshmem_malloc(max));
    if (!src || !dst) {
        say("FAIL", "PE %d: nvshmem_malloc of 2 x %llu bytes failed", g_rank, (unsigned long long)max);
        return 1;
    }
    int *d_err;
    unsigned long long *d_bad;
    CUDA_OK(cudaMalloc(&d_err, sizeof *d_err));
    CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));

    uint32_t salt = 0;
    for (uint64_t bytes : sizes) {
        for (const char *mode : {"gda", "proxy", "api"}) {
            const bool is_gda = mode[0] == 'g';
            if (is_gda ? !(want_gda && gda) : !(mode[0] == 'p' ? want_proxy : want_api)) continue;
            salt++;
            uint64_t iters64 = per_size / bytes;
            const int iters = (int)(iters64 < 4 ? 4 : iters64 > 400 ? 400 : iters64);
            CUDA_OK(cudaMemset(dst, 0, bytes));
            fill<<<132, 256>>>(src, bytes, salt);
            CUDA_OK(cudaDeviceSynchronize());
            nvshmem_barrier_all();
            if (g_rank == 0) {
                // One untimed put first: connection set-up and first-touch costs stay out of the table.
                if (is_gda) gda_puts<<<1, 32>>>(gda, dst, src, bytes, 1, 1, d_err);
                else proxy_puts<<<1, 32>>>(dst, src, bytes, 1, 1);
                CUDA_OK(cudaDeviceSynchronize());
                CUDA_OK(cudaEventRecord(a));
                if (is_gda) gda_puts<<<1, 32>>>(gda, dst, src, bytes, iters, 1, d_err);
                else proxy_puts<<<1, 32>>>(dst, src, bytes, iters, 1);
                CUDA_OK(cudaEventRecord(b));
                CUDA_OK(cudaEventSynchronize(b));
                float ms = 0;
                CUDA_OK(cudaEventElapsedTime(&ms, a, b));
                int err = 0;
                if (is_gda) CUDA_OK(cudaMemcpy(&err, d_err, sizeof err, cudaMemcpyDeviceToHost));
                if (err) {
                    say("FAIL", "gda put of %llu bytes failed with 0x%x (the device said why above)", (unsigned long long)bytes, err);
                    g_failures++;
                } else {
                    const double us = ms * 1e3 / iters;
                    say("ROW", "%llu %s %d %.3f %.4f", (unsigned long long)bytes, mode, iters, us, bytes / (us * 1e3));
                }
            }
            nvshmem_barrier_all();
            if (g_rank == 1) {
                CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
                count_bad<<<132, 256>>>(dst, bytes, salt, d_bad);
                unsigned long long bad = 0;
                CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
                say("CHECK", "%llu %s %s %llu", (unsigned long long)bytes, mode, bad ? "bad" : "ok", bad);
                if (bad) g_failures++;
            }
            nvshmem_barrier_all();
        }
    }
    nvshmem_free(dst);
    nvshmem_free(src);
    nvshmem_finalize();
    return g_failures ? 1 : 0;
}
