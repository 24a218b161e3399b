/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * What the host-side files of the EFA GDA path share; included by them only. One file per object, as
 * libfabric's prov/<name>/src does:
 *   transport_efa_gda.cpp  start-up and the agreements between PEs, finalize: the entry points NVSHMEM calls
 *   efa_gda_driver.cpp     the CUDA driver (dlopen), uploads, the GPUDirect RDMA write ordering of the GPU
 *   efa_gda_rail.cpp       rails and their queues: efa-direct fabric, domain, AV, QPs, SQ/doorbell mappings
 *   efa_gda_cq.cpp         GPU CQs: completion queues in GPU memory the NIC writes through a dma-buf
 *   efa_gda_region.cpp     heap regions: registration on every rail, the published region table, hot slots
 *   efa_gda_status.cpp     the status line and the host queries (compiled also without the GDA ops)
 * Everything here lives in namespace efa_gda; NVSHMEM's version script keeps it out of the transport's exports. */
#ifndef NVSHMEM_EFA_GDA_INTERNAL_H
#define NVSHMEM_EFA_GDA_INTERNAL_H

#include "transport_efa_gda.h"

#include <stdint.h>
#include <stdio.h>

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

#include <string>
#include <vector>

namespace efa_gda {

/* The status line (efa_gda_status.cpp). */
extern char g_status[1024];
extern bool g_active;
extern int g_rails;
void set_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether GDA signals are safe on every PE (the GPUDirect RDMA write ordering agreed at start-up), and if not why;
 * set only while GDA is active. */
extern bool g_signals_ordered;
extern bool g_delivered_once;
extern char g_delivered_once_why[400];
extern char g_signals_why[400];

/* NVSHMEM_EFA_GDA_ENABLE says yes on this PE. */
bool env_requested();

}  // namespace efa_gda

#if defined(FI_EFA_GDA_OPS)

#include <cuda.h>

namespace efa_gda {

const size_t kCqAlign = 2u << 20;         /* GPU CQ buffers: 2 MiB aligned, whole 2 MiB pages */
const uint32_t kCqeMax = 32;              /* largest CQE: efa_io_rx_cdesc_ex */
const uint32_t kMinImmWindow = 16;        /* immediates in flight per sender the RX CQ is sized for */
const uint64_t kCreditTimeoutNs = 10000000000ull;
const int kMaxRails = NVSHMEMX_EFA_GDA_MAX_RAILS;
const int kMaxOwned = NVSHMEM_EFA_GDA_MAX_OWNED;
/* CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER: the GPU consumes RDMA writes to its memory in the order they arrived
 * (the value NVSHMEM's IBGDA needs before it skips its consistency step). */
const int kGdrOrderingOwner = CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;

/* The driver entry points GDA needs, resolved at run time (efa_gda_driver.cpp). */
struct Driver {
    void *lib = nullptr;
    CUresult (*ctxGetDevice)(CUdevice *) = nullptr;
    CUresult (*deviceGetAttribute)(int *, CUdevice_attribute, CUdevice) = nullptr;
    CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*memFree)(CUdeviceptr) = nullptr;
    CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
    CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
    CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
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

    const char *load();
    const char *name(CUresult r) const;
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
    /* FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES accepted on this rail's endpoint: the NIC then delivers an RDMA
     * write's bytes to the target buffer only once (fi_efa(7)); without it a late copy may land again. */
    bool delivered_once = false;
    std::string delivered_once_why;
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
    uint32_t rx_entries;                  /* its RX CQ's entries, 0 without unsolicited write receive: the immediate
                                             window is agreed from every PE's */
    uint8_t owned_addr[NVSHMEM_EFA_GDA_MAX_OWNED][32]; /* their names (an efa-direct name is 32 bytes) */
};
struct PeerAddress {
    int32_t requested;
    int32_t ok;      /* local start-up gave at least one usable rail */
    int32_t usable;  /* usable rails */
    int32_t offered; /* rails NVSHMEM handed over */
    int32_t gdr_ordering; /* the GPU's CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, -1 when unknown */
    int32_t delivered_once; /* every rail this PE started delivers writes once (FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES) */
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
    int gdr_ordering = -1;             /* this GPU's GPUDirect RDMA write ordering, -1 when it could not be read */
    std::string gdr_ordering_why;      /* why it could not be read */
    std::vector<Rail> offered;  /* every NIC NVSHMEM handed over, in its order */
    std::vector<int> used;      /* GDA's rails: indices into offered, rail k = offered[used[k]] */
    std::vector<Region> regions;
    /* What the GPU copy holds, the queues included (about 260 KiB: on the heap with Gda). */
    nvshmemx_efa_gda_device_state_t host_state = {};
    void *hot_buf[NVSHMEMX_EFA_GDA_HOT_REGIONS] = {}; /* the region each hot slot holds (nullptr once retired) */
    bool hot_used[NVSHMEMX_EFA_GDA_HOT_REGIONS] = {}; /* filled once: a slot is never filled again */
    CUdeviceptr d_state = 0;
    CUdeviceptr d_api = 0;   /* the device API's shared block (efa_gda_api.cpp), allocated on first request */
    CUdeviceptr d_api_g = 0; /* its g scratch: g_value then g_lock, the values registered for GDA (local only) */
    std::vector<CUdeviceptr> tables; /* every regions table published; freed at finalize */

    Rail &rail(size_t k) { return offered[(size_t)used[k]]; }
    const Rail &rail(size_t k) const { return offered[(size_t)used[k]]; }
    size_t n_rails() const { return used.size(); }
};

/* The one GDA instance of this process (transport_efa_gda.cpp): set from init to fini. */
extern Gda *g;

uint32_t log2_of(uint32_t v);
uint32_t pow2_at_least(uint64_t v);

/* efa_gda_driver.cpp */
/* The CUDA driver and the GDA stream, shared by every rail; reads the GPU's RDMA write ordering. */
const char *start_shared(Gda &s, char *why, size_t whylen);
/* Copies host bytes into GPU memory on the GDA stream (never behind a running kernel's stream). */
CUresult upload(Gda &s, CUdeviceptr dst, const void *src, size_t bytes);

/* efa_gda_cq.cpp */
const char *open_gpu_cq(Gda &s, Rail &rl, size_t entries, GpuCq *c, const char *which, char *why, size_t whylen);
void close_cq(Gda &s, GpuCq &c);

/* efa_gda_rail.cpp */
std::string nic_name(const struct fi_info *info, int index);
int register_mr(Gda &s, Rail &rl, void *buf, size_t len, uint64_t access, struct fid_mr **mr);
const char *start_rail(Gda &s, Rail &rl, const struct fi_info *nvshmem_info, RailAddress *me, char *why, size_t whylen);
void start_owned_queues(Gda &s, Rail &rl, int want, RailAddress *me);
void close_owned(Gda &s, OwnedQueue &o);
void teardown_rail(Gda &s, Rail &rl);
const char *insert_peers(Gda &s, size_t k, const std::vector<PeerAddress> &all, std::vector<nvshmemx_efa_gda_peer_t> &peers,
                         char *why, size_t whylen);

/* efa_gda_region.cpp */
void close_mrs(const std::vector<struct fid_mr *> &mrs);
CUdeviceptr rail_offset(size_t k);
const char *publish_regions(Gda &s);
/* A buffer GDA posts may use as their local side (never a remote address): every rail, not collective. */
const char *register_local_region(Gda &s, void *buf, size_t length);

/* efa_gda_api.cpp */
/* At finalize, with NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1: the status line and the device API's proxy counters. */
void report_api_at_fini(Gda &s);

/* efa_gda_status.cpp */
/* "rail 1 (efaemu1) left out: why; ..." for every rail NVSHMEM offered that GDA does not run on. */
std::string left_out(const Gda &s);

#define GDA_CU(call, what)                                                                      \
    do {                                                                                        \
        CUresult r_ = (call);                                                                   \
        if (r_ != CUDA_SUCCESS) {                                                               \
            snprintf(why, whylen, "%s failed (%s)", what, s.cu.name(r_));                       \
            return why;                                                                         \
        }                                                                                       \
    } while (0)

}  // namespace efa_gda

#endif /* FI_EFA_GDA_OPS */

#endif
