// libefaemu-cuda-interpose.so: LD_PRELOAD'ed into test processes only (never into the product). Our GDA
// transport resolves the CUDA driver with dlopen("libcuda.so.1") + dlsym(handle, name); this library takes
// dlsym and, for that handle only, hands out two wrappers:
//
//   cuMemHostRegister(_v2): the transport maps the NIC's SQ ring and doorbell page for the GPU with
//     IOMEMORY | DEVICEMAP. An emulated NIC's pages are ordinary host memory, which the driver refuses with
//     IOMEMORY (measured on the GPU hosts). For pages the emulator owns, recognised by their mapping
//     (/dev/shm/efaemu-*), IOMEMORY is dropped; every other registration goes through untouched.
//   cuMemGetHandleForAddressRange: the transport hands the GPU CQ to libfabric as a dma-buf fd, and mmap of a
//     GPU dma-buf fails on those hosts. The wrapper records fd -> (device address, size) so the emulator, in
//     the same process, can write CQEs into the GPU memory behind the fd (efaemu_dmabuf_lookup).
//
//   cuGetProcAddress(_v2), the CUDA runtime's way to the driver: for cuMemcpyDtoHAsync it hands out a wrapper that,
//     when the destination is pageable host memory, first waits for the stream (cuStreamSynchronize) and then
//     copies. A pageable device-to-host copy returns only once it is done anyway, so the application sees the
//     same; but the driver's own pageable path, while it waits behind a kernel that spins on the network, stalls
//     the emulator's CUDA copies in the same context (its NIC "DMA"), and the kernel never gets its data: NVSHMEM's
//     ring-bcast and ring-reduce examples wait that way (measured on the GPU hosts: they hang through efaemu and
//     pass with cudaStreamSynchronize). A real NIC moves bytes without CUDA calls; this takes the emulator's own
//     limit away, not a program's. EFAEMU_PAGEABLE_SYNC=0 turns it off. Said once on stderr when first used.
//
// Also, for diagnosis only: a fatal SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT prints the faulting address and a native
// backtrace on stderr before the default action (handlers installed later, such as softgdr's, chain to it for
// faults that are not theirs). EFAEMU_CRASH_REPORT=0 turns it off.
//
// Everything else, and every other handle, goes to the real dlsym. The forward is a tail call, so glibc still
// sees the original caller, which RTLD_NEXT lookups depend on (checked by the test).
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

extern "C" {
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
}

namespace {

constexpr unsigned kIoMemory = 0x04;     // CU_MEMHOSTREGISTER_IOMEMORY
constexpr int kDmaBufFd = 1;             // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
constexpr const char *kOwnedPrefix = "/dev/shm/efaemu-";

using DlsymFn = void *(*)(void *, const char *);
using RegisterFn = CUresult (*)(void *, size_t, unsigned);
using HandleFn = CUresult (*)(void *, CUdeviceptr, size_t, int, unsigned long long);

DlsymFn g_dlsym;
void *g_cuda;  // the libcuda.so.1 handle, once loaded
RegisterFn g_register, g_register_v1;
HandleFn g_handle;

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
struct DmaBuf {
    int fd;
    dev_t dev;
    ino_t ino;
    CUdeviceptr dptr;
    size_t size;
};
DmaBuf g_bufs[256];
int g_nbufs;
unsigned long g_dropped, g_passed, g_recorded;

DlsymFn real_dlsym() {
    if (!g_dlsym) {
        g_dlsym = (DlsymFn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!g_dlsym) g_dlsym = (DlsymFn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!g_dlsym) {
            fprintf(stderr, "efaemu-cuda-interpose: cannot find the real dlsym\n");
            abort();
        }
    }
    return g_dlsym;
}

bool is_cuda(void *handle) {
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) return false;
    if (!g_cuda) g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);  // only finds a loaded one
    return g_cuda && handle == g_cuda;
}

// Is every page of [p, p+len) inside one mapping of an emulator-owned shared-memory file?
bool owned(const void *p, size_t len) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    const unsigned long a = (unsigned long)p, e = a + len;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || !path_at) continue;
        const char *path = line + path_at;
        found = a >= lo && e <= hi && strncmp(path, kOwnedPrefix, strlen(kOwnedPrefix)) == 0;
    }
    fclose(f);
    return found;
}

CUresult register_common(RegisterFn real, void *p, size_t len, unsigned flags) {
    if ((flags & kIoMemory) && owned(p, len)) {
        __atomic_add_fetch(&g_dropped, 1, __ATOMIC_RELAXED);
        flags &= ~kIoMemory;
    } else {
        __atomic_add_fetch(&g_passed, 1, __ATOMIC_RELAXED);
    }
    return real(p, len, flags);
}

CUresult wrap_register_v2(void *p, size_t len, unsigned flags) { return register_common(g_register, p, len, flags); }
CUresult wrap_register(void *p, size_t len, unsigned flags) { return register_common(g_register_v1, p, len, flags); }

CUresult wrap_handle(void *handle, CUdeviceptr dptr, size_t size, int type, unsigned long long flags) {
    CUresult r = g_handle(handle, dptr, size, type, flags);
    if (r != 0 || type != kDmaBufFd) return r;
    int fd = *static_cast<int *>(handle);
    struct stat st;
    if (fstat(fd, &st) != 0) return r;
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    for (int i = 0; i < g_nbufs && slot < 0; i++)
        if (g_bufs[i].fd == fd) slot = i;  // the number was reused: the newer export wins
    if (slot < 0 && g_nbufs < (int)(sizeof g_bufs / sizeof g_bufs[0])) slot = g_nbufs++;
    if (slot >= 0) {
        g_bufs[slot] = {fd, st.st_dev, st.st_ino, dptr, size};
        g_recorded++;
    } else {
        fprintf(stderr, "efaemu-cuda-interpose: dma-buf table full, fd %d not recorded\n", fd);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

// --- pageable device-to-host copies (see the top) ---------------------------------------------------------
using DtoHFn = CUresult (*)(void *, CUdeviceptr, size_t, void *);
using SyncFn = CUresult (*)(void *);
using AttrFn = CUresult (*)(void *, int, CUdeviceptr);
using GpaFn = CUresult (*)(const char *, void **, int, unsigned long long, int *);
using GpaV1Fn = CUresult (*)(const char *, void **, int, unsigned long long);
constexpr int kMemoryType = 2;                       // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned long long kPerThreadStream = 2;   // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
void *const kStreamPerThread = reinterpret_cast<void *>(0x2);  // CU_STREAM_PER_THREAD
GpaFn g_gpa;
GpaV1Fn g_gpa_v1;
SyncFn g_sync;
AttrFn g_attr;
unsigned long g_pageable_syncs;
bool g_said;

// The driver's copy functions the runtime was handed (legacy and per-thread variants), one wrapper each.
constexpr int kDtoHSlots = 4;
DtoHFn g_dtoh[kDtoHSlots];
bool g_dtoh_ptsz[kDtoHSlots];

bool pageable_sync_on() {
    const char *v = getenv("EFAEMU_PAGEABLE_SYNC");
    return !v || strcmp(v, "0") != 0;
}

// CUDA does not know pageable memory: its attribute query fails there.
bool pageable(const void *p) {
    unsigned type = 0;
    return g_attr && g_attr(&type, kMemoryType, (CUdeviceptr)(uintptr_t)p) != 0;
}

CUresult dtoh_common(int i, void *dst, CUdeviceptr src, size_t len, void *stream) {
    if (g_sync && pageable(dst)) {
        if (!__atomic_exchange_n(&g_said, true, __ATOMIC_RELAXED))
            fprintf(stderr, "efaemu-cuda-interpose: a device-to-host copy into pageable memory waits for its stream first "
                            "(the emulator's GPU copies stall behind the driver's pageable path; EFAEMU_PAGEABLE_SYNC=0 turns this off)\n");
        __atomic_add_fetch(&g_pageable_syncs, 1, __ATOMIC_RELAXED);
        const CUresult r = g_sync(!stream && g_dtoh_ptsz[i] ? kStreamPerThread : stream);
        if (r != 0) return r;
    }
    return g_dtoh[i](dst, src, len, stream);
}
CUresult dtoh0(void *d, CUdeviceptr s, size_t n, void *st) { return dtoh_common(0, d, s, n, st); }
CUresult dtoh1(void *d, CUdeviceptr s, size_t n, void *st) { return dtoh_common(1, d, s, n, st); }
CUresult dtoh2(void *d, CUdeviceptr s, size_t n, void *st) { return dtoh_common(2, d, s, n, st); }
CUresult dtoh3(void *d, CUdeviceptr s, size_t n, void *st) { return dtoh_common(3, d, s, n, st); }
const DtoHFn kDtoHWrappers[kDtoHSlots] = {dtoh0, dtoh1, dtoh2, dtoh3};

CUresult wrap_gpa(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);
CUresult wrap_gpa_v1(const char *symbol, void **pfn, int version, unsigned long long flags);

// What the runtime gets for a symbol it asked for: cuMemcpyDtoHAsync's wrapper; cuGetProcAddress itself wrapped too,
// because the runtime asks the entry point it got by dlsym for "cuGetProcAddress" (versions 11030 and 12000, seen
// with CUDA 13's static cudart) and looks up everything else through the answer, which would be the driver's own and
// pass us by (on the GPU hosts the wrapper was never reached until this); anything else as the driver said.
void *wrap_proc(const char *symbol, void *pfn, int version, unsigned long long flags) {
    if (pfn && !strcmp(symbol, "cuGetProcAddress")) {
        // 12000 on is cuGetProcAddress_v2 (with the status argument), earlier the v1 signature.
        pthread_mutex_lock(&g_mu);
        if (version >= 12000 && !g_gpa) g_gpa = (GpaFn)pfn;
        if (version < 12000 && !g_gpa_v1) g_gpa_v1 = (GpaV1Fn)pfn;
        pthread_mutex_unlock(&g_mu);
        return version >= 12000 ? (void *)wrap_gpa : (void *)wrap_gpa_v1;
    }
    if (!pfn || strcmp(symbol, "cuMemcpyDtoHAsync") != 0 || !pageable_sync_on()) return pfn;
    if (!g_sync) {
        g_sync = (SyncFn)real_dlsym()(g_cuda, "cuStreamSynchronize");
        g_attr = (AttrFn)real_dlsym()(g_cuda, "cuPointerGetAttribute");
        if (!g_sync || !g_attr) return pfn;
    }
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    for (int i = 0; i < kDtoHSlots && slot < 0; i++)
        if (g_dtoh[i] == (DtoHFn)pfn || !g_dtoh[i]) slot = i;
    if (slot >= 0 && !g_dtoh[slot]) {
        g_dtoh_ptsz[slot] = (flags & kPerThreadStream) != 0;
        __atomic_store_n(&g_dtoh[slot], (DtoHFn)pfn, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_mu);
    return slot >= 0 ? (void *)kDtoHWrappers[slot] : pfn;
}
CUresult wrap_gpa(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    const CUresult r = g_gpa(symbol, pfn, version, flags, status);
    if (r == 0 && pfn) *pfn = wrap_proc(symbol, *pfn, version, flags);
    return r;
}
CUresult wrap_gpa_v1(const char *symbol, void **pfn, int version, unsigned long long flags) {
    const CUresult r = g_gpa_v1(symbol, pfn, version, flags);
    if (r == 0 && pfn) *pfn = wrap_proc(symbol, *pfn, version, flags);
    return r;
}

void crash_report(int sig, siginfo_t *si, void *) {
    char line[160];
    int n = snprintf(line, sizeof line, "efaemu-cuda-interpose: fatal signal %d (%s) at address %p in pid %d tid %ld; backtrace:\n", sig,
                     strsignal(sig), si ? si->si_addr : nullptr, (int)getpid(), (long)syscall(SYS_gettid));
    if (write(2, line, (size_t)n) < 0) _exit(128 + sig);
    void *frames[64];
    const int depth = backtrace(frames, 64);
    backtrace_symbols_fd(frames, depth, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) void install_crash_report() {
    const char *v = getenv("EFAEMU_CRASH_REPORT");
    if (v && !strcmp(v, "0")) return;
    void *warm[2];
    backtrace(warm, 2);  // loads libgcc's unwinder now, not inside a signal handler
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_report;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
        struct sigaction old;
        // Only where nothing else (a sanitizer, a runtime) claimed the signal already.
        if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sig, &sa, nullptr);
    }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name) {
    DlsymFn real = real_dlsym();
    if (is_cuda(handle)) {
        if (!strcmp(name, "cuMemHostRegister_v2")) {
            if (!g_register) g_register = (RegisterFn)real(handle, name);
            return g_register ? (void *)wrap_register_v2 : nullptr;
        }
        if (!strcmp(name, "cuMemHostRegister")) {
            if (!g_register_v1) g_register_v1 = (RegisterFn)real(handle, name);
            return g_register_v1 ? (void *)wrap_register : nullptr;
        }
        if (!strcmp(name, "cuGetProcAddress_v2")) {
            if (!g_gpa) g_gpa = (GpaFn)real(handle, name);
            return g_gpa ? (void *)wrap_gpa : nullptr;
        }
        if (!strcmp(name, "cuGetProcAddress")) {
            if (!g_gpa_v1) g_gpa_v1 = (GpaV1Fn)real(handle, name);
            return g_gpa_v1 ? (void *)wrap_gpa_v1 : nullptr;
        }
        if (!strcmp(name, "cuMemGetHandleForAddressRange")) {
            if (!g_handle) g_handle = (HandleFn)real(handle, name);
            return g_handle ? (void *)wrap_handle : nullptr;
        }
    }
    return real(handle, name);  // a sibling call: glibc sees our caller as the caller
}

// For the emulator (found with dlsym(RTLD_DEFAULT, ...)): the GPU memory behind a dma-buf fd exported in this
// process. Returns 0 and fills dptr/size, or -1 when the fd is unknown or now names another file.
__attribute__((visibility("default"))) int efaemu_dmabuf_lookup(int fd, unsigned long long *dptr, size_t *size) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    int ret = -1;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nbufs; i++) {
        if (g_bufs[i].fd == fd && g_bufs[i].dev == st.st_dev && g_bufs[i].ino == st.st_ino) {
            *dptr = g_bufs[i].dptr;
            *size = g_bufs[i].size;
            ret = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return ret;
}

// Counters for tests: registrations whose IOMEMORY was dropped, passed through, dma-bufs recorded.
__attribute__((visibility("default"))) void efaemu_interpose_counts(unsigned long *dropped, unsigned long *passed,
                                                                    unsigned long *recorded) {
    *dropped = __atomic_load_n(&g_dropped, __ATOMIC_RELAXED);
    *passed = __atomic_load_n(&g_passed, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_mu);
    *recorded = g_recorded;
    pthread_mutex_unlock(&g_mu);
}

// Marks this library in RTLD_NEXT tests (see test/interpose_test.cpp).
__attribute__((visibility("default"))) unsigned long efaemu_interpose_pageable_syncs(void) {
    return __atomic_load_n(&g_pageable_syncs, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) int efaemu_probe_next(void) { return 1; }

}  // extern "C"
