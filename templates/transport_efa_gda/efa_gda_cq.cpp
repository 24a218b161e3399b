/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * GPU CQs: each GDA endpoint's completion queues live in GPU memory (cq_open_ext over a dma-buf, FI_WAIT_NONE),
 * so that kernels poll them without the CPU; the NIC writes them over PCIe. */
#include "efa_gda_internal.h"

#if defined(FI_EFA_GDA_OPS)

#include <unistd.h>

namespace efa_gda {

/* Exports [mem, mem + bytes) (page aligned) as a dma-buf the NIC maps over PCIe, as libfabric's
 * hmem_cuda.c does: the PCIe mapping type first, plain where the platform refuses it. */
static CUresult export_dmabuf(Gda &s, CUdeviceptr mem, size_t bytes, int *fd, bool *pcie) {
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
#if CUDA_VERSION >= 12080
    r = s.cu.memGetHandleForAddressRange(fd, mem, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                         CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
    *pcie = r == CUDA_SUCCESS;
    if (r == CUDA_SUCCESS || (r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED)) return r;
#endif
    *pcie = false;
    return s.cu.memGetHandleForAddressRange(fd, mem, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
}

const char *open_gpu_cq(Gda &s, Rail &rl, size_t entries, GpuCq *c, const char *which, char *why, size_t whylen) {
    struct fi_cq_attr attr = {};
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = FI_WAIT_NONE;
    attr.size = entries;
    /* The NIC rounds the depth up to a power of two; room for that many of the largest CQE, in whole 2 MiB
     * pages at a 2 MiB boundary. */
    c->bytes = ((size_t)pow2_at_least(entries) * kCqeMax + kCqAlign - 1) & ~(kCqAlign - 1);
    CUresult r = s.cu.memAlloc(&c->alloc, c->bytes + kCqAlign);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cuMemAlloc of the GPU %s CQ (%zu bytes) failed (%s)", which, c->bytes, s.cu.name(r));
        return why;
    }
    c->mem = (c->alloc + kCqAlign - 1) & ~(CUdeviceptr)(kCqAlign - 1);
    /* Zero: no entry looks written (the phase of the first pass is 1) or taken by a consumer. */
    s.cu.memsetD8(c->mem, 0, c->bytes);
    r = export_dmabuf(s, c->mem, c->bytes, &c->fd, &c->pcie_mapping);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "exporting the GPU %s CQ as dma-buf failed (%s): needs the open NVIDIA kernel module and driver >= 515",
                 which, s.cu.name(r));
        return why;
    }
    struct fi_efa_cq_init_attr init = {};
    init.flags = FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
    init.ext_mem_dmabuf.length = c->bytes;
    init.ext_mem_dmabuf.offset = 0;
    init.ext_mem_dmabuf.fd = (uint32_t)c->fd;
    int rc = rl.ops->cq_open_ext(rl.domain, &attr, &init, &c->cq, NULL);
    if (rc) {
        snprintf(why, whylen, "cq_open_ext of the %s CQ over GPU memory failed (%s)%s", which, fi_strerror(-rc),
                 rc == -FI_EOPNOTSUPP ? ": the EFA device or driver lacks CQ_WITH_EXT_MEM_DMABUF (rdma-core >= 59, recent efa.ko)" : "");
        return why;
    }
    rc = rl.ops->query_cq(c->cq, &c->attr);
    if (rc) {
        snprintf(why, whylen, "query_cq failed (%s)", fi_strerror(-rc));
        return why;
    }
    if (c->attr.entry_size < 16 || c->attr.entry_size > kCqeMax || !c->attr.num_entries ||
        (c->attr.num_entries & (c->attr.num_entries - 1)) != 0) {
        snprintf(why, whylen, "unexpected %s CQ geometry (%u entries of %u bytes)", which, c->attr.num_entries, c->attr.entry_size);
        return why;
    }
    if ((uint64_t)c->attr.num_entries * c->attr.entry_size > c->bytes) {
        snprintf(why, whylen, "the %s CQ needs %u x %u bytes but its GPU buffer holds %zu", which, c->attr.num_entries,
                 c->attr.entry_size, c->bytes);
        return why;
    }
    return nullptr;
}

void close_cq(Gda &s, GpuCq &c) {
    if (c.cq) fi_close(&c.cq->fid);
    c.cq = nullptr;
    if (c.fd >= 0) close(c.fd);
    c.fd = -1;
    if (c.alloc) s.cu.memFree(c.alloc);
    c.alloc = c.mem = 0;
}

}  // namespace efa_gda

#endif
