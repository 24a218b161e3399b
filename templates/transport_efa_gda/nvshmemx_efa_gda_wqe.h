/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Encoding of EFA send-queue WQEs and decoding of CQEs, shared by the GPU post path, the CPU reference
 * writer of the tests and the software EFA. Field names, masks and layouts come from the upstream
 * efa_io_defs.h (rdma-core providers/efa), which nvshmem-efa vendors next to this file after checking its
 * sha256 (third_party/efa_gda/lock.json); nothing here restates the layout. */
#ifndef NVSHMEMX_EFA_GDA_WQE_H
#define NVSHMEMX_EFA_GDA_WQE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define EFA_GDA_HD __host__ __device__
#else
#define EFA_GDA_HD
#endif

/* efa_io_defs.h uses the kernel's BIT/GENMASK without defining them (rdma-core gets them from util/). */
#ifndef BIT
#define BIT(nr) (1UL << (nr))
#endif
#ifndef GENMASK
#define GENMASK(h, l) (((~0UL) << (l)) & (~0UL >> (sizeof(unsigned long) * 8 - 1 - (h))))
#endif
#include "efa_io_defs.h"

#ifdef __cplusplus
/* Shift of a field from its mask, so that every field is written through the upstream *_MASK macro. */
EFA_GDA_HD constexpr unsigned efa_gda_mask_shift(unsigned long mask) {
    return (mask & 1UL) ? 0u : 1u + efa_gda_mask_shift(mask >> 1);
}
#define EFA_GDA_FIELD(mask, value) \
    ((((unsigned long)(value)) << efa_gda_mask_shift(mask)) & (unsigned long)(mask))
#define EFA_GDA_GET(mask, reg) ((((unsigned long)(reg)) & (unsigned long)(mask)) >> efa_gda_mask_shift(mask))

/* Everything one RDMA WQE carries. op is EFA_IO_RDMA_READ or EFA_IO_RDMA_WRITE; for a write with
 * immediate, has_imm = 1. length is bytes (<= the device's max RDMA size, the caller splits). */
struct efa_gda_rdma_desc {
    uint8_t op;
    uint8_t has_imm;
    uint16_t req_id;
    uint32_t imm;
    uint16_t dest_qpn;
    uint16_t ah;
    uint32_t qkey;
    uint64_t local_addr;
    uint32_t lkey;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t length;
};

union efa_gda_wqe_words {
    struct efa_io_tx_wqe wqe;
    uint64_t q[sizeof(struct efa_io_tx_wqe) / 8];
};

/* Phase of a slot: bit 0 of (slot number >> log2(ring size)), so 0 on the first pass over the ring. */
EFA_GDA_HD inline uint8_t efa_gda_sq_phase(uint32_t slot, uint32_t log2_entries) {
    return (uint8_t)((slot >> log2_entries) & 1u);
}

/* A CQE is new when its phase bit equals this: 1 on the first pass over the CQ, then flipping. */
EFA_GDA_HD inline uint8_t efa_gda_cq_expected_phase(uint32_t head, uint32_t log2_entries) {
    return (uint8_t)(((head >> log2_entries) & 1u) ^ 1u);
}

/* Builds the 64-byte WQE in w (registers or local memory); the caller stores it to the ring in 64-bit
 * words. meta_desc, first, last and comp_req are always set: the device rejects a WQE without them and
 * every WQE must ask for a completion. The local SGE count (1) goes in meta.length. */
EFA_GDA_HD inline void efa_gda_build_rdma_wqe(union efa_gda_wqe_words *w, const struct efa_gda_rdma_desc *d,
                                              uint8_t phase) {
    for (unsigned i = 0; i < sizeof(w->q) / sizeof(w->q[0]); i++) w->q[i] = 0;
    struct efa_io_tx_meta_desc *m = &w->wqe.meta;
    m->req_id = d->req_id;
    m->ctrl1 = (uint8_t)(EFA_GDA_FIELD(EFA_IO_TX_META_DESC_OP_TYPE_MASK, d->op) |
                         EFA_GDA_FIELD(EFA_IO_TX_META_DESC_HAS_IMM_MASK, d->has_imm ? 1 : 0) |
                         EFA_GDA_FIELD(EFA_IO_TX_META_DESC_META_DESC_MASK, 1));
    m->ctrl2 = (uint8_t)(EFA_GDA_FIELD(EFA_IO_TX_META_DESC_PHASE_MASK, phase) |
                         EFA_GDA_FIELD(EFA_IO_TX_META_DESC_FIRST_MASK, 1) |
                         EFA_GDA_FIELD(EFA_IO_TX_META_DESC_LAST_MASK, 1) |
                         EFA_GDA_FIELD(EFA_IO_TX_META_DESC_COMP_REQ_MASK, 1));
    m->dest_qp_num = d->dest_qpn;
    m->length = EFA_IO_TX_DESC_NUM_RDMA_BUFS;
    m->immediate_data = d->has_imm ? d->imm : 0;
    m->ah = d->ah;
    m->qkey = d->qkey;

    struct efa_io_rdma_req *r = &w->wqe.data.rdma_req;
    r->remote_mem.length = d->length;
    r->remote_mem.rkey = d->rkey;
    r->remote_mem.buf_addr_lo = (uint32_t)(d->remote_addr & 0xffffffffu);
    r->remote_mem.buf_addr_hi = (uint32_t)(d->remote_addr >> 32);
    r->local_mem[0].length = d->length;
    r->local_mem[0].lkey = (uint32_t)EFA_GDA_FIELD(EFA_IO_TX_BUF_DESC_LKEY_MASK, d->lkey);
    r->local_mem[0].buf_addr_lo = (uint32_t)(d->local_addr & 0xffffffffu);
    r->local_mem[0].buf_addr_hi = (uint32_t)(d->local_addr >> 32);
}

/* Offsets the CQ poller reads through volatile loads (the NIC writes the CQE by DMA). */
#define EFA_GDA_CQE_FLAGS_OFFSET offsetof(struct efa_io_cdesc_common, flags)
#define EFA_GDA_CQE_STATUS_OFFSET offsetof(struct efa_io_cdesc_common, status)
#define EFA_GDA_CQE_REQ_ID_OFFSET offsetof(struct efa_io_cdesc_common, req_id)
#define EFA_GDA_CQE_QP_NUM_OFFSET offsetof(struct efa_io_cdesc_common, qp_num)
#define EFA_GDA_RX_CQE_IMM_OFFSET offsetof(struct efa_io_rx_cdesc, imm)
#define EFA_GDA_RX_CQE_LENGTH_OFFSET offsetof(struct efa_io_rx_cdesc, length)
#define EFA_GDA_RX_CQE_AH_OFFSET offsetof(struct efa_io_rx_cdesc, ah)
#define EFA_GDA_RX_CQE_SRC_QP_OFFSET offsetof(struct efa_io_rx_cdesc, src_qp_num)

#endif /* __cplusplus */
#endif
