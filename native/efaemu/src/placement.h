// When a remote write's bytes reach target memory: the placement model of the emulated NIC's target side.
//
// EFA places data unordered (fi_efa(7): SRD and efa-direct "unordered"), its write completion means only that the
// data is "queued towards the receiver's PCIe" (NCCL's efa_gda putImplMode comment), and it promises delivery once
// only with FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES. Without a mode the engine is kinder than that: it places
// each chunk on arrival, in post order, and acks after the last. With a mode the target stages every write (its
// chunks copied out of the inbox slot) until the last chunk arrived, then runs it through three optional stages:
//
//   1. network order (EFAEMU_PLACE_ORDER=random:SEED[:WINDOW]): the complete writes of one initiator to one target
//      NIC wait a random hold (kHoldMinNs..kHoldMaxNs) and reach the NIC in a random order among the oldest WINDOW;
//   2. the NIC (EFAEMU_PLACE_DEFER_US=MIN-MAX): the NIC acks at once and lands the bytes MIN..MAX us later, FIFO per
//      target NIC (PCIe posted writes of one requester stay in order; nothing orders two NICs, or a NIC and the CPU).
//      A read request this NIC serves first lands every deferred write of the NIC (a read does not pass posted
//      writes). Without this stage the bytes land at once and the ack follows;
//   3. landing: the bytes into target memory, then (first landing only) the write-with-immediate's RX completion and
//      the ack if not yet sent. EFAEMU_DUPLICATE=RATE[:MAX_US] lands the same bytes once more, with probability RATE,
//      within MAX_US (no second RX completion).
//
// Sends and read responses are never staged: the target's CPU sees messages without waiting for deferred writes.
// Staged bytes are bounded (kStageCapBytes): a write that does not fit is placed directly as without a mode (the
// NIC's deferred writes landed first to keep its FIFO) and counted. Partial writes of an initiator that died, and
// writes for an endpoint or NIC that closed, are dropped and counted.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stats.h"
#include "wire.h"

namespace efaemu {

struct StagedWrite {
    MsgHdr h{};  // the first chunk's header: initiator, target QPN/qkey, op id, address, key, length, immediate
    int nic = 0;  // the target NIC (index) it arrived at
    Path path = Path::Rdm;
    std::vector<uint8_t> bytes;
    uint64_t got = 0;        // bytes staged so far
    uint64_t first_ns = 0;   // first chunk's arrival
    uint64_t seq = 0;        // complete-arrival order within its initiator/NIC set
    uint64_t ready_ns = 0;   // network order: may reach the NIC from here on
    uint64_t due_ns = 0;     // deferred: lands at; duplicate: lands again at
    bool acked = false;
    bool landed = false;
};

// What the engine does for the model (engine thread, engine lock held).
class PlacementHost {
public:
    virtual ~PlacementHost() = default;
    // Copies w.bytes into target memory. First landing (again == false): also the RX completion of an immediate,
    // the statistics and, unless w.acked, the ack. Returns false when the target or its memory is gone (nothing
    // placed; an ack not yet sent then carries the error).
    virtual bool land(StagedWrite &w, bool again) = 0;
    // Sends the ack (status kOk) before the bytes landed (the deferred stage).
    virtual void ack(StagedWrite &w) = 0;
    // The model dropped w (its endpoint, NIC or initiator is gone); an ack not yet sent goes out as an error.
    virtual void dropped(StagedWrite &w) = 0;
};

class Placement {
public:
    static constexpr uint64_t kHoldMinNs = 10000, kHoldMaxNs = 300000;  // network order: random hold per write
    static constexpr uint64_t kStageCapBytes = 128ull << 20;         // staged payload bytes, all stages together

    explicit Placement(PlacementHost *host) : host_(host) {}
    // Reads the configuration (once, at the first NIC).
    void configure();
    bool active() const { return order_ || defer_ || dup_rate_ > 0; }

    // The first chunk (offset 0) of a write that passed the target's checks: staged (returns it) or, over the cap,
    // not (nullptr: the engine places it directly; this NIC's deferred writes have been landed first).
    StagedWrite *begin(int nic, Path path, const MsgHdr &h, uint64_t now);
    // A later chunk: its staged write, or nullptr when the write is not staged.
    StagedWrite *find(int nic, const MsgHdr &h);
    // Copies one chunk in; the last one hands the write to the stages.
    void chunk(StagedWrite *w, const MsgHdr &h, const uint8_t *payload, uint64_t now);

    // Lands every deferred write of `nic` now, in order (a read request at that NIC, a write placed directly).
    void flush_nic(int nic, uint64_t now);
    // Moves writes whose time has come; lowers *next_due to the next moment something is due. Returns the work done.
    size_t step(uint64_t now, uint64_t *next_due);
    // An endpoint (nic, qpn) or a whole NIC closed: drop its writes (acks not yet sent go out as errors by the host).
    void drop_target(int nic, uint16_t qpn);
    void drop_nic(int nic);
    // Drops partial writes whose initiator process is gone, or older than timeout_ns.
    void reap(uint64_t now, uint64_t timeout_ns);

    // For a state dump: one line, and a finding when something waits far longer than the model allows.
    void describe(std::string &out, uint64_t now, std::vector<std::string> *findings) const;

private:
    struct Set {  // network order: complete writes of one initiator to one target NIC, in arrival order
        std::deque<StagedWrite *> q;
        uint64_t next_seq = 0;
    };
    uint64_t rand(uint64_t lo, uint64_t hi);
    std::string key(int nic, const MsgHdr &h) const;
    void arrived(StagedWrite *w, uint64_t now);     // all bytes staged
    void reach_nic(StagedWrite *w, uint64_t now);   // out of the network stage
    void land(StagedWrite *w, uint64_t now);        // first landing, then duplicate or free
    void release(StagedWrite *w);
    void drop_if(const std::function<bool(const StagedWrite &)> &doomed);

    PlacementHost *host_;
    bool order_ = false, defer_ = false;
    uint32_t window_ = 8;
    uint64_t defer_min_ = 0, defer_max_ = 0;
    double dup_rate_ = 0;
    uint64_t dup_max_ = 0;
    uint64_t rng_ = 1;
    uint64_t staged_bytes_ = 0;

    std::map<std::string, std::unique_ptr<StagedWrite>> all_;  // every write the model holds, by nic/initiator/op
    std::map<std::string, StagedWrite *> partial_;             // chunks still arriving
    std::map<std::string, Set> net_;                           // stage 1, by initiator and target NIC
    std::map<int, std::deque<StagedWrite *>> nic_;             // stage 2, FIFO per target NIC
    std::vector<StagedWrite *> dups_;                          // landed, to land once more
};

}  // namespace efaemu
