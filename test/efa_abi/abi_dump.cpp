// Prints, one per line, the size, offset, mask and value of every EFA definition nvshmem-efa relies on, so
// that two headers can be compared with diff (abi_check.sh). Build with -DDUMP_IO (efa_io_defs.h on the
// include path) or -DDUMP_FI (rdma/fi_ext_efa.h on the include path).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OFF(s, f) printf("offsetof(%s, %s) %zu\n", #s, #f, offsetof(struct s, f))
#define SIZE(s) printf("sizeof(%s) %zu\n", #s, sizeof(struct s))
#define VAL(v) printf("%s %llu\n", #v, (unsigned long long)(v))

#ifdef DUMP_IO
#ifndef BIT
#define BIT(nr) (1UL << (nr))
#endif
#ifndef GENMASK
#define GENMASK(h, l) (((~0UL) << (l)) & (~0UL >> (sizeof(unsigned long) * 8 - 1 - (h))))
#endif
#include <efa_io_defs.h> // angle brackets: only the -I directory given, never the copy next to this file

int main() {
    SIZE(efa_io_tx_meta_desc);
    OFF(efa_io_tx_meta_desc, req_id);
    OFF(efa_io_tx_meta_desc, ctrl1);
    OFF(efa_io_tx_meta_desc, ctrl2);
    OFF(efa_io_tx_meta_desc, dest_qp_num);
    OFF(efa_io_tx_meta_desc, length);
    OFF(efa_io_tx_meta_desc, immediate_data);
    OFF(efa_io_tx_meta_desc, ah);
    OFF(efa_io_tx_meta_desc, qkey);
    SIZE(efa_io_tx_buf_desc);
    OFF(efa_io_tx_buf_desc, length);
    OFF(efa_io_tx_buf_desc, lkey);
    OFF(efa_io_tx_buf_desc, buf_addr_lo);
    OFF(efa_io_tx_buf_desc, buf_addr_hi);
    SIZE(efa_io_remote_mem_addr);
    OFF(efa_io_remote_mem_addr, length);
    OFF(efa_io_remote_mem_addr, rkey);
    OFF(efa_io_remote_mem_addr, buf_addr_lo);
    OFF(efa_io_remote_mem_addr, buf_addr_hi);
    OFF(efa_io_rdma_req, remote_mem);
    OFF(efa_io_rdma_req, local_mem);
    SIZE(efa_io_tx_wqe);
    OFF(efa_io_tx_wqe, meta);
    OFF(efa_io_tx_wqe, data);
    OFF(efa_io_tx_wqe, data.rdma_req.remote_mem);
    OFF(efa_io_tx_wqe, data.rdma_req.local_mem);
    SIZE(efa_io_cdesc_common);
    OFF(efa_io_cdesc_common, req_id);
    OFF(efa_io_cdesc_common, status);
    OFF(efa_io_cdesc_common, flags);
    OFF(efa_io_cdesc_common, qp_num);
    SIZE(efa_io_rx_cdesc);
    OFF(efa_io_rx_cdesc, length);
    OFF(efa_io_rx_cdesc, ah);
    OFF(efa_io_rx_cdesc, src_qp_num);
    OFF(efa_io_rx_cdesc, imm);
    SIZE(efa_io_rx_cdesc_ex);
    OFF(efa_io_rx_cdesc_ex, u);
    OFF(efa_io_rx_cdesc_ex, u.rdma_write.length_hi);
    VAL(EFA_IO_TX_DESC_NUM_RDMA_BUFS);
    VAL(EFA_IO_SEND);
    VAL(EFA_IO_RDMA_READ);
    VAL(EFA_IO_RDMA_WRITE);
    VAL(EFA_IO_SEND_QUEUE);
    VAL(EFA_IO_RECV_QUEUE);
    VAL(EFA_IO_TX_META_DESC_OP_TYPE_MASK);
    VAL(EFA_IO_TX_META_DESC_HAS_IMM_MASK);
    VAL(EFA_IO_TX_META_DESC_INLINE_MSG_MASK);
    VAL(EFA_IO_TX_META_DESC_META_EXTENSION_MASK);
    VAL(EFA_IO_TX_META_DESC_META_DESC_MASK);
    VAL(EFA_IO_TX_META_DESC_PHASE_MASK);
    VAL(EFA_IO_TX_META_DESC_FIRST_MASK);
    VAL(EFA_IO_TX_META_DESC_LAST_MASK);
    VAL(EFA_IO_TX_META_DESC_COMP_REQ_MASK);
    VAL(EFA_IO_TX_BUF_DESC_LKEY_MASK);
    VAL(EFA_IO_CDESC_COMMON_PHASE_MASK);
    VAL(EFA_IO_CDESC_COMMON_Q_TYPE_MASK);
    VAL(EFA_IO_CDESC_COMMON_HAS_IMM_MASK);
    VAL(EFA_IO_CDESC_COMMON_OP_TYPE_MASK);
    VAL(EFA_IO_CDESC_COMMON_UNSOLICITED_MASK);
    VAL(EFA_IO_COMP_STATUS_OK);
    VAL(EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR);
    VAL(EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH);
    VAL(EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY);
    VAL(EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH);
    VAL(EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS);
    VAL(EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN);
    VAL(EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR);
    VAL(EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE);
    return 0;
}
#endif

#ifdef DUMP_FI
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext_efa.h>

int main() {
    printf("FI_EFA_GDA_OPS \"%s\"\n", FI_EFA_GDA_OPS);
    VAL(FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF);
    OFF(fi_efa_wq_attr, buffer);
    OFF(fi_efa_wq_attr, entry_size);
    OFF(fi_efa_wq_attr, num_entries);
    OFF(fi_efa_wq_attr, doorbell);
    OFF(fi_efa_wq_attr, max_batch);
    /* 32 bytes in v2.3.0 .. v2.6.0 and at HEAD, where caps (uint16_t, after v2.6.0) sits in the tail padding. */
    SIZE(fi_efa_wq_attr);
    SIZE(fi_efa_cq_attr);
    OFF(fi_efa_cq_attr, buffer);
    OFF(fi_efa_cq_attr, entry_size);
    OFF(fi_efa_cq_attr, num_entries);
    SIZE(fi_efa_cq_init_attr);
    OFF(fi_efa_cq_init_attr, flags);
    OFF(fi_efa_cq_init_attr, ext_mem_dmabuf.buffer);
    OFF(fi_efa_cq_init_attr, ext_mem_dmabuf.length);
    OFF(fi_efa_cq_init_attr, ext_mem_dmabuf.offset);
    OFF(fi_efa_cq_init_attr, ext_mem_dmabuf.fd);
    OFF(fi_efa_ops_gda, query_addr);
    OFF(fi_efa_ops_gda, query_qp_wqs);
    OFF(fi_efa_ops_gda, query_cq);
    OFF(fi_efa_ops_gda, cq_open_ext);
    OFF(fi_efa_ops_gda, get_mr_lkey);
    return 0;
}
#endif
