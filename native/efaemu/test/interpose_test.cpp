// The CUDA driver interposer's bookkeeping, on the CPU with the stand-in driver (test/fake_cuda.cpp):
//   LD_PRELOAD=<build>/interpose/libefaemu-cuda-interpose.so LD_LIBRARY_PATH=<build>/fakecuda efaemu_interpose_test
// It resolves the driver the way our GDA transport does (dlopen + dlsym) and checks that IOMEMORY is dropped
// only for emulator-owned pages, that dma-buf exports are recorded (and stale fds are not trusted), that
// other handles and RTLD_NEXT lookups are untouched.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;
void expect(bool cond, const std::string &check, const std::string &why = "") {
    if (cond) printf("ok %s\n", check.c_str());
    else {
        failures++;
        printf("FAIL %s%s%s\n", check.c_str(), why.empty() ? "" : ": ", why.c_str());
    }
}

typedef int (*Register)(void *, size_t, unsigned);
typedef int (*Handle)(void *, unsigned long long, size_t, int, unsigned long long);
typedef int (*Alloc)(unsigned long long *, size_t);
typedef int (*Lookup)(int, unsigned long long *, size_t *);
typedef void (*Counts)(unsigned long *, unsigned long *, unsigned long *);
constexpr unsigned kIoMemory = 0x04, kDeviceMap = 0x02;

}  // namespace

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    auto lookup = (Lookup)dlsym(RTLD_DEFAULT, "efaemu_dmabuf_lookup");
    auto counts = (Counts)dlsym(RTLD_DEFAULT, "efaemu_interpose_counts");
    if (!lookup || !counts) {
        printf("FAIL setup: the interposer is not preloaded\n");
        return 2;
    }
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // as transport_efa_gda.cpp does
    if (!cu || !dlsym(cu, "fakecuda_get_stats")) {
        printf("FAIL setup: libcuda.so.1 is not the test stand-in\n");
        return 2;
    }
    auto reg = (Register)dlsym(cu, "cuMemHostRegister_v2");
    auto handle = (Handle)dlsym(cu, "cuMemGetHandleForAddressRange");
    auto alloc = (Alloc)dlsym(cu, "cuMemAlloc_v2");
    auto last_flags = (unsigned (*)())dlsym(cu, "fakecuda_last_register_flags");
    void *direct = dlsym(cu, "cuMemAlloc_v2");
    expect(reg && handle && alloc && last_flags, "the transport's lookups on the libcuda handle resolve");

    // An ordinary page: the interposer must not help, the driver refuses IOMEMORY.
    void *anon = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int r = reg(anon, 4096, kIoMemory | kDeviceMap);
    expect(r == 1, "IOMEMORY|DEVICEMAP on an ordinary page still fails (CUDA_ERROR_INVALID_VALUE)", std::to_string(r));

    // An emulator-owned page (/dev/shm/efaemu-*): registered without IOMEMORY.
    std::string name = "/efaemu-sq-test-" + std::to_string(getpid());
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 8192) != 0) return 2;
    void *sq = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    r = reg(sq, 8192, kIoMemory | kDeviceMap);
    expect(r == 0 && last_flags() == kDeviceMap, "IOMEMORY|DEVICEMAP on an emulator-owned page: registered as DEVICEMAP",
           "r=" + std::to_string(r) + " flags=" + std::to_string(last_flags()));
    r = reg((char *)sq + 4096, 8192, kIoMemory | kDeviceMap);
    expect(r == 1, "a range running past the emulator's mapping is not emulator-owned");
    shm_unlink(name.c_str());
    unsigned long dropped, passed, recorded;
    counts(&dropped, &passed, &recorded);
    expect(dropped == 1 && passed == 2, "one registration adjusted, two passed through");

    // dma-buf export: recorded, looked up, and not trusted once the fd names another file.
    unsigned long long dptr = 0, got = 0;
    size_t size = 0;
    alloc(&dptr, 1 << 16);
    int dfd = -1;
    r = handle(&dfd, dptr, 1 << 16, 1, 0);
    expect(r == 0 && dfd >= 0 && lookup(dfd, &got, &size) == 0 && got == dptr && size == (1 << 16),
           "a dma-buf fd maps back to its device address and size");
    int other = dup(0);
    expect(lookup(other, &got, &size) == -1, "an fd that was never exported is unknown");
    close(other);
    close(dfd);
    int reuse = open("/dev/null", O_RDONLY);  // likely takes dfd's number
    expect(lookup(reuse, &got, &size) == -1, "a closed dma-buf's number, reused by another file, is not trusted");
    close(reuse);

    // The runtime's path to cuMemcpyDtoHAsync (cuGetProcAddress): into pageable memory it waits for the stream first;
    // into memory CUDA knows (here the stand-in's device memory) it copies at once. The path is CUDA 13's static
    // cudart's: dlsym of cuGetProcAddress_v2, which it asks for "cuGetProcAddress" (11030, then 12000), then every
    // symbol through the 12000 answer.
    {
        typedef int (*Gpa)(const char *, void **, int, unsigned long long, int *);
        typedef int (*GpaV1)(const char *, void **, int, unsigned long long);
        typedef int (*DtoH)(void *, unsigned long long, size_t, void *);
        auto first = (Gpa)dlsym(cu, "cuGetProcAddress_v2");
        Gpa gpa = nullptr;
        GpaV1 gpa_v1 = nullptr;
        expect(first && first("cuGetProcAddress", (void **)&gpa_v1, 11030, 0, nullptr) == 0 &&
                   first("cuGetProcAddress", (void **)&gpa, 12000, 0, nullptr) == 0 && gpa && gpa_v1,
               "cuGetProcAddress answers for itself, both versions");
        void *via_v1 = nullptr;
        expect(gpa_v1 && gpa_v1("cuMemcpyDtoHAsync", &via_v1, 11030, 0) == 0 && via_v1 && via_v1 != dlsym(cu, "cuMemcpyDtoHAsync_v2"),
               "through the 11030 answer too, cuMemcpyDtoHAsync is the wrapper");
        auto events = (const char *(*)())dlsym(cu, "fakecuda_events");
        auto syncs = (unsigned long (*)())dlsym(RTLD_DEFAULT, "efaemu_interpose_pageable_syncs");
        void *pfn = nullptr, *ptsz = nullptr;
        const int got = gpa ? gpa("cuMemcpyDtoHAsync", &pfn, 12000, 0, nullptr) : -1;
        const int got2 = gpa ? gpa("cuMemcpyDtoHAsync", &ptsz, 12000, 2, nullptr) : -1;
        expect(got == 0 && got2 == 0 && pfn && pfn != dlsym(cu, "cuMemcpyDtoHAsync_v2") && ptsz && ptsz != pfn && events && syncs,
               "cuGetProcAddress hands the runtime a wrapper of cuMemcpyDtoHAsync (one per variant)");
        void *other = nullptr;
        expect(gpa && gpa("cuStreamSynchronize", &other, 12000, 0, nullptr) == 0 && other == dlsym(cu, "cuStreamSynchronize"),
               "every other symbol is the driver's");
        if (pfn && events && syncs) {
            events();
            char host[64];
            void *stream = (void *)0x1234;
            int rc = ((DtoH)pfn)(host, dptr, sizeof host, stream);
            std::string e = events();
            expect(rc == 0 && e == "sync 0x1234;dtoh 0x1234;" && syncs() == 1, "into pageable memory: the stream is waited for, then the copy", e);
            unsigned long long dev2 = 0;
            alloc(&dev2, 64);
            rc = ((DtoH)pfn)((void *)dev2, dptr, 64, stream);
            e = events();
            expect(rc == 0 && e == "dtoh 0x1234;" && syncs() == 1, "into memory CUDA knows: the copy only", e);
            rc = ((DtoH)ptsz)(host, dptr, sizeof host, nullptr);
            e = events();
            expect(rc == 0 && e == "sync 0x2;dtoh (nil);", "the per-thread variant on stream 0 waits for the per-thread stream", e);
        }
    }

    // Other handles and RTLD_NEXT are untouched.
    void *self = dlopen(nullptr, RTLD_NOW);
    expect(dlsym(self, "cuMemHostRegister_v2") == nullptr || dlsym(self, "cuMemHostRegister_v2") != (void *)reg,
           "lookups on other handles are not redirected");
    expect(direct != nullptr && direct == dlsym(cu, "cuMemAlloc_v2"), "unwrapped driver functions are the driver's");
    void *g = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    auto next = (int (*)())dlsym(RTLD_NEXT, "efaemu_probe_next");
    expect(g && next && next() == 1, "dlsym(RTLD_NEXT) still resolves relative to its caller (the forward is a tail call)",
           next ? std::to_string(next()) : "null");
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
