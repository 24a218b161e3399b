// Completion order of a NIC that, like EFA (SRD), completes out of order. A Scheduler gets every fetched
// WQE in doorbell order and says which may complete (execute, then write its CQE) now, and in which order.
// The caller places a WQE's data immediately before writing its completion, so data is never late for its
// own completion but may be later than other WQEs' completions, which is what a real NIC does.
//
// Modes (parse_reorder spec):
//   inorder                completion in doorbell order
//   large:BYTES:N          a WQE of at least BYTES (suffix K/M/G allowed) completes only after N WQEs fetched
//                          after it have completed; smaller ones complete at once
//   reverse                the WQEs of each poll complete in reverse order
//   random:SEED[:WINDOW]   up to WINDOW (default 16) WQEs are held; past that, a seeded random one completes
//   pace:US                in order, at most one WQE per US microseconds, idle or not: a NIC that keeps completing,
//                          slowly (a busy receiver, a saturated link): what a bound on no progress must outlast
// Every held WQE but a paced one completes when the queue is idle (release(idle = true)): a real NIC completes
// eventually.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace softefa {

struct Reorder {
    enum Mode { InOrder, Large, Reverse, Random, Pace } mode = InOrder;
    uint64_t large_bytes = 0;  // Large: threshold
    uint32_t after = 0;        // Large: WQEs that complete first
    uint64_t seed = 0;         // Random
    uint32_t window = 16;      // Random: WQEs held at most
    uint64_t pace_us = 0;      // Pace: microseconds between completions
    // A threaded server (Device::start) treats a queue as idle when no new doorbell came for this long.
    uint32_t idle_us = 200;
};

// Parses a mode spec (see above). Returns false with *why on a malformed one.
bool parse_reorder(const std::string &spec, Reorder *out, std::string *why);
std::string to_string(const Reorder &r);

class Scheduler {
public:
    explicit Scheduler(const Reorder &r) : r_(r), rng_(r.seed) {}
    // A fetched WQE, in doorbell order; id is the caller's handle, bytes its length.
    void add(uint64_t id, uint64_t bytes) { items_.push_back({id, bytes, 0}); }
    // Appends to out the ids that complete now, in completion order. idle: release everything held.
    void release(std::vector<uint64_t> &out, bool idle);
    size_t held() const { return items_.size(); }

private:
    struct Item {
        uint64_t id, bytes;
        uint32_t later_done;  // Large: WQEs fetched after this one that completed
    };
    void take(size_t i, std::vector<uint64_t> &out);
    Reorder r_;
    std::mt19937_64 rng_;
    std::chrono::steady_clock::time_point last_{};  // Pace: the last completion
    std::vector<Item> items_;
};

}  // namespace softefa
