// softgdr: a user-space libgdrapi.so.2 for test hosts without the gdrdrv kernel module (the GPU hosts cannot
// load modules). Test-only; never shipped with the product.
//
// What NVSHMEM 3.4.5 needs (src/modules/transport/common/transport_gdr_common.cpp and libfabric.cpp, v3.4.5-0):
//   - symbols, looked up by name: gdr_runtime_get_version, gdr_driver_get_version, gdr_open, gdr_close,
//     gdr_pin_buffer, gdr_unpin_buffer, gdr_map, gdr_unmap, gdr_get_info, gdr_copy_from_mapping,
//     gdr_copy_to_mapping; the runtime version must be 2.x with x >= the minor NVSHMEM compiled with;
//   - pin + map + get_info of every device heap registration (cpu_ptr = map + (buf - info.va));
//   - RAW POINTER ACCESS to the mapping: the proxy's staged atomics read and write the target word through the
//     mapped pointer (`old = *ptr; *ptr = new`), and the ACK path stores the fetched value and flag through it;
//     enforce_cst reads 4 bytes with gdr_copy_from_mapping.
//
// Because of the raw pointer accesses, the mapping must behave like GDRCopy's uncached BAR mapping: every load
// sees the GPU's current bytes, every store reaches GPU memory. softgdr maps PROT_NONE host pages; an access
// faults, the handler fills the page from the GPU (cuMemcpy on a private non-blocking stream), opens it and
// single-steps the faulting instruction (x86 trap flag); the trap handler writes back only the bytes the
// instruction changed, then closes the page again. One instruction at a time is coherent with the GPU, as the
// BAR mapping is; it is slow (two copies per access), which does not matter for a path that carries signals.
// Limits: x86-64 only; accesses from two threads to the same page at the same instant are not serialised
// (NVSHMEM's proxy does them from one thread under its gdrRecvMutex); a SIGSEGV/SIGTRAP handler installed
// later without chaining disables it.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;

struct gdr;
typedef struct gdr *gdr_t;
typedef struct gdr_mh_s {
    unsigned long h;
} gdr_mh_t;
// The leading fields of gdr_info_t in every GDRCopy 2.x (v1 and v2 layouts agree on these); only they are written.
struct softgdr_info_prefix {
    uint64_t va;
    uint64_t mapped_size;
    uint32_t page_size;
};
}

namespace {

constexpr int kApiMajor = 2, kApiMinor = 5;  // GDRCopy's current API level
constexpr uint64_t kGpuPage = 1ull << 16;
constexpr size_t kHostPage = 4096;
constexpr int kMaxPins = 1024;
constexpr int kMaxPending = 8;  // pages one instruction may touch (string instructions are stepped per iteration)

struct Cuda {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
} cu;

struct Pin {
    bool used;
    CUdeviceptr base;  // aligned down to the GPU page, as gdrdrv reports it
    size_t size;       // aligned up
    int device;
    CUcontext ctx;
    CUstream stream;
    uint8_t *map;  // host view, PROT_NONE while idle; null until gdr_map
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;     // pins table
pthread_mutex_t g_fault = PTHREAD_MUTEX_INITIALIZER;  // one stepped instruction at a time
Pin g_pins[kMaxPins];
struct sigaction g_old_segv, g_old_trap;
bool g_installed = false;
bool g_cuda_ok = false;

struct Pending {
    uint8_t *page;
    Pin *pin;
    uint8_t twin[kHostPage];
};
thread_local Pending t_pending[kMaxPending];
thread_local int t_npending = 0;

// What a state dump reports (softgdr_describe; efaemu's dump calls it): lock-free, written in the handlers.
struct Counters {
    std::atomic<uint64_t> faults{0}, steps{0}, writebacks{0}, wb_bytes{0}, copies{0}, copy_ns{0}, copy_max_ns{0};
    std::atomic<uint64_t> last_fault_host{0}, last_fault_gpu{0}, last_fault_ns{0};
    std::atomic<long> last_fault_tid{0};
    std::atomic<long> handler_tid{0};        // the thread holding g_fault (between its fault and its trap)
    std::atomic<uint64_t> handler_since{0};
    std::atomic<uint64_t> copy_since{0};     // nonzero while a copy is under way
    std::atomic<int> copy_dir{0};            // 1: GPU to host, 2: host to GPU
    std::atomic<int> waiting{0};             // threads waiting for g_fault
};
Counters g_c;

uint64_t mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Brackets one CUDA copy for the counters.
struct CopyTimer {
    uint64_t t0;
    explicit CopyTimer(int dir) : t0(mono_ns()) {
        g_c.copy_dir = dir;
        g_c.copy_since = t0;
    }
    ~CopyTimer() {
        const uint64_t d = mono_ns() - t0;
        g_c.copy_since = 0;
        g_c.copies++;
        g_c.copy_ns += d;
        uint64_t m = g_c.copy_max_ns.load();
        while (d > m && !g_c.copy_max_ns.compare_exchange_weak(m, d)) {
        }
    }
};

template <typename F>
bool sym(void *h, const char *n, F *f) {
    *f = reinterpret_cast<F>(dlsym(h, n));
    return *f != nullptr;
}

bool load_cuda() {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        g_cuda_ok = h && sym(h, "cuInit", &cu.cuInit) && sym(h, "cuPointerGetAttribute", &cu.cuPointerGetAttribute) &&
                    sym(h, "cuDeviceGet", &cu.cuDeviceGet) &&
                    sym(h, "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain) &&
                    sym(h, "cuDevicePrimaryCtxRelease_v2", &cu.cuDevicePrimaryCtxRelease) &&
                    sym(h, "cuCtxPushCurrent_v2", &cu.cuCtxPushCurrent) &&
                    sym(h, "cuCtxPopCurrent_v2", &cu.cuCtxPopCurrent) && sym(h, "cuStreamCreate", &cu.cuStreamCreate) &&
                    sym(h, "cuStreamSynchronize", &cu.cuStreamSynchronize) &&
                    sym(h, "cuMemcpyDtoHAsync_v2", &cu.cuMemcpyDtoHAsync) &&
                    sym(h, "cuMemcpyHtoDAsync_v2", &cu.cuMemcpyHtoDAsync) && cu.cuInit(0) == 0;
    });
    return g_cuda_ok;
}

// Device <-> host copies for one pin, in its device's primary context, on its private stream.
bool dev_to_host(Pin *p, void *h, CUdeviceptr d, size_t n) {
    CUcontext prev;
    if (cu.cuCtxPushCurrent(p->ctx)) return false;
    CopyTimer t(1);
    bool ok = cu.cuMemcpyDtoHAsync(h, d, n, p->stream) == 0 && cu.cuStreamSynchronize(p->stream) == 0;
    cu.cuCtxPopCurrent(&prev);
    return ok;
}

bool host_to_dev(Pin *p, CUdeviceptr d, const void *h, size_t n) {
    CUcontext prev;
    if (cu.cuCtxPushCurrent(p->ctx)) return false;
    CopyTimer t(2);
    bool ok = cu.cuMemcpyHtoDAsync(d, h, n, p->stream) == 0 && cu.cuStreamSynchronize(p->stream) == 0;
    cu.cuCtxPopCurrent(&prev);
    return ok;
}

Pin *pin_of_host(const void *addr) {
    const uint8_t *a = static_cast<const uint8_t *>(addr);
    for (auto &p : g_pins)
        if (p.used && p.map && a >= p.map && a < p.map + p.size) return &p;
    return nullptr;
}

void chain(int sig, siginfo_t *si, void *uc, const struct sigaction &old) {
    if (old.sa_flags & SA_SIGINFO) {
        old.sa_sigaction(sig, si, uc);
    } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
        old.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);  // re-executing the instruction now kills the process with the right signal
    }
}

void on_segv(int sig, siginfo_t *si, void *ctx) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of_host(si->si_addr);
    pthread_mutex_unlock(&g_mu);
    if (!p || t_npending == kMaxPending) return chain(sig, si, ctx, g_old_segv);
    if (t_npending == 0) {
        g_c.waiting++;
        pthread_mutex_lock(&g_fault);
        g_c.waiting--;
        g_c.handler_tid = syscall(SYS_gettid);
        g_c.handler_since = mono_ns();
    }
    g_c.faults++;
    g_c.last_fault_host = (uint64_t)(uintptr_t)si->si_addr;
    g_c.last_fault_gpu = p->base + (uint64_t)(static_cast<uint8_t *>(si->si_addr) - p->map);
    g_c.last_fault_ns = mono_ns();
    g_c.last_fault_tid = syscall(SYS_gettid);
    uint8_t *page = reinterpret_cast<uint8_t *>(reinterpret_cast<uintptr_t>(si->si_addr) & ~(kHostPage - 1));
    Pending &pd = t_pending[t_npending++];
    pd.page = page;
    pd.pin = p;
    mprotect(page, kHostPage, PROT_READ | PROT_WRITE);
    if (!dev_to_host(p, page, p->base + (CUdeviceptr)(page - p->map), kHostPage)) {
        fprintf(stderr, "softgdr: reading GPU memory behind %p failed\n", si->si_addr);
        abort();
    }
    memcpy(pd.twin, page, kHostPage);
    static_cast<ucontext_t *>(ctx)->uc_mcontext.gregs[REG_EFL] |= 0x100;  // trap after this one instruction
}

void on_trap(int sig, siginfo_t *si, void *ctx) {
    if (t_npending == 0) return chain(sig, si, ctx, g_old_trap);
    g_c.steps++;
    for (int k = 0; k < t_npending; k++) {
        Pending &pd = t_pending[k];
        // Write back only what the instruction changed: bytes the GPU changed meanwhile stay the GPU's.
        for (size_t i = 0; i < kHostPage;) {
            if (pd.page[i] == pd.twin[i]) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < kHostPage && pd.page[j] != pd.twin[j]) j++;
            g_c.writebacks++;
            g_c.wb_bytes += j - i;
            if (!host_to_dev(pd.pin, pd.pin->base + (CUdeviceptr)(pd.page - pd.pin->map) + i, pd.page + i, j - i)) {
                fprintf(stderr, "softgdr: writing GPU memory failed\n");
                abort();
            }
            i = j;
        }
        mprotect(pd.page, kHostPage, PROT_NONE);
    }
    t_npending = 0;
    static_cast<ucontext_t *>(ctx)->uc_mcontext.gregs[REG_EFL] &= ~0x100ll;
    g_c.handler_tid = 0;
    g_c.handler_since = 0;
    pthread_mutex_unlock(&g_fault);
}

void install() {
    if (g_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: an instruction spanning two pages faults twice
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_segv;
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, &g_old_trap);
    g_installed = true;
}

Pin *pin_of(gdr_mh_t mh) { return mh.h < kMaxPins && g_pins[mh.h].used ? &g_pins[mh.h] : nullptr; }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void gdr_runtime_get_version(int *major, int *minor) {
    *major = kApiMajor;
    *minor = kApiMinor;
}

__attribute__((visibility("default"))) int gdr_driver_get_version(gdr_t, int *major, int *minor) {
    *major = kApiMajor;
    *minor = kApiMinor;
    return 0;
}

__attribute__((visibility("default"))) gdr_t gdr_open(void) {
    if (!load_cuda()) {
        fprintf(stderr, "softgdr: no usable CUDA driver (libcuda.so.1)\n");
        return nullptr;
    }
    pthread_mutex_lock(&g_mu);
    install();
    pthread_mutex_unlock(&g_mu);
    static char token;
    return reinterpret_cast<gdr_t>(&token);
}

__attribute__((visibility("default"))) int gdr_close(gdr_t) { return 0; }

__attribute__((visibility("default"))) int gdr_pin_buffer(gdr_t, unsigned long addr, size_t size, uint64_t, uint32_t,
                                                          gdr_mh_t *handle) {
    unsigned type = 0;
    int ordinal = 0;
    if (!g_cuda_ok || cu.cuPointerGetAttribute(&type, 2, addr) || type != 2 ||
        cu.cuPointerGetAttribute(&ordinal, 9, addr))
        return EINVAL;  // not GPU memory
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    if (cu.cuDeviceGet(&dev, ordinal) || cu.cuDevicePrimaryCtxRetain(&ctx, dev)) return EINVAL;
    CUcontext prev;
    cu.cuCtxPushCurrent(ctx);
    CUresult r = cu.cuStreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */);
    cu.cuCtxPopCurrent(&prev);
    if (r) return EINVAL;
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    for (int i = 0; i < kMaxPins && slot < 0; i++)
        if (!g_pins[i].used) slot = i;
    if (slot >= 0) {
        Pin &p = g_pins[slot];
        p.used = true;
        p.base = addr & ~(kGpuPage - 1);
        p.size = ((addr + size + kGpuPage - 1) & ~(kGpuPage - 1)) - p.base;
        p.device = ordinal;
        p.ctx = ctx;
        p.stream = stream;
        p.map = nullptr;
        handle->h = (unsigned long)slot;
    }
    pthread_mutex_unlock(&g_mu);
    return slot >= 0 ? 0 : ENOMEM;
}

__attribute__((visibility("default"))) int gdr_unpin_buffer(gdr_t, gdr_mh_t mh) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    int ret = p && !p->map ? 0 : EINVAL;  // unmap first, as with GDRCopy
    if (!ret) {
        p->used = false;
        cu.cuDevicePrimaryCtxRelease(p->device);
    }
    pthread_mutex_unlock(&g_mu);
    return ret;
}

__attribute__((visibility("default"))) int gdr_get_info(gdr_t, gdr_mh_t mh, softgdr_info_prefix *info) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    if (p) {
        info->va = p->base;
        info->mapped_size = p->size;
        info->page_size = (uint32_t)kGpuPage;
    }
    pthread_mutex_unlock(&g_mu);
    return p ? 0 : EINVAL;
}

__attribute__((visibility("default"))) int gdr_get_info_v2(gdr_t g, gdr_mh_t mh, softgdr_info_prefix *info) {
    return gdr_get_info(g, mh, info);
}

__attribute__((visibility("default"))) int gdr_map(gdr_t, gdr_mh_t mh, void **va, size_t) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    int ret = EINVAL;
    if (p && !p->map) {
        // The whole pinned range from its aligned base, like gdrdrv's mapping (callers add buf - info.va).
        void *m = mmap(nullptr, p->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) {
            p->map = static_cast<uint8_t *>(m);
            *va = m;
            ret = 0;
        } else {
            ret = ENOMEM;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return ret;
}

__attribute__((visibility("default"))) int gdr_unmap(gdr_t, gdr_mh_t mh, void *va, size_t) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    int ret = p && p->map == va ? 0 : EINVAL;
    if (!ret) {
        munmap(p->map, p->size);
        p->map = nullptr;
    }
    pthread_mutex_unlock(&g_mu);
    return ret;
}

__attribute__((visibility("default"))) int gdr_copy_to_mapping(gdr_mh_t mh, void *map_d_ptr, const void *h_ptr, size_t size) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    bool in = p && p->map && static_cast<uint8_t *>(map_d_ptr) >= p->map &&
              static_cast<uint8_t *>(map_d_ptr) + size <= p->map + p->size;
    pthread_mutex_unlock(&g_mu);
    if (!in) return EINVAL;
    return host_to_dev(p, p->base + (CUdeviceptr)(static_cast<uint8_t *>(map_d_ptr) - p->map), h_ptr, size) ? 0 : EIO;
}

__attribute__((visibility("default"))) int gdr_copy_from_mapping(gdr_mh_t mh, void *h_ptr, const void *map_d_ptr, size_t size) {
    pthread_mutex_lock(&g_mu);
    Pin *p = pin_of(mh);
    const uint8_t *m = static_cast<const uint8_t *>(map_d_ptr);
    bool in = p && p->map && m >= p->map && m + size <= p->map + p->size;
    pthread_mutex_unlock(&g_mu);
    if (!in) return EINVAL;
    return dev_to_host(p, h_ptr, p->base + (CUdeviceptr)(m - p->map), size) ? 0 : EIO;
}

// Not part of GDRCopy: one line of state for efaemu's state dump (dlsym'd by name). An access held in the fault
// handler for more than a second is marked STUCK.
__attribute__((visibility("default"))) int softgdr_describe(char *buf, size_t len) {
    const uint64_t now = mono_ns();
    auto ago = [now](uint64_t t) { return t ? (double)(now - t) / 1e9 : -1.0; };
    int pins = 0;
    uint64_t mapped = 0;
    for (auto &p : g_pins)  // racy snapshot, for reporting only
        if (p.used) {
            pins++;
            if (p.map) mapped += p.size;
        }
    const long htid = g_c.handler_tid.load();
    const uint64_t hsince = g_c.handler_since.load(), csince = g_c.copy_since.load();
    char now_line[256] = "";
    if (htid)
        snprintf(now_line, sizeof now_line, "; thread %ld in the fault handler for %.3f s%s%s", htid, ago(hsince),
                 csince ? (g_c.copy_dir == 1 ? ", in a GPU-to-host copy" : ", in a host-to-GPU copy") : "",
                 ago(hsince) > 1.0 ? " (STUCK)" : "");
    const uint64_t copies = g_c.copies.load();
    return snprintf(buf, len,
                    "softgdr: %d pins (%.1f MiB mapped); faults %llu, single steps %llu, write-backs %llu (%llu bytes); "
                    "CUDA copies %llu (mean %.1f us, max %.1f us); last fault at %#llx (GPU %#llx) by thread %ld, %.3f s "
                    "ago; %d threads waiting for the fault lock%s\n",
                    pins, (double)mapped / 1048576.0, (unsigned long long)g_c.faults.load(),
                    (unsigned long long)g_c.steps.load(), (unsigned long long)g_c.writebacks.load(),
                    (unsigned long long)g_c.wb_bytes.load(), (unsigned long long)copies,
                    copies ? (double)g_c.copy_ns.load() / 1e3 / (double)copies : 0.0, (double)g_c.copy_max_ns.load() / 1e3,
                    (unsigned long long)g_c.last_fault_host.load(), (unsigned long long)g_c.last_fault_gpu.load(),
                    g_c.last_fault_tid.load(), ago(g_c.last_fault_ns.load()), g_c.waiting.load(), now_line);
}

__attribute__((visibility("default"))) int gdr_get_callback_flag(gdr_t, gdr_mh_t, int *flag) {
    *flag = 0;
    return 0;
}

__attribute__((visibility("default"))) int gdr_get_attribute(gdr_t, int, int *) { return EINVAL; }

}  // extern "C"
