#include "wqe.h"

#include <cstdio>
#include <cstring>

#include "nvshmemx_efa_gda_wqe.h"

namespace softefa {

namespace {
std::string hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return b;
}
}  // namespace

bool parse_wqe(const uint8_t *p, size_t wqe_size, uint32_t slot, uint32_t log2_entries, ParsedWqe *out,
               std::string *why) {
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
               std::to_string(EFA_IO_TX_DESC_NUM_RDMA_BUFS) +
               " local buffer descriptor (length counts descriptors, not bytes)";
        return false;
    }
    for (size_t i = offsetof(efa_io_tx_meta_desc, ah) + 2; i < offsetof(efa_io_tx_meta_desc, qkey); i++)
        if (p[i]) {
            *why = "reserved meta byte " + std::to_string(i) + " is not zero";
            return false;
        }
    for (size_t i = offsetof(efa_io_tx_meta_desc, qkey) + 4; i < sizeof(efa_io_tx_meta_desc); i++)
        if (p[i]) {
            *why = "reserved meta byte " + std::to_string(i) + " is not zero";
            return false;
        }
    // A wide (128-byte) WQE carries the same RDMA request; the tail is inline data this model never sends.
    for (size_t i = sizeof(efa_io_tx_wqe); i < wqe_size; i++)
        if (p[i]) {
            *why = "byte " + std::to_string(i) + " of a " + std::to_string(wqe_size) +
                   "-byte RDMA WQE is not zero (no inline data is sent)";
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

}  // namespace softefa
