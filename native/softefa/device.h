// An in-process software EFA NIC: memory regions, QPs (send queue + TX CQ + optional RX CQ for RDMA write
// with immediate), each QP's address vector, and the execution of RDMA read / write / write-with-immediate
// between its own QPs, with completion reordering (reorder.h), QP errors and RX CQ overruns.
//
// Per fetched WQE, when the Scheduler releases it: the NIC's checks in the order a real NIC meets them
// (AH, destination QP, qkey, length, lkey; at the target: the initiator in its AV, else UNKNOWN_PEER; rkey
// range and access; an RX CQ for an immediate), then the data, then the RX CQE at the target, then the TX
// CQE. A WQE the NIC rejects as malformed, or the first WQE fetched after a max_batch rule was broken
// (send_queue.h), completes with QP_INTERNAL_ERROR and puts the QP in the error state, like set_qp_error():
// from then on every WQE, held or new, completes FLUSHED and moves nothing.
//
// Driving it: call poll_once() after ringing (every doorbell value is seen, held completions stay held
// until drain()), or start() a thread that polls (held completions are also released once a queue has been
// idle for Reorder::idle_us). Another component (an emulator whose targets live in other processes) can
// instead compose SendQueue, CompletionQueue and Scheduler itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "completion_queue.h"
#include "memory.h"
#include "reorder.h"
#include "send_queue.h"
#include "violation.h"

namespace softefa {

struct Region {
    uint32_t key;  // lkey and rkey (24 bits used as lkey)
    uint64_t base;
    uint64_t length;
    bool remote_read;
    bool remote_write;
};

struct QpConfig {
    uint8_t *sq;            // host view of the ring the device writes (sq_entries * wqe_size bytes)
    volatile uint32_t *db;  // host view of the doorbell register
    uint32_t sq_entries;    // power of two
    uint32_t max_batch;
    uint8_t *cq;            // TX CQ, written through Memory::write_cqe
    uint32_t cq_entries;    // power of two, >= sq_entries
    uint32_t cq_entry_size;
    uint8_t *rx_cq;         // RX CQ for write-with-immediate (nullptr: such writes fail with RNR)
    uint32_t rx_cq_entries;
    uint32_t rx_cq_entry_size;
    uint16_t qpn, ah;       // this QP's address as peers use it
    uint32_t qkey;
    uint64_t max_rdma_size;
    uint32_t wqe_size = 64;                    // 64, or 128 on wide-WQE devices
    std::function<uint32_t()> rx_consumed;     // optional: RX CQ entries the consumer took (overrun check)
};

struct Stats {
    uint64_t wqes = 0, bytes = 0, doorbells = 0, errors = 0;
    uint64_t reordered = 0;    // completions written while a WQE fetched earlier on the QP was still held
    uint64_t max_held = 0;     // most WQEs held back at once on one QP
    uint64_t flushed = 0;      // completions with status FLUSHED
    uint64_t unknown_peer = 0; // WQEs refused because the target had not inserted the initiator
    uint64_t rx_overruns = 0;  // RX CQEs written over entries the consumer had not taken
};

class Device {
public:
    explicit Device(Memory &mem) : mem_(mem) {}
    ~Device() { stop(); }
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    void add_region(const Region &r);
    // Returns the QP's index. Before start().
    int add_qp(const QpConfig &cfg);
    // Completion order for every QP. Before start() and before any WQE is fetched.
    void set_reorder(const Reorder &r);
    // The QP's address vector: the initiators whose RDMA this QP accepts as a target (fi_av_insert on the
    // target's side). An initiator not inserted gets REMOTE_ERROR_UNKNOWN_PEER.
    void av_insert(int qp, uint16_t ah, uint16_t qpn);
    void av_remove(int qp, uint16_t ah, uint16_t qpn);
    // Puts the QP in the error state (fault injection): every WQE held or fetched later completes FLUSHED.
    void set_qp_error(int qp);
    bool qp_in_error(int qp) const;

    // Serves every doorbell rung since the last call; returns the number of WQEs completed.
    size_t poll_once();
    // Completes every held WQE now (a poll_once() driver's "the NIC finishes eventually").
    size_t drain();
    void start();
    void stop();

    std::vector<Violation> violations() const { return log_.list(); }
    Stats stats() const;

private:
    struct Qp {
        QpConfig cfg;
        std::unique_ptr<SendQueue> sq;
        std::unique_ptr<CompletionQueue> cq, rx;
        std::unique_ptr<Scheduler> sched;
        std::map<uint64_t, FetchedWqe> pending;  // fetched, not completed, by fetch order
        uint64_t next_id = 0;
        std::set<std::pair<uint16_t, uint16_t>> av;  // (ah, qpn) of inserted initiators
        bool error = false;
        std::chrono::steady_clock::time_point last_new;
    };
    size_t serve(Qp &qp, bool idle);
    void complete(Qp &qp, const FetchedWqe &f, bool overtook);
    uint8_t execute(Qp &qp, const ParsedWqe &w);
    const Region *find_region(uint32_t key, uint64_t addr, uint64_t len) const;

    Memory &mem_;
    std::vector<Region> regions_;
    std::vector<std::unique_ptr<Qp>> qps_;
    Reorder reorder_;
    mutable std::mutex mu_;
    ViolationLog log_;
    Stats stats_;
    std::atomic<bool> running_{false};
    bool threaded_ = false;  // served by start()'s thread: intermediate doorbell values may go unseen
    std::thread thread_;
};

}  // namespace softefa
