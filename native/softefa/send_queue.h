// One EFA send queue as the NIC sees it: an LLQ ring of WQEs the device writes and a doorbell register
// that takes the 16-bit producer counter (rdma-core writes `(uint16_t)pc`). fetch() reads every WQE a new
// doorbell value covers, at doorbell time, as the NIC does, and checks the doorbell rules:
//  - the value fits in 16 bits and never goes backwards;
//  - one doorbell value covers at most max_batch new WQEs (checked when every value is seen, i.e. when the
//    caller polls after each ring; a threaded caller relies on check_staged() instead);
//  - a slot is not covered again while the WQE last fetched from its ring position has not completed;
//  - never more than max_batch WQEs written past the doorbell (check_staged(), a snapshot taken while the
//    doorbell stands still, which any doorbell covering more than max_batch implies).
// Breaking a max_batch rule is a failure, not only a report: the NIC puts the QP in the error state. The first WQE
// fetched at or after the violation comes back rejected (ok false, why naming the rule), so it completes
// LOCAL_ERROR_QP_INTERNAL_ERROR and puts the QP in error, exactly as a malformed WQE does.
// Completion order is not decided here: the caller completes fetched WQEs in any order with complete().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "violation.h"
#include "wqe.h"

namespace softefa {

struct SqConfig {
    uint8_t *ring;                // host view of the ring (entries * wqe_size bytes)
    volatile uint32_t *doorbell;  // host view of the doorbell register
    uint32_t entries;             // power of two, at most 65536
    uint32_t wqe_size;            // 64, or 128 on wide-WQE devices
    uint32_t max_batch;           // most new WQEs one doorbell value may cover
    uint16_t qpn;                 // for reports
};

struct FetchedWqe {
    uint32_t slot;     // free-running slot number (32 bits; the doorbell carries its low 16)
    bool ok;           // false: the NIC rejects it (why says why); it completes with QP_INTERNAL_ERROR
    ParsedWqe wqe;     // valid when ok
    uint16_t req_id;   // from the raw WQE, also when rejected
    uint8_t op;        // op_type bits of the raw WQE
    std::string why;
};

class SendQueue {
public:
    explicit SendQueue(const SqConfig &cfg);  // throws std::invalid_argument on a bad geometry

    // Reads the doorbell and appends every WQE its new value covers to out, in slot order. Violations go
    // to log. every_value_seen: the caller polls after each ring, so the per-doorbell max_batch rule holds.
    size_t fetch(std::vector<FetchedWqe> &out, ViolationLog &log, bool every_value_seen);
    // Reports more than max_batch WQEs staged past the doorbell (once per queue) and fails the next WQE fetched.
    void check_staged(ViolationLog &log);
    // The completion of slot was written: its ring position may be covered again.
    void complete(uint32_t slot);

    uint32_t fetched() const { return fetched_; }  // slots fetched so far (the doorbell position, 32 bits)
    uint32_t in_flight() const { return in_flight_; }
    // WQEs written past the doorbell (valid, of the next pass's phase) and not yet covered by it: a snapshot.
    uint32_t staged() const;
    const SqConfig &config() const { return cfg_; }

private:
    SqConfig cfg_;
    uint32_t log2_ = 0;
    uint32_t fetched_ = 0;
    uint32_t in_flight_ = 0;
    std::vector<uint8_t> busy_;  // per ring position: the WQE fetched from it has not completed
    bool warned_wide_ = false, warned_ahead_ = false;
    std::string fault_;  // a max_batch rule broken: the next fetched WQE is rejected with this reason
};

}  // namespace softefa
