// softgdr on the CPU with the stand-in driver: LD_LIBRARY_PATH=<build>/softgdr:<build>/fakecuda efaemu_softgdr_test
// Loads libgdrapi.so.2 and its symbols by name and pins/maps/offsets exactly as NVSHMEM 3.4.5's libfabric
// transport does, then uses the mapping by raw pointer as its proxy does, checking coherence with "GPU" memory
// that the test changes behind the mapping's back.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

int failures = 0;
void expect(bool cond, const std::string &check, const std::string &why = "") {
    if (cond) printf("ok %s\n", check.c_str());
    else {
        failures++;
        printf("FAIL %s%s%s\n", check.c_str(), why.empty() ? "" : ": ", why.c_str());
    }
}

struct gdr;
typedef struct gdr *gdr_t;
struct gdr_mh_t {
    unsigned long h;
};
struct gdr_info_t {  // GDRCopy 2.5's layout, as NVSHMEM compiles it
    uint64_t va, mapped_size;
    uint32_t page_size;
    uint64_t tm_cycles;
    uint32_t cycles_per_ms;
    unsigned mapped : 1, wc_mapping : 1;
    int mapping_type;
};

// True when the host view of [p, p+n) is PROT_NONE (idle mapping), read from /proc/self/maps.
bool closed(const void *p) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool none = false;
    unsigned long a = (unsigned long)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perm[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 && a >= lo && a < hi) none = !strncmp(perm, "---", 3);
    }
    fclose(f);
    return none;
}

}  // namespace

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    void *g = dlopen("libgdrapi.so.2", RTLD_LAZY);  // NVSHMEM's dlopen
    void *cu = dlopen("libcuda.so.1", RTLD_NOW);
    if (!g || !cu || !dlsym(cu, "fakecuda_get_stats")) {
        printf("FAIL setup: libgdrapi.so.2 (softgdr) or the stand-in libcuda.so.1 not found\n");
        return 2;
    }
    const char *names[] = {"gdr_runtime_get_version", "gdr_driver_get_version", "gdr_open", "gdr_close",
                           "gdr_pin_buffer", "gdr_unpin_buffer", "gdr_map", "gdr_unmap", "gdr_get_info",
                           "gdr_copy_from_mapping", "gdr_copy_to_mapping"};
    bool all = true;
    for (const char *n : names) all = all && dlsym(g, n);
    expect(all, "every symbol NVSHMEM loads by name is there (gdr_get_info by that name, not only _v2)");
    auto rt = (void (*)(int *, int *))dlsym(g, "gdr_runtime_get_version");
    int major, minor;
    rt(&major, &minor);
    expect(major == 2 && minor >= 5, "runtime API 2.x with x >= 5 (NVSHMEM: same major, minor >= its build's)");
    auto open_ = (gdr_t(*)())dlsym(g, "gdr_open");
    auto pin = (int (*)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *))dlsym(g, "gdr_pin_buffer");
    auto map = (int (*)(gdr_t, gdr_mh_t, void **, size_t))dlsym(g, "gdr_map");
    auto info = (int (*)(gdr_t, gdr_mh_t, gdr_info_t *))dlsym(g, "gdr_get_info");
    auto unmap = (int (*)(gdr_t, gdr_mh_t, void *, size_t))dlsym(g, "gdr_unmap");
    auto unpin = (int (*)(gdr_t, gdr_mh_t))dlsym(g, "gdr_unpin_buffer");
    auto from = (int (*)(gdr_mh_t, void *, const void *, size_t))dlsym(g, "gdr_copy_from_mapping");
    auto to = (int (*)(gdr_mh_t, void *, const void *, size_t))dlsym(g, "gdr_copy_to_mapping");
    auto alloc = (int (*)(unsigned long long *, size_t))dlsym(cu, "cuMemAlloc_v2");
    auto htod = (int (*)(unsigned long long, const void *, size_t))dlsym(cu, "cuMemcpyHtoD_v2");
    auto dtoh = (int (*)(void *, unsigned long long, size_t))dlsym(cu, "cuMemcpyDtoH_v2");

    gdr_t gd = open_();
    unsigned long long pad, buf;
    alloc(&pad, 256);        // the heap does not start on a GPU page: exercise NVSHMEM's offset arithmetic
    alloc(&buf, 3 * 65536);  // 3 GPU pages
    const size_t len = 2 * 65536;
    uint64_t init[1024];
    for (int i = 0; i < 1024; i++) init[i] = 1000 + i;
    htod(buf, init, sizeof init);
    gdr_mh_t mh;
    gdr_info_t inf;
    memset(&inf, 0xee, sizeof inf);
    void *base = nullptr;
    int r = pin(gd, buf, len, 0, 0, &mh);
    r = r ? r : map(gd, mh, &base, len);
    r = r ? r : info(gd, mh, &inf);
    expect(r == 0 && inf.va <= buf && inf.va % 65536 == 0 && inf.mapped_size >= len + (buf - inf.va),
           "pin, map, get_info: va aligned to the GPU page, covering the buffer");
    auto *cpu = reinterpret_cast<volatile uint64_t *>(static_cast<char *>(base) + (buf - inf.va));  // NVSHMEM's cpu_ptr
    expect(cpu[5] == 1005, "a raw load through the mapping reads GPU memory");
    expect(closed((const void *)cpu), "the page is closed again after the access (every access goes to the GPU)");

    // The proxy's staged atomic: old = *ptr; *ptr = old + v.
    uint64_t old = cpu[7];
    cpu[7] = old + 5;
    uint64_t dev7;
    dtoh(&dev7, buf + 7 * 8, 8);
    expect(dev7 == 1012, "a raw read-modify-write reaches GPU memory", std::to_string(dev7));

    // The GPU writes behind the mapping's back: the next raw load must see it.
    uint64_t gpu = 424242;
    htod(buf + 5 * 8, &gpu, 8);
    expect(cpu[5] == 424242, "a GPU-side change is visible to the next raw load (no stale host copy)");

    // A store writes back only its own bytes.
    gpu = 777;
    htod(buf + 9 * 8, &gpu, 8);
    cpu[8] = 88;
    uint64_t d89[2];
    dtoh(d89, buf + 8 * 8, 16);
    expect(d89[0] == 88 && d89[1] == 777, "a store changes only its word; the neighbour written by the GPU stays");

    // An unaligned store across a host page boundary (two faults, one stepped instruction).
    char *edge = const_cast<char *>(reinterpret_cast<volatile char *>(cpu) - 0) + 4096 - ((uintptr_t)cpu % 4096) - 4;
    uint64_t v = 0x1122334455667788ull;
    memcpy(edge, &v, 8);
    uint64_t back;
    dtoh(&back, buf + (unsigned long long)(edge - (char *)cpu), 8);
    expect(back == v, "an 8-byte store spanning two host pages lands whole");

    // NVSHMEM's ACK path: two stores (value, flag) through the mapping.
    volatile uint64_t *elem = cpu + 64;
    elem[0] = 31337;
    elem[1] = 1;
    uint64_t ack[2];
    dtoh(ack, buf + 64 * 8, 16);
    expect(ack[0] == 31337 && ack[1] == 1, "the ACK's value and flag stores reach GPU memory");

    // enforce_cst's read and the copy functions.
    int tmp = 0;
    r = from(mh, &tmp, (const void *)cpu, sizeof tmp);
    expect(r == 0 && tmp == 1000, "gdr_copy_from_mapping reads GPU memory");
    uint64_t w = 99;
    r = to(mh, (void *)(cpu + 100), &w, 8);
    dtoh(&back, buf + 100 * 8, 8);
    expect(r == 0 && back == 99, "gdr_copy_to_mapping writes GPU memory");

    // A second thread doing the proxy's adds, the GPU reading the result.
    std::thread t([&] {
        for (int i = 0; i < 200; i++) cpu[200] = cpu[200] + 5;
    });
    t.join();
    dtoh(&back, buf + 200 * 8, 8);
    expect(back == 1200 + 1000, "200 read-modify-writes from another thread: all reach GPU memory", std::to_string(back));

    expect(unmap(gd, mh, base, len) == 0 && unpin(gd, mh) == 0, "unmap, then unpin");
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
