/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Rails and their queues. GDA gets its own efa-direct fabric, domain, endpoint and AV on each NIC (rail) NVSHMEM
 * chose for the PE: NVSHMEM 3.4 opens the `efa` (RDM) fabric, whose domain refuses FI_EFA_GDA_OPS, and a QP
 * cannot be driven by the CPU proxy and the GPU at once (separate producer counters, CPU reaping of GPU
 * completions corrupts the wr-id pool). Each endpoint's SQ ring and doorbell page are mapped into the GPU with
 * cuMemHostRegister (IOMEMORY | DEVICEMAP); its CQs are GPU CQs (efa_gda_cq.cpp), bound before fi_enable.
 * Owned queues are further endpoints of a rail, one per queue a device thread may own. */
#include "efa_gda_internal.h"

#if defined(FI_EFA_GDA_OPS)

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

namespace efa_gda {

static size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

/* A queue's slot peers: right after its slot marks, in the same allocation (map_sq). */
static uint16_t *slot_pe_of(uint32_t *slot_done, uint32_t entries) { return (uint16_t *)(slot_done + entries); }

/* Maps [p, p + len) of NIC BAR memory for the GPU. The registration must cover whole pages; the returned
 * device pointer corresponds to p itself. */
static const char *map_bar(Gda &s, void *p, size_t len, Mapping *m, CUdeviceptr *dev_p, CUresult *err) {
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
static void close_qp(Gda &s, Mapping &sq, Mapping &db, struct fid_ep *&ep, GpuCq &tx, CUdeviceptr &slot_done) {
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

/* The NIC's name for status lines: the nic object's device name (efaemu0, rdmap16s27), else the domain. */
std::string nic_name(const struct fi_info *info, int index) {
    if (info && info->nic && info->nic->device_attr && info->nic->device_attr->name) return info->nic->device_attr->name;
    if (info && info->domain_attr && info->domain_attr->name) return info->domain_attr->name;
    return "NIC " + std::to_string(index);
}

/* libfabric after 2.3.0 reports a work queue's capabilities in a 16-bit caps word it appended to struct
 * fi_efa_wq_attr, in what was the struct's tail padding (its size is unchanged): set by such a provider, left zero
 * by an older one (the struct is cleared before the query). Bit 0, FI_EFA_WQ_CAPS_64_BIT_REQ_ID, says the queue's
 * completions carry 64-bit request ids; the device code reads 16-bit ones, so such a queue is refused. */
static const size_t kWqCapsOffset = offsetof(struct fi_efa_wq_attr, max_batch) + sizeof(uint32_t);
static const uint16_t kWqCaps64BitReqId = 1u << 0;
static_assert(sizeof(struct fi_efa_wq_attr) >= kWqCapsOffset + sizeof(uint16_t), "the caps word sits in fi_efa_wq_attr's tail padding");
static uint16_t wq_caps(const struct fi_efa_wq_attr *a) {
    uint16_t caps;
    memcpy(&caps, (const uint8_t *)a + kWqCapsOffset, sizeof caps);
    return caps;
}

/* One QP on a rail's domain (the rail's own, or an owned queue's): its endpoint bound to the rail's AV, to tx
 * (FI_TRANSMIT) and to the rail's RX CQ, enabled, and its send and receive queues as query_qp_wqs gives them.
 * what names it in errors. */
static const char *open_qp(Rail &rl, GpuCq &tx, struct fid_ep **ep, struct fi_efa_wq_attr *sq, struct fi_efa_wq_attr *rq, const char *what,
                    char *why, size_t whylen) {
    int rc;
    if ((rc = fi_endpoint(rl.domain, rl.info, ep, NULL)) || (rc = fi_ep_bind(*ep, &rl.av->fid, 0)) ||
        (rc = fi_ep_bind(*ep, &tx.cq->fid, FI_TRANSMIT)) || (rc = fi_ep_bind(*ep, &rl.rx.cq->fid, FI_RECV)) ||
        (rc = fi_enable(*ep))) {
        snprintf(why, whylen, "creating %s failed (%s)", what, fi_strerror(-rc));
        return why;
    }
    memset(sq, 0, sizeof *sq);
    memset(rq, 0, sizeof *rq);
    if ((rc = rl.ops->query_qp_wqs(*ep, sq, rq))) {
        snprintf(why, whylen, "query_qp_wqs of %s failed (%s)%s", what, fi_strerror(-rc),
                 rc == -FI_ENOSYS ? ": libfabric was built against an rdma-core without efadv_query_qp_wqs (needs >= 59)" : "");
        return why;
    }
    if (wq_caps(sq) & kWqCaps64BitReqId) {
        snprintf(why, whylen, "the send queue of %s reports FI_EFA_WQ_CAPS_64_BIT_REQ_ID (caps 0x%x): its completions carry 64-bit "
                 "request ids, which this GDA code does not read (it reads 16-bit ones)", what, (unsigned)wq_caps(sq));
        return why;
    }
    return nullptr;
}

/* A QP's SQ ring and doorbell mapped for the GPU, and its per-slot completion marks in GPU memory (entry i
 * starts as the slot of the pass before, i - entries), followed by its per-slot peers (slot_pe_of). */
static const char *map_sq(Gda &s, const struct fi_efa_wq_attr &sq, Mapping *ring, Mapping *db, CUdeviceptr *ring_dev, CUdeviceptr *db_dev,
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
    /* The slot marks, then (same allocation) each slot's target PE, stored by the poster with its WQE so that a
     * failed completion names its peer, all ones until a slot is used (no PE); then each PE's first failed
     * completion (ABI 8), zero. */
    const size_t done_bytes = done.size() * sizeof done[0], pes_bytes = (size_t)sq.num_entries * sizeof(uint16_t),
                 errors_bytes = (size_t)s.boot.n_pes * sizeof(uint32_t);
    GDA_CU(s.cu.memAlloc(slot_done, done_bytes + pes_bytes + errors_bytes), "allocating the slot marks");
    GDA_CU(s.cu.memcpyHtoD(*slot_done, done.data(), done_bytes), "initialising the slot marks");
    GDA_CU(s.cu.memsetD8(*slot_done + done_bytes, 0xff, pes_bytes), "initialising the slot peers");
    GDA_CU(s.cu.memsetD8(*slot_done + done_bytes + pes_bytes, 0, errors_bytes), "initialising the errors per PE");
    return nullptr;
}

/* Whether the NIC delivers an RDMA write to the target buffer only once. fi_efa(7) promises that only with
 * FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES, which efa-direct grants when the device reports in-order aligned
 * 128-byte writes (rdma-core DATA_POLLING_128) and refuses with -FI_EOPNOTSUPP otherwise; on efa-direct the call
 * only checks the device. Without it a late copy of a write may land again, which a zeroed single-writer signal
 * cannot tell from a new one: GDA signals are then off (the shim sends them through NVSHMEM). */
static void ask_delivered_once(Rail &rl) {
    /* FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES by value: it is an enum of rdma/fi_ext.h (not a macro one could
     * test), absent from the older headers the CPU tests build against; the value is ABI. */
    const int kWriteInOrderAligned128 = -(0xefa << 16) + 6;
    bool on = true;
    const int rc = fi_setopt(&rl.ep->fid, FI_OPT_ENDPOINT, kWriteInOrderAligned128, &on, sizeof on);
    rl.delivered_once = rc == 0;
    if (rc) rl.delivered_once_why = std::string("FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES refused (") + fi_strerror(-rc) + ")";
}

/* Whether this process's efa provider receives an RDMA write with immediate unsolicited, with no receive posted
 * (what the device code's immediates need: it posts none). efa-direct offers FI_RMA only on devices with unsolicited
 * write receive, and GDA asks for FI_RMA; the provider then uses it unless FI_EFA_USE_UNSOLICITED_WRITE_RECV turns
 * it off (default on), read here as libfabric reads a boolean parameter. */
static bool unsolicited_write_recv() {
    const char *v = getenv("FI_EFA_USE_UNSOLICITED_WRITE_RECV");
    if (!v) return true;
    return !(strcasecmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 || strcasecmp(v, "off") == 0);
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
    /* The first EFA device (PCI device id 0xefa0, which libfabric's efa provider reports as the nic's device_id)
     * builds each CQ from sub-CQs polled in turn, which libfabric's own direct data path refuses
     * (efa_device_use_sub_cq). The device code polls one ring. */
    const char *device_id = rl.info->nic && rl.info->nic->device_attr ? rl.info->nic->device_attr->device_id : nullptr;
    if (device_id && strtoul(device_id, nullptr, 16) == 0xefa0) {
        snprintf(why, whylen, "%s is an EFA device %s, whose completion queues are made of sub-CQs polled in turn (as libfabric's "
                 "efa_device_use_sub_cq says); the GDA device code polls one ring", rl.name.c_str(), device_id);
        return why;
    }
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
    ask_delivered_once(rl);
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
    q.slot_pe = slot_pe_of(q.slot_done, q.sq_entries);
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
    /* The immediate window (st.imm_window) is agreed from every PE's: none where immediates would need posted
     * receives, so that no PE sends any. */
    me->rx_entries = unsolicited_write_recv() ? rl.rx.attr.num_entries : 0;
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
static const char *start_owned(Gda &s, Rail &rl, OwnedQueue &o, uint8_t *addr, char *why, size_t whylen) {
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
    o.qp.slot_pe = slot_pe_of(o.qp.slot_done, o.qp.sq_entries);
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

}  // namespace efa_gda

#endif
