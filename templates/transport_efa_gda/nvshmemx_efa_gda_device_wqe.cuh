/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Part of the GDA device API (nvshmemx_efa_gda_device.cuh): building a WQE. The descriptor of one RDMA op
 * (efa_gda_desc) from a peer's address and a piece, the WQE in registers (efa_gda_wqe_of), and its store into a
 * ring slot with the slot's request id and phase (efa_gda_store_wqe), with the slot's destination PE noted. */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_WQE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_WQE_CUH

#include "nvshmemx_efa_gda_device_base.cuh"

/* One WQE's worth of a transfer: local and remote address, bytes, and the keys (efa_gda_lookup finds it). */
struct efa_gda_piece {
    uint64_t local, remote, len;
    uint32_t lkey, rkey;
};

/* A WQE in registers. efa_gda_wqe_of builds everything but the slot's request id and phase, which
 * efa_gda_store_wqe adds to the first word when it stores the WQE into its slot: the WQE can be built
 * while the slot's reservation is in flight. */
static_assert(offsetof(struct efa_io_tx_meta_desc, req_id) == 0 && offsetof(struct efa_io_tx_meta_desc, ctrl2) == 3,
              "request id and phase are in the WQE's first 64-bit word");
EFA_GDA_DEV efa_gda_wqe_words efa_gda_wqe_of(struct efa_gda_rdma_desc d) {
    union efa_gda_wqe_words w;
    d.req_id = 0;
    efa_gda_build_rdma_wqe(&w, &d, 0);
    return w;
}
EFA_GDA_DEV void efa_gda_store_wqe(const efa_gda_sq &q, uint32_t slot, const efa_gda_wqe_words &w) {
    const uint64_t first = w.q[0] | (uint64_t)(uint16_t)slot |
                           ((uint64_t)EFA_GDA_FIELD(EFA_IO_TX_META_DESC_PHASE_MASK, efa_gda_sq_phase(slot, q.log2)) << 24);
    uint64_t *dst = (uint64_t *)(q.buf + (size_t)(slot & (q.entries - 1)) * q.wqe_size);
    efa_gda_mmio_store64(&dst[0], first);
#pragma unroll
    for (int i = 1; i < NVSHMEMX_EFA_GDA_WQE_SIZE / 8; i++) efa_gda_mmio_store64(&dst[i], w.q[i]);
    for (uint32_t i = NVSHMEMX_EFA_GDA_WQE_SIZE / 8; i < q.wqe_size / 8; i++) efa_gda_mmio_store64(&dst[i], 0);
}

/* Notes the PE the WQE of slot is addressed to (q.slot_pe, one 16-bit store), so that an error completion of
 * that slot names its peer. Stored before the doorbell, whose fence orders it (efa_gda_fence_nic). */
EFA_GDA_DEV void efa_gda_note_pe(const efa_gda_sq &q, uint32_t slot, int pe) {
    if (q.slot_pe) q.slot_pe[slot & (q.entries - 1)] = (uint16_t)pe;
}

/* Stores the WQE for slot into the ring. The request id is the slot's low 16 bits. */
EFA_GDA_DEV void efa_gda_write_wqe(const efa_gda_sq &q, uint32_t slot, struct efa_gda_rdma_desc d) {
    efa_gda_store_wqe(q, slot, efa_gda_wqe_of(d));
}
EFA_GDA_DEV void efa_gda_write_wqe(nvshmemx_efa_gda_qp_t *qp, uint32_t slot, struct efa_gda_rdma_desc d) {
    efa_gda_write_wqe(efa_gda_sq_of(qp), slot, d);
}

/* A PE's address on a rail: at a fixed offset for the first NVSHMEMX_EFA_GDA_FAST_PES PEs, through peers beyond. */
EFA_GDA_DEV nvshmemx_efa_gda_peer_t efa_gda_peer(const nvshmemx_efa_gda_rail_t *rl, int pe) {
    return (uint32_t)pe < NVSHMEMX_EFA_GDA_FAST_PES ? efa_gda_ro(&rl->fast[pe].addr) : efa_gda_ro(&efa_gda_ro(&rl->peers)[pe]);
}

EFA_GDA_DEV struct efa_gda_rdma_desc efa_gda_desc(uint8_t op, nvshmemx_efa_gda_peer_t peer, const efa_gda_piece &p,
                                                 bool has_imm, uint32_t imm) {
    struct efa_gda_rdma_desc d;
    d.op = op;
    d.has_imm = has_imm ? 1 : 0;
    d.req_id = 0;
    d.imm = has_imm ? imm : 0;
    d.dest_qpn = peer.qpn;
    d.ah = peer.ah;
    d.qkey = peer.qkey;
    d.local_addr = p.local;
    d.lkey = p.lkey;
    d.remote_addr = p.remote;
    d.rkey = p.rkey;
    d.length = (uint32_t)p.len;
    return d;
}

#endif
