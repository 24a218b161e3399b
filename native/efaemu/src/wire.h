// The wire between emulated NICs on one host: every (process, NIC) owns an inbox, a POSIX shared-memory segment
// (/dev/shm/efaemu-<gid>) holding a bounded multi-producer / single-consumer ring of fixed-size slots. Peers'
// engines push messages (headers plus up to one chunk of payload) into it; the owner's engine drains it in
// order. One ring per receiver keeps discovery trivial (the address names the inbox) and preserves per-sender
// FIFO order, which the RDM message ordering (FI_ORDER_SAS) and the "last chunk acks" rule rely on.
//
// Payloads are staged through the slots: the sender's engine copies from its own memory (host or its own GPU)
// into the slot, the receiver's engine copies from the slot into its own memory. No process ever maps another
// process's buffers, which is what lets GPU memory that CUDA IPC cannot export (NVSHMEM's cuMem heap) travel.
//
// Ring algorithm: Vyukov's bounded queue (per-cell sequence numbers), with lock-free 64-bit atomics that are
// address-free on x86-64 and so valid across processes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "addr.h"

namespace efaemu {

enum MsgType : uint16_t {
    kMsgWrite = 1,     // RMA write chunk (initiator -> target)
    kMsgReadReq = 2,   // RMA read request (initiator -> target)
    kMsgReadResp = 3,  // RMA read data chunk or error (target -> initiator)
    kMsgSend = 4,      // message chunk (initiator -> target)
    kMsgAck = 5,       // completion of a write or send at the target (target -> initiator)
};

enum MsgFlags : uint16_t {
    kFlagLast = 1 << 0,        // last chunk of the operation
    kFlagRemoteData = 1 << 1,  // carries remote CQ data (fi_writedata / fi_senddata)
    kFlagPathGda = 1 << 2,     // issued by a GDA queue pair (phase 2), counted on the GDA path
};

struct MsgHdr {
    uint16_t type;
    uint16_t flags;
    uint32_t status;       // for acks and read responses: the target's verdict (Status)
    EpAddr src;            // initiator endpoint (for acks/responses: the responding endpoint)
    uint16_t dst_qpn;      // endpoint inside the receiving inbox
    uint16_t pad0;
    uint32_t dst_qkey;
    uint64_t op_id;        // initiator-side operation id, echoed in acks and responses
    uint64_t remote_addr;  // target virtual address of the whole operation (RMA)
    uint64_t rkey;
    uint64_t total_len;    // bytes of the whole operation
    uint64_t offset;       // of this chunk within the operation
    uint32_t len;          // payload bytes following the header in this slot
    uint32_t pad1;
    uint64_t data;         // remote CQ data
};
static_assert(sizeof(MsgHdr) % 8 == 0, "MsgHdr is 8-byte aligned");

constexpr uint32_t kSlotPayload = 64 * 1024;  // bytes of payload per message (the chunk size)
constexpr uint32_t kSlots = 64;               // power of two

struct InboxHeader;

// The owner's side: creates the segment, drains it, sleeps on it.
class Inbox {
public:
    Inbox() = default;
    ~Inbox() { destroy(); }
    Inbox(const Inbox &) = delete;
    Inbox &operator=(const Inbox &) = delete;

    // Creates /dev/shm/efaemu-<gid>. Returns false with *why on failure.
    bool create(const uint8_t gid[16], std::string *why);
    // Tells senders the owner is gone and removes the name; the mapping stays until destroy().
    void close_name();
    void destroy();

    // Calls fn for every published message in order, releasing each slot after fn returns; at most `max`.
    size_t drain(const std::function<void(const MsgHdr &, const uint8_t *payload)> &fn, size_t max);

    // Futex sleep until a producer or wake() wakes us or timeout_ns passes. Returns at once if a message is
    // waiting or more_work() (checked after announcing the sleep, so no wake-up is lost) says so.
    void sleep(int64_t timeout_ns, bool (*more_work)());
    // Wakes the owner (used by local threads that queued work for the engine).
    void wake();

    bool valid() const { return hdr_ != nullptr; }
    // Messages published or being written and not yet drained (for a state dump).
    uint64_t pending() const;

private:
    bool has_message() const;
    InboxHeader *hdr_ = nullptr;
    size_t map_len_ = 0;
    std::string name_;
    uint64_t deq_ = 0;
};

// A sender's view of a peer's inbox.
class PeerLink {
public:
    PeerLink() = default;
    ~PeerLink() { close(); }
    PeerLink(const PeerLink &) = delete;
    PeerLink &operator=(const PeerLink &) = delete;

    // Maps the inbox of the process behind gid. False when it does not exist (never did, or its owner left).
    bool open(const uint8_t gid[16], std::string *why);
    void close();
    bool alive() const;
    int owner_pid() const;

    // Reserves a slot, lets fill() write the payload (len bytes) into it, publishes it and wakes the owner.
    // Returns false when the ring is full (try again later) or the owner closed it. fill() returns false when
    // it could not produce the payload; the slot is then published with header status kLocalQpInternalError.
    bool push(const MsgHdr &h, const std::function<bool(uint8_t *dst)> &fill);

private:
    InboxHeader *hdr_ = nullptr;
    size_t map_len_ = 0;
};

}  // namespace efaemu
