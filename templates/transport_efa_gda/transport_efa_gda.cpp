/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Host side of the EFA GPU-Direct-Async path, compiled into NVSHMEM's libfabric transport.
 *
 * GDA gets its own efa-direct fabric, domain, endpoint and AV on each NIC (rail) NVSHMEM chose for the PE:
 * NVSHMEM 3.4 opens the `efa` (RDM) fabric, whose domain refuses FI_EFA_GDA_OPS, and a QP cannot be driven
 * by the CPU proxy and the GPU at once (separate producer counters, CPU reaping of GPU completions corrupts
 * the wr-id pool). Each endpoint's completion queues live in GPU memory (cq_open_ext over a dma-buf,
 * FI_WAIT_NONE) and are bound before fi_enable; its SQ ring and doorbell page are mapped into the GPU with
 * cuMemHostRegister (IOMEMORY | DEVICEMAP). A failure that turns GDA off does so on every PE with a one-line
 * reason and leaves NVSHMEM alone.
 *
 * Rails: NVSHMEM 3.6+ (multi-rail libfabric transport) gives a PE several NICs and calls
 * nvshmemt_efa_gda_init_rails with one fi_info per NIC; older NVSHMEM calls nvshmemt_efa_gda_init with one.
 * The rule every PE applies to the same all-gathered facts, so that all agree:
 *   - a PE opens GDA on each NIC it is given, in order, up to NVSHMEMX_EFA_GDA_MAX_RAILS (and
 *     NVSHMEM_EFA_GDA_RAILS, when set); a NIC named twice, or one that cannot be opened, is left out with the
 *     reason; the NICs that opened are that PE's usable rails, numbered in order;
 *   - GDA runs on n = the smallest number of usable rails of any PE, and rail k of every PE is its k-th
 *     usable NIC (any EFA NIC reaches any other); a PE's usable rails past n are left out, naming the PE that
 *     has fewer; with n = 0 (some PE has none) GDA is off on every PE;
 *   - every heap region is registered on every rail; a region some PE could not register on some rail is
 *     unreachable on that rail only (device posts that pick that rail fail with
 *     NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE), and is never hot.
 * nvshmemx_efa_gda_status() names the rails GDA runs on and each rail left out with why; every left-out
 * rail is also printed to stderr.
 *
 * Start-up is collective and never hangs on a disagreement: every PE takes part whatever its
 * NVSHMEM_EFA_GDA_ENABLE says (the switch itself is agreed in the first all-gather, which also carries each
 * PE's usable rails), an all-gather of "my inserts are done" after the AV inserts of every rail is the
 * barrier fi_efa(7) asks for (a target must know the initiator before RMA), and nothing is published to the
 * GPU before both succeeded everywhere.
 *
 * While kernels run, the device state changes only by replacing its regions pointer with a new, fully
 * written table (one aligned 8-byte copy on a private stream; old tables stay until finalize) and by filling
 * a hot region slot once (the peers' entries, then ours, on every rail) or retiring it (clearing one word
 * per rail).
 *
 * The CUDA driver is reached through dlopen("libcuda.so.1") so that the transport keeps loading on hosts
 * where GDA cannot run. */
#include "transport_efa_gda.h"

#include <dlfcn.h>
#include <errno.h>
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

#include <string>
#include <vector>

namespace {

char g_status[1024] = "EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1 on every PE)";
bool g_active = false;
int g_rails = 0;

void set_status(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_status, sizeof g_status, fmt, ap);
    va_end(ap);
}

bool env_requested() {
    const char *v = getenv(NVSHMEM_EFA_GDA_ENABLE_ENV);
    if (v == NULL) return false;
    return strcmp(v, "1") == 0 || strcasecmp(v, "y") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0 ||
           strcasecmp(v, "true") == 0;
}

}  // namespace

int nvshmemt_efa_gda_active(void) { return g_active ? 1 : 0; }

extern "C" const char *nvshmemx_efa_gda_status(void) { return g_status; }
extern "C" int nvshmemx_efa_gda_is_active(void) { return g_active ? 1 : 0; }
extern "C" int nvshmemx_efa_gda_rails(void) { return g_active ? g_rails : 0; }

int nvshmemt_efa_gda_init(const struct fi_info *nvshmem_info, const nvshmemt_efa_gda_bootstrap_t *boot) {
    return nvshmemt_efa_gda_init_rails(&nvshmem_info, 1, boot);
}

#if !defined(FI_EFA_GDA_OPS)

/* Built against a libfabric without the GDA extension: every PE is built the same way and none exchanges
 * anything, so a PE that asks for GDA can say why not on its own without risking a hang. */
int nvshmemt_efa_gda_enabled(void) { return env_requested() ? 1 : 0; }
int nvshmemt_efa_gda_init_rails(const struct fi_info *const *, int, const nvshmemt_efa_gda_bootstrap_t *) {
    set_status("EFA GDA off: NVSHMEM was built against libfabric headers without FI_EFA_GDA_OPS "
               "(needs libfabric >= 2.3.0; rebuild with nvshmem-efa --libfabric-home pointing at one)");
    return -1;
}
void nvshmemt_efa_gda_register_region(void *, size_t) {}
void nvshmemt_efa_gda_release_region(void *) {}
void nvshmemt_efa_gda_fini(void) {}
extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) { return NULL; }

#else

/* Every PE runs the collective start-up, so that NVSHMEM_EFA_GDA_ENABLE can differ between PEs without
 * one PE waiting in an all-gather the others never enter. */
int nvshmemt_efa_gda_enabled(void) { return 1; }

namespace {

const size_t kCqAlign = 2u << 20;         /* GPU CQ buffers: 2 MiB aligned, whole 2 MiB pages */
const uint32_t kCqeMax = 32;              /* largest CQE: efa_io_rx_cdesc_ex */
const uint32_t kMinImmWindow = 16;        /* immediates in flight per sender the RX CQ is sized for */
const uint64_t kCreditTimeoutNs = 10000000000ull;
const int kMaxRails = NVSHMEMX_EFA_GDA_MAX_RAILS;
const char *const kRailsEnv = NVSHMEM_EFA_GDA_RAILS_ENV;
const char *const kOwnedEnv = NVSHMEM_EFA_GDA_OWNED_QUEUES_ENV;
const int kMaxOwned = NVSHMEM_EFA_GDA_MAX_OWNED;

/* The driver entry points GDA needs, resolved at run time. */
struct Driver {
    void *lib = nullptr;
    CUresult (*ctxGetDevice)(CUdevice *) = nullptr;
    CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*memFree)(CUdeviceptr) = nullptr;
    CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
    CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
    CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
    CUresult (*streamCreate)(CUstream *, unsigned int) = nullptr;
    CUresult (*streamSynchronize)(CUstream) = nullptr;
    CUresult (*streamDestroy)(CUstream) = nullptr;
    CUresult (*pointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr) = nullptr;
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
    const char *name(CUresult r) const {
        const char *n = "CUDA error";
        if (getErrorName) getErrorName(r, &n);
        return n;
    }
};

/* GPU memory the NIC writes through a dma-buf: a CQ. */
struct GpuCq {
    CUdeviceptr alloc = 0;  /* what cuMemAlloc returned */
    CUdeviceptr mem = 0;    /* the 2 MiB aligned buffer inside it */
    size_t bytes = 0;
    int fd = -1;
    bool pcie_mapping = false;
    struct fid_cq *cq = nullptr;
    struct fi_efa_cq_attr attr = {};
};

/* A page-aligned host registration of NIC BAR memory. */
struct Mapping {
    void *base = nullptr;
    CUdeviceptr dev = 0;
};

/* An owned queue: an endpoint of its own on a rail (its QP), with its TX CQ in GPU memory; its RX side
 * shares the rail's RX CQ (nothing is sent to it: peers address the rail's own QP). */
struct OwnedQueue {
    struct fid_ep *ep = nullptr;
    GpuCq tx;
    Mapping sq, db;
    struct fi_efa_wq_attr sq_attr = {};
    uint8_t sq_attr_spare[64] = {};
    struct fi_efa_wq_attr rq_attr = {};
    uint8_t rq_attr_spare[64] = {};
    CUdeviceptr d_slot_done = 0;
    nvshmemx_efa_gda_qp_t qp = {};
};

/* One NIC of this PE with GDA's own efa-direct endpoint on it. */
struct Rail {
    std::string name;   /* the NIC (nic->device_attr->name), else the domain name */
    bool nic_named = false; /* name is the NIC's (not a domain name) */
    std::string why;    /* non-empty: left out, and why */
    bool opened = false; /* local start-up succeeded */
    struct fi_info *info = nullptr;
    struct fid_fabric *fabric = nullptr;
    struct fid_domain *domain = nullptr;
    struct fid_av *av = nullptr;
    struct fid_ep *ep = nullptr;
    struct fi_efa_ops_gda *ops = nullptr;
    GpuCq tx, rx;
    Mapping sq, db;
    /* query_qp_wqs fills the struct of the libfabric loaded at run time, which may be newer than the header
     * this was built against: the struct is 32 bytes in v2.3.0 .. v2.6.0 and at HEAD, where a uint16_t caps
     * (after v2.6.0) sits in what was its tail padding. The spare bytes keep any later growth off our
     * stack. */
    struct fi_efa_wq_attr sq_attr = {};
    uint8_t sq_attr_spare[64] = {};
    struct fi_efa_wq_attr rq_attr = {};
    uint8_t rq_attr_spare[64] = {};
    struct fid_mr *credits_mr = nullptr;
    CUdeviceptr d_rx = 0, d_peers = 0, d_slot_done = 0, d_credits = 0, d_credit_words = 0, d_peer_consumed = 0;
    std::vector<OwnedQueue> owned;     /* the owned queues opened (at most what every PE opened, after start-up) */
    std::string owned_why;             /* why fewer owned queues than asked for opened here, if so */
    CUdeviceptr d_owned = 0, d_owner = 0;
    /* What goes into the rail's block of the device state once GDA's rails are known (finish_start). */
    struct {
        nvshmemx_efa_gda_qp_t qp;
        uint64_t *signal_src;
        uint32_t signal_lkey, imm_window;
        nvshmemx_efa_gda_rx_cq_t *rx_cq;
        nvshmemx_efa_gda_credits_t *credits;
    } st = {};
};

/* One heap region NVSHMEM registered, with every PE's view of it, per rail. */
struct Region {
    void *buf = nullptr;
    size_t length = 0;
    std::vector<struct fid_mr *> mr;                              /* [rail] */
    std::vector<nvshmemx_efa_gda_region_t> local;                 /* [rail] */
    std::vector<std::vector<nvshmemx_efa_gda_region_t>> remote;   /* [rail][pe] */
};

/* What each PE contributes to the start-up all-gather: its switch, how many rails it can use, and for each
 * usable rail (in order) its GDA address and credit block. */
struct RailAddress {
    uint32_t addrlen;
    uint32_t credits_rkey;
    uint64_t credits_base;
    uint8_t addr[96];
    uint32_t owned;                       /* owned queues opened on this rail */
    uint32_t reserved;
    uint8_t owned_addr[NVSHMEM_EFA_GDA_MAX_OWNED][32]; /* their names (an efa-direct name is 32 bytes) */
};
struct PeerAddress {
    int32_t requested;
    int32_t ok;      /* local start-up gave at least one usable rail */
    int32_t usable;  /* usable rails */
    int32_t offered; /* rails NVSHMEM handed over */
    RailAddress rail[NVSHMEMX_EFA_GDA_MAX_RAILS];
};

struct RegionInfo {
    uint64_t base, length;
    uint32_t rkey[NVSHMEMX_EFA_GDA_MAX_RAILS];
    uint32_t ok[NVSHMEMX_EFA_GDA_MAX_RAILS];
};

struct Gda {
    Driver cu;
    nvshmemt_efa_gda_bootstrap_t boot = {};
    CUstream stream = nullptr;
    std::vector<Rail> offered;  /* every NIC NVSHMEM handed over, in its order */
    std::vector<int> used;      /* GDA's rails: indices into offered, rail k = offered[used[k]] */
    std::vector<Region> regions;
    /* What the GPU copy holds, the queues included (about 260 KiB: on the heap with Gda). */
    nvshmemx_efa_gda_device_state_t host_state = {};
    void *hot_buf[NVSHMEMX_EFA_GDA_HOT_REGIONS] = {}; /* the region each hot slot holds (nullptr once retired) */
    bool hot_used[NVSHMEMX_EFA_GDA_HOT_REGIONS] = {}; /* filled once: a slot is never filled again */
    CUdeviceptr d_state = 0;
    std::vector<CUdeviceptr> tables; /* every regions table published; freed at finalize */

    Rail &rail(size_t k) { return offered[(size_t)used[k]]; }
    size_t n_rails() const { return used.size(); }
};

Gda *g = nullptr;

size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

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

/* Exports [mem, mem + bytes) (page aligned) as a dma-buf the NIC maps over PCIe, as libfabric's
 * hmem_cuda.c does: the PCIe mapping type first, plain where the platform refuses it. */
CUresult export_dmabuf(Gda &s, CUdeviceptr mem, size_t bytes, int *fd, bool *pcie) {
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

/* Registers [buf, buf + len) on a rail's domain: host memory as system memory, GPU memory as CUDA memory of
 * its device. */
int register_mr(Gda &s, Rail &rl, void *buf, size_t len, uint64_t access, struct fid_mr **mr) {
    struct iovec iov = {buf, len};
    struct fi_mr_attr attr = {};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = access;
    unsigned int type = 0;
    CUdevice dev = 0;
    const CUresult r = s.cu.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)buf);
    if (r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE && s.cu.ctxGetDevice(&dev) == CUDA_SUCCESS) {
        attr.iface = FI_HMEM_CUDA;
        attr.device.cuda = dev;
    } else {
        attr.iface = FI_HMEM_SYSTEM; /* host memory, registered with CUDA or not */
    }
    return fi_mr_regattr(rl.domain, &attr, 0, mr);
}

/* Closes one QP (the rail's own or an owned queue's): the GPU's mappings of its SQ and doorbell first, then the
 * endpoint, then its TX CQ and slot marks (see teardown_rail for why in this order). */
void close_qp(Gda &s, Mapping &sq, Mapping &db, struct fid_ep *&ep, GpuCq &tx, CUdeviceptr &slot_done) {
    if (sq.base) s.cu.memHostUnregister(sq.base);
    if (db.base) s.cu.memHostUnregister(db.base);
    sq = Mapping();
    db = Mapping();
    if (ep) fi_close(&ep->fid);
    ep = nullptr;
    close_cq(s, tx);
    if (slot_done && s.cu.memFree) s.cu.memFree(slot_done);
    slot_done = 0;
}
void close_owned(Gda &s, OwnedQueue &o) { close_qp(s, o.sq, o.db, o.ep, o.tx, o.d_slot_done); }

/* Closes one rail. Order matters: the GPU must stop seeing the NIC's pages before the QP that owns them goes;
 * the endpoint goes before its CQs (the QP references them); GPU CQ memory is freed only after the NIC stopped
 * writing into it; MRs and the AV before the domain, the domain before the fabric. Heap regions registered on
 * the rail are closed by the caller first. */
void teardown_rail(Gda &s, Rail &rl) {
    for (OwnedQueue &o : rl.owned) close_owned(s, o);
    rl.owned.clear();
    for (CUdeviceptr *p : {&rl.d_owned, &rl.d_owner}) {
        if (*p && s.cu.memFree) s.cu.memFree(*p);
        *p = 0;
    }
    close_qp(s, rl.sq, rl.db, rl.ep, rl.tx, rl.d_slot_done);
    close_cq(s, rl.rx);
    if (rl.credits_mr) fi_close(&rl.credits_mr->fid);
    rl.credits_mr = nullptr;
    if (rl.av) fi_close(&rl.av->fid);
    rl.av = nullptr;
    CUdeviceptr *dev[] = {&rl.d_rx, &rl.d_peers, &rl.d_credits, &rl.d_credit_words, &rl.d_peer_consumed};
    for (CUdeviceptr *p : dev) {
        if (*p && s.cu.memFree) s.cu.memFree(*p);
        *p = 0;
    }
    if (rl.domain) fi_close(&rl.domain->fid);
    rl.domain = nullptr;
    if (rl.fabric) fi_close(&rl.fabric->fid);
    rl.fabric = nullptr;
    if (rl.info) fi_freeinfo(rl.info);
    rl.info = nullptr;
    rl.opened = false;
}

void teardown(Gda &s) {
    for (Region &r : s.regions)
        for (struct fid_mr *mr : r.mr)
            if (mr) fi_close(&mr->fid);
    s.regions.clear();
    for (Rail &rl : s.offered) teardown_rail(s, rl);
    if (s.d_state) s.cu.memFree(s.d_state);
    s.d_state = 0;
    for (CUdeviceptr t : s.tables) s.cu.memFree(t);
    s.tables.clear();
    if (s.stream) s.cu.streamDestroy(s.stream);
    s.stream = nullptr;
}

#define GDA_CU(call, what)                                                                      \
    do {                                                                                        \
        CUresult r_ = (call);                                                                   \
        if (r_ != CUDA_SUCCESS) {                                                               \
            snprintf(why, whylen, "%s failed (%s)", what, s.cu.name(r_));                       \
            return why;                                                                         \
        }                                                                                       \
    } while (0)

/* Shared by every rail: the CUDA driver and the GDA stream. */
const char *start_shared(Gda &s, char *why, size_t whylen) {
    const char *cu_err = s.cu.load();
    if (cu_err) return cu_err;
    GDA_CU(s.cu.streamCreate(&s.stream, CU_STREAM_NON_BLOCKING), "creating the GDA stream");
    return nullptr;
}

/* The NIC's name for status lines: the nic object's device name (efaemu0, rdmap16s27), else the domain. */
std::string nic_name(const struct fi_info *info, int index) {
    if (info && info->nic && info->nic->device_attr && info->nic->device_attr->name) return info->nic->device_attr->name;
    if (info && info->domain_attr && info->domain_attr->name) return info->domain_attr->name;
    return "NIC " + std::to_string(index);
}

/* One QP on a rail's domain (the rail's own, or an owned queue's): its endpoint bound to the rail's AV, to tx
 * (FI_TRANSMIT) and to the rail's RX CQ, enabled, and its send and receive queues as query_qp_wqs gives them.
 * what names it in errors. */
const char *open_qp(Rail &rl, GpuCq &tx, struct fid_ep **ep, struct fi_efa_wq_attr *sq, struct fi_efa_wq_attr *rq, const char *what,
                    char *why, size_t whylen) {
    int rc;
    if ((rc = fi_endpoint(rl.domain, rl.info, ep, NULL)) || (rc = fi_ep_bind(*ep, &rl.av->fid, 0)) ||
        (rc = fi_ep_bind(*ep, &tx.cq->fid, FI_TRANSMIT)) || (rc = fi_ep_bind(*ep, &rl.rx.cq->fid, FI_RECV)) ||
        (rc = fi_enable(*ep))) {
        snprintf(why, whylen, "creating %s failed (%s)", what, fi_strerror(-rc));
        return why;
    }
    if ((rc = rl.ops->query_qp_wqs(*ep, sq, rq))) {
        snprintf(why, whylen, "query_qp_wqs of %s failed (%s)%s", what, fi_strerror(-rc),
                 rc == -FI_ENOSYS ? ": libfabric was built against an rdma-core without efadv_query_qp_wqs (needs >= 59)" : "");
        return why;
    }
    return nullptr;
}

/* A QP's SQ ring and doorbell mapped for the GPU, and its per-slot completion marks in GPU memory (entry i
 * starts as the slot of the pass before, i - entries). */
const char *map_sq(Gda &s, const struct fi_efa_wq_attr &sq, Mapping *ring, Mapping *db, CUdeviceptr *ring_dev, CUdeviceptr *db_dev,
                   CUdeviceptr *slot_done, char *why, size_t whylen) {
    CUresult cr;
    const char *step = map_bar(s, sq.buffer, (size_t)sq.entry_size * sq.num_entries, ring, ring_dev, &cr);
    if (!step) step = map_bar(s, sq.doorbell, sizeof(uint32_t), db, db_dev, &cr);
    if (step) {
        snprintf(why, whylen, "%s of the NIC's SQ/doorbell pages was refused (%s)%s", step, s.cu.name(cr),
                 cr == CUDA_ERROR_NOT_PERMITTED || cr == CUDA_ERROR_NOT_SUPPORTED || cr == CUDA_ERROR_INVALID_VALUE
                     ? ": needs NVreg_RegistryDwords=\"PeerMappingOverride=1;\" for the nvidia module and a privileged process"
                     : "");
        return why;
    }
    std::vector<uint32_t> done(sq.num_entries);
    for (uint32_t i = 0; i < sq.num_entries; i++) done[i] = i - sq.num_entries;
    GDA_CU(s.cu.memAlloc(slot_done, done.size() * sizeof done[0]), "allocating the slot marks");
    GDA_CU(s.cu.memcpyHtoD(*slot_done, done.data(), done.size() * sizeof done[0]), "initialising the slot marks");
    return nullptr;
}

/* One rail's local set-up up to the point where peers are needed: its efa-direct fabric, domain, AV, GPU CQs,
 * endpoint, the SQ and doorbell mapped for the GPU, the slot marks, and its registered block of credit
 * counters and signal scratch. The queue's constants go to rl.host (written to the GPU in finish_start).
 * Returns nullptr or the reason the rail cannot be used. */
const char *start_rail(Gda &s, Rail &rl, const struct fi_info *nvshmem_info, RailAddress *me, char *why, size_t whylen) {
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return "fi_allocinfo failed";
    hints->caps = FI_MSG | FI_RMA | FI_HMEM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_HMEM;
    /* The GPU writes RDMA WQEs without inline data: asking for 32 bytes keeps libfabric after v2.6.0 from
     * requesting wide (128-byte) WQEs for inline sends; where the device uses them anyway, the device code
     * writes at the 128-byte stride. */
    hints->tx_attr->inject_size = 32;
    hints->fabric_attr->prov_name = strdup("efa");
    hints->fabric_attr->name = strdup("efa-direct");
    if (nvshmem_info && nvshmem_info->domain_attr && nvshmem_info->domain_attr->name)
        hints->domain_attr->name = strdup(nvshmem_info->domain_attr->name);
    int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &rl.info);
    fi_freeinfo(hints);
    if (rc) {
        snprintf(why, whylen, "no efa-direct fabric for %s (fi_getinfo: %s): needs an EFA device and libfabric >= 2.3.0",
                 nvshmem_info && nvshmem_info->domain_attr && nvshmem_info->domain_attr->name ? nvshmem_info->domain_attr->name
                                                                                           : "this NIC",
                 fi_strerror(-rc));
        return why;
    }
    /* NVSHMEM's info named no NIC: efa-direct's may (a nic object, else its domain). */
    if (!rl.nic_named && ((rl.info->nic && rl.info->nic->device_attr && rl.info->nic->device_attr->name) || rl.name.rfind("NIC ", 0) == 0))
        rl.name = nic_name(rl.info, 0);
    if (!s.stream) {
        const char *shared = start_shared(s, why, whylen);
        if (shared) return shared;
    }
    if ((rc = fi_fabric(rl.info->fabric_attr, &rl.fabric, NULL)) || (rc = fi_domain(rl.fabric, rl.info, &rl.domain, NULL))) {
        snprintf(why, whylen, "opening the efa-direct fabric/domain failed (%s)", fi_strerror(-rc));
        return why;
    }
    rc = fi_open_ops(&rl.domain->fid, FI_EFA_GDA_OPS, 0, (void **)&rl.ops, NULL);
    if (rc) {
        snprintf(why, whylen, "fi_open_ops(\"%s\") failed (%s)%s", FI_EFA_GDA_OPS, fi_strerror(-rc),
                 rc == -FI_EOPNOTSUPP ? ": the domain is not efa-direct"
                                      : ": the libfabric loaded at run time predates the GDA ops (needs >= 2.3.0)");
        return why;
    }
    struct fi_av_attr av_attr = {};
    av_attr.type = FI_AV_TABLE;
    if ((rc = fi_av_open(rl.domain, &av_attr, &rl.av, NULL))) {
        snprintf(why, whylen, "fi_av_open failed (%s)", fi_strerror(-rc));
        return why;
    }
    /* The RX CQ absorbs every PE's unconsumed immediates: at least kMinImmWindow per PE (credits keep each
     * sender within RX CQ entries / n_pes). */
    const size_t rx_entries = rl.info->rx_attr->size > (size_t)s.boot.n_pes * kMinImmWindow ? rl.info->rx_attr->size
                                                                                            : (size_t)s.boot.n_pes * kMinImmWindow;
    if (open_gpu_cq(s, rl, rl.info->tx_attr->size, &rl.tx, "TX", why, whylen) ||
        open_gpu_cq(s, rl, rx_entries, &rl.rx, "RX", why, whylen))
        return why;
    if (open_qp(rl, rl.tx, &rl.ep, &rl.sq_attr, &rl.rq_attr, "the GDA endpoint", why, whylen)) return why;
    if (rl.sq_attr.entry_size != 64 && rl.sq_attr.entry_size != 128) {
        snprintf(why, whylen, "the SQ uses %u-byte WQEs; the device code writes 64-byte RDMA WQEs at a 64- or 128-byte stride",
                 rl.sq_attr.entry_size);
        return why;
    }
    if (!rl.sq_attr.num_entries || (rl.sq_attr.num_entries & (rl.sq_attr.num_entries - 1)) || rl.sq_attr.num_entries > 65536 ||
        rl.tx.attr.num_entries < rl.sq_attr.num_entries) {
        snprintf(why, whylen, "SQ of %u entries with a TX CQ of %u entries cannot be driven safely", rl.sq_attr.num_entries,
                 rl.tx.attr.num_entries);
        return why;
    }
    CUdeviceptr sq_dev, db_dev;
    if (map_sq(s, rl.sq_attr, &rl.sq, &rl.db, &sq_dev, &db_dev, &rl.d_slot_done, why, whylen)) return why;
    /* The rail's own registered block. Credits: consumed, sent, seen, landing ([n_pes] x u64 each), then lock
     * ([n_pes] x u32); consumed is read by peers, landing receives our reads. Then the signal scratch: one
     * u64 per SQ slot, the source the NIC reads a signal's value from (nvshmemx_efa_gda_rail_t). */
    const size_t n = (size_t)s.boot.n_pes;
    const size_t credit_bytes = 4 * n * sizeof(uint64_t) + n * sizeof(uint32_t);
    const size_t signal_off = (credit_bytes + 63) & ~(size_t)63;
    const size_t block_bytes = signal_off + (size_t)rl.sq_attr.num_entries * sizeof(uint64_t);
    GDA_CU(s.cu.memAlloc(&rl.d_credit_words, block_bytes), "allocating the credit counters and signal scratch");
    GDA_CU(s.cu.memsetD8(rl.d_credit_words, 0, block_bytes), "clearing the credit counters and signal scratch");
    if ((rc = register_mr(s, rl, (void *)(uintptr_t)rl.d_credit_words, block_bytes, FI_READ | FI_WRITE | FI_REMOTE_READ, &rl.credits_mr))) {
        snprintf(why, whylen, "registering the credit counters and signal scratch failed (%s)", fi_strerror(-rc));
        return why;
    }
    nvshmemx_efa_gda_credits_t credits = {};
    uint64_t *words = (uint64_t *)(uintptr_t)rl.d_credit_words;
    credits.consumed = words;
    credits.sent = words + n;
    credits.seen = words + 2 * n;
    credits.landing = words + 3 * n;
    credits.lock = (uint32_t *)(words + 4 * n);
    credits.lkey = (uint32_t)rl.ops->get_mr_lkey(rl.credits_mr);
    GDA_CU(s.cu.memAlloc(&rl.d_peer_consumed, n * sizeof(nvshmemx_efa_gda_region_t)), "allocating the peer credit table");
    credits.peer_consumed = (nvshmemx_efa_gda_region_t *)(uintptr_t)rl.d_peer_consumed;
    GDA_CU(s.cu.memAlloc(&rl.d_credits, sizeof credits), "allocating the credit state");
    GDA_CU(s.cu.memcpyHtoD(rl.d_credits, &credits, sizeof credits), "initialising the credit state");
    me->credits_base = (uint64_t)rl.d_credit_words;
    me->credits_rkey = (uint32_t)fi_mr_key(rl.credits_mr);

    /* The rail's part of the state (placed in its block once GDA's rails are known, see finish_start). */
    auto &h = rl.st;
    h.signal_src = (uint64_t *)(uintptr_t)(rl.d_credit_words + signal_off);
    h.signal_lkey = credits.lkey;
    h.credits = (nvshmemx_efa_gda_credits_t *)(uintptr_t)rl.d_credits;
    nvshmemx_efa_gda_qp_t &q = h.qp;
    q = nvshmemx_efa_gda_qp_t();
    q.sq_buf = (uint8_t *)sq_dev;
    q.sq_db = (uint32_t *)db_dev;
    q.sq_entries = rl.sq_attr.num_entries;
    q.sq_log2 = log2_of(q.sq_entries);
    q.max_batch = rl.sq_attr.max_batch ? rl.sq_attr.max_batch : 1;
    q.wqe_size = rl.sq_attr.entry_size;
    q.cq_buf = (uint8_t *)rl.tx.mem;
    q.cq_entries = rl.tx.attr.num_entries;
    q.cq_log2 = log2_of(q.cq_entries);
    q.cq_entry_size = rl.tx.attr.entry_size;
    q.slot_done = (uint32_t *)(uintptr_t)rl.d_slot_done;
    /* NCCL's EFA GDA path splits at 1 GiB; the endpoint's max message size is the device's RDMA limit. */
    q.max_rdma_size = rl.info->ep_attr->max_msg_size && rl.info->ep_attr->max_msg_size < (1ull << 30) ? rl.info->ep_attr->max_msg_size
                                                                                                      : (1ull << 30);
    nvshmemx_efa_gda_rx_cq_t rx = {};
    rx.cq_buf = (uint8_t *)rl.rx.mem;
    rx.cq_entries = rl.rx.attr.num_entries;
    rx.cq_log2 = log2_of(rx.cq_entries);
    rx.cq_entry_size = rl.rx.attr.entry_size;
    GDA_CU(s.cu.memAlloc(&rl.d_rx, sizeof rx), "allocating the GPU receive state");
    GDA_CU(s.cu.memcpyHtoD(rl.d_rx, &rx, sizeof rx), "writing the GPU receive state");
    h.rx_cq = (nvshmemx_efa_gda_rx_cq_t *)(uintptr_t)rl.d_rx;
    h.imm_window = rl.rx.attr.num_entries / (uint32_t)n;
    size_t len = sizeof me->addr;
    if ((rc = fi_getname(&rl.ep->fid, me->addr, &len))) {
        snprintf(why, whylen, "fi_getname failed (%s)", fi_strerror(-rc));
        return why;
    }
    me->addrlen = (uint32_t)len;
    rl.opened = true;
    return nullptr;
}

/* Opens owned queue k of a rail (after start_rail): its endpoint on the rail's domain and AV, its own TX CQ
 * in GPU memory, the rail's RX CQ; its SQ and doorbell mapped for the GPU; slot marks. The queue's constants
 * follow the rail's queue; its QP number comes with the AV inserts. *addr gets its name. */
const char *start_owned(Gda &s, Rail &rl, OwnedQueue &o, uint8_t *addr, char *why, size_t whylen) {
    if (open_gpu_cq(s, rl, rl.info->tx_attr->size, &o.tx, "owned queue's TX", why, whylen)) return why;
    if (open_qp(rl, o.tx, &o.ep, &o.sq_attr, &o.rq_attr, "an owned queue's endpoint", why, whylen)) return why;
    if (o.sq_attr.entry_size != rl.sq_attr.entry_size || o.sq_attr.num_entries != rl.sq_attr.num_entries ||
        o.tx.attr.num_entries < o.sq_attr.num_entries || o.tx.attr.entry_size != rl.tx.attr.entry_size) {
        snprintf(why, whylen, "an owned queue's SQ (%u x %u B, TX CQ %u x %u B) differs from the rail's (%u x %u B, TX CQ %u x %u B)",
                 o.sq_attr.num_entries, o.sq_attr.entry_size, o.tx.attr.num_entries, o.tx.attr.entry_size, rl.sq_attr.num_entries,
                 rl.sq_attr.entry_size, rl.tx.attr.num_entries, rl.tx.attr.entry_size);
        return why;
    }
    CUdeviceptr sq_dev, db_dev;
    if (map_sq(s, o.sq_attr, &o.sq, &o.db, &sq_dev, &db_dev, &o.d_slot_done, why, whylen)) return why;
    o.qp = rl.st.qp;
    o.qp.sq_buf = (uint8_t *)sq_dev;
    o.qp.sq_db = (uint32_t *)db_dev;
    o.qp.max_batch = o.sq_attr.max_batch ? o.sq_attr.max_batch : 1;
    o.qp.cq_buf = (uint8_t *)o.tx.mem;
    o.qp.cq_entries = o.tx.attr.num_entries;
    o.qp.cq_log2 = log2_of(o.qp.cq_entries);
    o.qp.slot_done = (uint32_t *)(uintptr_t)o.d_slot_done;
    size_t len = sizeof RailAddress::owned_addr[0];
    if (const int rc = fi_getname(&o.ep->fid, addr, &len)) {
        snprintf(why, whylen, "fi_getname of an owned queue failed (%s)", fi_strerror(-rc));
        return why;
    }
    return nullptr;
}

/* Opens up to `want` owned queues on a rail; fewer (with the reason in rl.owned_why) when one fails. */
void start_owned_queues(Gda &s, Rail &rl, int want, RailAddress *me) {
    for (int k = 0; k < want; k++) {
        rl.owned.emplace_back();
        char why[400] = "";
        const char *err = start_owned(s, rl, rl.owned.back(), me->owned_addr[k], why, sizeof why);
        if (err) {
            close_owned(s, rl.owned.back());
            rl.owned.pop_back();
            rl.owned_why = std::string("owned queue ") + std::to_string(k) + " of " + rl.name + ": " + err;
            break;
        }
    }
    me->owned = (uint32_t)rl.owned.size();
}

/* A count from the environment (NVSHMEM_EFA_GDA_RAILS, NVSHMEM_EFA_GDA_OWNED_QUEUES): `unset` when it is unset
 * or empty, -1 when it is not a number in [lo, hi]. */
int env_count(const char *name, int unset, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return unset;
    char *end = nullptr;
    const long n = strtol(v, &end, 10);
    return *end || n < lo || n > hi ? -1 : (int)n;
}

/* Inserts every PE's address of rail k into rail k's AV and learns its {ah, qpn, qkey} on that rail. */
const char *insert_peers(Gda &s, size_t k, const std::vector<PeerAddress> &all, std::vector<nvshmemx_efa_gda_peer_t> &peers,
                         char *why, size_t whylen) {
    Rail &rl = s.rail(k);
    char on[160] = "";
    if (s.n_rails() > 1) snprintf(on, sizeof on, " on rail %zu (%s)", k, rl.name.c_str());
    for (int pe = 0; pe < s.boot.n_pes; pe++) {
        fi_addr_t fa;
        if (fi_av_insert(rl.av, all[pe].rail[k].addr, 1, &fa, 0, NULL) != 1) {
            snprintf(why, whylen, "fi_av_insert of PE %d's GDA address%s failed", pe, on);
            return why;
        }
        int rc = rl.ops->query_addr(rl.ep, fa, &peers[pe].ah, &peers[pe].qpn, &peers[pe].qkey);
        if (rc) {
            snprintf(why, whylen, "query_addr for PE %d%s failed (%s)", pe, on, fi_strerror(-rc));
            return why;
        }
        /* Its owned queues too: a target accepts RMA only from initiators it inserted. Our own give their QP
         * numbers, which their CQEs must carry. */
        for (size_t o = 0; o < rl.owned.size(); o++) {
            if (fi_av_insert(rl.av, all[pe].rail[k].owned_addr[o], 1, &fa, 0, NULL) != 1) {
                snprintf(why, whylen, "fi_av_insert of PE %d's owned queue %zu%s failed", pe, o, on);
                return why;
            }
            nvshmemx_efa_gda_peer_t a;
            if ((rc = rl.ops->query_addr(rl.ep, fa, &a.ah, &a.qpn, &a.qkey))) {
                snprintf(why, whylen, "query_addr for PE %d's owned queue %zu%s failed (%s)", pe, o, on, fi_strerror(-rc));
                return why;
            }
            if (pe == s.boot.my_pe) rl.owned[o].qp.qp_num = a.qpn;
        }
    }
    return nullptr;
}

/* Copies host bytes into GPU memory on the GDA stream (never behind a running kernel's stream). */
CUresult upload(Gda &s, CUdeviceptr dst, const void *src, size_t bytes) {
    CUresult r = s.cu.memcpyHtoDAsync(dst, src, bytes, s.stream);
    if (r == CUDA_SUCCESS) r = s.cu.streamSynchronize(s.stream);
    return r;
}

CUdeviceptr rail_offset(size_t k) {
    return offsetof(nvshmemx_efa_gda_device_state_t, rail) + k * sizeof(nvshmemx_efa_gda_rail_t);
}

/* Publishes the current region list: a new table (header, then per region one row of 1 + n_pes entries per
 * rail, at least one row per rail) written in full, then the state's regions pointer replaced with one aligned
 * 8-byte copy. A kernel sees the old table or the new one, never a mix; old tables stay allocated until
 * finalize. */
const char *publish_regions(Gda &s) {
    const uint32_t count = (uint32_t)s.regions.size(), n = (uint32_t)s.boot.n_pes, rails = (uint32_t)s.n_rails();
    const size_t rows = (size_t)(count ? count : 1) * rails;
    const size_t bytes = sizeof(nvshmemx_efa_gda_regions_t) + rows * (1 + n) * sizeof(nvshmemx_efa_gda_region_t);
    std::vector<uint8_t> buf(bytes, 0);
    CUdeviceptr t = 0;
    CUresult r = s.cu.memAlloc(&t, bytes);
    if (r != CUDA_SUCCESS) return s.cu.name(r);
    s.tables.push_back(t);
    nvshmemx_efa_gda_regions_t head = {};
    head.count = count;
    head.n_pes = n;
    head.n_rails = rails;
    memcpy(buf.data(), &head, sizeof head);
    nvshmemx_efa_gda_region_t *entry = (nvshmemx_efa_gda_region_t *)(buf.data() + sizeof head);
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t k = 0; k < rails; k++) {
            nvshmemx_efa_gda_region_t *row = entry + ((size_t)i * rails + k) * (1 + n);
            row[0] = s.regions[i].local[k];
            for (uint32_t pe = 0; pe < n; pe++) row[1 + pe] = s.regions[i].remote[k][pe];
        }
    r = upload(s, t, buf.data(), bytes);
    if (r == CUDA_SUCCESS) {
        const uint64_t ptr = (uint64_t)t;
        r = upload(s, s.d_state + offsetof(nvshmemx_efa_gda_device_state_t, regions), &ptr, sizeof ptr);
    }
    if (r == CUDA_SUCCESS) s.host_state.regions = (nvshmemx_efa_gda_regions_t *)(uintptr_t)t;
    return r == CUDA_SUCCESS ? nullptr : s.cu.name(r);
}

/* Fills a free hot slot with a region reachable on every PE and every rail and of one length everywhere
 * (see nvshmemx_efa_gda_hot_local_t): on each rail the peers' entries first, then ours, each upload finished
 * before the next. Returns nullptr (also when no slot is free or the region does not qualify) or why the
 * upload failed. */
const char *fill_hot_slot(Gda &s, const Region &reg) {
    const uint32_t n = (uint32_t)s.boot.n_pes;
    const size_t rails = s.n_rails();
    for (size_t k = 0; k < rails; k++) {
        if (!reg.local[k].valid) return nullptr;
        for (uint32_t pe = 0; pe < n; pe++)
            if (!reg.remote[k][pe].valid || reg.remote[k][pe].length != reg.local[k].length) return nullptr;
    }
    int slot = 0;
    while (slot < NVSHMEMX_EFA_GDA_HOT_REGIONS && s.hot_used[slot]) slot++;
    if (slot == NVSHMEMX_EFA_GDA_HOT_REGIONS) return nullptr;
    s.hot_used[slot] = true;
    const uint32_t fast = n < NVSHMEMX_EFA_GDA_FAST_PES ? n : NVSHMEMX_EFA_GDA_FAST_PES;
    for (size_t k = 0; k < rails; k++) {
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        for (uint32_t pe = 0; pe < fast; pe++) h.fast[pe].hot[slot] = {reg.remote[k][pe].base, reg.remote[k][pe].key, 1};
        CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, fast), h.fast,
                            fast * sizeof(nvshmemx_efa_gda_fast_peer_t));
        if (r != CUDA_SUCCESS) return s.cu.name(r);
    }
    for (size_t k = 0; k < rails; k++) {
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        h.hot[slot] = {reg.local[k].base, reg.local[k].length, reg.local[k].key, 1, 0};
        const CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, hot) + slot * sizeof(nvshmemx_efa_gda_hot_local_t),
                                  &h.hot[slot], sizeof h.hot[slot]);
        if (r != CUDA_SUCCESS) return s.cu.name(r);
    }
    s.hot_buf[slot] = reg.buf;
    return nullptr;
}

/* Retires the hot slot holding buf, if any: one 4-byte store of present = 0 per rail (kernels then use the
 * table). */
const char *retire_hot_slot(Gda &s, void *buf) {
    for (int slot = 0; slot < NVSHMEMX_EFA_GDA_HOT_REGIONS; slot++) {
        if (!s.hot_used[slot] || s.hot_buf[slot] != buf) continue;
        s.hot_buf[slot] = nullptr;
        for (size_t k = 0; k < s.n_rails(); k++) {
            nvshmemx_efa_gda_hot_local_t &h = s.host_state.rail[k].hot[slot];
            h.present = 0;
            const CUresult r = upload(s, s.d_state + rail_offset(k) + offsetof(nvshmemx_efa_gda_rail_t, hot) +
                                             slot * sizeof(nvshmemx_efa_gda_hot_local_t) + offsetof(nvshmemx_efa_gda_hot_local_t, present),
                                      &h.present, sizeof h.present);
            if (r != CUDA_SUCCESS) return s.cu.name(r);
        }
        return nullptr;
    }
    return nullptr;
}

const char *finish_start(Gda &s, const std::vector<PeerAddress> &all, const std::vector<std::vector<nvshmemx_efa_gda_peer_t>> &peers,
                         char *why, size_t whylen) {
    const size_t n = (size_t)s.boot.n_pes;
    s.host_state.abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
    s.host_state.my_pe = s.boot.my_pe;
    s.host_state.n_pes = s.boot.n_pes;
    s.host_state.n_rails = (uint32_t)s.n_rails();
    s.host_state.credit_timeout_ns = kCreditTimeoutNs;
    for (size_t k = 0; k < s.n_rails(); k++) {
        Rail &rl = s.rail(k);
        GDA_CU(s.cu.memAlloc(&rl.d_peers, n * sizeof peers[k][0]), "allocating the peer table");
        GDA_CU(upload(s, rl.d_peers, peers[k].data(), n * sizeof peers[k][0]), "writing the peer table");
        std::vector<nvshmemx_efa_gda_region_t> pc(n);
        for (size_t pe = 0; pe < n; pe++) pc[pe] = {all[pe].rail[k].credits_base, n * sizeof(uint64_t), all[pe].rail[k].credits_rkey, 1};
        GDA_CU(upload(s, rl.d_peer_consumed, pc.data(), n * sizeof pc[0]), "writing the peer credit table");
        /* This QP's number, as query_addr reports it for our own address on this rail: every CQE must carry it. */
        const uint32_t qpn = peers[k][s.boot.my_pe].qpn;
        rl.st.qp.qp_num = qpn;
        GDA_CU(upload(s, rl.d_rx + offsetof(nvshmemx_efa_gda_rx_cq_t, qp_num), &qpn, sizeof qpn), "writing the QP number");
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        h.qp = rl.st.qp;
        h.signal_src = rl.st.signal_src;
        h.signal_lkey = rl.st.signal_lkey;
        h.imm_window = rl.st.imm_window;
        h.rx_cq = rl.st.rx_cq;
        h.credits = rl.st.credits;
        h.peers = (nvshmemx_efa_gda_peer_t *)(uintptr_t)rl.d_peers;
        /* Peers at fixed offsets (the rest of the array stays zero: no hot region is reachable there). */
        for (size_t pe = 0; pe < n && pe < NVSHMEMX_EFA_GDA_FAST_PES; pe++) h.fast[pe].addr = peers[k][pe];
        if (!rl.owned.empty()) {
            std::vector<nvshmemx_efa_gda_qp_t> qs;
            for (const OwnedQueue &o : rl.owned) qs.push_back(o.qp);
            GDA_CU(s.cu.memAlloc(&rl.d_owned, qs.size() * sizeof qs[0]), "allocating the owned queues");
            GDA_CU(upload(s, rl.d_owned, qs.data(), qs.size() * sizeof qs[0]), "writing the owned queues");
            GDA_CU(s.cu.memAlloc(&rl.d_owner, qs.size() * sizeof(uint32_t)), "allocating the owned queues' owner words");
            GDA_CU(s.cu.memsetD8(rl.d_owner, 0, qs.size() * sizeof(uint32_t)), "clearing the owned queues' owner words");
            h.owned = (nvshmemx_efa_gda_qp_t *)(uintptr_t)rl.d_owned;
            h.owner = (uint32_t *)(uintptr_t)rl.d_owner;
            h.n_owned = (uint32_t)qs.size();
        }
    }
    GDA_CU(s.cu.memAlloc(&s.d_state, sizeof s.host_state), "allocating the device state");
    /* Nobody has the state's address yet: it is written whole, once. */
    GDA_CU(upload(s, s.d_state, &s.host_state, sizeof s.host_state), "writing the device state");
    const char *err = publish_regions(s);
    if (err) {
        snprintf(why, whylen, "publishing the (empty) region table failed (%s)", err);
        return why;
    }
    return nullptr;
}

int off_everywhere(const char *fmt, const char *detail) {
    set_status(fmt, detail);
    teardown(*g);
    return -1;
}

/* "rail 1 (efaemu1) left out: why; ..." for every rail NVSHMEM offered that GDA does not run on. */
std::string left_out(const Gda &s) {
    std::string o;
    for (size_t i = 0; i < s.offered.size(); i++) {
        if (s.offered[i].why.empty()) continue;
        o += (o.empty() ? "" : "; ") + std::string("rail ") + std::to_string(i) + " (" + s.offered[i].name + ") left out: " +
             s.offered[i].why;
    }
    return o;
}

}  // namespace

int nvshmemt_efa_gda_init_rails(const struct fi_info *const *rail_infos, int n_rails, const nvshmemt_efa_gda_bootstrap_t *boot) {
    if (g) return g_active ? 0 : -1;
    g = new Gda();
    g->boot = *boot;
    char why[400] = "";
    PeerAddress me = {};
    me.requested = env_requested() ? 1 : 0;
    me.offered = n_rails > 0 ? n_rails : 0;
    const char *err = nullptr;
    /* How many rails may run GDA (all by default) and how many owned queues each rail opens (none by default). */
    const int allowed = env_count(kRailsEnv, kMaxRails, 1, kMaxRails);
    const int owned_asked = env_count(kOwnedEnv, 0, 0, kMaxOwned);
    if (me.requested) {
        if (n_rails < 1 || !rail_infos) err = "the transport handed over no NIC";
        else if (allowed < 0) {
            snprintf(why, sizeof why, "%s=%s is not a number of rails in [1, %d]", kRailsEnv, getenv(kRailsEnv), kMaxRails);
            err = why;
        } else if (owned_asked < 0) {
            snprintf(why, sizeof why, "%s=%s is not a number of owned queues in [0, %d]", kOwnedEnv, getenv(kOwnedEnv), kMaxOwned);
            err = why;
        }
        if (!err) {
            g->offered.resize((size_t)n_rails);
            for (int i = 0; i < n_rails; i++) {
                Rail &rl = g->offered[(size_t)i];
                rl.name = nic_name(rail_infos[i], i);
                rl.nic_named = rail_infos[i] && rail_infos[i]->nic && rail_infos[i]->nic->device_attr &&
                               rail_infos[i]->nic->device_attr->name;
                for (int j = 0; j < i && rl.why.empty(); j++)
                    if (g->offered[(size_t)j].name == rl.name) rl.why = "the same NIC as rail " + std::to_string(j);
                if (!rl.why.empty()) continue;
                if ((int)g->used.size() == allowed) {
                    rl.why = allowed < kMaxRails ? std::string(kRailsEnv) + "=" + std::to_string(allowed) + " allows " +
                                                       std::to_string(allowed) + " rail" + (allowed == 1 ? "" : "s")
                                                 : "the device state holds at most " + std::to_string(kMaxRails) + " rails";
                    continue;
                }
                char rwhy[400] = "";
                const char *rerr = start_rail(*g, rl, rail_infos[i], &me.rail[g->used.size()], rwhy, sizeof rwhy);
                if (rerr) {
                    rl.why = rerr;
                    teardown_rail(*g, rl);
                    me.rail[g->used.size()] = RailAddress();
                    continue;
                }
                start_owned_queues(*g, rl, owned_asked, &me.rail[g->used.size()]);
                g->used.push_back(i);
            }
            if (g->used.empty()) {
                if (n_rails == 1) snprintf(why, sizeof why, "%s", g->offered[0].why.c_str());
                else snprintf(why, sizeof why, "no rail could start: %s", left_out(*g).c_str());
                err = why;
            }
        }
    }
    me.usable = me.requested && !err ? (int32_t)g->used.size() : 0;
    me.ok = me.usable > 0;
    /* Every PE reaches this all-gather, whatever its switch says or what happened locally. */
    std::vector<PeerAddress> all(boot->n_pes);
    if (boot->allgather(&me, all.data(), (int)sizeof me, boot->ctx) != 0)
        return off_everywhere("EFA GDA off: the bootstrap all-gather of GDA addresses failed%s", "");
    int on = -1, off = -1;
    for (int pe = 0; pe < boot->n_pes; pe++) (all[pe].requested ? on : off) = pe;
    if (on < 0) {
        set_status("EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1 on every PE)");
        teardown(*g);
        return 0;
    }
    if (off >= 0) {
        set_status("EFA GDA off on every PE: " NVSHMEM_EFA_GDA_ENABLE_ENV " differs between PEs (on for PE %d, off for PE %d); "
                   "set it the same on every PE",
                   on, off);
        teardown(*g);
        return -1;
    }
    if (err) return off_everywhere("EFA GDA off: %s", err);
    /* The common rail count: the fewest usable rails of any PE. */
    int fewest = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        if (fewest < 0 || all[pe].usable < all[fewest].usable) fewest = pe;
    for (int pe = 0; pe < boot->n_pes; pe++) {
        if (!all[pe].ok) {
            if (all[pe].offered > 1)
                set_status("EFA GDA off: PE %d could not start GDA on any of its %d rails (its log says why)", pe, all[pe].offered);
            else
                set_status("EFA GDA off: PE %d could not start GDA (its log says why)", pe);
            teardown(*g);
            return -1;
        }
    }
    const size_t common = (size_t)all[fewest].usable;
    while (g->used.size() > common) {
        Rail &rl = g->offered[(size_t)g->used.back()];
        char rwhy[200];
        snprintf(rwhy, sizeof rwhy, "PE %d has only %zu usable rail%s (its log says why), and every PE runs GDA on as many rails",
                 fewest, common, common == 1 ? "" : "s");
        rl.why = rwhy;
        teardown_rail(*g, rl);
        g->used.pop_back();
    }
    /* The common owned-queue count: the fewest any PE opened on any of the common rails (owned_asked >= 0 here: a
     * malformed value turned GDA off above). */
    uint32_t owned_common = (uint32_t)owned_asked;
    int owned_fewest = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        for (size_t k = 0; k < common; k++)
            if (all[pe].rail[k].owned < owned_common) owned_common = all[pe].rail[k].owned, owned_fewest = pe;
    std::string owned_note;
    if (owned_fewest >= 0) {
        owned_note = "; " + std::to_string(owned_asked) + " owned queue" + (owned_asked == 1 ? "" : "s") +
                     " per rail asked for, " + std::to_string(owned_common) + " on every PE: PE " + std::to_string(owned_fewest) +
                     " opened " + std::to_string(owned_common) + " (its log says why)";
        for (size_t k = 0; k < common; k++)
            if (!g->rail(k).owned_why.empty())
                fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d: fewer owned queues than %s=%d asked for: %s\n", boot->my_pe, kOwnedEnv,
                        owned_asked, g->rail(k).owned_why.c_str());
    }
    for (size_t k = 0; k < common; k++) {
        Rail &rl = g->rail(k);
        while (rl.owned.size() > owned_common) {
            close_owned(*g, rl.owned.back());
            rl.owned.pop_back();
        }
    }
    for (Rail &rl : g->offered)
        if (!rl.why.empty())
            fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d: rail %d (%s) left out: %s\n", boot->my_pe, (int)(&rl - g->offered.data()),
                    rl.name.c_str(), rl.why.c_str());
    std::vector<std::vector<nvshmemx_efa_gda_peer_t>> peers(g->n_rails(), std::vector<nvshmemx_efa_gda_peer_t>(boot->n_pes));
    err = nullptr;
    for (size_t k = 0; k < g->n_rails() && !err; k++) err = insert_peers(*g, k, all, peers[k], why, sizeof why);
    /* The barrier fi_efa(7) asks for: no PE goes on (and no kernel posts RMA) before every PE inserted
     * every other on every rail; it also agrees on whether all inserts worked. */
    int32_t inserted = err == nullptr, ok_all = 1;
    std::vector<int32_t> every(boot->n_pes);
    if (boot->allgather(&inserted, every.data(), (int)sizeof inserted, boot->ctx) != 0)
        return off_everywhere("EFA GDA off: the bootstrap barrier after the AV inserts failed%s", "");
    if (err) return off_everywhere("EFA GDA off: %s", err);
    int bad = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        if (!every[pe]) ok_all = 0, bad = pe;
    if (!ok_all) {
        set_status("EFA GDA off: PE %d could not insert every PE's GDA address (its log says why)", bad);
        teardown(*g);
        return -1;
    }
    err = finish_start(*g, all, peers, why, sizeof why);
    if (err) return off_everywhere("EFA GDA off: %s", err);
    g_active = true;
    g_rails = (int)g->n_rails();
    std::string names, qps;
    for (size_t k = 0; k < g->n_rails(); k++) {
        names += (k ? ", " : "") + g->rail(k).name;
        qps += (k ? "/" : "") + std::to_string(peers[k][boot->my_pe].qpn);
    }
    const Rail &r0 = g->rail(0);
    const std::string out = left_out(*g);
    char rails[600];
    if (g->offered.size() == g->n_rails())
        snprintf(rails, sizeof rails, "on %zu rail%s (%s)", g->n_rails(), g->n_rails() == 1 ? "" : "s", names.c_str());
    else
        snprintf(rails, sizeof rails, "on %zu of %zu rails (%s); %s", g->n_rails(), g->offered.size(), names.c_str(), out.c_str());
    std::string owned;
    if (owned_common > 0 || owned_fewest >= 0)
        owned = ", " + std::to_string(owned_common) + " owned queue" + (owned_common == 1 ? "" : "s") + " per rail" + owned_note;
    set_status("EFA GDA active %s: efa-direct, QP%s %s, SQ %u x %u B (max_batch %u), TX CQ %u x %u B, RX CQ %u x %u B "
               "(%u immediates in flight per sender), CQ dma-buf %s, %d PEs%s",
               rails, g->n_rails() == 1 ? "" : "s", qps.c_str(), r0.sq_attr.num_entries, r0.sq_attr.entry_size, r0.sq_attr.max_batch,
               r0.tx.attr.num_entries, r0.tx.attr.entry_size, r0.rx.attr.num_entries, r0.rx.attr.entry_size,
               g->host_state.rail[0].imm_window, r0.tx.pcie_mapping ? "PCIe-mapped" : "plain (no PCIe mapping type)", boot->n_pes,
               owned.c_str());
    return 0;
}

void nvshmemt_efa_gda_register_region(void *buf, size_t length) {
    if (!g_active) return;
    Gda &s = *g;
    const size_t rails = s.n_rails();
    Region reg;
    reg.buf = buf;
    reg.length = length;
    reg.mr.assign(rails, nullptr);
    RegionInfo mine = {};
    mine.base = (uint64_t)(uintptr_t)buf;
    mine.length = (uint64_t)length;
    std::vector<uint64_t> lkey(rails, FI_KEY_NOTAVAIL);
    std::vector<int> rc(rails, 0);
    for (size_t k = 0; k < rails; k++) {
        Rail &rl = s.rail(k);
        rc[k] = register_mr(s, rl, buf, length, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, &reg.mr[k]);
        if (rc[k] == 0) {
            lkey[k] = rl.ops->get_mr_lkey(reg.mr[k]);
            mine.rkey[k] = (uint32_t)fi_mr_key(reg.mr[k]);
            mine.ok[k] = lkey[k] != FI_KEY_NOTAVAIL;
        }
    }
    /* Collective like the registration that called us: every PE contributes, even after a local failure. */
    std::vector<RegionInfo> all(s.boot.n_pes);
    const bool gathered = s.boot.allgather(&mine, all.data(), (int)sizeof mine, s.boot.ctx) == 0;
    reg.local.resize(rails);
    reg.remote.assign(rails, std::vector<nvshmemx_efa_gda_region_t>(s.boot.n_pes));
    for (size_t k = 0; k < rails; k++) {
        reg.local[k] = {mine.base, mine.length, (uint32_t)lkey[k], mine.ok[k] && gathered ? 1u : 0u};
        int failed = -1;
        for (int pe = 0; pe < s.boot.n_pes; pe++) {
            reg.remote[k][pe] = {all[pe].base, all[pe].length, all[pe].rkey[k], all[pe].ok[k] && gathered ? 1u : 0u};
            if (!reg.remote[k][pe].valid) failed = pe;
        }
        /* The range stays in the table with valid = 0 on this rail, so a kernel touching it there gets
         * NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE instead of a silent miss. */
        if (!gathered || failed >= 0 || !reg.local[k].valid) {
            char where[128] = "";
            if (rails > 1) snprintf(where, sizeof where, " on rail %zu (%s)", k, s.rail(k).name.c_str());
            set_status("EFA GDA active, but heap region %p (%zu bytes) is unreachable by GDA%s: %s", buf, length, where,
                       !gathered ? "the all-gather of its keys failed"
                       : !reg.local[k].valid ? (rc[k] ? fi_strerror(-rc[k]) : "no lkey for its registration")
                                             : "another PE could not register it (its log says why)");
            fprintf(stderr, "nvshmem-efa: %s; GDA operations on it fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE\n", g_status);
        }
    }
    s.regions.push_back(reg);
    const char *err = publish_regions(s);
    if (err) {
        set_status("EFA GDA active, but publishing region %p failed (%s): GDA cannot reach it", buf, err);
        fprintf(stderr, "nvshmem-efa: %s\n", g_status);
    } else if ((err = fill_hot_slot(s, reg))) {
        /* The table has it: posts to it still work, one lookup round slower. */
        fprintf(stderr, "nvshmem-efa: EFA GDA: writing region %p to a hot slot failed (%s)\n", buf, err);
    }
}

void nvshmemt_efa_gda_release_region(void *buf) {
    if (!g_active) return;
    Gda &s = *g;
    for (size_t i = 0; i < s.regions.size(); i++) {
        if (s.regions[i].buf != buf) continue;
        const std::vector<struct fid_mr *> mrs = s.regions[i].mr;
        s.regions.erase(s.regions.begin() + (long)i);
        /* Kernels stop seeing the region before its registrations go. */
        const char *err = retire_hot_slot(s, buf);
        if (err) fprintf(stderr, "nvshmem-efa: EFA GDA: retiring the hot slot of %p failed (%s)\n", buf, err);
        err = publish_regions(s);
        if (err) fprintf(stderr, "nvshmem-efa: EFA GDA: publishing the region table after releasing %p failed (%s)\n", buf, err);
        for (struct fid_mr *mr : mrs)
            if (mr) fi_close(&mr->fid);
        return;
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
    g_rails = 0;
}

extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) {
    return g_active ? (nvshmemx_efa_gda_device_state_t *)(uintptr_t)g->d_state : NULL;
}

#endif
