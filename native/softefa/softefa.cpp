#include "softefa.h"

#include <cstring>
#include <string>

#include "nvshmemx_efa_gda_wqe.h"

namespace softefa {

namespace {

uint32_t log2_exact(uint32_t v) {
    uint32_t l = 0;
    while ((1u << l) < v) l++;
    return l;
}

bool is_pow2(uint32_t v) { return v && (v & (v - 1)) == 0; }

std::string hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return b;
}

template <typename T>
T load(const uint8_t *p) {
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

void HostMemory::copy(uint64_t dst, uint64_t src, uint64_t len) {
    memmove(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), len);
}

void HostMemory::write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) {
    // Body first with the old flags byte, then the flags byte: a poller that sees the new phase sees the body.
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t i = 0; i < size; i++)
        if (i != flags_offset) dst[i] = entry[i];
    std::atomic_thread_fence(std::memory_order_release);
    reinterpret_cast<std::atomic<uint8_t> *>(dst + flags_offset)->store(entry[flags_offset], std::memory_order_release);
}

bool parse_wqe(const uint8_t *p, uint32_t slot, uint32_t log2_entries, ParsedWqe *out, std::string *why) {
    efa_io_tx_wqe w;
    memcpy(&w, p, sizeof w);
    const efa_io_tx_meta_desc &m = w.meta;
    const uint8_t phase = efa_gda_sq_phase(slot, log2_entries);

    if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_META_DESC_MASK, m.ctrl1)) {
        *why = "meta_desc bit (ctrl1 bit 7) not set: slot never written";
        return false;
    }
    if (EFA_GDA_GET(EFA_IO_TX_META_DESC_PHASE_MASK, m.ctrl2) != phase) {
        *why = "phase " + std::to_string(phase ^ 1) + " but slot " + std::to_string(slot) + " needs phase " +
               std::to_string(phase) + ": the doorbell covers a slot not written in this pass";
        return false;
    }
    if (EFA_GDA_GET(EFA_IO_TX_META_DESC_META_EXTENSION_MASK, m.ctrl1)) {
        *why = "meta_extension (ctrl1 bit 6) set; it must be zero";
        return false;
    }
    if (EFA_GDA_GET(EFA_IO_TX_META_DESC_INLINE_MSG_MASK, m.ctrl1)) {
        *why = "inline_msg set on an RDMA WQE";
        return false;
    }
    const uint8_t known2 = (uint8_t)(EFA_IO_TX_META_DESC_PHASE_MASK | EFA_IO_TX_META_DESC_FIRST_MASK |
                                     EFA_IO_TX_META_DESC_LAST_MASK | EFA_IO_TX_META_DESC_COMP_REQ_MASK);
    if (m.ctrl2 & ~known2) {
        *why = "reserved ctrl2 bits set (" + hex(m.ctrl2 & ~known2) + "); they must be zero";
        return false;
    }
    if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_FIRST_MASK, m.ctrl2) || !EFA_GDA_GET(EFA_IO_TX_META_DESC_LAST_MASK, m.ctrl2)) {
        *why = "first/last (ctrl2 bits 2, 3) must both be set for a one-descriptor WQE";
        return false;
    }
    if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_COMP_REQ_MASK, m.ctrl2)) {
        *why = "comp_req (ctrl2 bit 4) not set: unsignaled WQEs are not supported";
        return false;
    }
    const uint8_t op = (uint8_t)EFA_GDA_GET(EFA_IO_TX_META_DESC_OP_TYPE_MASK, m.ctrl1);
    if (op != EFA_IO_RDMA_READ && op != EFA_IO_RDMA_WRITE) {
        *why = "op_type " + std::to_string(op) + " is not RDMA read (1) or write (2)";
        return false;
    }
    const bool has_imm = EFA_GDA_GET(EFA_IO_TX_META_DESC_HAS_IMM_MASK, m.ctrl1);
    if (has_imm && op != EFA_IO_RDMA_WRITE) {
        *why = "has_imm on an RDMA read";
        return false;
    }
    if (!has_imm && m.immediate_data != 0) {
        *why = "immediate_data set without has_imm";
        return false;
    }
    if (m.length != EFA_IO_TX_DESC_NUM_RDMA_BUFS) {
        *why = "meta.length " + std::to_string(m.length) + ": an RDMA WQE carries exactly " +
               std::to_string(EFA_IO_TX_DESC_NUM_RDMA_BUFS) + " local buffer descriptor (length counts descriptors, not bytes)";
        return false;
    }
    const uint8_t *meta = p;
    for (size_t i = offsetof(efa_io_tx_meta_desc, ah) + 2; i < offsetof(efa_io_tx_meta_desc, qkey); i++)
        if (meta[i]) {
            *why = "reserved meta byte " + std::to_string(i) + " is not zero";
            return false;
        }
    for (size_t i = offsetof(efa_io_tx_meta_desc, qkey) + 4; i < sizeof(efa_io_tx_meta_desc); i++)
        if (meta[i]) {
            *why = "reserved meta byte " + std::to_string(i) + " is not zero";
            return false;
        }
    const efa_io_rdma_req &r = w.data.rdma_req;
    if (r.local_mem[0].lkey & ~(uint32_t)EFA_IO_TX_BUF_DESC_LKEY_MASK) {
        *why = "lkey word " + hex(r.local_mem[0].lkey) + " has bits above 23 set";
        return false;
    }
    if (r.remote_mem.length != r.local_mem[0].length) {
        *why = "remote length " + std::to_string(r.remote_mem.length) + " differs from local length " +
               std::to_string(r.local_mem[0].length);
        return false;
    }
    out->op = op;
    out->has_imm = has_imm;
    out->req_id = m.req_id;
    out->imm = m.immediate_data;
    out->dest_qpn = m.dest_qp_num;
    out->ah = m.ah;
    out->qkey = m.qkey;
    out->lkey = (uint32_t)EFA_GDA_GET(EFA_IO_TX_BUF_DESC_LKEY_MASK, r.local_mem[0].lkey);
    out->rkey = r.remote_mem.rkey;
    out->length = r.remote_mem.length;
    out->local_addr = ((uint64_t)r.local_mem[0].buf_addr_hi << 32) | r.local_mem[0].buf_addr_lo;
    out->remote_addr = ((uint64_t)r.remote_mem.buf_addr_hi << 32) | r.remote_mem.buf_addr_lo;
    return true;
}

void Device::add_region(const Region &r) {
    std::lock_guard<std::mutex> g(mu_);
    regions_.push_back(r);
}

int Device::add_qp(const QpConfig &cfg) {
    if (!is_pow2(cfg.sq_entries) || !is_pow2(cfg.cq_entries) || (cfg.rx_cq && !is_pow2(cfg.rx_cq_entries)))
        throw std::invalid_argument("softefa: queue sizes must be powers of two");
    if (cfg.cq_entries < cfg.sq_entries) throw std::invalid_argument("softefa: the CQ must hold a completion per SQ slot");
    if (cfg.max_batch == 0) throw std::invalid_argument("softefa: max_batch must be at least 1");
    Qp q;
    q.cfg = cfg;
    q.log2 = log2_exact(cfg.sq_entries);
    q.cq_log2 = log2_exact(cfg.cq_entries);
    q.rx_log2 = cfg.rx_cq ? log2_exact(cfg.rx_cq_entries) : 0;
    std::lock_guard<std::mutex> g(mu_);
    qps_.push_back(q);
    return (int)qps_.size() - 1;
}

void Device::violation(const Qp &qp, uint32_t slot, std::string what) {
    std::lock_guard<std::mutex> g(mu_);
    violation_locked(qp, slot, std::move(what));
}

// Bounded, so a runaway device cannot exhaust memory with reports.
void Device::violation_locked(const Qp &qp, uint32_t slot, std::string what) {
    if (violations_.size() < 1000) violations_.push_back({qp.cfg.qpn, slot, std::move(what)});
}

const Region *Device::find_region(uint32_t key, uint64_t addr, uint64_t len) const {
    for (const Region &r : regions_)
        if (r.key == key && addr >= r.base && addr - r.base <= r.length && len <= r.length - (addr - r.base)) return &r;
    return nullptr;
}

void Device::complete_tx(Qp &qp, uint16_t req_id, uint8_t status, uint8_t op) {
    uint8_t e[64] = {};
    efa_io_cdesc_common c{};
    c.req_id = req_id;
    c.status = status;
    c.qp_num = qp.cfg.qpn;
    c.flags = (uint8_t)(EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_PHASE_MASK, efa_gda_cq_expected_phase(qp.cq_tail, qp.cq_log2)) |
                        EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, EFA_IO_SEND_QUEUE) |
                        EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, op));
    memcpy(e, &c, sizeof c);
    uint8_t *dst = qp.cfg.cq + (size_t)(qp.cq_tail & (qp.cfg.cq_entries - 1)) * qp.cfg.cq_entry_size;
    mem_.write_cqe(dst, e, qp.cfg.cq_entry_size, EFA_GDA_CQE_FLAGS_OFFSET);
    qp.cq_tail++;
}

void Device::complete_rx(Qp &t, const Qp &src, uint32_t imm, uint32_t length, uint8_t status) {
    uint8_t e[64] = {};
    efa_io_rx_cdesc_ex c{};
    c.base.common.status = status;
    c.base.common.qp_num = t.cfg.qpn;
    c.base.common.flags =
        (uint8_t)(EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_PHASE_MASK, efa_gda_cq_expected_phase(t.rx_tail, t.rx_log2)) |
                  EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, EFA_IO_RECV_QUEUE) |
                  EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_HAS_IMM_MASK, 1) |
                  EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, EFA_IO_RDMA_WRITE) |
                  EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_UNSOLICITED_MASK, 1));
    c.base.length = (uint16_t)(length & 0xffff);
    c.base.ah = 0xffff;
    c.base.src_qp_num = src.cfg.qpn;
    c.base.imm = imm;
    c.u.rdma_write.length_hi = (uint16_t)(length >> 16);
    const size_t size = t.cfg.rx_cq_entry_size < sizeof c ? t.cfg.rx_cq_entry_size : sizeof c;
    memcpy(e, &c, size);
    uint8_t *dst = t.cfg.rx_cq + (size_t)(t.rx_tail & (t.cfg.rx_cq_entries - 1)) * t.cfg.rx_cq_entry_size;
    mem_.write_cqe(dst, e, t.cfg.rx_cq_entry_size, EFA_GDA_CQE_FLAGS_OFFSET);
    t.rx_tail++;
}

// Returns the completion status the NIC would report.
uint8_t Device::execute(Qp &qp, const ParsedWqe &w) {
    Qp *target = nullptr;
    bool ah_known = false;
    for (Qp &t : qps_) {
        if (t.cfg.ah != w.ah) continue;
        ah_known = true;
        if (t.cfg.qpn == w.dest_qpn) target = &t;
    }
    if (!ah_known) return EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH;
    if (!target) return EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN;
    if (target->cfg.qkey != w.qkey) return EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE;
    if (w.length > qp.cfg.max_rdma_size) return EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH;
    if (!find_region(w.lkey, w.local_addr, w.length)) return EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY;
    const Region *rr = find_region(w.rkey, w.remote_addr, w.length);
    if (!rr || (w.op == EFA_IO_RDMA_WRITE && !rr->remote_write) || (w.op == EFA_IO_RDMA_READ && !rr->remote_read))
        return EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS;
    if (w.has_imm && !target->cfg.rx_cq) return EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR;
    if (w.length) {
        if (w.op == EFA_IO_RDMA_WRITE) mem_.copy(w.remote_addr, w.local_addr, w.length);
        else mem_.copy(w.local_addr, w.remote_addr, w.length);
    }
    if (w.has_imm) complete_rx(*target, qp, w.imm, w.length, EFA_IO_COMP_STATUS_OK);
    return EFA_IO_COMP_STATUS_OK;
}

size_t Device::poll_once() {
    size_t served = 0;
    for (Qp &qp : qps_) {
        const uint32_t db = *qp.cfg.db;
        std::atomic_thread_fence(std::memory_order_acquire);
        const uint32_t fresh = db - qp.seen_db;
        if ((int32_t)fresh < 0) {
            violation(qp, db, "doorbell went backwards from " + std::to_string(qp.seen_db) + " to " + std::to_string(db));
            continue;
        }
        // Polling sees only the latest doorbell value, not every write; a threaded emulator checks the same
        // limit through the staged-WQE snapshot below instead.
        if (fresh > qp.cfg.max_batch && !threaded_)
            violation(qp, qp.seen_db, "doorbell " + std::to_string(db) + " covers " + std::to_string(fresh) +
                                          " new WQEs, more than max_batch " + std::to_string(qp.cfg.max_batch));
        if (db - qp.completed > qp.cfg.sq_entries)
            violation(qp, qp.seen_db, "doorbell " + std::to_string(db) + " with only " + std::to_string(qp.completed) +
                                          " completions: a slot was reused before its completion");
        std::lock_guard<std::mutex> g(mu_);
        if (fresh) stats_.doorbells++;
        for (uint32_t slot = qp.seen_db; slot != db; slot++) {
            uint8_t raw[sizeof(efa_io_tx_wqe)];
            const uint8_t *src = qp.cfg.sq + (size_t)(slot & (qp.cfg.sq_entries - 1)) * sizeof raw;
            for (size_t i = 0; i < sizeof raw; i++) raw[i] = ((const volatile uint8_t *)src)[i];
            ParsedWqe w{};
            std::string why;
            uint8_t status;
            uint8_t op = (uint8_t)EFA_GDA_GET(EFA_IO_TX_META_DESC_OP_TYPE_MASK, raw[offsetof(efa_io_tx_meta_desc, ctrl1)]);
            if (!parse_wqe(raw, slot, qp.log2, &w, &why)) {
                violation_locked(qp, slot, "slot " + std::to_string(slot) + ": " + why);
                status = EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR;
                w.req_id = load<uint16_t>(raw + offsetof(efa_io_tx_meta_desc, req_id));
            } else {
                status = execute(qp, w);
                if (status == EFA_IO_COMP_STATUS_OK) stats_.bytes += w.length;
            }
            if (status != EFA_IO_COMP_STATUS_OK) stats_.errors++;
            complete_tx(qp, w.req_id, status, op);
            stats_.wqes++;
            served++;
        }
        if (fresh) mem_.flush();
        qp.completed += fresh;
        qp.seen_db = db;
        // WQEs of this pass already written past the doorbell: the device may stage at most max_batch.
        uint32_t ahead = 0;
        for (uint32_t slot = db; ahead <= qp.cfg.max_batch && slot - qp.completed < qp.cfg.sq_entries; slot++) {
            const uint8_t *src = qp.cfg.sq + (size_t)(slot & (qp.cfg.sq_entries - 1)) * sizeof(efa_io_tx_wqe);
            const uint8_t c1 = ((const volatile uint8_t *)src)[offsetof(efa_io_tx_meta_desc, ctrl1)];
            const uint8_t c2 = ((const volatile uint8_t *)src)[offsetof(efa_io_tx_meta_desc, ctrl2)];
            if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_META_DESC_MASK, c1) ||
                EFA_GDA_GET(EFA_IO_TX_META_DESC_PHASE_MASK, c2) != efa_gda_sq_phase(slot, qp.log2))
                break;
            ahead++;
        }
        // Only a snapshot taken while the doorbell stood still proves the WQEs were staged at the same time.
        const uint32_t db_after = *qp.cfg.db;
        if (ahead > qp.cfg.max_batch && db_after == db && !qp.warned_ahead) {
            qp.warned_ahead = true;
            violation_locked(qp, db, "more than max_batch " + std::to_string(qp.cfg.max_batch) + " WQEs written past doorbell " + std::to_string(db));
        }
    }
    return served;
}

void Device::start() {
    if (running_.exchange(true)) return;
    threaded_ = true;
    thread_ = std::thread([this] {
        while (running_.load(std::memory_order_relaxed)) {
            if (poll_once() == 0) std::this_thread::yield();
        }
        poll_once();
    });
}

void Device::stop() {
    if (!running_.exchange(false)) return;
    if (thread_.joinable()) thread_.join();
}

std::vector<Violation> Device::violations() const {
    std::lock_guard<std::mutex> g(mu_);
    return violations_;
}

Stats Device::stats() const {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
}

}  // namespace softefa
