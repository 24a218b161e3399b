#include "completion_queue.h"

#include <cstring>
#include <stdexcept>

#include "nvshmemx_efa_gda_wqe.h"

namespace softefa {

CompletionQueue::CompletionQueue(const CqConfig &cfg, Memory &mem) : cfg_(cfg), mem_(mem) {
    if (!cfg.entries || (cfg.entries & (cfg.entries - 1)))
        throw std::invalid_argument("softefa: CQ entries must be a power of two");
    if (cfg.entry_size < sizeof(efa_io_cdesc_common) + 10 || cfg.entry_size > 64)
        throw std::invalid_argument("softefa: CQ entry size must be 16..64 bytes");
    if (!cfg.ring) throw std::invalid_argument("softefa: CQ buffer is required");
    while ((1u << log2_) < cfg.entries) log2_++;
}

bool CompletionQueue::push(uint8_t *entry) {
    bool overrun = false;
    if (cfg_.consumed && produced_ - consumer_seen_ >= cfg_.entries) {
        const uint32_t c = cfg_.consumed();
        if ((int32_t)(produced_ - c) >= 0) consumer_seen_ = c;  // a count past what was produced is noise
        overrun = produced_ - consumer_seen_ >= cfg_.entries;
    }
    uint8_t &flags = entry[EFA_GDA_CQE_FLAGS_OFFSET];
    flags = (uint8_t)((flags & ~EFA_IO_CDESC_COMMON_PHASE_MASK) |
                      EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_PHASE_MASK, efa_gda_cq_expected_phase(produced_, log2_)));
    uint8_t *dst = cfg_.ring + (size_t)(produced_ & (cfg_.entries - 1)) * cfg_.entry_size;
    mem_.write_cqe(dst, entry, cfg_.entry_size, EFA_GDA_CQE_FLAGS_OFFSET);
    produced_++;
    return !overrun;
}

void build_tx_cqe(uint8_t *e, size_t size, uint16_t req_id, uint8_t status, uint8_t op, uint16_t qpn) {
    memset(e, 0, size);
    efa_io_cdesc_common c{};
    c.req_id = req_id;
    c.status = status;
    c.qp_num = qpn;
    c.flags = (uint8_t)(EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, EFA_IO_SEND_QUEUE) |
                        EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, op));
    memcpy(e, &c, sizeof c);
}

void build_rx_cqe(uint8_t *e, size_t size, uint8_t status, uint16_t qpn, uint16_t src_ah, uint16_t src_qpn,
                  uint32_t imm, uint32_t length) {
    memset(e, 0, size);
    efa_io_rx_cdesc_ex c{};
    c.base.common.status = status;
    c.base.common.qp_num = qpn;
    c.base.common.flags = (uint8_t)(EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, EFA_IO_RECV_QUEUE) |
                                    EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_HAS_IMM_MASK, 1) |
                                    EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, EFA_IO_RDMA_WRITE) |
                                    EFA_GDA_FIELD(EFA_IO_CDESC_COMMON_UNSOLICITED_MASK, 1));
    c.base.length = (uint16_t)(length & 0xffff);
    c.base.ah = src_ah;
    c.base.src_qp_num = src_qpn;
    c.base.imm = imm;
    c.u.rdma_write.length_hi = (uint16_t)(length >> 16);
    memcpy(e, &c, size < sizeof c ? size : sizeof c);
}

}  // namespace softefa
