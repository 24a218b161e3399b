// The engine: one thread per process that is the emulated NIC's processing unit. It owns every operation in
// flight, moves payloads over the wire (wire.h) and through memory (hmem.h), validates what peers ask of this
// process (through Target), and completes operations (through OpSink) in the order the fault model chooses.
//
// Plug points (phase 2 adds the GDA path without a second engine, wire or set of counters):
//   - OpSink: who hears that an operation finished. RDM endpoints write libfabric CQ entries and counters; a GDA
//     queue pair will write a CQE into the GPU-visible completion ring (through native/softefa).
//   - Target: who answers a peer's message addressed to a QPN of this process. RDM endpoints check their AV,
//     the domain's keys and ranges; a GDA queue pair does the same for efa-direct (and write-with-immediate).
//   - Source: polled every engine iteration. A GDA queue pair's doorbell poller turns GPU-written WQEs into Ops
//     (path = Path::Gda) and submits them here; needs_spin() keeps the engine from sleeping while a GPU may ring.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "addr.h"
#include "hmem.h"
#include "placement.h"
#include "stats.h"
#include "wire.h"

namespace efaemu {

enum class OpKind : uint8_t { Write, Read, Send };

struct Op;

class OpSink {
public:
    virtual ~OpSink() = default;
    // Called on the engine thread, once per submitted Op, after the fault model released it. The sink owns the
    // Op afterwards (it may reuse or delete it).
    virtual void op_done(Op &op, uint32_t status) = 0;
};

struct Op {
    // Set by the poster.
    OpKind kind = OpKind::Write;
    Path path = Path::Rdm;
    OpSink *sink = nullptr;
    EpAddr src{};  // the posting endpoint
    EpAddr dst{};  // the remote endpoint
    uint64_t local = 0;  // local buffer address (for inject: inline_buf)
    MemRef mem;
    bool mem_known = false;  // false: the engine classifies `local` (never the application thread: no CUDA there)
    uint64_t len = 0;
    uint64_t remote_addr = 0, rkey = 0;
    uint64_t data = 0;
    bool has_data = false;
    uint32_t local_status = 0;  // nonzero: the NIC rejects it locally (e.g. bad lkey); completes with this
    std::vector<uint8_t> inline_buf;
    // Free for the sink (the RDM endpoint keeps the libfabric context and flags here).
    void *context = nullptr;
    uint64_t flags = 0;
    bool want_cq = true;

    // Engine state.
    uint64_t id = 0;
    uint64_t sent = 0;      // payload bytes pushed (write/send) or requested (read: 0/1 for the request)
    uint64_t received = 0;  // read: bytes placed
    uint64_t start_ns = 0;
    bool header_sent = false;
};

// Validation and placement at the target, for messages addressed to one QPN of this process.
class Target {
public:
    virtual ~Target() = default;
    // May initiator `src` access [addr, addr+len) with `rkey` (write or read)? On kOk, *mem says where it lives.
    // imm: a write with immediate data (a target that cannot take one answers RNR, as EFA does).
    virtual uint32_t rma_check(const EpAddr &src, uint64_t addr, uint64_t len, uint64_t rkey, bool write, bool imm,
                               MemRef *mem) = 0;
    // A remote write (all chunks placed) or read (fully served) completed at this target.
    virtual void rma_done(const EpAddr &src, bool write, uint64_t len, bool has_data, uint64_t data) = 0;
    // One chunk of a message. Returns the status to acknowledge with when the message is complete (kOk) or has
    // failed; *complete says whether an acknowledgement is due now.
    virtual uint32_t msg_chunk(const MsgHdr &h, const uint8_t *payload, bool *complete) = 0;
    // Called every engine iteration: deliver buffered messages to newly posted receives, and the like.
    virtual void progress() {}
    // For a state dump (engine lock held): one or more lines about this target, and findings that point at a stall.
    virtual void describe(std::string &, uint64_t /*now_ns*/, std::vector<std::string> * /*findings*/) {}
};

// Polled every engine iteration (engine thread, engine lock held). A GPU rings doorbells without waking anyone,
// so while sources exist the engine never sleeps longer than kSourcePollNs; needs_spin() keeps it from
// sleeping at all while a source is busy.
class Source {
public:
    virtual ~Source() = default;
    virtual size_t poll() = 0;  // returns the amount of work done (0: idle)
    virtual bool needs_spin() const = 0;
    // For a state dump (engine lock held), as Target::describe.
    virtual void describe(std::string &, uint64_t /*now_ns*/, std::vector<std::string> * /*findings*/) {}
};
constexpr int64_t kSourcePollNs = 200000;

class Engine : private PlacementHost {
public:
    static Engine &instance();

    // Creates this process's inbox on NIC `nic` (refcounted) and returns the GID peers reach it by.
    bool attach_nic(int nic, uint8_t gid[16], std::string *why);
    void detach_nic(int nic);

    // Registers a target on NIC `nic`; returns its QPN and qkey. remove_target() returns once the engine no
    // longer touches it; cancel() drops every Op of a sink without completing it (the sink is going away).
    uint16_t add_target(int nic, Target *t, uint32_t *qkey);
    void remove_target(int nic, uint16_t qpn);
    void cancel(OpSink *sink);

    // Any thread. The engine owns op until it calls op->sink->op_done.
    void submit(Op *op);
    // Wakes the engine (a receive was posted, a source has work).
    void kick();

    void add_source(Source *s);
    void remove_source(Source *s);

    // Stops the thread (provider cleanup).
    void shutdown();

    // The state dump's part (dump.h): waits at most 2 s for the engine lock; an engine that holds it that long
    // is reported as such.
    std::string describe(uint64_t now, std::vector<std::string> *findings);

private:
    Engine() = default;
    struct Peer;
    struct Out;
    struct Held;
    struct Nic;

    void run();
    void start_locked();
    size_t take_submissions();
    size_t drain_inboxes();
    size_t pump();
    size_t release_completions(uint64_t now, uint64_t *next_due);
    void check_peers(uint64_t now);

    void begin(Op *op, uint64_t now);
    void finish(Op *op, uint32_t status);  // into the fault model
    void deliver(Op *op, uint32_t status);  // to the sink
    void fail_peer_ops(Peer &p, uint32_t status);
    Peer &peer(const uint8_t gid[16]);
    void handle(Nic &nic, const MsgHdr &h, const uint8_t *payload);
    void reply(const Nic &nic, const MsgHdr &req, uint16_t type, uint32_t status, uint16_t flags);
    bool push_op_chunk(Peer &p, Op *op);
    bool push_read_chunk(Peer &p, Out &o);
    // PlacementHost: what the placement model (placement.h) asks of the engine.
    bool land(StagedWrite &w, bool again) override;
    void ack(StagedWrite &w) override;
    void dropped(StagedWrite &w) override;

    std::mutex mu_;  // engine state; held by the engine thread while it works
    std::mutex submit_mu_;
    std::vector<Op *> submitted_;
    std::thread thread_;
    bool running_ = false;
    std::map<int, std::unique_ptr<Nic>> nics_;
    std::map<std::string, std::unique_ptr<Peer>> peers_;  // by GID
    std::unordered_map<uint64_t, Op *> inflight_;       // by op id, awaiting an ack or read data
    std::vector<Held> held_;                             // completed, waiting for the fault model's release
    std::vector<Source *> sources_;
    Placement placement_{this};  // EFAEMU_PLACE_ORDER / _PLACE_DEFER_US / _DUPLICATE: when writes reach memory
    uint64_t next_id_ = 1;
    uint64_t ops_seen_ = 0;  // for EFAEMU_FAIL_EVERY
    uint64_t rng_ = 0;
    uint64_t last_check_ns_ = 0;
    uint32_t nonce_ = 0;
};

uint64_t now_ns();

}  // namespace efaemu
