// A stand-in libcuda.so.1 for CPU tests of efaemu's GPU path. Its "device memory" is a PROT_NONE region that
// only its own copy functions open (under a lock), so any direct access by the provider crashes the test. It
// records who copied (which thread, which stream, created with which flags), so a test can assert that GPU
// bytes move only through CUDA copies on a private non-blocking stream, never from the application's thread
// and never on the legacy default stream. Test-only: nothing here resembles a real driver beyond the ABI.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

extern "C" {
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;

struct fakecuda_stats {
    uint64_t async_copies, nonblocking_copies, default_stream_copies, app_thread_calls, device_bytes;
};
}

namespace {

constexpr size_t kRegion = 256ull << 20;
constexpr CUresult kOk = 0, kInvalidValue = 1;
std::mutex g_mu;
uint8_t *g_base = nullptr;
size_t g_used = 0;
std::map<CUstream, unsigned> g_streams;  // stream -> creation flags
std::atomic<uint64_t> g_async{0}, g_nonblocking{0}, g_default{0}, g_app_calls{0}, g_bytes{0};
pthread_t g_app;
std::atomic<bool> g_app_set{false};
char g_ctx;  // the one fake context (its address is the handle)

void note_call() {
    if (g_app_set && pthread_equal(pthread_self(), g_app)) g_app_calls++;
}

bool on_device(CUdeviceptr p, size_t len) {
    auto *a = reinterpret_cast<uint8_t *>(p);
    return g_base && a >= g_base && a + len <= g_base + g_used;
}

void ensure_region() {
    if (g_base) return;
    void *p = mmap(nullptr, kRegion, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    g_base = static_cast<uint8_t *>(p);
}

// Opens the device region for the duration of one copy.
CUresult device_copy(void *dst, const void *src, size_t len) {
    std::lock_guard<std::mutex> g(g_mu);
    mprotect(g_base, kRegion, PROT_READ | PROT_WRITE);
    memcpy(dst, src, len);
    mprotect(g_base, kRegion, PROT_NONE);
    g_bytes += len;
    return kOk;
}

void count_stream(CUstream s) {
    g_async++;
    if (!s) {
        g_default++;
        return;
    }
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_streams.find(s);
    if (it != g_streams.end() && (it->second & 1u)) g_nonblocking++;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned) { note_call(); return kOk; }
CUresult cuDeviceGetCount(int *n) { note_call(); *n = 1; return kOk; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { note_call(); *d = ordinal; return ordinal == 0 ? kOk : kInvalidValue; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) { note_call(); *c = reinterpret_cast<CUcontext>(&g_ctx); return kOk; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { note_call(); return kOk; }
CUresult cuCtxSetCurrent(CUcontext) { note_call(); return kOk; }
CUresult cuCtxPushCurrent_v2(CUcontext) { note_call(); return kOk; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { note_call(); if (c) *c = reinterpret_cast<CUcontext>(&g_ctx); return kOk; }
CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    note_call();
    *s = reinterpret_cast<CUstream>(new char[1]);
    std::lock_guard<std::mutex> g(g_mu);
    g_streams[*s] = flags;
    return kOk;
}
CUresult cuStreamDestroy_v2(CUstream s) {
    note_call();
    std::lock_guard<std::mutex> g(g_mu);
    g_streams.erase(s);
    delete[] reinterpret_cast<char *>(s);
    return kOk;
}
// The order of stream waits and device-to-host copies, for the interposer's test: "sync <stream>", "dtoh <stream>".
static std::string g_events;
static void event(const char *what, CUstream s) {
    std::lock_guard<std::mutex> g(g_mu);
    char e[64];
    snprintf(e, sizeof e, "%s %p;", what, (void *)s);
    if (g_events.size() < 4096) g_events += e;
}
const char *fakecuda_events() {
    static std::string copy;
    std::lock_guard<std::mutex> g(g_mu);
    copy = g_events;
    g_events.clear();
    return copy.c_str();
}
CUresult cuStreamSynchronize(CUstream s) { note_call(); event("sync", s); return kOk; }
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t len, CUstream s) {
    note_call();
    event("dtoh", s);
    if (!on_device(src, len)) return kInvalidValue;
    count_stream(s);
    return device_copy(dst, reinterpret_cast<void *>(src), len);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t len, CUstream s) {
    note_call();
    if (!on_device(dst, len)) return kInvalidValue;
    count_stream(s);
    return device_copy(reinterpret_cast<void *>(dst), src, len);
}
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    note_call();
    if (!on_device(p, 1)) return kInvalidValue;  // pageable host memory is unknown to CUDA
    if (attr == 2) *static_cast<unsigned *>(data) = 2;  // MEMORY_TYPE: DEVICE
    else if (attr == 9) *static_cast<int *>(data) = 0;  // DEVICE_ORDINAL
    else return kInvalidValue;
    return kOk;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == kOk ? "no error" : "fake CUDA error";
    return kOk;
}

// For the test application (its own calls, counted like any other).
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t len) {
    note_call();
    std::lock_guard<std::mutex> g(g_mu);
    ensure_region();
    size_t aligned = (len + 255) & ~size_t(255);
    if (g_used + aligned > kRegion) return 2;  // out of memory
    *p = reinterpret_cast<CUdeviceptr>(g_base + g_used);
    g_used += aligned;
    return kOk;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len) {
    note_call();
    if (!on_device(dst, len)) return kInvalidValue;
    return device_copy(reinterpret_cast<void *>(dst), src, len);
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len) {
    note_call();
    if (!on_device(src, len)) return kInvalidValue;
    return device_copy(dst, reinterpret_cast<void *>(src), len);
}

// What the GDA host code (templates/transport_efa_gda) calls besides the above.
CUresult cuCtxGetDevice(CUdevice *d) { note_call(); *d = 0; return kOk; }
// CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING (118): FAKECUDA_GDR_ORDERING (default 100, OWNER, as
// H100/H200 report; 0 for a GPU that does not order RDMA writes; "fail" for a driver that cannot answer).
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice) {
    note_call();
    if (attr != 118) return kInvalidValue;
    const char *order = getenv("FAKECUDA_GDR_ORDERING");
    if (order && strcmp(order, "fail") == 0) return kInvalidValue;
    *v = order ? atoi(order) : 100;
    return kOk;
}
CUresult cuMemFree_v2(CUdeviceptr p) { note_call(); return on_device(p, 1) ? kOk : kInvalidValue; }  // a bump allocator
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    note_call();
    if (!on_device(p, n)) return kInvalidValue;
    std::lock_guard<std::mutex> g(g_mu);
    mprotect(g_base, kRegion, PROT_READ | PROT_WRITE);
    memset(reinterpret_cast<void *>(p), v, n);
    mprotect(g_base, kRegion, PROT_NONE);
    return kOk;
}
CUresult cuMemHostUnregister(void *) { note_call(); return kOk; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned) {  // mapped host memory: same address
    note_call();
    *d = reinterpret_cast<CUdeviceptr>(p);
    return kOk;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
    *s = r == kOk ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return kOk;
}

// Host registration: like the driver on the GPU hosts, IOMEMORY on ordinary pages is refused.
std::atomic<unsigned> g_last_register_flags{0xffffffffu};
CUresult cuMemHostRegister_v2(void *, size_t, unsigned flags) {
    note_call();
    if (flags & 0x04) return kInvalidValue;
    g_last_register_flags = flags;
    return kOk;
}
CUresult cuMemHostRegister(void *p, size_t n, unsigned flags) { return cuMemHostRegister_v2(p, n, flags); }
// dma-buf export of device memory: a memfd stands in for the dma-buf.
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, int type, unsigned long long) {
    note_call();
    if (type != 1 || !on_device(p, size)) return kInvalidValue;
    *static_cast<int *>(handle) = memfd_create("fake-dmabuf", 0);
    return kOk;
}
unsigned fakecuda_last_register_flags() { return g_last_register_flags; }

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t len, CUstream s) { return cuMemcpyDtoHAsync_v2(dst, src, len, s); }

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);

// The CUDA runtime's way to the driver: the entry point for a symbol (the few the tests ask for; flags 2, the
// per-thread default stream, gets the _ptsz variant). Asked for "cuGetProcAddress" itself, it answers with its own
// entry point of that version, as the driver does (the runtime asks, then looks up everything through the answer).
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    note_call();
    *pfn = !strcmp(symbol, "cuMemcpyDtoHAsync") ? (flags & 2 ? (void *)cuMemcpyDtoHAsync_v2_ptsz : (void *)cuMemcpyDtoHAsync_v2)
           : !strcmp(symbol, "cuStreamSynchronize") ? (void *)cuStreamSynchronize
           : !strcmp(symbol, "cuGetProcAddress")    ? (version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress)
                                                     : nullptr;
    if (status) *status = *pfn ? 0 : 1;
    return *pfn ? kOk : 500;  // CUDA_ERROR_NOT_FOUND
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
int efaemu_probe_next(void) { return 2; }  // the interposer's says 1 (RTLD_NEXT test)

// Introspection for tests.
void fakecuda_mark_app_thread() {
    g_app = pthread_self();
    g_app_set = true;
}
void fakecuda_get_stats(struct fakecuda_stats *s) {
    s->async_copies = g_async;
    s->nonblocking_copies = g_nonblocking;
    s->default_stream_copies = g_default;
    s->app_thread_calls = g_app_calls;
    s->device_bytes = g_bytes;
}
void fakecuda_reset_app_calls() { g_app_calls = 0; }

}  // extern "C"
