#include "hmem.h"

#include "dump.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace efaemu {
namespace hmem {

namespace {

// The few driver API types and values used here (stable across CUDA 11..13); no cuda.h needed to build.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
constexpr unsigned CU_MEMORYTYPE_UNIFIED = 4;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;

struct Driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*cuGetErrorString)(CUresult, const char **);
};

std::once_flag g_once;
Driver g_drv;
bool g_ok = false;
std::string g_why;
int g_count = 0;
std::thread::id g_engine;
bool g_engine_set = false;

template <typename F>
bool sym(void *h, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(h, name));
    return *out != nullptr;
}

void load() {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        g_why = std::string("dlopen(libcuda.so.1): ") + dlerror();
        return;
    }
    Driver d{};
    bool all = sym(h, "cuInit", &d.cuInit) && sym(h, "cuDeviceGetCount", &d.cuDeviceGetCount) &&
               sym(h, "cuDeviceGet", &d.cuDeviceGet) &&
               sym(h, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain) &&
               sym(h, "cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease) &&
               sym(h, "cuCtxSetCurrent", &d.cuCtxSetCurrent) && sym(h, "cuStreamCreate", &d.cuStreamCreate) &&
               sym(h, "cuStreamDestroy_v2", &d.cuStreamDestroy) &&
               sym(h, "cuStreamSynchronize", &d.cuStreamSynchronize) &&
               sym(h, "cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync) &&
               sym(h, "cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync) &&
               sym(h, "cuPointerGetAttribute", &d.cuPointerGetAttribute) &&
               sym(h, "cuGetErrorString", &d.cuGetErrorString);
    if (!all) {
        g_why = "libcuda.so.1 lacks a driver entry point efaemu needs";
        return;
    }
    CUresult r = d.cuInit(0);
    if (r != 0) {
        g_why = "cuInit failed (" + std::to_string(r) + ")";
        return;
    }
    if (d.cuDeviceGetCount(&g_count) != 0 || g_count <= 0) {
        g_why = "no CUDA device";
        return;
    }
    g_drv = d;
    g_ok = true;
}

std::string err(CUresult r, const char *what) {
    const char *s = nullptr;
    if (g_ok) g_drv.cuGetErrorString(r, &s);
    return std::string(what) + ": " + (s ? s : "CUDA error " + std::to_string(r));
}

// Per-device state, engine thread only.
struct Dev {
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
};
std::map<int, Dev> &g_devs = *new std::map<int, Dev>;  // never destroyed: the engine may run at exit

bool bind_device(int ordinal, CUstream *s, std::string *why) {
    if (g_engine_set && std::this_thread::get_id() != g_engine) {
        fprintf(stderr, "efaemu: internal error: CUDA copy outside the engine thread\n");
        abort();
    }
    if (!cuda_available(why)) return false;
    Dev &d = g_devs[ordinal];
    if (!d.ctx) {
        CUdevice dev;
        CUresult r = g_drv.cuDeviceGet(&dev, ordinal);
        if (r == 0) r = g_drv.cuDevicePrimaryCtxRetain(&d.ctx, dev);
        if (r != 0) {
            *why = err(r, "cuDevicePrimaryCtxRetain");
            d.ctx = nullptr;
            return false;
        }
        if ((r = g_drv.cuCtxSetCurrent(d.ctx)) != 0 || (r = g_drv.cuStreamCreate(&d.stream, CU_STREAM_NON_BLOCKING)) != 0) {
            *why = err(r, "cuStreamCreate");
            return false;
        }
        // The emulator's copies are CUDA calls in the application's context: whatever synchronizes that context
        // waits for kernels that may be spinning on data these copies are to deliver. Lazy module loading does so
        // on a kernel's first launch (CUDA's default since 12.2; torch sets it).
        const char *loading = getenv("CUDA_MODULE_LOADING");
        if (!loading || strcmp(loading, "EAGER") != 0)
            fprintf(stderr,
                    "efaemu: CUDA_MODULE_LOADING is %s: a kernel launched for the first time while another kernel waits on "
                    "the network can stall the emulator's GPU copies until that kernel ends (a deadlock the real NIC does "
                    "not have); set CUDA_MODULE_LOADING=EAGER\n",
                    loading ? loading : "unset (lazy)");
    }
    CUresult r = g_drv.cuCtxSetCurrent(d.ctx);
    if (r != 0) {
        *why = err(r, "cuCtxSetCurrent");
        return false;
    }
    *s = d.stream;
    return true;
}

}  // namespace

bool cuda_available(std::string *why) {
    std::call_once(g_once, load);
    if (!g_ok && why) *why = g_why;
    return g_ok;
}

int cuda_device_count() { return cuda_available() ? g_count : 0; }

MemRef classify(const void *addr) {
    MemRef m;
    if (!cuda_available()) return m;
    unsigned type = 0;
    if (g_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)addr) != 0)
        return m;  // pageable host memory is unknown to CUDA
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) return m;
    int ordinal = 0;
    if (g_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)addr) != 0)
        return m;
    m.kind = MemKind::Cuda;
    m.device = ordinal;
    return m;
}

bool copy_to_host(void *h, uint64_t a, const MemRef &m, size_t len, std::string *why) {
    if (!len) return true;
    if (m.kind == MemKind::Host) {
        memcpy(h, reinterpret_cast<const void *>(a), len);
        return true;
    }
    CUstream s;
    if (!bind_device(m.device, &s, why)) return false;
    dump::Scope act(dump::Act::CudaDtoH);
    CUresult r = g_drv.cuMemcpyDtoHAsync(h, (CUdeviceptr)a, len, s);
    if (r == 0) r = g_drv.cuStreamSynchronize(s);
    if (r != 0) {
        *why = err(r, "cuMemcpyDtoHAsync");
        return false;
    }
    return true;
}

bool copy_from_host(uint64_t a, const MemRef &m, const void *h, size_t len, std::string *why) {
    if (!len) return true;
    if (m.kind == MemKind::Host) {
        memcpy(reinterpret_cast<void *>(a), h, len);
        return true;
    }
    CUstream s;
    if (!bind_device(m.device, &s, why)) return false;
    dump::Scope act(dump::Act::CudaHtoD);
    CUresult r = g_drv.cuMemcpyHtoDAsync((CUdeviceptr)a, h, len, s);
    if (r == 0) r = g_drv.cuStreamSynchronize(s);
    if (r != 0) {
        *why = err(r, "cuMemcpyHtoDAsync");
        return false;
    }
    return true;
}

bool copy_from_host_async(uint64_t a, const MemRef &m, const void *h, size_t len, std::string *why) {
    if (!len) return true;
    if (m.kind == MemKind::Host) {
        memcpy(reinterpret_cast<void *>(a), h, len);
        return true;
    }
    CUstream s;
    if (!bind_device(m.device, &s, why)) return false;
    CUresult r = g_drv.cuMemcpyHtoDAsync((CUdeviceptr)a, h, len, s);
    if (r != 0) {
        *why = err(r, "cuMemcpyHtoDAsync");
        return false;
    }
    return true;
}

bool sync(const MemRef &m, std::string *why) {
    if (m.kind == MemKind::Host) return true;
    CUstream s;
    if (!bind_device(m.device, &s, why)) return false;
    dump::Scope act(dump::Act::CudaSync);
    CUresult r = g_drv.cuStreamSynchronize(s);
    if (r != 0) {
        *why = err(r, "cuStreamSynchronize");
        return false;
    }
    return true;
}

void engine_thread_release() {
    if (!g_ok) return;
    for (auto &kv : g_devs) {
        if (kv.second.stream) g_drv.cuStreamDestroy(kv.second.stream);
        CUdevice dev;
        if (kv.second.ctx && g_drv.cuDeviceGet(&dev, kv.first) == 0) g_drv.cuDevicePrimaryCtxRelease(dev);
    }
    g_devs.clear();
}

void mark_engine_thread() {
    g_engine = std::this_thread::get_id();
    g_engine_set = true;
}

}  // namespace hmem
}  // namespace efaemu
