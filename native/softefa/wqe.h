// Decoding of one TX WQE as the EFA NIC reads it from its LLQ ring, with every check the NIC makes on an
// RDMA read / write / write-with-immediate WQE (and the must-be-zero bits it could start using).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softefa {

struct ParsedWqe {
    uint8_t op;  // EFA_IO_RDMA_READ / EFA_IO_RDMA_WRITE
    bool has_imm;
    uint16_t req_id;
    uint32_t imm;
    uint16_t dest_qpn, ah;
    uint32_t qkey;
    uint64_t local_addr, remote_addr;
    uint32_t lkey, rkey, length;
};

// Decodes the WQE of wqe_size bytes (64, or 128 on devices with wide WQEs: the RDMA part is the same 64
// bytes and the rest must be zero) read from ring slot `slot` of a ring of 2^log2_entries. Returns false
// with *why set when the NIC would reject it or it is not an RDMA WQE this model executes.
bool parse_wqe(const uint8_t *wqe, size_t wqe_size, uint32_t slot, uint32_t log2_entries, ParsedWqe *out,
               std::string *why);

}  // namespace softefa
