// One EFA completion queue as the NIC writes it: entries of entry_size bytes in a ring of `entries`, each
// written body first and flags byte last with the phase of its pass (1 on the first pass, then flipping).
// The NIC learns nothing from the consumer on the GPU (no CQ doorbell is written there), so when a consumer
// does not drain, new entries overwrite ones it has not read. With a `consumed` source (the consumer's
// free-running count of entries taken) push() reports such an overrun; without one it cannot know, like
// the NIC, and the consumer must detect it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "memory.h"

namespace softefa {

struct CqConfig {
    uint8_t *ring;                        // the CQ buffer, written through Memory::write_cqe
    uint32_t entries;                     // power of two
    uint32_t entry_size;                  // 16..64 bytes
    std::function<uint32_t()> consumed;   // optional: entries the consumer has taken so far
};

class CompletionQueue {
public:
    CompletionQueue(const CqConfig &cfg, Memory &mem);  // throws std::invalid_argument on a bad geometry

    // Writes the next CQE from entry (entry_size bytes; its phase bit is set here). Returns false when it
    // overwrote an entry the consumer had not taken (an overrun); the entry is written anyway, as the NIC
    // would.
    bool push(uint8_t *entry);

    uint32_t produced() const { return produced_; }
    uint32_t consumer_seen() const { return consumer_seen_; }
    const CqConfig &config() const { return cfg_; }

private:
    CqConfig cfg_;
    Memory &mem_;
    uint32_t log2_ = 0;
    uint32_t produced_ = 0;
    uint32_t consumer_seen_ = 0;
};

// CQE builders (efa_io_tx_cdesc / efa_io_rx_cdesc_ex), phase left for push(). size = the CQ's entry size.
void build_tx_cqe(uint8_t *entry, size_t size, uint16_t req_id, uint8_t status, uint8_t op, uint16_t qpn);
// An RDMA write with immediate arriving unsolicited; src_ah is the receiver's address handle for the
// sender (0xffff when the sender is not in its AV), src_qpn the sender's QP.
void build_rx_cqe(uint8_t *entry, size_t size, uint8_t status, uint16_t qpn, uint16_t src_ah, uint16_t src_qpn,
                  uint32_t imm, uint32_t length);

}  // namespace softefa
