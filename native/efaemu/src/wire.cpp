#include "wire.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>

namespace efaemu {

namespace {

constexpr uint64_t kMagic = 0x3175656d65616665ull;  // "efaemu1" little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kSlotSize = sizeof(MsgHdr) + kSlotPayload;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "cross-process ring needs lock-free 64-bit atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "cross-process futex word needs lock-free atomics");

long futex(std::atomic<uint32_t> *addr, int op, uint32_t val, const struct timespec *ts) {
    // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
    return syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

struct Cell {
    std::atomic<uint64_t> seq;
    uint64_t pad[7];  // one cache line per cell: producers of neighbouring slots do not false-share
};

struct InboxHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t nslots;
    uint32_t slot_size;
    int32_t owner_pid;
    uint8_t gid[16];
    std::atomic<uint32_t> alive;     // cleared by the owner before it unmaps: senders stop and fail their ops
    std::atomic<uint32_t> wake;      // futex word bumped by producers
    std::atomic<uint32_t> sleeping;  // the owner is (about to be) asleep on `wake`
    alignas(64) std::atomic<uint64_t> enq;
    alignas(64) Cell cells[kSlots];
    // followed by kSlots * slot_size bytes of slots, 64-byte aligned
};

static uint8_t *slot_ptr(InboxHeader *h, uint64_t pos) {
    return reinterpret_cast<uint8_t *>(h) + sizeof(InboxHeader) + (pos & (kSlots - 1)) * (size_t)h->slot_size;
}

static size_t segment_len() {
    size_t slot = (kSlotSize + 63) & ~size_t(63);
    return sizeof(InboxHeader) + kSlots * slot;
}

bool Inbox::create(const uint8_t gid[16], std::string *why) {
    name_ = inbox_name(gid);
    map_len_ = segment_len();
    shm_unlink(name_.c_str());  // a stale segment of a dead process with a recycled pid and nonce
    int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        *why = "shm_open(" + name_ + "): " + strerror(errno);
        return false;
    }
    if (ftruncate(fd, (off_t)map_len_) != 0) {
        *why = "ftruncate(" + name_ + "): " + strerror(errno);
        ::close(fd);
        shm_unlink(name_.c_str());
        return false;
    }
    void *p = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
        *why = "mmap(" + name_ + "): " + strerror(errno);
        shm_unlink(name_.c_str());
        return false;
    }
    hdr_ = new (p) InboxHeader;
    hdr_->magic = 0;  // published last, after the ring is initialised
    hdr_->version = kVersion;
    hdr_->nslots = kSlots;
    hdr_->slot_size = (uint32_t)((kSlotSize + 63) & ~size_t(63));
    hdr_->owner_pid = (int32_t)getpid();
    memcpy(hdr_->gid, gid, 16);
    hdr_->wake.store(0);
    hdr_->sleeping.store(0);
    hdr_->enq.store(0);
    for (uint32_t i = 0; i < kSlots; i++) hdr_->cells[i].seq.store(i, std::memory_order_relaxed);
    deq_ = 0;
    hdr_->alive.store(1, std::memory_order_release);
    __atomic_store_n(&hdr_->magic, kMagic, __ATOMIC_RELEASE);
    return true;
}

void Inbox::close_name() {
    if (!hdr_ || name_.empty()) return;
    hdr_->alive.store(0, std::memory_order_release);
    shm_unlink(name_.c_str());
    name_.clear();
}

void Inbox::destroy() {
    if (!hdr_) return;
    close_name();
    munmap(hdr_, map_len_);
    hdr_ = nullptr;
}

uint64_t Inbox::pending() const { return hdr_ ? hdr_->enq.load(std::memory_order_acquire) - deq_ : 0; }

bool Inbox::has_message() const {
    const Cell &c = hdr_->cells[deq_ & (kSlots - 1)];
    return c.seq.load(std::memory_order_acquire) == deq_ + 1;
}

size_t Inbox::drain(const std::function<void(const MsgHdr &, const uint8_t *)> &fn, size_t max) {
    size_t n = 0;
    while (n < max && has_message()) {
        const uint8_t *slot = slot_ptr(hdr_, deq_);
        MsgHdr h;
        memcpy(&h, slot, sizeof h);
        fn(h, slot + sizeof(MsgHdr));
        hdr_->cells[deq_ & (kSlots - 1)].seq.store(deq_ + kSlots, std::memory_order_release);
        deq_++;
        n++;
    }
    return n;
}

void Inbox::sleep(int64_t timeout_ns, bool (*more_work)()) {
    uint32_t seen = hdr_->wake.load(std::memory_order_acquire);
    hdr_->sleeping.store(1, std::memory_order_seq_cst);
    if (!has_message() && !more_work()) {
        struct timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
        futex(&hdr_->wake, FUTEX_WAIT, seen, &ts);
    }
    hdr_->sleeping.store(0, std::memory_order_relaxed);
}

void Inbox::wake() {
    hdr_->wake.fetch_add(1, std::memory_order_seq_cst);
    if (hdr_->sleeping.load(std::memory_order_seq_cst)) futex(&hdr_->wake, FUTEX_WAKE, INT_MAX, nullptr);
}

bool PeerLink::open(const uint8_t gid[16], std::string *why) {
    std::string name = inbox_name(gid);
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
        *why = "no inbox " + name + " (" + strerror(errno) + ")";
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(InboxHeader)) {
        *why = "inbox " + name + " is not initialised";
        ::close(fd);
        return false;
    }
    map_len_ = (size_t)st.st_size;
    void *p = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
        *why = "mmap(" + name + "): " + strerror(errno);
        return false;
    }
    hdr_ = static_cast<InboxHeader *>(p);
    if (__atomic_load_n(&hdr_->magic, __ATOMIC_ACQUIRE) != kMagic || hdr_->version != kVersion ||
        hdr_->nslots != kSlots || memcmp(hdr_->gid, gid, 16) != 0 || map_len_ != segment_len()) {
        *why = "inbox " + name + " has another layout (a different efaemu build?)";
        close();
        return false;
    }
    return true;
}

void PeerLink::close() {
    if (hdr_) munmap(hdr_, map_len_);
    hdr_ = nullptr;
}

bool PeerLink::alive() const {
    if (!hdr_ || !hdr_->alive.load(std::memory_order_acquire)) return false;
    // The owner may have died without clearing `alive` (killed): ask the kernel.
    return kill(hdr_->owner_pid, 0) == 0 || errno != ESRCH;
}

int PeerLink::owner_pid() const { return hdr_ ? hdr_->owner_pid : -1; }

bool PeerLink::push(const MsgHdr &h, const std::function<bool(uint8_t *)> &fill) {
    if (!hdr_ || !hdr_->alive.load(std::memory_order_acquire)) return false;
    uint64_t pos = hdr_->enq.load(std::memory_order_relaxed);
    for (;;) {
        Cell &c = hdr_->cells[pos & (kSlots - 1)];
        uint64_t seq = c.seq.load(std::memory_order_acquire);
        int64_t diff = (int64_t)seq - (int64_t)pos;
        if (diff == 0) {
            if (hdr_->enq.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
        } else if (diff < 0) {
            return false;  // full
        } else {
            pos = hdr_->enq.load(std::memory_order_relaxed);
        }
    }
    uint8_t *slot = slot_ptr(hdr_, pos);
    MsgHdr out = h;
    if (h.len && !fill(slot + sizeof(MsgHdr))) out.status = 2;  // kLocalQpInternalError: payload not produced
    memcpy(slot, &out, sizeof out);
    hdr_->cells[pos & (kSlots - 1)].seq.store(pos + 1, std::memory_order_release);
    hdr_->wake.fetch_add(1, std::memory_order_seq_cst);
    if (hdr_->sleeping.load(std::memory_order_seq_cst)) futex(&hdr_->wake, FUTEX_WAKE, INT_MAX, nullptr);
    return true;
}

}  // namespace efaemu
