#include "send_queue.h"

#include <atomic>
#include <cstdio>
#include <stdexcept>

#include "nvshmemx_efa_gda_wqe.h"

namespace softefa {

namespace {
bool is_pow2(uint32_t v) { return v && (v & (v - 1)) == 0; }
uint32_t log2_exact(uint32_t v) {
    uint32_t l = 0;
    while ((1u << l) < v) l++;
    return l;
}
std::string hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return b;
}
}  // namespace

SendQueue::SendQueue(const SqConfig &cfg) : cfg_(cfg) {
    if (!is_pow2(cfg.entries) || cfg.entries > 65536)
        throw std::invalid_argument("softefa: SQ entries must be a power of two <= 65536 (the doorbell is 16 bits)");
    if (cfg.wqe_size != 64 && cfg.wqe_size != 128) throw std::invalid_argument("softefa: WQE size must be 64 or 128");
    if (cfg.max_batch == 0) throw std::invalid_argument("softefa: max_batch must be at least 1");
    if (!cfg.ring || !cfg.doorbell) throw std::invalid_argument("softefa: SQ ring and doorbell are required");
    log2_ = log2_exact(cfg.entries);
    busy_.assign(cfg.entries, 0);
}

size_t SendQueue::fetch(std::vector<FetchedWqe> &out, ViolationLog &log, bool every_value_seen) {
    const uint32_t raw = *cfg_.doorbell;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (raw > 0xffff && !warned_wide_) {
        warned_wide_ = true;
        log.add(cfg_.qpn, raw, "doorbell value " + hex(raw) +
                                   " has bits above 15 set: the register takes the 16-bit producer counter (rdma-core writes (uint16_t)pc)");
    }
    const uint32_t fresh = (uint16_t)((uint16_t)raw - (uint16_t)fetched_);
    if (fresh == 0) return 0;
    if (fresh >= 0x8000) {
        log.add(cfg_.qpn, raw, "doorbell went backwards from " + std::to_string((uint16_t)fetched_) + " to " +
                                   std::to_string((uint16_t)raw) + " (16-bit producer counter)");
        return 0;
    }
    if (fresh > cfg_.entries)
        log.add(cfg_.qpn, raw, "doorbell " + std::to_string((uint16_t)raw) + " covers " + std::to_string(fresh) +
                                   " new WQEs, more than the " + std::to_string(cfg_.entries) + "-entry ring holds");
    if (fresh > cfg_.max_batch && every_value_seen) {
        const std::string what = "doorbell " + std::to_string((uint16_t)raw) + " covers " + std::to_string(fresh) +
                                 " new WQEs, more than max_batch " + std::to_string(cfg_.max_batch);
        log.add(cfg_.qpn, fetched_, what);
        if (fault_.empty()) fault_ = what;
    }
    for (uint32_t i = 0; i < fresh; i++) {
        const uint32_t slot = fetched_ + i;
        const uint32_t pos = slot & (cfg_.entries - 1);
        if (busy_[pos])
            log.add(cfg_.qpn, slot, "slot " + std::to_string(slot) + " (ring position " + std::to_string(pos) +
                                        ") reused before its completion: the WQE of slot " +
                                        std::to_string(slot - cfg_.entries) + " there is still in flight");
        uint8_t raw_wqe[128];
        const volatile uint8_t *src = cfg_.ring + (size_t)pos * cfg_.wqe_size;
        for (size_t b = 0; b < cfg_.wqe_size; b++) raw_wqe[b] = src[b];
        FetchedWqe f{};
        f.slot = slot;
        f.req_id = (uint16_t)(raw_wqe[offsetof(efa_io_tx_meta_desc, req_id)] |
                              raw_wqe[offsetof(efa_io_tx_meta_desc, req_id) + 1] << 8);
        f.op = (uint8_t)EFA_GDA_GET(EFA_IO_TX_META_DESC_OP_TYPE_MASK, raw_wqe[offsetof(efa_io_tx_meta_desc, ctrl1)]);
        f.ok = parse_wqe(raw_wqe, cfg_.wqe_size, slot, log2_, &f.wqe, &f.why);
        if (!f.ok) log.add(cfg_.qpn, slot, "slot " + std::to_string(slot) + ": " + f.why);
        if (!fault_.empty()) {  // already logged when found: this WQE carries the QP error
            f.ok = false;
            f.why = fault_;
            fault_.clear();
        }
        if (!busy_[pos]) in_flight_++;
        busy_[pos] = 1;
        out.push_back(std::move(f));
    }
    fetched_ += fresh;
    return fresh;
}

void SendQueue::complete(uint32_t slot) {
    uint8_t &b = busy_[slot & (cfg_.entries - 1)];
    if (b) in_flight_--;
    b = 0;
}

uint32_t SendQueue::staged() const {
    uint32_t ahead = 0;
    for (uint32_t slot = fetched_; slot - fetched_ < cfg_.entries; slot++) {
        const uint32_t pos = slot & (cfg_.entries - 1);
        if (busy_[pos]) break;
        const volatile uint8_t *src = cfg_.ring + (size_t)pos * cfg_.wqe_size;
        if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_META_DESC_MASK, src[offsetof(efa_io_tx_meta_desc, ctrl1)]) ||
            EFA_GDA_GET(EFA_IO_TX_META_DESC_PHASE_MASK, src[offsetof(efa_io_tx_meta_desc, ctrl2)]) != efa_gda_sq_phase(slot, log2_))
            break;
        ahead++;
    }
    return ahead;
}

void SendQueue::check_staged(ViolationLog &log) {
    if (warned_ahead_) return;
    const uint32_t db = fetched_;
    uint32_t ahead = 0;
    for (uint32_t slot = db; ahead <= cfg_.max_batch && slot - db < cfg_.entries; slot++) {
        const uint32_t pos = slot & (cfg_.entries - 1);
        if (busy_[pos]) break;  // the previous pass's WQE is still in flight there: nothing new can be
        const volatile uint8_t *src = cfg_.ring + (size_t)pos * cfg_.wqe_size;
        const uint8_t c1 = src[offsetof(efa_io_tx_meta_desc, ctrl1)];
        const uint8_t c2 = src[offsetof(efa_io_tx_meta_desc, ctrl2)];
        if (!EFA_GDA_GET(EFA_IO_TX_META_DESC_META_DESC_MASK, c1) ||
            EFA_GDA_GET(EFA_IO_TX_META_DESC_PHASE_MASK, c2) != efa_gda_sq_phase(slot, log2_))
            break;
        ahead++;
    }
    // Only a snapshot taken while the doorbell stood still proves the WQEs were staged at the same time.
    const uint32_t raw_after = *cfg_.doorbell;
    if (ahead > cfg_.max_batch && (uint16_t)raw_after == (uint16_t)db) {
        warned_ahead_ = true;
        const std::string what = "more than max_batch " + std::to_string(cfg_.max_batch) + " WQEs written past doorbell " +
                                 std::to_string(db);
        log.add(cfg_.qpn, db, what);
        if (fault_.empty()) fault_ = what;
    }
}

}  // namespace softefa
