// efa-direct's device interface: fi_open_ops(FI_EFA_GDA_OPS) with query_addr, query_qp_wqs, query_cq,
// cq_open_ext and get_mr_lkey (libfabric v2.3.0 prov/efa/src/efa_domain.c), and the queue pairs a device
// (a GPU kernel) drives through them.
//
// The NIC's queues are native/softefa's model, not a second copy: a SendQueue reads the LLQ ring at doorbell
// time with every check the NIC makes, a Scheduler decides the completion order, a CompletionQueue writes
// phase-correct CQEs. What softefa's in-process Device does with its own targets, the engine does across
// processes: each WQE becomes an engine Op on the GDA path of the same wire as the RDM path (same counters,
// same fault injection), the target checks AV, key, range and domain and places the data, and only its
// acknowledgement lets the initiator's CQE be written.
//
// Memory the device owns:
//   - SQ ring and doorbell: a /dev/shm/efaemu-<gid>-sq<qpn> mapping (ring pages, then a doorbell page), the
//     "BAR" the host code maps for the GPU with cuMemHostRegister(IOMEMORY|DEVICEMAP), which the test-only
//     interposer lets through for these pages only.
//   - CQ rings: cq_open_ext over a dma-buf fd of GPU memory. mmap of a GPU dma-buf fails on the GPU hosts,
//     so the emulator asks the test-only interposer (efaemu_dmabuf_lookup, same process) for the device
//     address behind the fd and writes CQEs with CUDA copies on the engine's private stream, body first and
//     the phase byte last. With ext_mem_dmabuf.buffer set (a CPU-visible address, as the real provider
//     allows), the ring is that host memory.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "config.h"
#include "dump.h"
#include "efaemu.h"
#include "mr_lkey.h"
#include "status.h"

#if defined(__has_include)
#if __has_include(<rdma/fi_ext_efa.h>)
#include <rdma/fi_ext_efa.h>
#endif
#endif

#include "completion_queue.h"
#include "memory.h"
#include "nvshmemx_efa_gda_wqe.h"
#include "reorder.h"
#include "send_queue.h"
#include "violation.h"

namespace efaemu {

uint64_t now_ns();

namespace {

constexpr uint32_t kCqeSize = 32;          // efa_io_rx_cdesc_ex: the device's CQE size
constexpr uint32_t kMaxBatch = 16;         // WQEs one doorbell may cover (the LLQ's max_batch on p5)
constexpr uint64_t kMaxRdmaSize = 1ull << 30;
constexpr uint64_t kIdleNs = 1000000;      // a reordering Scheduler releases what it holds after 1 ms of quiet
constexpr uint64_t kBusyNs = 5000000;      // the engine keeps spinning this long after a doorbell
constexpr size_t kViolationsPrinted = 20;

// Where a CQ ring lives: host memory (written with stores) or GPU memory (CUDA copies on the engine's private
// stream). write_cqe keeps the NIC's order: the body, then the byte holding the phase bit.
class CqeWriter final : public softefa::Memory {
public:
    explicit CqeWriter(MemRef m) : mem_(m) {}
    void copy(uint64_t, uint64_t, uint64_t) override {
        fprintf(stderr, "efaemu: internal error: payloads travel over the wire, not through the CQ writer\n");
        abort();
    }
    void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) override {
        const uint64_t a = reinterpret_cast<uint64_t>(dst);
        if (mem_.kind == MemKind::Host) {
            __atomic_thread_fence(__ATOMIC_RELEASE);
            for (size_t i = 0; i < size; i++)
                if (i != flags_offset) reinterpret_cast<volatile uint8_t *>(dst)[i] = entry[i];
            __atomic_thread_fence(__ATOMIC_RELEASE);
            __atomic_store_n(dst + flags_offset, entry[flags_offset], __ATOMIC_RELEASE);
            return;
        }
        std::string why;
        bool ok = hmem::copy_from_host_async(a, mem_, entry, flags_offset, &why) &&
                  hmem::copy_from_host_async(a + flags_offset + 1, mem_, entry + flags_offset + 1, size - flags_offset - 1, &why) &&
                  hmem::copy_from_host_async(a + flags_offset, mem_, entry + flags_offset, 1, &why) && hmem::sync(mem_, &why);
        if (!ok) EFA_WARN(FI_LOG_CQ, "writing a CQE into GPU memory at 0x%llx failed: %s", (unsigned long long)a, why.c_str());
    }
    void flush() override {}

private:
    MemRef mem_;
};

softefa::Reorder gda_order() {
    const Config &c = config();
    softefa::Reorder r;
    if (!c.gda_order.empty()) {
        std::string why;
        softefa::parse_reorder(c.gda_order, &r, &why);  // validated when the configuration was read
    } else if (c.reorder) {
        r.mode = softefa::Reorder::Random;
        r.seed = c.seed;
        r.window = c.reorder;
    }
    return r;
}

}  // namespace

struct GdaRing {
    uint64_t base = 0;  // host pointer or device address of entry 0
    MemRef mem;
    uint32_t entries = 0, entry_size = 0;
    std::unique_ptr<CqeWriter> writer;
    std::unique_ptr<softefa::CompletionQueue> cq;
};

void gda_ring_free(GdaRing *r) { delete r; }

class GdaQp final : public Source, public OpSink {
public:
    GdaQp(Domain *d, const EpAddr &self, Cq *tx) : d_(d), self_(self), tx_(tx), sched_(gda_order()) {}
    ~GdaQp() override {
        if (map_) munmap(map_, map_len_);
    }

    bool init(uint32_t entries, std::string *why) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t ring_bytes = ((size_t)entries * wqe_size_ + page - 1) & ~(page - 1);
        map_len_ = ring_bytes + page;  // the doorbell on a page of its own, as in the NIC's BAR
        const std::string name = inbox_name(self_.gid) + "-sq" + std::to_string(self_.qpn);
        shm_unlink(name.c_str());
        int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0) {
            *why = "shm_open(" + name + "): " + strerror(errno);
            return false;
        }
        bool ok = ftruncate(fd, (off_t)map_len_) == 0;
        void *p = ok ? mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        const int err = errno;
        close(fd);
        shm_unlink(name.c_str());  // the mapping stays (and still names /dev/shm/efaemu-*); nothing is left behind
        if (p == MAP_FAILED) {
            *why = "mapping " + name + ": " + strerror(err);
            return false;
        }
        map_ = static_cast<uint8_t *>(p);
        ring_ = map_;
        db_ = reinterpret_cast<uint32_t *>(map_ + ring_bytes);
        entries_ = entries;
        try {
            sq_.reset(new softefa::SendQueue({ring_, db_, entries, wqe_size_, kMaxBatch, self_.qpn}));
        } catch (const std::exception &e) {
            *why = e.what();
            return false;
        }
        last_ns_ = now_ns();
        return true;
    }

    uint8_t *ring() const { return ring_; }
    uint32_t *doorbell() const { return db_; }
    uint32_t entries() const { return entries_; }
    uint32_t wqe_size() const { return wqe_size_; }

    // Engine thread: the doorbell rung since the last poll, and completions a reordering Scheduler held.
    size_t poll() override {
        std::vector<softefa::FetchedWqe> got;
        sq_->fetch(got, log_, false);
        sq_->check_staged(log_);
        report_violations();
        const uint64_t now = now_ns();
        for (softefa::FetchedWqe &f : got) {
            const uint64_t id = next_id_++;
            submit(id, f);
            pending_.emplace(id, std::move(f));
        }
        if (!got.empty()) last_ns_ = last_fetch_ns_ = now;
        size_t released = 0;
        if (sched_.held() && now - last_ns_ >= kIdleNs) released = release(true);
        return got.size() + released;
    }

    bool needs_spin() const override { return inflight_ > 0 || sched_.held() > 0 || now_ns() - last_ns_ < kBusyNs; }

    void describe(std::string &out, uint64_t now, std::vector<std::string> *findings) override {
        const uint32_t db = *reinterpret_cast<volatile uint32_t *>(db_);
        const uint32_t staged = sq_->staged();
        const uint32_t written = tx_->ring->cq->produced();
        char b[512];
        snprintf(b, sizeof b,
                 "  GDA queue pair qpn %u: doorbell %u (16-bit register), WQEs fetched %u (last %s ago), written past the "
                 "doorbell %u, in flight on the wire %zu, finished and held by the completion scheduler %zu, fetched and "
                 "without CQE %zu, CQEs written %u%s\n",
                 self_.qpn, db & 0xffffu, sq_->fetched(), dump::age(last_fetch_ns_, now).c_str(), staged, inflight_,
                 sched_.held(), pending_.size(), written,
                 !error_ ? "" : silent_ ? ", QP IN ERROR, SILENT (EFAEMU_SILENT_AFTER_ERROR)" : ", QP IN ERROR");
        out += b;
        const std::string me = "GDA queue pair qpn " + std::to_string(self_.qpn);
        if (staged && now - last_fetch_ns_ > 1000000000ull)
            findings->push_back(me + ": " + std::to_string(staged) + " WQEs written past the doorbell and not rung for " +
                                dump::age(last_fetch_ns_, now) + " (a device poster waits before its doorbell)");
        if (error_ && silent_ && !pending_.empty())
            findings->push_back(me + ": in error and silent (EFAEMU_SILENT_AFTER_ERROR): " + std::to_string(pending_.size()) +
                                " fetched WQEs will never complete; a waiter without a bound hangs");
        else if (!pending_.empty() && now - last_ns_ > 1000000000ull)
            findings->push_back(me + ": " + std::to_string(pending_.size()) + " fetched WQEs without a CQE for " +
                                dump::age(last_ns_, now));
    }

    // Engine thread: an Op of ours finished (after the engine's own fault model released it).
    void op_done(Op &op, uint32_t status) override {
        const uint64_t id = op.flags;
        auto it = pending_.find(id);
        // EFAEMU_SILENT_AFTER_ERROR: any error completion (an injected failure included) is a QP error; this WQE
        // still completes with its status, and every WQE fetched after it never does.
        if (silent_ && status != kOk && !error_) enter_error(id, "an error completion (status " + std::to_string(status) + ")");
        if (it != pending_.end() && !(silent_ && error_ && id > error_id_)) {
            status_[id] = status;
            sched_.add(id, op.len);
        } else if (it != pending_.end()) {
            stats().fault("gda_silenced");  // finished on the wire, but its CQE is never written
        }
        inflight_--;
        last_ns_ = now_ns();
        delete &op;
        release(false);
    }

private:
    // One fetched WQE into an engine Op. What the NIC rejects before sending completes through the same path
    // with the status it would report (and counts, and meets the fault injection, like any other).
    void submit(uint64_t id, const softefa::FetchedWqe &f) {
        auto *op = new Op;
        op->path = Path::Gda;
        op->sink = this;
        op->src = self_;
        op->flags = id;
        op->mem_known = true;
        if (error_ && silent_) {
            // Fetched, never executed, never completed: it stays in pending_ (and its ring position busy), as a
            // NIC that stopped serving the queue leaves it.
            delete op;
            stats().fault("gda_silenced");
            return;
        }
        if (error_) {
            op->local_status = kFlushed;
        } else if (!f.ok) {
            op->local_status = kLocalQpInternalError;  // the NIC puts the QP in the error state
            enter_error(id, "WQE in slot " + std::to_string(f.slot) + " rejected (" + f.why + ")");
        } else {
            const softefa::ParsedWqe &w = f.wqe;
            op->kind = w.op == EFA_IO_RDMA_READ ? OpKind::Read : OpKind::Write;
            op->len = w.length;
            op->local = w.local_addr;
            op->remote_addr = w.remote_addr;
            op->rkey = w.rkey;
            op->has_data = w.has_imm;
            op->data = w.imm;
            Mr m;
            if (!domain_ah_gid(d_, w.ah, op->dst.gid)) {
                op->local_status = kLocalInvalidAh;
            } else {
                op->dst.qpn = w.dest_qpn;
                op->dst.qkey = w.qkey;
                if (w.length > kMaxRdmaSize) op->local_status = kLocalBadLength;
                else if (!mr_by_lkey(w.lkey, &m) || m.domain != d_ || w.local_addr < m.base || w.length > m.len ||
                         w.local_addr - m.base > m.len - w.length)
                    op->local_status = kLocalInvalidLkey;
                else op->mem = m.mem;
            }
        }
        inflight_++;
        Engine::instance().submit(op);
    }

    void enter_error(uint64_t id, const std::string &why) {
        error_ = true;
        error_id_ = id;
        EFA_WARN(FI_LOG_EP_DATA, "QP %u: %s: the QP is now in the error state%s", self_.qpn, why.c_str(),
                 silent_ ? " and completes nothing more (EFAEMU_SILENT_AFTER_ERROR)" : "");
    }

    size_t release(bool idle) {
        std::vector<uint64_t> ids;
        sched_.release(ids, idle);
        GdaRing *ring = tx_->ring;
        for (uint64_t id : ids) {
            auto it = pending_.find(id);
            if (it == pending_.end()) continue;
            if (silent_ && error_ && id > error_id_) {  // finished before the error, CQE not yet written: never is
                status_.erase(id);
                stats().fault("gda_silenced");
                continue;
            }
            const bool overtook = it != pending_.begin();  // an earlier-fetched WQE is still outstanding
            const softefa::FetchedWqe &f = it->second;
            uint8_t e[64];
            softefa::build_tx_cqe(e, ring->entry_size, f.req_id, (uint8_t)status_[id], f.op, self_.qpn);
            ring->cq->push(e);
            sq_->complete(f.slot);
            if (overtook) stats().fault("gda_cqe_out_of_order");
            status_.erase(id);
            pending_.erase(it);
        }
        return ids.size();
    }

    void report_violations() {
        const size_t total = log_.total();
        if (total == reported_) return;
        std::vector<softefa::Violation> list = log_.list();
        for (size_t i = reported_; i < total; i++) {
            stats().fault("gda_violation");
            if (i < list.size() && i < kViolationsPrinted)
                fprintf(stderr, "efaemu: GDA protocol violation on QP %u (%u): %s\n", list[i].qpn, list[i].slot,
                        list[i].what.c_str());
        }
        reported_ = total;
    }

    Domain *d_;
    EpAddr self_;
    Cq *tx_;
    uint8_t *map_ = nullptr;
    size_t map_len_ = 0;
    uint8_t *ring_ = nullptr;
    uint32_t *db_ = nullptr;
    uint32_t entries_ = 0;
    softefa::ViolationLog log_;
    size_t reported_ = 0;
    std::unique_ptr<softefa::SendQueue> sq_;
    softefa::Scheduler sched_;
    std::map<uint64_t, softefa::FetchedWqe> pending_;  // fetched, CQE not yet written, by fetch order
    std::map<uint64_t, uint32_t> status_;              // finished, held by the Scheduler
    uint64_t next_id_ = 0;
    size_t inflight_ = 0;
    bool error_ = false;
    uint64_t error_id_ = 0;  // the WQE (fetch order) that put the QP in error: it completes, later ones do not (silent)
    const bool silent_ = config().silent_after_error;
    const uint32_t wqe_size_ = config().wqe_size;
    uint64_t last_ns_ = 0;
    uint64_t last_fetch_ns_ = 0;
};

GdaQp *gda_qp_create(Domain *d, const EpAddr &self, Cq *tx, uint32_t sq_entries, std::string *why) {
    if (!tx->ring || tx->ring->entries < sq_entries) {
        *why = "the TX CQ must be a cq_open_ext ring with an entry per SQ slot";
        return nullptr;
    }
    auto *qp = new GdaQp(d, self, tx);
    if (!qp->init(sq_entries, why)) {
        delete qp;
        return nullptr;
    }
    Engine::instance().add_source(qp);
    return qp;
}

void gda_qp_destroy(GdaQp *qp) {
    Engine &e = Engine::instance();
    e.remove_source(qp);  // returns once the engine no longer polls it
    e.cancel(qp);
    delete qp;
}

void gda_rx_cqe(Cq *rx, Domain *d, uint16_t qpn, const EpAddr &src, uint32_t imm, uint64_t len) {
    uint8_t e[64];
    softefa::build_rx_cqe(e, rx->ring->entry_size, EFA_IO_COMP_STATUS_OK, qpn, domain_ah_find(d, src.gid), src.qpn, imm,
                          (uint32_t)len);
    rx->ring->cq->push(e);
}

#if defined(FI_EFA_GDA_OPS)

namespace {

int query_addr(struct fid_ep *ep, fi_addr_t addr, uint16_t *ahn, uint16_t *qpn, uint32_t *qkey) {
    return ep_query_addr(ep, addr, ahn, qpn, qkey);
}

int query_qp_wqs(struct fid_ep *ep, struct fi_efa_wq_attr *sq, struct fi_efa_wq_attr *rq) {
    memset(sq, 0, sizeof *sq);
    memset(rq, 0, sizeof *rq);
    if (!ep_is_ours(ep)) return -FI_EINVAL;
    GdaQp *qp = ep_gda_qp(ep);
    if (!qp) {
        EFA_WARN(FI_LOG_DOMAIN, "query_qp_wqs: efaemu serves device-posted WQEs only on an enabled efa-direct endpoint "
                                "whose TX CQ was opened with cq_open_ext");
        return -FI_EOPNOTSUPP;
    }
    sq->buffer = qp->ring();
    sq->entry_size = qp->wqe_size();
    sq->num_entries = qp->entries();
    sq->doorbell = qp->doorbell();
    sq->max_batch = kMaxBatch;
    return 0;
}

int query_cq(struct fid_cq *f, struct fi_efa_cq_attr *attr) {
    memset(attr, 0, sizeof *attr);
    Cq *cq = reinterpret_cast<Cq *>(f);
    if (!cq->ring) {
        EFA_WARN(FI_LOG_CQ, "query_cq: only CQs opened with cq_open_ext have a device ring in efaemu");
        return -FI_EOPNOTSUPP;
    }
    attr->buffer = reinterpret_cast<uint8_t *>(cq->ring->base);
    attr->entry_size = cq->ring->entry_size;
    attr->num_entries = cq->ring->entries;
    return 0;
}

using LookupFn = int (*)(int, unsigned long long *, size_t *);

int cq_open_ext(struct fid_domain *domain, struct fi_cq_attr *attr, struct fi_efa_cq_init_attr *init, struct fid_cq **out,
                void *context) {
    auto *d = reinterpret_cast<Domain *>(domain);
    if (!attr || !init) return -FI_EINVAL;
    // The GPU cannot wait on a file descriptor (the real provider's rule).
    if (attr->wait_obj != FI_WAIT_NONE) return -FI_ENOSYS;
    if (!(init->flags & FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF)) {
        EFA_WARN(FI_LOG_CQ, "FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF flag is not set");
        return -FI_EINVAL;
    }
    if (!init->ext_mem_dmabuf.length) {
        EFA_WARN(FI_LOG_CQ, "struct ext_mem_dmabuf is invalid");
        return -FI_EINVAL;
    }
    uint32_t entries = 1;
    while (entries < attr->size && entries < (1u << 24)) entries <<= 1;
    const uint64_t need = (uint64_t)entries * kCqeSize;
    const uint64_t off = init->ext_mem_dmabuf.offset;
    if (init->ext_mem_dmabuf.length < need) {
        EFA_WARN(FI_LOG_CQ, "cq_open_ext: %u entries of %u bytes do not fit the %llu-byte buffer", entries, kCqeSize,
                 (unsigned long long)init->ext_mem_dmabuf.length);
        return -FI_EINVAL;
    }
    auto ring = std::make_unique<GdaRing>();
    if (init->ext_mem_dmabuf.buffer) {
        ring->base = reinterpret_cast<uint64_t>(init->ext_mem_dmabuf.buffer) + off;
    } else {
        // The GPU memory behind the fd, from the test-only CUDA interposer of this process.
        auto lookup = reinterpret_cast<LookupFn>(dlsym(RTLD_DEFAULT, "efaemu_dmabuf_lookup"));
        unsigned long long dptr = 0;
        size_t size = 0;
        const int fd = (int)init->ext_mem_dmabuf.fd;
        if (!lookup) {
            fprintf(stderr, "efaemu: cq_open_ext: the CQ is a dma-buf (fd %d) and efaemu can only write GPU memory whose "
                            "address the test interposer recorded: LD_PRELOAD libefaemu-cuda-interpose.so\n", fd);
            return -FI_EINVAL;
        }
        if (lookup(fd, &dptr, &size) != 0) {
            fprintf(stderr, "efaemu: cq_open_ext: dma-buf fd %d was not exported by cuMemGetHandleForAddressRange in this "
                            "process (or was closed)\n", fd);
            return -FI_EINVAL;
        }
        if (off + need > size) {
            EFA_WARN(FI_LOG_CQ, "cq_open_ext: offset %llu + %llu bytes exceed the %zu-byte dma-buf", (unsigned long long)off,
                     (unsigned long long)need, size);
            return -FI_EINVAL;
        }
        ring->base = dptr + off;
        ring->mem = hmem::classify(reinterpret_cast<const void *>(dptr));
        if (ring->mem.kind != MemKind::Cuda) {
            fprintf(stderr, "efaemu: cq_open_ext: dma-buf fd %d is not GPU memory CUDA knows\n", fd);
            return -FI_EINVAL;
        }
    }
    ring->entries = entries;
    ring->entry_size = kCqeSize;
    ring->writer.reset(new CqeWriter(ring->mem));
    try {
        ring->cq.reset(new softefa::CompletionQueue(
            {reinterpret_cast<uint8_t *>(ring->base), entries, kCqeSize, nullptr}, *ring->writer));
    } catch (const std::exception &e) {
        EFA_WARN(FI_LOG_CQ, "cq_open_ext: %s", e.what());
        return -FI_EINVAL;
    }
    struct fi_cq_attr a = *attr;
    a.format = FI_CQ_FORMAT_DATA;
    int rc = cq_open(&d->fid, &a, out, context);
    if (rc) return rc;
    static struct fi_ops_cq ext_ops;
    static std::once_flag once;
    auto strerror_fn = (*out)->ops->strerror;
    std::call_once(once, [strerror_fn] {
        fill_enosys(&ext_ops);  // the ring is the device's: nothing to read from the CPU (as the NIC's ext CQs)
        ext_ops.strerror = strerror_fn;
    });
    Cq *cq = reinterpret_cast<Cq *>(*out);
    cq->ring = ring.release();
    cq->fid.ops = &ext_ops;
    return 0;
}

uint64_t get_mr_lkey(struct fid_mr *mr) {
    uint32_t lkey;
    if (!mr || !mr_lkey(mr->mem_desc, &lkey)) {
        EFA_WARN(FI_LOG_MR, "MR not registered");
        return FI_KEY_NOTAVAIL;
    }
    return lkey;  // not fi_mr_key's rkey (mr_lkey.h)
}

struct fi_efa_ops_gda g_gda_ops = {query_addr, query_qp_wqs, query_cq, cq_open_ext, get_mr_lkey};

}  // namespace

void *gda_ops() { return &g_gda_ops; }

#else

void *gda_ops() { return nullptr; }  // headers without fi_ext_efa.h (the build adds our test copy, so not reached)

#endif

}  // namespace efaemu
