// Protocol violations: what a device-side driver of the queues did that the NIC forbids (a malformed WQE,
// a doorbell rule broken, a CQ overrun). Bounded, so a runaway driver cannot exhaust memory with reports.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace softefa {

struct Violation {
    uint16_t qpn;
    uint32_t slot;  // SQ slot, doorbell value or CQ position, as the message says
    std::string what;
};

class ViolationLog {
public:
    static constexpr size_t kMax = 1000;
    void add(uint16_t qpn, uint32_t slot, std::string what) {
        std::lock_guard<std::mutex> g(mu_);
        total_++;
        if (list_.size() < kMax) list_.push_back({qpn, slot, std::move(what)});
    }
    std::vector<Violation> list() const {
        std::lock_guard<std::mutex> g(mu_);
        return list_;
    }
    // Counts every violation, including those past the kMax kept.
    size_t total() const {
        std::lock_guard<std::mutex> g(mu_);
        return total_;
    }

private:
    mutable std::mutex mu_;
    std::vector<Violation> list_;
    size_t total_ = 0;
};

}  // namespace softefa
