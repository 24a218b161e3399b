#include "device.h"

#include <stdexcept>
#include <string>

#include "nvshmemx_efa_gda_wqe.h"

namespace softefa {

void Device::add_region(const Region &r) {
    std::lock_guard<std::mutex> g(mu_);
    regions_.push_back(r);
}

int Device::add_qp(const QpConfig &cfg) {
    if (cfg.cq_entries < cfg.sq_entries) throw std::invalid_argument("softefa: the CQ must hold a completion per SQ slot");
    std::unique_ptr<Qp> q(new Qp);
    q->cfg = cfg;
    q->sq.reset(new SendQueue({cfg.sq, cfg.db, cfg.sq_entries, cfg.wqe_size, cfg.max_batch, cfg.qpn}));
    q->cq.reset(new CompletionQueue({cfg.cq, cfg.cq_entries, cfg.cq_entry_size, nullptr}, mem_));
    if (cfg.rx_cq) q->rx.reset(new CompletionQueue({cfg.rx_cq, cfg.rx_cq_entries, cfg.rx_cq_entry_size, cfg.rx_consumed}, mem_));
    q->sched.reset(new Scheduler(reorder_));
    q->last_new = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> g(mu_);
    qps_.push_back(std::move(q));
    return (int)qps_.size() - 1;
}

void Device::set_reorder(const Reorder &r) {
    std::lock_guard<std::mutex> g(mu_);
    reorder_ = r;
    for (auto &q : qps_) {
        if (q->sched->held()) throw std::logic_error("softefa: set_reorder with WQEs held");
        q->sched.reset(new Scheduler(r));
    }
}

void Device::av_insert(int qp, uint16_t ah, uint16_t qpn) {
    std::lock_guard<std::mutex> g(mu_);
    qps_.at((size_t)qp)->av.insert({ah, qpn});
}

void Device::av_remove(int qp, uint16_t ah, uint16_t qpn) {
    std::lock_guard<std::mutex> g(mu_);
    qps_.at((size_t)qp)->av.erase({ah, qpn});
}

void Device::set_qp_error(int qp) {
    std::lock_guard<std::mutex> g(mu_);
    qps_.at((size_t)qp)->error = true;
}

bool Device::qp_in_error(int qp) const {
    std::lock_guard<std::mutex> g(mu_);
    return qps_.at((size_t)qp)->error;
}

const Region *Device::find_region(uint32_t key, uint64_t addr, uint64_t len) const {
    for (const Region &r : regions_)
        if (r.key == key && addr >= r.base && addr - r.base <= r.length && len <= r.length - (addr - r.base)) return &r;
    return nullptr;
}

// Returns the completion status the NIC would report. Data and the target's RX CQE happen here, before
// the caller writes the TX CQE.
uint8_t Device::execute(Qp &qp, const ParsedWqe &w) {
    Qp *target = nullptr;
    bool ah_known = false;
    for (auto &t : qps_) {
        if (t->cfg.ah != w.ah) continue;
        ah_known = true;
        if (t->cfg.qpn == w.dest_qpn) target = t.get();
    }
    if (!ah_known) return EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH;
    if (!target) return EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN;
    if (target->cfg.qkey != w.qkey) return EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE;
    if (w.length > qp.cfg.max_rdma_size) return EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH;
    if (!find_region(w.lkey, w.local_addr, w.length)) return EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY;
    if (!target->av.count({qp.cfg.ah, qp.cfg.qpn})) {
        stats_.unknown_peer++;
        return EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER;
    }
    const Region *rr = find_region(w.rkey, w.remote_addr, w.length);
    if (!rr || (w.op == EFA_IO_RDMA_WRITE && !rr->remote_write) || (w.op == EFA_IO_RDMA_READ && !rr->remote_read))
        return EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS;
    if (w.has_imm && !target->rx) return EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR;
    if (w.length) {
        if (w.op == EFA_IO_RDMA_WRITE) mem_.copy(w.remote_addr, w.local_addr, w.length);
        else mem_.copy(w.local_addr, w.remote_addr, w.length);
    }
    if (w.has_imm) {
        uint8_t e[64];
        build_rx_cqe(e, target->cfg.rx_cq_entry_size, EFA_IO_COMP_STATUS_OK, target->cfg.qpn, qp.cfg.ah, qp.cfg.qpn,
                     w.imm, w.length);
        const uint32_t at = target->rx->produced();
        if (!target->rx->push(e)) {
            stats_.rx_overruns++;
            log_.add(target->cfg.qpn, at,
                     "RX CQ overrun: completion " + std::to_string(at) + " written over an entry the consumer has not taken (consumer at " +
                         std::to_string(target->rx->consumer_seen()) + ", " + std::to_string(target->cfg.rx_cq_entries) +
                         " entries): the receiver does not drain or the senders lack flow control");
        }
    }
    return EFA_IO_COMP_STATUS_OK;
}

void Device::complete(Qp &qp, const FetchedWqe &f, bool overtook) {
    uint8_t status;
    if (qp.error) {
        status = EFA_IO_COMP_STATUS_FLUSHED;
        stats_.flushed++;
    } else if (!f.ok) {
        status = EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR;
        qp.error = true;
    } else {
        status = execute(qp, f.wqe);
        if (status == EFA_IO_COMP_STATUS_OK) stats_.bytes += f.wqe.length;
    }
    if (status != EFA_IO_COMP_STATUS_OK) stats_.errors++;
    uint8_t e[64];
    build_tx_cqe(e, qp.cfg.cq_entry_size, f.req_id, status, f.op, qp.cfg.qpn);
    qp.cq->push(e);
    qp.sq->complete(f.slot);
    stats_.wqes++;
    if (overtook) stats_.reordered++;
}

size_t Device::serve(Qp &qp, bool idle) {
    std::vector<uint64_t> ids;
    qp.sched->release(ids, idle);
    for (uint64_t id : ids) {
        auto it = qp.pending.find(id);
        const bool overtook = it != qp.pending.begin();
        complete(qp, it->second, overtook);
        qp.pending.erase(it);
    }
    return ids.size();
}

size_t Device::poll_once() {
    std::lock_guard<std::mutex> g(mu_);
    size_t served = 0;
    const auto now = std::chrono::steady_clock::now();
    for (auto &qpp : qps_) {
        Qp &qp = *qpp;
        std::vector<FetchedWqe> got;
        const size_t n = qp.sq->fetch(got, log_, !threaded_);
        if (n) {
            stats_.doorbells++;
            qp.last_new = now;
        }
        for (FetchedWqe &f : got) {
            const uint64_t id = qp.next_id++;
            qp.sched->add(id, f.ok ? f.wqe.length : 0);
            qp.pending.emplace(id, std::move(f));
        }
        if (qp.pending.size() > stats_.max_held) stats_.max_held = qp.pending.size();
        qp.sq->check_staged(log_);
        const bool idle = threaded_ && n == 0 && now - qp.last_new >= std::chrono::microseconds(reorder_.idle_us);
        served += serve(qp, idle);
    }
    if (served) mem_.flush();
    return served;
}

size_t Device::drain() {
    std::lock_guard<std::mutex> g(mu_);
    size_t served = 0;
    for (auto &qp : qps_) served += serve(*qp, true);
    if (served) mem_.flush();
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
        drain();
    });
}

void Device::stop() {
    if (!running_.exchange(false)) return;
    if (thread_.joinable()) thread_.join();
}

Stats Device::stats() const {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
}

}  // namespace softefa
