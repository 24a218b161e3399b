/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * The CUDA driver as GDA uses it: reached through dlopen("libcuda.so.1") so that the transport keeps loading on
 * hosts where GDA cannot run; the GDA stream every upload goes through; the GPU's GPUDirect RDMA write ordering. */
#include "efa_gda_internal.h"

#if defined(FI_EFA_GDA_OPS)

#include <dlfcn.h>

namespace efa_gda {

const char *Driver::load() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "libcuda.so.1 cannot be loaded (no NVIDIA driver on this host)";
    struct {
        const char *name;
        void **slot;
    } syms[] = {{"cuCtxGetDevice", (void **)&ctxGetDevice},
                {"cuDeviceGetAttribute", (void **)&deviceGetAttribute},
                {"cuMemAlloc_v2", (void **)&memAlloc},
                {"cuMemFree_v2", (void **)&memFree},
                {"cuMemsetD8_v2", (void **)&memsetD8},
                {"cuMemcpyHtoD_v2", (void **)&memcpyHtoD},
                {"cuMemcpyDtoH_v2", (void **)&memcpyDtoH},
                {"cuMemcpyHtoDAsync_v2", (void **)&memcpyHtoDAsync},
                {"cuStreamCreate", (void **)&streamCreate},
                {"cuStreamSynchronize", (void **)&streamSynchronize},
                {"cuStreamDestroy_v2", (void **)&streamDestroy},
                {"cuPointerGetAttribute", (void **)&pointerGetAttribute},
                {"cuMemGetHandleForAddressRange", (void **)&memGetHandleForAddressRange},
                {"cuMemHostRegister_v2", (void **)&memHostRegister},
                {"cuMemHostUnregister", (void **)&memHostUnregister},
                {"cuMemHostGetDevicePointer_v2", (void **)&memHostGetDevicePointer},
                {"cuGetErrorName", (void **)&getErrorName}};
    for (auto &s : syms) {
        *s.slot = dlsym(lib, s.name);
        if (!*s.slot) return "the NVIDIA driver lacks a CUDA entry point GDA needs (dma-buf export needs driver >= 515)";
    }
    return nullptr;
}

const char *Driver::name(CUresult r) const {
    const char *n = "CUDA error";
    if (getErrorName) getErrorName(r, &n);
    return n;
}

/* The GPU's CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING. GDA signals rely on it: a kernel that sees a
 * signal an RDMA write placed reads the payload an earlier write placed, which holds natively only from
 * CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER (NVSHMEM's IBGDA skips its consistency step only then). A value that
 * cannot be read counts as unordered, as IBGDA assumes. */
void read_gdr_ordering(Gda &s) {
    CUdevice dev = 0;
    int order = 0;
    CUresult r = s.cu.ctxGetDevice(&dev);
    if (r == CUDA_SUCCESS)
        r = s.cu.deviceGetAttribute(&order, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, dev);
    if (r != CUDA_SUCCESS) {
        s.gdr_ordering = -1;
        s.gdr_ordering_why = std::string("cuDeviceGetAttribute(GPU_DIRECT_RDMA_WRITES_ORDERING) failed (") + s.cu.name(r) + ")";
        return;
    }
    s.gdr_ordering = order;
}

const char *start_shared(Gda &s, char *why, size_t whylen) {
    const char *cu_err = s.cu.load();
    if (cu_err) return cu_err;
    GDA_CU(s.cu.streamCreate(&s.stream, CU_STREAM_NON_BLOCKING), "creating the GDA stream");
    read_gdr_ordering(s);
    return nullptr;
}

CUresult upload(Gda &s, CUdeviceptr dst, const void *src, size_t bytes) {
    CUresult r = s.cu.memcpyHtoDAsync(dst, src, bytes, s.stream);
    if (r == CUDA_SUCCESS) r = s.cu.streamSynchronize(s.stream);
    return r;
}

uint32_t log2_of(uint32_t v) {
    uint32_t l = 0;
    while ((1u << l) < v) l++;
    return l;
}

uint32_t pow2_at_least(uint64_t v) {
    uint32_t p = 1;
    while (p < v && p < (1u << 30)) p <<= 1;
    return p;
}

}  // namespace efa_gda

#endif
