// Test double of the CUDA driver for the GDA host code on a machine without a GPU: built as libcuda.so.1
// and found through LD_LIBRARY_PATH by the transport's dlopen. "GPU memory" is host memory; every call
// the transport makes is recorded so the harness can check how it was made (fake_cuda_report()).
#include <cuda.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <map>
#include <string>

namespace {
std::map<uintptr_t, size_t> g_allocs;  // device allocations: base -> bytes
std::string g_log;

void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g_log += line;
    g_log += "\n";
}
bool is_device(uintptr_t p) {
    auto it = g_allocs.upper_bound(p);
    if (it == g_allocs.begin()) return false;
    --it;
    return p - it->first < it->second;
}
}  // namespace

extern "C" {

// The harness reads what happened through this.
const char *fake_cuda_report() { return g_log.c_str(); }

CUresult cuCtxGetDevice(CUdevice *d) {
    *d = 0;
    return CUDA_SUCCESS;
}
// CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: FAKE_CUDA_GDR_ORDERING (default 100, OWNER, as H100/H200
// report), or "fail" for a driver that cannot answer. Every other attribute is refused: GDA asks for none.
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice) {
    if (attr != CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING) return CUDA_ERROR_INVALID_VALUE;
    const char *order = getenv("FAKE_CUDA_GDR_ORDERING");
    if (order && strcmp(order, "fail") == 0) return CUDA_ERROR_NOT_SUPPORTED;
    *v = order ? atoi(order) : CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
    return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    // Fault injection: FAKE_CUDA_FAIL_ALLOC_BYTES=N refuses every allocation of exactly N bytes (the harness sets
    // it to one object's size to fail one step of start-up on one PE).
    const char *fail = getenv("FAKE_CUDA_FAIL_ALLOC_BYTES");
    if (fail && strtoull(fail, nullptr, 10) == bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = nullptr;
    if (posix_memalign(&m, 512, bytes ? bytes : 1)) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xEE, bytes);  // like GPU memory: not zero unless someone clears it
    g_allocs[(uintptr_t)m] = bytes;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (!g_allocs.erase((uintptr_t)p)) return CUDA_ERROR_INVALID_VALUE;
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    if (!is_device((uintptr_t)p)) return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)p, v, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
    if (!is_device((uintptr_t)d)) return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
    if (!is_device((uintptr_t)s)) return CUDA_ERROR_INVALID_VALUE;
    memcpy(d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) {
    if (!st) note("cuMemcpyHtoDAsync on the legacy default stream");
    return cuMemcpyHtoD_v2(d, s, n);
}
CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
    static int tag;
    note("cuStreamCreate flags=%u", flags);
    *s = (CUstream)&tag;
    return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) {
    if (attr != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_NOT_SUPPORTED;
    if (!is_device((uintptr_t)p)) return CUDA_ERROR_INVALID_VALUE;  // plain host memory: unknown to CUDA
    *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
    return CUDA_SUCCESS;
}
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
                                       unsigned long long flags) {
    const long page = sysconf(_SC_PAGESIZE);
    note("dmabuf ptr_mod_2M=%lu ptr_page_aligned=%d size=%zu size_page_aligned=%d flags=%llu device=%d",
         (unsigned long)(p % (2u << 20)), p % page == 0, size, size % page == 0, flags, is_device((uintptr_t)p));
    if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || p % page || size % page || !is_device((uintptr_t)p))
        return CUDA_ERROR_INVALID_VALUE;
    if (getenv("FAKE_CUDA_NO_PCIE_MAPPING") && flags) return CUDA_ERROR_NOT_SUPPORTED;
    *(int *)handle = open("/dev/null", O_RDONLY);
    return CUDA_SUCCESS;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
    note("cuMemHostRegister page_aligned=%d bytes=%zu iomemory=%d devicemap=%d", (uintptr_t)p % sysconf(_SC_PAGESIZE) == 0, n,
         (flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0, (flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0);
    return CUDA_SUCCESS;
}
CUresult cuMemHostUnregister(void *) { return CUDA_SUCCESS; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int) {
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
    static char buf[32];
    snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)r);
    *s = buf;
    return CUDA_SUCCESS;
}
}
