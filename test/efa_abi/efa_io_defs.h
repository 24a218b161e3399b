/* Test-only stand-in for rdma-core's providers/efa/efa_io_defs.h, written for nvshmem-efa from the layout
 * documented in docs/research/efa_gda.md §2.2-2.4 (64-byte WQE generation). It defines only what the
 * nvshmem-efa device code, the software EFA and the ABI check use, under the upstream names, so the same
 * sources compile against either header. It is never installed: builds use the vendored upstream header
 * (third_party/efa_gda/lock.json), and test/efa_abi/abi_dump.cpp compares the two field by field. */
#ifndef _EFA_IO_H_
#define _EFA_IO_H_

#define EFA_IO_TX_DESC_NUM_BUFS 2
#define EFA_IO_TX_DESC_NUM_RDMA_BUFS 1
#define EFA_IO_TX_DESC_INLINE_MAX_SIZE 32
#define EFA_IO_TX_DESC_IMM_DATA_SIZE 4

enum efa_io_queue_type { EFA_IO_SEND_QUEUE = 1, EFA_IO_RECV_QUEUE = 2 };

enum efa_io_send_op_type { EFA_IO_SEND = 0, EFA_IO_RDMA_READ = 1, EFA_IO_RDMA_WRITE = 2 };

enum efa_io_comp_status {
    EFA_IO_COMP_STATUS_OK = 0,
    EFA_IO_COMP_STATUS_FLUSHED = 1,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR = 2,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_UNSUPPORTED_OP = 3,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH = 4,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY = 5,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH = 6,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS = 7,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT = 8,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN = 9,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR = 10,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH = 11,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_STATUS = 12,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE = 13,
    EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER = 14,
    EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE = 15,
};

/* 32 bytes. ctrl1: op_type 3:0, has_imm 4, inline_msg 5, meta_extension 6 (MBZ), meta_desc 7.
 * ctrl2: phase 0, bit 1 MBZ, first 2, last 3, comp_req 4, 7:5 MBZ. */
struct efa_io_tx_meta_desc {
    uint16_t req_id;
    uint8_t ctrl1;
    uint8_t ctrl2;
    uint16_t dest_qp_num;
    uint16_t length;
    uint32_t immediate_data;
    uint16_t ah;
    uint16_t reserved;
    uint32_t qkey;
    uint8_t reserved2[12];
};

struct efa_io_tx_buf_desc {
    uint32_t length;
    uint32_t lkey; /* 23:0 lkey, 31:24 MBZ */
    uint32_t buf_addr_lo;
    uint32_t buf_addr_hi;
};

struct efa_io_remote_mem_addr {
    uint32_t length;
    uint32_t rkey;
    uint32_t buf_addr_lo;
    uint32_t buf_addr_hi;
};

struct efa_io_rdma_req {
    struct efa_io_remote_mem_addr remote_mem;
    struct efa_io_tx_buf_desc local_mem[1];
};

struct efa_io_tx_wqe {
    struct efa_io_tx_meta_desc meta;
    union {
        struct efa_io_tx_buf_desc sgl[2];
        uint8_t inline_data[32];
        struct efa_io_rdma_req rdma_req;
    } data;
};

/* flags: phase 0, q_type 2:1, has_imm 3, op_type 6:4, unsolicited 7 */
struct efa_io_cdesc_common {
    uint16_t req_id;
    uint8_t status;
    uint8_t flags;
    uint16_t qp_num;
};

struct efa_io_rx_cdesc {
    struct efa_io_cdesc_common common;
    uint16_t length;
    uint16_t ah;
    uint16_t src_qp_num;
    uint32_t imm;
};

struct efa_io_rx_cdesc_ex {
    struct efa_io_rx_cdesc base;
    union {
        struct {
            uint16_t length_hi;
        } rdma_write;
        uint8_t src_addr[16];
    } u;
};

#define EFA_IO_TX_META_DESC_OP_TYPE_MASK GENMASK(3, 0)
#define EFA_IO_TX_META_DESC_HAS_IMM_MASK BIT(4)
#define EFA_IO_TX_META_DESC_INLINE_MSG_MASK BIT(5)
#define EFA_IO_TX_META_DESC_META_EXTENSION_MASK BIT(6)
#define EFA_IO_TX_META_DESC_META_DESC_MASK BIT(7)
#define EFA_IO_TX_META_DESC_PHASE_MASK BIT(0)
#define EFA_IO_TX_META_DESC_FIRST_MASK BIT(2)
#define EFA_IO_TX_META_DESC_LAST_MASK BIT(3)
#define EFA_IO_TX_META_DESC_COMP_REQ_MASK BIT(4)
#define EFA_IO_TX_BUF_DESC_LKEY_MASK GENMASK(23, 0)
#define EFA_IO_CDESC_COMMON_PHASE_MASK BIT(0)
#define EFA_IO_CDESC_COMMON_Q_TYPE_MASK GENMASK(2, 1)
#define EFA_IO_CDESC_COMMON_HAS_IMM_MASK BIT(3)
#define EFA_IO_CDESC_COMMON_OP_TYPE_MASK GENMASK(6, 4)
#define EFA_IO_CDESC_COMMON_UNSOLICITED_MASK BIT(7)

#endif
