// The libfabric objects of the emulated `efa` provider, one file per object (fabric.cpp, domain.cpp, mr.cpp,
// av.cpp, cq.cpp, cntr.cpp, ep.cpp, eq.cpp), written against libfabric's public headers only so the same
// source builds against Debian's libfabric 1.17 and a libfabric 2.3.0 built with --disable-efa.
//
// Every object starts with its libfabric fid so a fid pointer converts back with a static cast.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "addr.h"
#include "engine.h"
#include "hmem.h"
#include "log.h"

#ifndef FI_OPT_CUDA_API_PERMITTED
#define FI_OPT_CUDA_API_PERMITTED 10  // libfabric >= 1.18; the value is ABI
#endif

namespace efaemu {

constexpr const char *kFabricRdm = "efa";
constexpr const char *kFabricDirect = "efa-direct";  // the real provider's name for its device-direct path
constexpr size_t kInjectSize = 4096;
constexpr size_t kCqDataSize = 4;  // EFA carries 4 bytes of immediate data
constexpr uint32_t kApiVersion = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// ---- info.cpp: the fi_info list and NIC objects -------------------------------------------------------------
int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags, const struct fi_info *hints,
            struct fi_info **info);
// "efaemu<N>-rdm" -> N; -1 when the name is not one of ours.
int nic_from_domain_name(const char *name, const char *suffix);
bool hmem_claimed();

// ---- fabric.cpp -------------------------------------------------------------------------------------------------
struct Fabric {
    struct fid_fabric fid;
    uint32_t api_version;
    std::string name;  // kFabricRdm or kFabricDirect
};
int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);

// ---- eq.cpp: event queues (fabtests open one; RDM endpoints report nothing on it) ------------------------------
int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq, void *context);

// ---- domain.cpp ---------------------------------------------------------------------------------------------------
struct Domain {
    struct fid_domain fid;
    Fabric *fabric;
    int nic;
    bool direct = false;  // an efa-direct domain: FI_EFA_GDA_OPS, device-posted WQEs
    uint8_t gid[16];
    uint64_t mr_mode;
    std::atomic<int> refs{0};  // objects opened on it
    // Address handles: one per remote GID this domain inserted into any of its AVs, numbered from 1, as the
    // NIC numbers AHs per protection domain. query_addr hands them out; WQEs name the target by them.
    std::mutex ah_mu;
    std::map<std::string, uint16_t> ah_by_gid;
    std::vector<std::string> ah_gids;  // [ahn - 1] = gid (16 raw bytes)
};
int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context);
constexpr uint16_t kNoAh = 0xffff;  // what an RX completion carries for a sender without an AH
uint16_t domain_ah(Domain *d, const uint8_t gid[16]);           // allocates on first use
uint16_t domain_ah_find(Domain *d, const uint8_t gid[16]);      // kNoAh when none
bool domain_ah_gid(Domain *d, uint16_t ahn, uint8_t gid[16]);  // false for an unknown AH

// ---- mr.cpp -------------------------------------------------------------------------------------------------------
struct Mr {
    struct fid_mr fid;
    Domain *domain;
    uint64_t base, len, access;
    MemRef mem;
    uint32_t key;
};
extern struct fi_ops_mr g_mr_ops;
// Registry lookups: by key (the target's check) and by descriptor (the initiator's local check).
// *out receives a copy, so a concurrent fi_close cannot pull the entry away mid-check.
bool mr_by_key(uint64_t key, Mr *out);
bool mr_by_desc(const void *desc, Mr *out);

// ---- av.cpp -------------------------------------------------------------------------------------------------------
struct Av {
    struct fid_av fid;
    Domain *domain;
    mutable std::mutex mu;
    std::vector<EpAddr> table;           // index = fi_addr
    std::vector<bool> valid;
    std::map<std::string, fi_addr_t> by_addr;  // reverse lookup for the target's AV check and FI_SOURCE
    std::atomic<int> refs{0};                   // endpoints bound to it
};
int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context);
bool av_lookup(const Av *av, fi_addr_t a, EpAddr *out);
fi_addr_t av_reverse(const Av *av, const EpAddr &a);  // FI_ADDR_NOTAVAIL when absent

// ---- cq.cpp -------------------------------------------------------------------------------------------------------
struct CqEntry {
    struct fi_cq_tagged_entry e;
    fi_addr_t src;
};
struct CqErr {
    struct fi_cq_err_entry e;  // src_addr filled separately (field exists only in >= 1.20 headers)
    fi_addr_t src;
};
struct Cq {
    struct fid_cq fid;
    Domain *domain;
    enum fi_cq_format format;
    enum fi_wait_obj wait_obj;
    std::mutex mu;
    std::condition_variable cv;
    // One queue in completion order; an error sits where it happened, and fi_cq_read stops at it (-FI_EAVAIL
    // once it reaches the head), as libfabric's util CQ that the real provider uses.
    struct Item {
        bool is_err;
        CqEntry ok;
        CqErr err;
    };
    std::deque<Item> items;
    bool signaled = false;
    std::atomic<uint32_t> empty_polls{0};
    std::atomic<uint64_t> reads{0}, last_read_ns{0};  // the application's fi_cq_read* calls (for a state dump)
    std::atomic<int> refs{0};
    // A CQ opened with cq_open_ext (efa-direct): a completion ring in memory its consumer (a GPU) owns. The
    // engine writes EFA CQEs into it; libfabric's read calls do not apply (-FI_ENOSYS, as on the NIC).
    struct GdaRing *ring = nullptr;
};
int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context);
void cq_push(Cq *cq, const CqEntry &e);
void cq_push_err(Cq *cq, const CqErr &e);

// ---- cntr.cpp -----------------------------------------------------------------------------------------------------
struct Cntr {
    struct fid_cntr fid;
    Domain *domain;
    std::atomic<uint64_t> value{0}, err{0};
    std::atomic<uint64_t> reads{0}, last_read_ns{0};  // the application's fi_cntr_read calls (for a state dump)
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<int> refs{0};
};
int cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context);
void cntr_inc(Cntr *c);
void cntr_inc_err(Cntr *c);

// ---- ep.cpp: the RDM endpoint -------------------------------------------------------------------------------------
int ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
// For the GDA ops: the endpoint's address and domain, the peer behind an fi_addr, its queue pair's rings.
bool ep_is_ours(struct fid_ep *ep);
int ep_query_addr(struct fid_ep *ep, fi_addr_t addr, uint16_t *ahn, uint16_t *qpn, uint32_t *qkey);
struct GdaQp *ep_gda_qp(struct fid_ep *ep);

// ---- gda.cpp: efa-direct's device interface (fi_open_ops(FI_EFA_GDA_OPS)) -----------------------------------------
// The ops table returned for FI_EFA_GDA_OPS (compiled where the headers declare it, or with our test header).
void *gda_ops();
void gda_ring_free(GdaRing *r);
// A queue pair the device drives: its SQ ring and doorbell live in a /dev/shm/efaemu-* mapping (so the test
// interposer lets the GPU map them), an engine Source serves the doorbell through native/softefa's SendQueue,
// Scheduler and CompletionQueue, and each WQE travels as an engine Op on the GDA path of the same wire.
GdaQp *gda_qp_create(Domain *d, const EpAddr &self, Cq *tx, uint32_t sq_entries, std::string *why);
void gda_qp_destroy(GdaQp *qp);
// Target side: the RX CQE of an RDMA write with immediate, after its data was placed (engine thread).
void gda_rx_cqe(Cq *rx, Domain *d, uint16_t qpn, const EpAddr &src, uint32_t imm, uint64_t len);

// ---- helpers ------------------------------------------------------------------------------------------------------
// Operations that an object does not implement: the libfabric convention is -FI_ENOSYS.
int fid_no_bind(struct fid *, struct fid *, uint64_t);
int fid_no_control(struct fid *, int, void *);
int fid_no_ops_open(struct fid *, const char *, uint64_t, void **, void *);

// Fills every function slot of a libfabric ops table (after its `size` member) with a stub returning
// -FI_ENOSYS, for interfaces the emulator does not offer (tagged, atomic, collective). All those entry points
// return int or ssize_t and the stub ignores its arguments, which the x86-64 and AArch64 calling conventions
// make safe; it spares writing out forty signatures that only ever say "not supported".
template <typename Ops>
void fill_enosys(Ops *ops) {
    ops->size = sizeof(Ops);
    using Fn = ssize_t (*)();
    Fn stub = []() -> ssize_t { return -FI_ENOSYS; };
    auto *slots = reinterpret_cast<char *>(ops) + sizeof(size_t);
    for (size_t off = 0; off + sizeof(Fn) <= sizeof(Ops) - sizeof(size_t); off += sizeof(Fn))
        memcpy(slots + off, &stub, sizeof(Fn));
}

// Domain objects hold a reference on their domain; the domain refuses to close while any is open.
inline void domain_ref(Domain *d) { d->refs++; }
inline void domain_unref(Domain *d) { d->refs--; }

}  // namespace efaemu
