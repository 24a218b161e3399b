/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Host side of the EFA GPU-Direct-Async path, compiled into NVSHMEM's libfabric transport.
 *
 * GDA gets its own efa-direct fabric, domain, endpoint and AV on the NIC NVSHMEM chose: NVSHMEM 3.4 opens
 * the `efa` (RDM) fabric, whose domain refuses FI_EFA_GDA_OPS, and a QP cannot be driven by the CPU proxy
 * and the GPU at once (separate producer counters, CPU reaping of GPU completions corrupts the wr-id pool).
 * The endpoint's completion queues live in GPU memory (cq_open_ext over a dma-buf, FI_WAIT_NONE) and are
 * bound before fi_enable; its SQ ring and doorbell page are mapped into the GPU with cuMemHostRegister
 * (IOMEMORY | DEVICEMAP). Every failure turns GDA off with a one-line reason and leaves NVSHMEM alone.
 *
 * The CUDA driver is reached through dlopen("libcuda.so.1") so that the transport keeps loading on hosts
 * where GDA cannot run. */
#include "transport_efa_gda.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#if defined(__has_include)
#if __has_include(<rdma/fi_ext_efa.h>)
#include <rdma/fi_ext_efa.h>
#endif
#endif

#include <cuda.h>

#include <vector>

namespace {

char g_status[512] = "EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1)";
bool g_active = false;

void set_status(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_status, sizeof g_status, fmt, ap);
    va_end(ap);
}

}  // namespace

int nvshmemt_efa_gda_enabled(void) {
    const char *v = getenv(NVSHMEM_EFA_GDA_ENABLE_ENV);
    if (v == NULL) return 0;
    return strcmp(v, "1") == 0 || strcasecmp(v, "y") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0;
}

int nvshmemt_efa_gda_active(void) { return g_active ? 1 : 0; }

extern "C" const char *nvshmemx_efa_gda_status(void) { return g_status; }
extern "C" int nvshmemx_efa_gda_is_active(void) { return g_active ? 1 : 0; }

#if !defined(FI_EFA_GDA_OPS)

/* Built against a libfabric without the GDA extension: every PE is built the same way, so no exchange is
 * needed to agree that GDA is off. */
int nvshmemt_efa_gda_init(const struct fi_info *, const nvshmemt_efa_gda_bootstrap_t *) {
    set_status("EFA GDA off: NVSHMEM was built against libfabric headers without FI_EFA_GDA_OPS "
               "(needs libfabric >= 2.3.0; rebuild with nvshmem-efa --libfabric-home pointing at one)");
    return -1;
}
void nvshmemt_efa_gda_register_region(void *, size_t) {}
void nvshmemt_efa_gda_release_region(void *) {}
void nvshmemt_efa_gda_fini(void) {}
extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) { return NULL; }

#else

namespace {

/* The driver entry points GDA needs, resolved at run time. */
struct Driver {
    void *lib = nullptr;
    CUresult (*ctxGetDevice)(CUdevice *) = nullptr;
    CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*memFree)(CUdeviceptr) = nullptr;
    CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
    CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
    CUresult (*memGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = nullptr;
    CUresult (*memHostRegister)(void *, size_t, unsigned int) = nullptr;
    CUresult (*memHostUnregister)(void *) = nullptr;
    CUresult (*memHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int) = nullptr;
    CUresult (*getErrorName)(CUresult, const char **) = nullptr;

    const char *load() {
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return "libcuda.so.1 cannot be loaded (no NVIDIA driver on this host)";
        struct {
            const char *name;
            void **slot;
        } syms[] = {{"cuCtxGetDevice", (void **)&ctxGetDevice},
                    {"cuMemAlloc_v2", (void **)&memAlloc},
                    {"cuMemFree_v2", (void **)&memFree},
                    {"cuMemsetD8_v2", (void **)&memsetD8},
                    {"cuMemcpyHtoD_v2", (void **)&memcpyHtoD},
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
    const char *name(CUresult r) const {
        const char *n = "CUDA error";
        if (getErrorName) getErrorName(r, &n);
        return n;
    }
};

/* GPU memory the NIC writes through a dma-buf: a CQ. */
struct GpuCq {
    CUdeviceptr mem = 0;
    size_t bytes = 0;
    int fd = -1;
    struct fid_cq *cq = nullptr;
    struct fi_efa_cq_attr attr = {};
};

/* A page-aligned host registration of NIC BAR memory. */
struct Mapping {
    void *base = nullptr;
    CUdeviceptr dev = 0;
};

struct Region {
    void *buf = nullptr;
    size_t length = 0;
    struct fid_mr *mr = nullptr;
};

struct PeerAddress {
    int32_t ok;
    uint32_t addrlen;
    uint8_t addr[96];
};

struct RegionInfo {
    uint64_t base, length;
    uint32_t rkey, ok;
};

struct Gda {
    Driver cu;
    nvshmemt_efa_gda_bootstrap_t boot = {};
    struct fi_info *info = nullptr;
    struct fid_fabric *fabric = nullptr;
    struct fid_domain *domain = nullptr;
    struct fid_av *av = nullptr;
    struct fid_ep *ep = nullptr;
    struct fi_efa_ops_gda *ops = nullptr;
    GpuCq tx, rx;
    Mapping sq, db;
    /* Newer libfabric appends fields to fi_efa_wq_attr (caps, after v2.5) and query_qp_wqs fills the
     * struct of the library loaded at run time: the padding keeps a newer library from writing past ours. */
    struct fi_efa_wq_attr sq_attr = {};
    uint8_t sq_attr_pad[64] = {};
    struct fi_efa_wq_attr rq_attr = {};
    uint8_t rq_attr_pad[64] = {};
    Region regions[NVSHMEMX_EFA_GDA_MAX_REGIONS];
    nvshmemx_efa_gda_device_state_t host_state = {};
    std::vector<nvshmemx_efa_gda_region_t> remote;
    CUdeviceptr d_state = 0, d_qp = 0, d_rx = 0, d_peers = 0, d_remote = 0;
};

Gda *g = nullptr;

size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

uint32_t log2_of(uint32_t v) {
    uint32_t l = 0;
    while ((1u << l) < v) l++;
    return l;
}

/* Maps [p, p + len) of NIC BAR memory for the GPU. The registration must cover whole pages; the returned
 * device pointer corresponds to p itself. */
const char *map_bar(Gda &s, void *p, size_t len, Mapping *m, CUdeviceptr *dev_p, CUresult *err) {
    const size_t page = page_size();
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)p + len + page - 1) & ~(uintptr_t)(page - 1);
    *err = s.cu.memHostRegister((void *)start, end - start, CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (*err != CUDA_SUCCESS) return "cuMemHostRegister(IOMEMORY|DEVICEMAP)";
    m->base = (void *)start;
    *err = s.cu.memHostGetDevicePointer(&m->dev, (void *)start, 0);
    if (*err != CUDA_SUCCESS) return "cuMemHostGetDevicePointer";
    *dev_p = m->dev + ((uintptr_t)p - start);
    return nullptr;
}

const char *open_gpu_cq(Gda &s, size_t entries, GpuCq *c, char *why, size_t whylen) {
    struct fi_cq_attr attr = {};
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = FI_WAIT_NONE;
    attr.size = entries;
    /* Room for the largest CQE (32 bytes) per entry, plus the slack fabtests keep. */
    c->bytes = entries * 32 + 4096;
    CUresult r = s.cu.memAlloc(&c->mem, c->bytes);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cuMemAlloc of the GPU CQ failed (%s)", s.cu.name(r));
        return why;
    }
    s.cu.memsetD8(c->mem, 0, c->bytes);
    r = s.cu.memGetHandleForAddressRange(&c->fd, c->mem, c->bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "exporting the GPU CQ as dma-buf failed (%s): needs the open NVIDIA kernel module and driver >= 515", s.cu.name(r));
        return why;
    }
    struct fi_efa_cq_init_attr init = {};
    init.flags = FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
    init.ext_mem_dmabuf.length = c->bytes;
    init.ext_mem_dmabuf.offset = 0;
    init.ext_mem_dmabuf.fd = (uint32_t)c->fd;
    int rc = s.ops->cq_open_ext(s.domain, &attr, &init, &c->cq, NULL);
    if (rc) {
        snprintf(why, whylen, "cq_open_ext over GPU memory failed (%s)%s", fi_strerror(-rc),
                 rc == -FI_EOPNOTSUPP ? ": the EFA device or driver lacks CQ_WITH_EXT_MEM_DMABUF (rdma-core >= 59, recent efa.ko)" : "");
        return why;
    }
    rc = s.ops->query_cq(c->cq, &c->attr);
    if (rc) {
        snprintf(why, whylen, "query_cq failed (%s)", fi_strerror(-rc));
        return why;
    }
    if (c->attr.entry_size > 32 || (c->attr.num_entries & (c->attr.num_entries - 1)) != 0) {
        snprintf(why, whylen, "unexpected CQ geometry (%u entries of %u bytes)", c->attr.num_entries, c->attr.entry_size);
        return why;
    }
    return nullptr;
}

void close_cq(Gda &s, GpuCq &c) {
    if (c.cq) fi_close(&c.cq->fid);
    c.cq = nullptr;
    if (c.fd >= 0) close(c.fd);
    c.fd = -1;
    if (c.mem) s.cu.memFree(c.mem);
    c.mem = 0;
}

/* Order matters: the GPU must stop seeing the NIC's pages before the QP that owns them goes; the endpoint
 * goes before its CQs (the QP references them); GPU CQ memory is freed only after the NIC stopped writing
 * into it; MRs and the AV before the domain, the domain before the fabric. */
void teardown(Gda &s) {
    if (s.sq.base) s.cu.memHostUnregister(s.sq.base);
    if (s.db.base) s.cu.memHostUnregister(s.db.base);
    s.sq = Mapping();
    s.db = Mapping();
    if (s.ep) fi_close(&s.ep->fid);
    s.ep = nullptr;
    close_cq(s, s.tx);
    close_cq(s, s.rx);
    for (Region &r : s.regions) {
        if (r.mr) fi_close(&r.mr->fid);
        r = Region();
    }
    if (s.av) fi_close(&s.av->fid);
    s.av = nullptr;
    CUdeviceptr *dev[] = {&s.d_state, &s.d_qp, &s.d_rx, &s.d_peers, &s.d_remote};
    for (CUdeviceptr *p : dev) {
        if (*p) s.cu.memFree(*p);
        *p = 0;
    }
    if (s.domain) fi_close(&s.domain->fid);
    s.domain = nullptr;
    if (s.fabric) fi_close(&s.fabric->fid);
    s.fabric = nullptr;
    if (s.info) fi_freeinfo(s.info);
    s.info = nullptr;
}

/* Local set-up up to the point where peers are needed. Returns nullptr or the reason GDA cannot start. */
const char *start_local(Gda &s, const struct fi_info *nvshmem_info, PeerAddress *me, char *why, size_t whylen) {
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return "fi_allocinfo failed";
    hints->caps = FI_MSG | FI_RMA | FI_HMEM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_HMEM;
    hints->fabric_attr->prov_name = strdup("efa");
    hints->fabric_attr->name = strdup("efa-direct");
    if (nvshmem_info && nvshmem_info->domain_attr && nvshmem_info->domain_attr->name)
        hints->domain_attr->name = strdup(nvshmem_info->domain_attr->name);
    int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &s.info);
    fi_freeinfo(hints);
    if (rc) {
        snprintf(why, whylen, "no efa-direct fabric for %s (fi_getinfo: %s): needs an EFA device and libfabric >= 2.3.0",
                 nvshmem_info && nvshmem_info->domain_attr && nvshmem_info->domain_attr->name ? nvshmem_info->domain_attr->name
                                                                                           : "this NIC",
                 fi_strerror(-rc));
        return why;
    }
    const char *cu_err = s.cu.load();
    if (cu_err) return cu_err;
    if ((rc = fi_fabric(s.info->fabric_attr, &s.fabric, NULL)) || (rc = fi_domain(s.fabric, s.info, &s.domain, NULL))) {
        snprintf(why, whylen, "opening the efa-direct fabric/domain failed (%s)", fi_strerror(-rc));
        return why;
    }
    rc = fi_open_ops(&s.domain->fid, FI_EFA_GDA_OPS, 0, (void **)&s.ops, NULL);
    if (rc) {
        snprintf(why, whylen, "fi_open_ops(\"%s\") failed (%s)%s", FI_EFA_GDA_OPS, fi_strerror(-rc),
                 rc == -FI_EOPNOTSUPP ? ": the domain is not efa-direct"
                                      : ": the libfabric loaded at run time predates the GDA ops (needs >= 2.3.0)");
        return why;
    }
    struct fi_av_attr av_attr = {};
    av_attr.type = FI_AV_TABLE;
    if ((rc = fi_av_open(s.domain, &av_attr, &s.av, NULL))) {
        snprintf(why, whylen, "fi_av_open failed (%s)", fi_strerror(-rc));
        return why;
    }
    if (open_gpu_cq(s, s.info->tx_attr->size, &s.tx, why, whylen) || open_gpu_cq(s, s.info->rx_attr->size, &s.rx, why, whylen))
        return why;
    if ((rc = fi_endpoint(s.domain, s.info, &s.ep, NULL)) || (rc = fi_ep_bind(s.ep, &s.av->fid, 0)) ||
        (rc = fi_ep_bind(s.ep, &s.tx.cq->fid, FI_TRANSMIT)) || (rc = fi_ep_bind(s.ep, &s.rx.cq->fid, FI_RECV)) ||
        (rc = fi_enable(s.ep))) {
        snprintf(why, whylen, "creating the GDA endpoint failed (%s)", fi_strerror(-rc));
        return why;
    }
    if ((rc = s.ops->query_qp_wqs(s.ep, &s.sq_attr, &s.rq_attr))) {
        snprintf(why, whylen, "query_qp_wqs failed (%s)%s", fi_strerror(-rc),
                 rc == -FI_ENOSYS ? ": libfabric was built against an rdma-core without efadv_query_qp_wqs (needs >= 59)" : "");
        return why;
    }
    if (s.sq_attr.entry_size != NVSHMEMX_EFA_GDA_WQE_SIZE) {
        snprintf(why, whylen, "the SQ uses %u-byte WQEs; this release writes %d-byte WQEs only", s.sq_attr.entry_size,
                 NVSHMEMX_EFA_GDA_WQE_SIZE);
        return why;
    }
    if ((s.sq_attr.num_entries & (s.sq_attr.num_entries - 1)) || s.tx.attr.num_entries < s.sq_attr.num_entries) {
        snprintf(why, whylen, "SQ of %u entries with a TX CQ of %u entries cannot be driven safely", s.sq_attr.num_entries,
                 s.tx.attr.num_entries);
        return why;
    }
    CUdeviceptr sq_dev, db_dev;
    CUresult cr;
    const char *step = map_bar(s, s.sq_attr.buffer, (size_t)s.sq_attr.entry_size * s.sq_attr.num_entries, &s.sq, &sq_dev, &cr);
    if (!step) step = map_bar(s, s.sq_attr.doorbell, sizeof(uint32_t), &s.db, &db_dev, &cr);
    if (step) {
        snprintf(why, whylen, "%s of the NIC's SQ/doorbell pages was refused (%s)%s", step, s.cu.name(cr),
                 cr == CUDA_ERROR_NOT_PERMITTED || cr == CUDA_ERROR_NOT_SUPPORTED || cr == CUDA_ERROR_INVALID_VALUE
                     ? ": needs NVreg_RegistryDwords=\"PeerMappingOverride=1;\" for the nvidia module and a privileged process"
                     : "");
        return why;
    }
    nvshmemx_efa_gda_qp_t q = {};
    q.sq_buf = (uint8_t *)sq_dev;
    q.sq_db = (uint32_t *)db_dev;
    q.sq_entries = s.sq_attr.num_entries;
    q.sq_log2 = log2_of(q.sq_entries);
    q.max_batch = s.sq_attr.max_batch ? s.sq_attr.max_batch : 1;
    q.wqe_size = s.sq_attr.entry_size;
    q.cq_buf = (uint8_t *)s.tx.mem;
    q.cq_entries = s.tx.attr.num_entries;
    q.cq_log2 = log2_of(q.cq_entries);
    q.cq_entry_size = s.tx.attr.entry_size;
    /* NCCL's EFA GDA path splits at 1 GiB; the endpoint's max message size is the device's RDMA limit. */
    q.max_rdma_size = s.info->ep_attr->max_msg_size && s.info->ep_attr->max_msg_size < (1ull << 30) ? s.info->ep_attr->max_msg_size : (1ull << 30);
    nvshmemx_efa_gda_rx_cq_t rx = {};
    rx.cq_buf = (uint8_t *)s.rx.mem;
    rx.cq_entries = s.rx.attr.num_entries;
    rx.cq_log2 = log2_of(rx.cq_entries);
    rx.cq_entry_size = s.rx.attr.entry_size;
    if ((cr = s.cu.memAlloc(&s.d_qp, sizeof q)) || (cr = s.cu.memcpyHtoD(s.d_qp, &q, sizeof q)) ||
        (cr = s.cu.memAlloc(&s.d_rx, sizeof rx)) || (cr = s.cu.memcpyHtoD(s.d_rx, &rx, sizeof rx))) {
        snprintf(why, whylen, "allocating the GPU queue state failed (%s)", s.cu.name(cr));
        return why;
    }
    size_t len = sizeof me->addr;
    if ((rc = fi_getname(&s.ep->fid, me->addr, &len))) {
        snprintf(why, whylen, "fi_getname failed (%s)", fi_strerror(-rc));
        return why;
    }
    me->addrlen = (uint32_t)len;
    return nullptr;
}

const char *publish(Gda &s) {
    s.host_state.abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
    CUresult r = s.cu.memcpyHtoD(s.d_remote, s.remote.data(), s.remote.size() * sizeof s.remote[0]);
    if (r == CUDA_SUCCESS) r = s.cu.memcpyHtoD(s.d_state, &s.host_state, sizeof s.host_state);
    return r == CUDA_SUCCESS ? nullptr : s.cu.name(r);
}

}  // namespace

int nvshmemt_efa_gda_init(const struct fi_info *nvshmem_info, const nvshmemt_efa_gda_bootstrap_t *boot) {
    if (g) return g_active ? 0 : -1;
    g = new Gda();
    g->boot = *boot;
    char why[400] = "";
    PeerAddress me = {};
    const char *err = start_local(*g, nvshmem_info, &me, why, sizeof why);
    me.ok = err == nullptr;
    /* Every PE reaches this all-gather, whatever happened locally: GDA starts everywhere or nowhere. */
    std::vector<PeerAddress> all(boot->n_pes);
    if (boot->allgather(&me, all.data(), (int)sizeof me, boot->ctx) != 0) {
        set_status("EFA GDA off: the bootstrap all-gather of GDA addresses failed");
        teardown(*g);
        return -1;
    }
    if (err) {
        set_status("EFA GDA off: %s", err);
        teardown(*g);
        return -1;
    }
    for (int pe = 0; pe < boot->n_pes; pe++) {
        if (!all[pe].ok) {
            set_status("EFA GDA off: PE %d could not start GDA (its log says why)", pe);
            teardown(*g);
            return -1;
        }
    }
    std::vector<nvshmemx_efa_gda_peer_t> peers(boot->n_pes);
    for (int pe = 0; pe < boot->n_pes; pe++) {
        fi_addr_t fa;
        if (fi_av_insert(g->av, all[pe].addr, 1, &fa, 0, NULL) != 1) {
            set_status("EFA GDA off: fi_av_insert of PE %d's GDA address failed", pe);
            teardown(*g);
            return -1;
        }
        int rc = g->ops->query_addr(g->ep, fa, &peers[pe].ah, &peers[pe].qpn, &peers[pe].qkey);
        if (rc) {
            set_status("EFA GDA off: query_addr for PE %d failed (%s)", pe, fi_strerror(-rc));
            teardown(*g);
            return -1;
        }
    }
    g->remote.assign((size_t)boot->n_pes * NVSHMEMX_EFA_GDA_MAX_REGIONS, nvshmemx_efa_gda_region_t());
    CUresult r;
    if ((r = g->cu.memAlloc(&g->d_peers, peers.size() * sizeof peers[0])) ||
        (r = g->cu.memcpyHtoD(g->d_peers, peers.data(), peers.size() * sizeof peers[0])) ||
        (r = g->cu.memAlloc(&g->d_remote, g->remote.size() * sizeof g->remote[0])) ||
        (r = g->cu.memAlloc(&g->d_state, sizeof g->host_state))) {
        set_status("EFA GDA off: allocating the GPU peer tables failed (%s)", g->cu.name(r));
        teardown(*g);
        return -1;
    }
    g->host_state.my_pe = boot->my_pe;
    g->host_state.n_pes = boot->n_pes;
    g->host_state.qp = (nvshmemx_efa_gda_qp_t *)g->d_qp;
    g->host_state.rx_cq = (nvshmemx_efa_gda_rx_cq_t *)g->d_rx;
    g->host_state.peers = (nvshmemx_efa_gda_peer_t *)g->d_peers;
    g->host_state.remote = (nvshmemx_efa_gda_region_t *)g->d_remote;
    const char *perr = publish(*g);
    if (perr) {
        set_status("EFA GDA off: publishing the device state failed (%s)", perr);
        teardown(*g);
        return -1;
    }
    g_active = true;
    set_status("EFA GDA active: efa-direct %s, SQ %u x %u B (max_batch %u), TX CQ %u x %u B, %d PEs",
               g->info->domain_attr->name, g->sq_attr.num_entries, g->sq_attr.entry_size, g->sq_attr.max_batch,
               g->tx.attr.num_entries, g->tx.attr.entry_size, boot->n_pes);
    return 0;
}

void nvshmemt_efa_gda_register_region(void *buf, size_t length) {
    if (!g_active) return;
    Gda &s = *g;
    int slot = -1;
    for (int i = 0; i < NVSHMEMX_EFA_GDA_MAX_REGIONS && slot < 0; i++)
        if (!s.regions[i].buf) slot = i;
    RegionInfo mine = {(uint64_t)(uintptr_t)buf, (uint64_t)length, 0, 0};
    uint64_t lkey = FI_KEY_NOTAVAIL;
    CUdevice dev = 0;
    if (slot >= 0 && s.cu.ctxGetDevice(&dev) == CUDA_SUCCESS) {
        struct iovec iov = {buf, length};
        struct fi_mr_attr attr = {};
        attr.mr_iov = &iov;
        attr.iov_count = 1;
        attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        attr.iface = FI_HMEM_CUDA;
        attr.device.cuda = dev;
        if (fi_mr_regattr(s.domain, &attr, 0, &s.regions[slot].mr) == 0) {
            lkey = s.ops->get_mr_lkey(s.regions[slot].mr);
            mine.rkey = (uint32_t)fi_mr_key(s.regions[slot].mr);
            mine.ok = lkey != FI_KEY_NOTAVAIL;
        }
    }
    /* Collective like the registration that called us: every PE contributes, even after a local failure. */
    std::vector<RegionInfo> all(s.boot.n_pes);
    const bool gathered = s.boot.allgather(&mine, all.data(), (int)sizeof mine, s.boot.ctx) == 0;
    if (slot < 0) {
        set_status("EFA GDA active, but region %p (%zu bytes) is not reachable by GDA: more than %d regions", buf, length,
                   NVSHMEMX_EFA_GDA_MAX_REGIONS);
        return;
    }
    s.regions[slot].buf = buf;
    s.regions[slot].length = length;
    if (!mine.ok || !gathered) {
        set_status("EFA GDA active, but registering region %p (%zu bytes) on the GDA domain failed", buf, length);
        return;
    }
    s.host_state.local[slot].base = mine.base;
    s.host_state.local[slot].length = mine.length;
    s.host_state.local[slot].key = (uint32_t)lkey;
    s.host_state.local[slot].valid = 1;
    if ((uint32_t)slot + 1 > s.host_state.num_regions) s.host_state.num_regions = (uint32_t)slot + 1;
    for (int pe = 0; pe < s.boot.n_pes; pe++) {
        nvshmemx_efa_gda_region_t &r = s.remote[(size_t)pe * NVSHMEMX_EFA_GDA_MAX_REGIONS + slot];
        r.base = all[pe].base;
        r.length = all[pe].length;
        r.key = all[pe].rkey;
        r.valid = all[pe].ok;
    }
    const char *err = publish(s);
    if (err) set_status("EFA GDA active, but publishing region %p failed (%s)", buf, err);
}

void nvshmemt_efa_gda_release_region(void *buf) {
    if (!g_active) return;
    Gda &s = *g;
    for (int i = 0; i < NVSHMEMX_EFA_GDA_MAX_REGIONS; i++) {
        if (s.regions[i].buf != buf) continue;
        s.host_state.local[i] = nvshmemx_efa_gda_region_t();
        publish(s);
        if (s.regions[i].mr) fi_close(&s.regions[i].mr->fid);
        s.regions[i] = Region();
    }
}

void nvshmemt_efa_gda_fini(void) {
    if (!g) return;
    teardown(*g);
    if (g->cu.lib) dlclose(g->cu.lib);
    delete g;
    g = nullptr;
    if (g_active) set_status("EFA GDA off: finalized");
    g_active = false;
}

extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) {
    return g_active ? (nvshmemx_efa_gda_device_state_t *)g->d_state : NULL;
}

#endif
