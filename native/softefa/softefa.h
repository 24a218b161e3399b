// Software EFA: a host-side model of the EFA NIC's send-queue, doorbell and completion-queue behaviour, strict
// enough to catch a device-side post path that would misbehave on the real NIC. It reads WQEs from the
// ring exactly at the slots the doorbell announces, checks every bit the NIC checks (and the MBZ bits it
// could start using), performs RDMA read / write / write-with-immediate through a Memory backend, and writes
// CQEs with the phase bit the device code must expect.
//
// Protocol violations (malformed WQE, doorbell going backwards, a doorbell covering more than max_batch new
// WQEs or unwritten slots, a slot reused before its completion, more than max_batch WQEs written past the
// doorbell) are recorded as violations. Driven by poll_once() after each ring, every doorbell value is
// seen; served by start()'s thread, writes between two polls coalesce, so the per-doorbell max_batch rule
// is checked as "never more than max_batch WQEs staged past the doorbell" in snapshots taken while the
// doorbell stands still, which any doorbell covering more than max_batch implies. The offending WQE still
// completes
// with an error status, so the device side never hangs on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace softefa {

// Where data and CQEs go. The CPU backend is plain memcpy; the CUDA backend copies between GPU buffers.
class Memory {
public:
    virtual ~Memory() = default;
    // Copies len bytes between device-visible addresses (both may be GPU memory).
    virtual void copy(uint64_t dst, uint64_t src, uint64_t len) = 0;
    // Writes a completion entry so that its byte at flags_offset (holding the phase bit) becomes visible
    // only after the rest of the entry and after every copy issued before it.
    virtual void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) = 0;
    // Waits for everything issued so far.
    virtual void flush() = 0;
};

class HostMemory final : public Memory {
public:
    void copy(uint64_t dst, uint64_t src, uint64_t len) override;
    void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) override;
    void flush() override {}
};

struct Region {
    uint32_t key;       // lkey and rkey (24 bits used as lkey)
    uint64_t base;
    uint64_t length;
    bool remote_read;
    bool remote_write;
};

struct QpConfig {
    uint8_t *sq;            // host view of the ring the device writes (entries * 64 bytes)
    volatile uint32_t *db;  // host view of the doorbell register
    uint32_t sq_entries;    // power of two
    uint32_t max_batch;
    uint8_t *cq;            // TX CQ, written through Memory::write_cqe
    uint32_t cq_entries;    // power of two
    uint32_t cq_entry_size;
    uint8_t *rx_cq;         // RX CQ for write-with-immediate (nullptr: such writes fail at the target)
    uint32_t rx_cq_entries;
    uint32_t rx_cq_entry_size;
    uint16_t qpn, ah;       // this QP's address as peers use it
    uint32_t qkey;
    uint64_t max_rdma_size;
};

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

// Decodes one 64-byte WQE read from slot `slot` of a ring of 2^log2_entries. Returns false with *why set
// when the NIC would reject it or it is not an RDMA WQE this model executes.
bool parse_wqe(const uint8_t *wqe, uint32_t slot, uint32_t log2_entries, ParsedWqe *out, std::string *why);

struct Violation {
    uint16_t qpn;
    uint32_t slot;
    std::string what;
};

struct Stats {
    uint64_t wqes = 0, bytes = 0, doorbells = 0, errors = 0;
};

class Device {
public:
    explicit Device(Memory &mem) : mem_(mem) {}
    ~Device() { stop(); }
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    void add_region(const Region &r);
    // Returns the index of the QP. Must be called before start().
    int add_qp(const QpConfig &cfg);

    // Serves every doorbell rung since the last call; returns the number of WQEs executed.
    size_t poll_once();
    void start();
    void stop();

    std::vector<Violation> violations() const;
    Stats stats() const;

private:
    struct Qp {
        QpConfig cfg;
        uint32_t log2 = 0, cq_log2 = 0, rx_log2 = 0;
        uint32_t seen_db = 0;     // last doorbell value served
        uint32_t completed = 0;   // WQEs completed (TX CQEs written)
        uint32_t cq_tail = 0, rx_tail = 0;
        bool warned_ahead = false;
    };
    uint8_t execute(Qp &qp, const ParsedWqe &w);
    void complete_tx(Qp &qp, uint16_t req_id, uint8_t status, uint8_t op);
    void complete_rx(Qp &target, const Qp &src, uint32_t imm, uint32_t length, uint8_t status);
    const Region *find_region(uint32_t key, uint64_t addr, uint64_t len) const;
    void violation(const Qp &qp, uint32_t slot, std::string what);
    void violation_locked(const Qp &qp, uint32_t slot, std::string what);  // mu_ held

    Memory &mem_;
    std::vector<Region> regions_;
    std::vector<Qp> qps_;
    mutable std::mutex mu_;
    std::vector<Violation> violations_;
    Stats stats_;
    std::atomic<bool> running_{false};
    bool threaded_ = false;  // served by start()'s thread: intermediate doorbell values may go unseen
    std::thread thread_;
};

}  // namespace softefa
