// The RDM endpoint. Application threads post here (fi_send / fi_write / fi_read / fi_recv ...): the call checks
// what the NIC would check at post time, turns it into an engine Op and returns. It never moves GPU memory or
// calls CUDA (NVSHMEM sets FI_OPT_CUDA_API_PERMITTED = false); the engine does both.
//
// As a Target, the endpoint answers peers: RMA checks (AV, key, domain, access, range) and message delivery
// into posted receives, buffering messages that arrive before a receive (the RDM protocol does the same) and
// delivering them in arrival order (FI_ORDER_SAS). As an OpSink, it turns finished Ops into CQ entries and
// counter updates.
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_tagged.h>
#include <string.h>

#include <algorithm>

#include "config.h"
#include "dump.h"
#include "efaemu.h"
#include "status.h"

namespace efaemu {

namespace {

struct Ep;

struct Recv {
    uint64_t buf = 0;
    size_t len = 0;
    MemRef mem;
    bool mem_known = false;
    void *context = nullptr;
    uint64_t flags = 0;
};

// A message from a peer: matched to a receive, or buffered until one is posted.
struct Incoming {
    EpAddr src{};
    uint64_t op_id = 0, total = 0, received = 0, data = 0;
    bool has_data = false;
    bool matched = false, done = false;
    uint64_t arrived_ns = 0;
    uint32_t status = 0;  // a placement failure, reported on the receive
    Recv recv;
    std::vector<uint8_t> buffered;
};

struct Side final : Target, OpSink {
    Ep *ep;
    uint32_t rma_check(const EpAddr &src, uint64_t addr, uint64_t len, uint64_t rkey, bool write, bool imm,
                       MemRef *mem) override;
    void rma_done(const EpAddr &src, bool write, uint64_t len, bool has_data, uint64_t data) override;
    uint32_t msg_chunk(const MsgHdr &h, const uint8_t *payload, bool *complete) override;
    void progress() override;
    void describe(std::string &out, uint64_t now, std::vector<std::string> *findings) override;
    void op_done(Op &op, uint32_t status) override;
};

struct Ep {
    struct fid_ep fid;  // first: a fid_ep pointer is an Ep pointer
    Side side;
    Domain *domain = nullptr;
    Av *av = nullptr;
    Cq *tx_cq = nullptr, *rx_cq = nullptr;
    bool tx_selective = false, rx_selective = false;
    Cntr *c_send = nullptr, *c_recv = nullptr, *c_read = nullptr, *c_write = nullptr, *c_rread = nullptr,
         *c_rwrite = nullptr;
    uint64_t tx_op_flags = 0, rx_op_flags = 0;
    size_t tx_size = 0, rx_size = 0;
    std::atomic<size_t> tx_outstanding{0};
    EpAddr addr{};
    bool enabled = false;
    bool cuda_api_permitted = true;
    GdaQp *gda = nullptr;  // efa-direct with a cq_open_ext TX CQ: the queue pair a device drives

    std::mutex rx_mu;  // posted receives: appended by the application, taken by the engine
    std::deque<Recv> posted;
    std::atomic<bool> rx_dirty{false};

    // Engine thread only.
    std::map<std::string, std::unique_ptr<Incoming>> incoming;  // by sender and op id
    std::deque<Incoming *> unexpected;                          // arrival order, not yet matched

    // What the application did and what completed (for a state dump): operations accepted by kind
    // (write, read, send), receives posted, completions delivered (ok, error), messages delivered.
    std::atomic<uint64_t> accepted[3] = {}, recvs_posted{0}, done_ok{0}, done_err{0}, delivered{0};
    std::atomic<uint64_t> last_post_ns{0}, last_recv_post_ns{0}, last_done_ns{0}, last_arrival_ns{0};
};

// FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (rdma/fi_ext.h of libfabric >= 1.19, an enum; Debian's 1.17 lacks it):
// the value is ABI.
constexpr int kOptWriteInOrderAligned128 = -(0xefa << 16) + 6;

Ep *E(struct fid_ep *f) { return reinterpret_cast<Ep *>(f); }
Ep *E(struct fid *f) { return reinterpret_cast<Ep *>(f); }

std::string msg_key(const EpAddr &src, uint64_t op_id) {
    return gid_hex(src.gid) + ":" + std::to_string(src.qpn) + ":" + std::to_string(op_id);
}

// ---- target side (engine thread) ------------------------------------------------------------------------------

uint32_t Side::rma_check(const EpAddr &src, uint64_t addr, uint64_t len, uint64_t rkey, bool write, bool imm,
                         MemRef *mem) {
    if (!ep->av || av_reverse(ep->av, src) == FI_ADDR_NOTAVAIL) return kRemoteUnknownPeer;
    // efa-direct: an immediate needs a receive CQ (the device answers RNR); the RDM protocol just drops it.
    if (write && imm && ep->domain->direct && !ep->rx_cq) return kRemoteRnr;
    Mr m;
    if (!mr_by_key(rkey, &m) || m.domain != ep->domain) return kRemoteBadAddress;
    if (!(m.access & (write ? FI_REMOTE_WRITE : FI_REMOTE_READ))) return kRemoteBadAddress;
    if (addr < m.base || len > m.len || addr - m.base > m.len - len) return kRemoteBadAddress;
    *mem = m.mem;
    return kOk;
}

void Side::rma_done(const EpAddr &src, bool write, uint64_t len, bool has_data, uint64_t data) {
    cntr_inc(write ? ep->c_rwrite : ep->c_rread);
    if (write && has_data && ep->rx_cq && ep->rx_cq->ring) {
        gda_rx_cqe(ep->rx_cq, ep->domain, ep->addr.qpn, src, (uint32_t)data, len);
    } else if (write && has_data && ep->rx_cq) {
        CqEntry e{};
        e.e.flags = FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE;
        e.e.len = len;
        e.e.data = data;
        e.src = av_reverse(ep->av, src);
        cq_push(ep->rx_cq, e);
    }
}

void place(Incoming &in, uint64_t offset, const uint8_t *payload, uint64_t n) {
    if (!in.matched) {
        memcpy(in.buffered.data() + offset, payload, n);
        return;
    }
    if (in.status || offset >= in.recv.len) return;
    uint64_t fit = std::min<uint64_t>(n, in.recv.len - offset);
    std::string why;
    if (!hmem::copy_from_host(in.recv.buf + offset, in.recv.mem, payload, fit, &why)) {
        EFA_WARN(FI_LOG_EP_DATA, "placing a message failed: %s", why.c_str());
        in.status = kLocalQpInternalError;
    }
}

void bind_recv(Incoming &in, const Recv &r) {
    in.recv = r;
    if (!in.recv.mem_known) {
        in.recv.mem = hmem::classify(reinterpret_cast<const void *>(in.recv.buf));
        in.recv.mem_known = true;
    }
    in.matched = true;
}

void deliver(Ep *ep, Incoming &in) {
    ep->delivered.fetch_add(1, std::memory_order_relaxed);
    const uint64_t n = std::min<uint64_t>(in.total, in.recv.len);
    const uint64_t flags = FI_RECV | FI_MSG | (in.has_data ? FI_REMOTE_CQ_DATA : 0);
    const fi_addr_t src = av_reverse(ep->av, in.src);
    stats().record(Path::Rdm, Kind::Recv, ep->domain->nic, peer_key(in.src.gid), n, in.recv.mem.kind, in.status);
    if (in.status || in.total > in.recv.len) {
        CqErr e{};
        e.e.op_context = in.recv.context;
        e.e.flags = flags;
        e.e.len = n;
        e.e.buf = reinterpret_cast<void *>(in.recv.buf);
        e.e.data = in.data;
        e.e.olen = in.total > in.recv.len ? in.total - in.recv.len : 0;
        e.e.err = in.status ? status_errno(in.status) : FI_ETRUNC;
        e.e.prov_errno = (int)in.status;
        e.src = src;
        if (ep->rx_cq) cq_push_err(ep->rx_cq, e);
        cntr_inc_err(ep->c_recv);
        return;
    }
    if (ep->rx_cq && (!ep->rx_selective || (in.recv.flags & FI_COMPLETION))) {
        CqEntry e{};
        e.e.op_context = in.recv.context;
        e.e.flags = flags;
        e.e.len = n;
        e.e.buf = reinterpret_cast<void *>(in.recv.buf);
        e.e.data = in.data;
        e.src = src;
        cq_push(ep->rx_cq, e);
    }
    cntr_inc(ep->c_recv);
}

uint32_t Side::msg_chunk(const MsgHdr &h, const uint8_t *payload, bool *complete) {
    *complete = false;
    const std::string key = msg_key(h.src, h.op_id);
    if (h.offset == 0) {
        auto in = std::make_unique<Incoming>();
        in->src = h.src;
        in->op_id = h.op_id;
        in->total = h.total_len;
        in->has_data = h.flags & kFlagRemoteData;
        in->data = h.data;
        in->arrived_ns = now_ns();
        ep->last_arrival_ns.store(in->arrived_ns, std::memory_order_relaxed);
        bool bound = false;
        if (ep->unexpected.empty()) {
            std::lock_guard<std::mutex> g(ep->rx_mu);
            if (!ep->posted.empty()) {
                bind_recv(*in, ep->posted.front());
                ep->posted.pop_front();
                bound = true;
            }
        }
        if (!bound) {
            in->buffered.resize(h.total_len);
            ep->unexpected.push_back(in.get());
        }
        ep->incoming[key] = std::move(in);
    }
    auto it = ep->incoming.find(key);
    if (it == ep->incoming.end()) {
        *complete = true;  // a chunk of a message we never saw start: the peer's stream is broken
        return kRemoteBadStatus;
    }
    Incoming &in = *it->second;
    if (h.offset + h.len > in.total) {
        *complete = true;
        return kRemoteBadLength;
    }
    place(in, h.offset, payload, h.len);
    in.received += h.len;
    if (in.received < in.total) return kOk;
    *complete = true;  // the sender's completion: the message reached this endpoint
    in.done = true;
    if (in.matched) {
        deliver(ep, in);
        ep->incoming.erase(it);
    }
    return kOk;
}

void Side::progress() {
    if (!ep->rx_dirty.exchange(false)) return;
    while (!ep->unexpected.empty()) {
        Recv r;
        {
            std::lock_guard<std::mutex> g(ep->rx_mu);
            if (ep->posted.empty()) return;
            r = ep->posted.front();
            ep->posted.pop_front();
        }
        Incoming *in = ep->unexpected.front();
        ep->unexpected.pop_front();
        std::vector<uint8_t> held;
        held.swap(in->buffered);
        bind_recv(*in, r);
        place(*in, 0, held.data(), in->received);  // what arrived so far; later chunks go straight in
        if (in->done) {
            deliver(ep, *in);
            ep->incoming.erase(msg_key(in->src, in->op_id));
        }
    }
}

namespace {

std::string cq_text(Cq *cq, uint64_t now) {
    if (!cq) return "none";
    if (cq->ring) return "a device ring (cq_open_ext)";
    size_t n, errs = 0;
    {
        std::lock_guard<std::mutex> g(cq->mu);
        n = cq->items.size();
        for (const auto &it : cq->items) errs += it.is_err;
    }
    return std::to_string(n) + " entries not yet read (" + std::to_string(errs) + " errors), read " +
           std::to_string(cq->reads.load()) + " times, last " + dump::age(cq->last_read_ns.load(), now) + " ago";
}

}  // namespace

void Side::describe(std::string &out, uint64_t now, std::vector<std::string> *findings) {
    char b[768];
    size_t posted_now;
    {
        std::lock_guard<std::mutex> g(ep->rx_mu);
        posted_now = ep->posted.size();
    }
    uint64_t oldest = 0;
    std::string from;
    if (!ep->unexpected.empty()) {
        oldest = ep->unexpected.front()->arrived_ns;
        from = peer_key(ep->unexpected.front()->src.gid);
    }
    const uint64_t accepted = ep->accepted[0] + ep->accepted[1] + ep->accepted[2];
    const uint64_t completed = ep->done_ok + ep->done_err;
    snprintf(b, sizeof b,
             "  ep qpn %u (%s%s): receives posted now %zu of %zu (%llu posted in all, last %s ago); unexpected messages "
             "%zu (oldest %s%s%s); partial messages %zu; delivered %llu (last arrival %s ago)\n"
             "    operations accepted %llu (write %llu read %llu send %llu, last %s ago), completed %llu (%llu ok, %llu "
             "error, last %s ago), in flight %zu of %zu\n",
             ep->addr.qpn, ep->domain->direct ? "efa-direct" : "efa", ep->gda ? ", GDA queue pair" : "", posted_now,
             ep->rx_size, (unsigned long long)ep->recvs_posted.load(), dump::age(ep->last_recv_post_ns, now).c_str(),
             ep->unexpected.size(), dump::age(oldest, now).c_str(), from.empty() ? "" : " from ", from.c_str(),
             ep->incoming.size() - ep->unexpected.size(), (unsigned long long)ep->delivered.load(),
             dump::age(ep->last_arrival_ns, now).c_str(), (unsigned long long)accepted, (unsigned long long)ep->accepted[0].load(),
             (unsigned long long)ep->accepted[1].load(), (unsigned long long)ep->accepted[2].load(),
             dump::age(ep->last_post_ns, now).c_str(), (unsigned long long)completed, (unsigned long long)ep->done_ok.load(),
             (unsigned long long)ep->done_err.load(), dump::age(ep->last_done_ns, now).c_str(), ep->tx_outstanding.load(),
             ep->tx_size);
    out += b;
    out += "    tx CQ: " + cq_text(ep->tx_cq, now) + "\n";
    if (ep->rx_cq != ep->tx_cq) out += "    rx CQ: " + cq_text(ep->rx_cq, now) + "\n";
    struct Named {
        const char *what;
        Cntr *c;
    } cs[] = {{"send", ep->c_send}, {"recv", ep->c_recv}, {"read", ep->c_read}, {"write", ep->c_write},
              {"remote read", ep->c_rread}, {"remote write", ep->c_rwrite}};
    std::vector<Cntr *> seen;
    for (const Named &n : cs) {
        if (!n.c || std::find(seen.begin(), seen.end(), n.c) != seen.end()) continue;
        seen.push_back(n.c);
        std::string roles;
        for (const Named &m : cs)
            if (m.c == n.c) roles += std::string(roles.empty() ? "" : "+") + m.what;
        snprintf(b, sizeof b, "    counter (%s): value %llu, errors %llu, read %llu times, last %s ago\n", roles.c_str(),
                 (unsigned long long)n.c->value.load(), (unsigned long long)n.c->err.load(),
                 (unsigned long long)n.c->reads.load(), dump::age(n.c->last_read_ns.load(), now).c_str());
        out += b;
    }
    const std::string me = "ep qpn " + std::to_string(ep->addr.qpn);
    if (!ep->unexpected.empty() && posted_now == 0 && now - oldest > 1000000000ull)
        findings->push_back(me + ": " + std::to_string(ep->unexpected.size()) + " messages have waited " +
                            dump::age(oldest, now) + " for a receive and none is posted (the application stopped "
                            "re-posting receives)");
    if (!ep->unexpected.empty() && posted_now > 0)
        findings->push_back(me + ": " + std::to_string(ep->unexpected.size()) + " unexpected messages while " +
                            std::to_string(posted_now) + " receives are posted (an emulator bug: they should match)");
    for (Cq *cq : {ep->tx_cq, ep->rx_cq}) {
        if (!cq || cq->ring) continue;
        size_t n;
        uint64_t oldest_entry_hint = cq->last_read_ns.load();
        {
            std::lock_guard<std::mutex> g(cq->mu);
            n = cq->items.size();
        }
        if (n && now - oldest_entry_hint > 1000000000ull)
            findings->push_back(me + ": " + std::to_string(n) + " CQ entries unread and the CQ not read for " +
                                dump::age(oldest_entry_hint, now) + " (the application stopped polling it)");
    }
}

// ---- initiator side -----------------------------------------------------------------------------------------------

uint64_t cq_flags(OpKind k) {
    switch (k) {
        case OpKind::Write: return FI_RMA | FI_WRITE;
        case OpKind::Read: return FI_RMA | FI_READ;
        default: return FI_MSG | FI_SEND;
    }
}

void Side::op_done(Op &op, uint32_t status) {
    ep->tx_outstanding--;
    (status == kOk ? ep->done_ok : ep->done_err).fetch_add(1, std::memory_order_relaxed);
    ep->last_done_ns.store(now_ns(), std::memory_order_relaxed);
    Cntr *c = op.kind == OpKind::Write ? ep->c_write : op.kind == OpKind::Read ? ep->c_read : ep->c_send;
    // A TX CQ in device memory (cq_open_ext) belongs to the device: CPU-posted operations complete on the
    // counters only.
    const bool host_cq = ep->tx_cq && !ep->tx_cq->ring;
    if (status == kOk) {
        if (op.want_cq && host_cq) {
            CqEntry e{};
            e.e.op_context = op.context;
            e.e.flags = cq_flags(op.kind);
            e.e.len = op.len;
            e.src = FI_ADDR_NOTAVAIL;
            cq_push(ep->tx_cq, e);
        }
        cntr_inc(c);
    } else {
        EFA_INFO(FI_LOG_EP_DATA, "op to %s completes with %s", addr_str(op.dst).c_str(), status_name(status));
        if (host_cq) {
            CqErr e{};
            e.e.op_context = op.context;
            e.e.flags = cq_flags(op.kind);
            e.e.len = op.len;
            e.e.err = status_errno(status);
            e.e.prov_errno = (int)status;
            e.src = FI_ADDR_NOTAVAIL;
            cq_push_err(ep->tx_cq, e);
        }
        cntr_inc_err(c);
    }
    delete &op;
}

struct Post {
    OpKind kind;
    const void *buf;
    size_t len;
    void *desc;
    fi_addr_t peer;
    uint64_t raddr = 0, rkey = 0, data = 0;
    bool has_data = false;
    void *context;
    uint64_t flags;  // FI_INJECT, FI_COMPLETION, ...
    bool inject_call = false;  // fi_inject*: never a completion entry
};

ssize_t post(Ep *ep, const Post &p) {
    if (!ep->enabled) return -FI_EOPBADSTATE;
    const bool inject = p.inject_call || (p.flags & FI_INJECT);
    if (inject && p.len > kInjectSize) return -FI_EINVAL;
    EpAddr dst;
    if (!ep->av || !av_lookup(ep->av, p.peer, &dst)) return -FI_EINVAL;
    if (ep->tx_outstanding.fetch_add(1) >= ep->tx_size) {
        ep->tx_outstanding--;
        return -FI_EAGAIN;
    }
    auto *op = new Op;
    op->kind = p.kind;
    op->path = Path::Rdm;
    op->sink = &ep->side;
    op->src = ep->addr;
    op->dst = dst;
    op->len = p.len;
    op->remote_addr = p.raddr;
    op->rkey = p.rkey;
    op->data = p.data;
    op->has_data = p.has_data;
    op->context = p.context;
    op->flags = p.flags;
    op->want_cq = !p.inject_call && (!ep->tx_selective || (p.flags & FI_COMPLETION));
    if (inject && p.kind != OpKind::Read) {
        // The buffer is the caller's again on return: copy it now (inject buffers are host memory).
        op->inline_buf.assign(static_cast<const uint8_t *>(p.buf), static_cast<const uint8_t *>(p.buf) + p.len);
        op->local = reinterpret_cast<uint64_t>(op->inline_buf.data());
        op->mem_known = true;
    } else {
        op->local = reinterpret_cast<uint64_t>(p.buf);
        if (p.desc) {
            Mr m;
            const uint64_t a = op->local;
            if (!mr_by_desc(p.desc, &m) || m.domain != ep->domain || a < m.base || p.len > m.len ||
                a - m.base > m.len - p.len) {
                op->local_status = kLocalInvalidLkey;
            } else {
                op->mem = m.mem;
                op->mem_known = true;
            }
        }
    }
    ep->accepted[(int)p.kind].fetch_add(1, std::memory_order_relaxed);
    ep->last_post_ns.store(now_ns(), std::memory_order_relaxed);
    Engine::instance().submit(op);
    return 0;
}

ssize_t post_recv(Ep *ep, void *buf, size_t len, void *desc, void *context, uint64_t flags) {
    if (!ep->enabled) return -FI_EOPBADSTATE;
    Recv r;
    r.buf = reinterpret_cast<uint64_t>(buf);
    r.len = len;
    r.context = context;
    r.flags = flags;
    if (desc) {
        Mr m;
        if (!mr_by_desc(desc, &m) || m.domain != ep->domain) return -FI_EINVAL;
        r.mem = m.mem;
        r.mem_known = true;
    }
    {
        std::lock_guard<std::mutex> g(ep->rx_mu);
        if (ep->posted.size() >= ep->rx_size) return -FI_EAGAIN;
        ep->posted.push_back(r);
    }
    ep->recvs_posted.fetch_add(1, std::memory_order_relaxed);
    ep->last_recv_post_ns.store(now_ns(), std::memory_order_relaxed);
    ep->rx_dirty = true;
    Engine::instance().kick();
    return 0;
}

// ---- libfabric entry points -----------------------------------------------------------------------------------

uint64_t tx_flags(Ep *ep) { return ep->tx_op_flags; }

struct fi_ops_msg g_msg_ops = {
    sizeof(struct fi_ops_msg),
    [](struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t, void *ctx) -> ssize_t {
        return post_recv(E(f), buf, len, desc, ctx, E(f)->rx_op_flags);
    },
    [](struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t, void *ctx) -> ssize_t {
        if (count > 1) return -FI_EINVAL;
        return post_recv(E(f), count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, desc ? desc[0] : nullptr,
                         ctx, E(f)->rx_op_flags);
    },
    [](struct fid_ep *f, const struct fi_msg *m, uint64_t flags) -> ssize_t {
        if (m->iov_count > 1) return -FI_EINVAL;
        return post_recv(E(f), m->iov_count ? m->msg_iov[0].iov_base : nullptr, m->iov_count ? m->msg_iov[0].iov_len : 0,
                         m->desc ? m->desc[0] : nullptr, m->context, flags);
    },
    [](struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *ctx) -> ssize_t {
        return post(E(f), {OpKind::Send, buf, len, desc, dest, 0, 0, 0, false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest, void *ctx) -> ssize_t {
        if (count > 1) return -FI_EINVAL;
        return post(E(f), {OpKind::Send, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0,
                           desc ? desc[0] : nullptr, dest, 0, 0, 0, false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct fi_msg *m, uint64_t flags) -> ssize_t {
        if (m->iov_count > 1) return -FI_EINVAL;
        return post(E(f), {OpKind::Send, m->iov_count ? m->msg_iov[0].iov_base : nullptr,
                           m->iov_count ? m->msg_iov[0].iov_len : 0, m->desc ? m->desc[0] : nullptr, m->addr, 0, 0,
                           m->data, (flags & FI_REMOTE_CQ_DATA) != 0, m->context, flags});
    },
    [](struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest) -> ssize_t {
        Post p{OpKind::Send, buf, len, nullptr, dest, 0, 0, 0, false, nullptr, FI_INJECT};
        p.inject_call = true;
        return post(E(f), p);
    },
    [](struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, void *ctx) -> ssize_t {
        return post(E(f), {OpKind::Send, buf, len, desc, dest, 0, 0, data, true, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest) -> ssize_t {
        Post p{OpKind::Send, buf, len, nullptr, dest, 0, 0, data, true, nullptr, FI_INJECT};
        p.inject_call = true;
        return post(E(f), p);
    },
};

ssize_t rma_msg(struct fid_ep *f, OpKind kind, const struct fi_msg_rma *m, uint64_t flags) {
    if (m->iov_count > 1 || m->rma_iov_count != 1) return -FI_EINVAL;
    return post(E(f), {kind, m->iov_count ? m->msg_iov[0].iov_base : nullptr, m->iov_count ? m->msg_iov[0].iov_len : 0,
                       m->desc ? m->desc[0] : nullptr, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, m->data,
                       kind == OpKind::Write && (flags & FI_REMOTE_CQ_DATA), m->context, flags});
}

struct fi_ops_rma g_rma_ops = {
    sizeof(struct fi_ops_rma),
    [](struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr, uint64_t key,
       void *ctx) -> ssize_t {
        return post(E(f), {OpKind::Read, buf, len, desc, src, addr, key, 0, false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
       void *ctx) -> ssize_t {
        if (count != 1) return -FI_EINVAL;
        return post(E(f), {OpKind::Read, iov[0].iov_base, iov[0].iov_len, desc ? desc[0] : nullptr, src, addr, key, 0,
                           false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags) { return rma_msg(f, OpKind::Read, m, flags); },
    [](struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
       void *ctx) -> ssize_t {
        return post(E(f), {OpKind::Write, buf, len, desc, dest, addr, key, 0, false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t addr,
       uint64_t key, void *ctx) -> ssize_t {
        if (count != 1) return -FI_EINVAL;
        return post(E(f), {OpKind::Write, iov[0].iov_base, iov[0].iov_len, desc ? desc[0] : nullptr, dest, addr, key, 0,
                           false, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags) { return rma_msg(f, OpKind::Write, m, flags); },
    [](struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key) -> ssize_t {
        Post p{OpKind::Write, buf, len, nullptr, dest, addr, key, 0, false, nullptr, FI_INJECT};
        p.inject_call = true;
        return post(E(f), p);
    },
    [](struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, uint64_t addr,
       uint64_t key, void *ctx) -> ssize_t {
        return post(E(f), {OpKind::Write, buf, len, desc, dest, addr, key, data, true, ctx, tx_flags(E(f))});
    },
    [](struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
       uint64_t key) -> ssize_t {
        Post p{OpKind::Write, buf, len, nullptr, dest, addr, key, data, true, nullptr, FI_INJECT};
        p.inject_call = true;
        return post(E(f), p);
    },
};

int ep_setopt(fid_t f, int level, int name, const void *val, size_t len) {
    if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
    if (name == FI_OPT_CUDA_API_PERMITTED) {
        if (len != sizeof(bool)) return -FI_EINVAL;
        // Accepted either way: only the engine thread ever calls CUDA, never the caller's thread.
        E(f)->cuda_api_permitted = *static_cast<const bool *>(val);
        return 0;
    }
    if (name == kOptWriteInOrderAligned128) {
        // fi_efa(7): granted, the NIC writes each aligned 128-byte block in order and delivers a write to the target
        // buffer only once; refused (-FI_EOPNOTSUPP) on devices without it. efaemu delivers once unless
        // EFAEMU_DUPLICATE asks it to place writes again, so it refuses exactly then (the product must not rely on
        // single delivery where the device does not promise it). Only efa-direct answers it like this; the real RDM
        // endpoint emulates the option, which NVSHMEM does not ask for.
        if (len != sizeof(bool)) return -FI_EINVAL;
        if (!*static_cast<const bool *>(val)) return 0;
        if (!E(f)->domain || !E(f)->domain->direct) return -FI_ENOPROTOOPT;
        return config().dup_rate > 0 ? -FI_EOPNOTSUPP : 0;
    }
    return -FI_ENOPROTOOPT;
}

int ep_getopt(fid_t f, int level, int name, void *val, size_t *len) {
    if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
    if (name == FI_OPT_CUDA_API_PERMITTED) {
        if (*len < sizeof(bool)) return -FI_ETOOSMALL;
        *static_cast<bool *>(val) = E(f)->cuda_api_permitted;
        *len = sizeof(bool);
        return 0;
    }
    return -FI_ENOPROTOOPT;
}

ssize_t ep_cancel(fid_t f, void *context) {
    Ep *ep = E(f);
    Recv r;
    bool found = false;
    {
        std::lock_guard<std::mutex> g(ep->rx_mu);
        for (auto it = ep->posted.begin(); it != ep->posted.end(); ++it) {
            if (it->context == context) {
                r = *it;
                ep->posted.erase(it);
                found = true;
                break;
            }
        }
    }
    if (!found) return -FI_ENOENT;
    if (ep->rx_cq) {
        CqErr e{};
        e.e.op_context = context;
        e.e.flags = FI_RECV | FI_MSG;
        e.e.buf = reinterpret_cast<void *>(r.buf);
        e.e.err = FI_ECANCELED;
        e.e.prov_errno = (int)kFlushed;
        e.src = FI_ADDR_NOTAVAIL;
        cq_push_err(ep->rx_cq, e);
    }
    return 0;
}

struct fi_ops_ep g_ep_ops = {
    sizeof(struct fi_ops_ep),
    ep_cancel,
    ep_getopt,
    ep_setopt,
    [](struct fid_ep *, int, struct fi_tx_attr *, struct fid_ep **, void *) { return -FI_ENOSYS; },
    [](struct fid_ep *, int, struct fi_rx_attr *, struct fid_ep **, void *) { return -FI_ENOSYS; },
    [](struct fid_ep *f) -> ssize_t {
        std::lock_guard<std::mutex> g(E(f)->rx_mu);
        return (ssize_t)(E(f)->rx_size - E(f)->posted.size());
    },
    [](struct fid_ep *f) -> ssize_t { return (ssize_t)(E(f)->tx_size - E(f)->tx_outstanding.load()); },
};

int ep_getname(fid_t f, void *addr, size_t *addrlen) {
    size_t have = *addrlen;
    *addrlen = kAddrLen;
    if (have < kAddrLen) return -FI_ETOOSMALL;
    memcpy(addr, &E(f)->addr, kAddrLen);
    return 0;
}

struct fi_ops_cm g_cm_ops = {
    sizeof(struct fi_ops_cm),
    [](fid_t, void *, size_t) { return -FI_ENOSYS; },
    ep_getname,
    [](struct fid_ep *, void *, size_t *) { return -FI_ENOSYS; },
    [](struct fid_ep *, const void *, const void *, size_t) { return -FI_ENOSYS; },
    [](struct fid_pep *) { return -FI_ENOSYS; },
    [](struct fid_ep *, const void *, size_t) { return -FI_ENOSYS; },
    [](struct fid_pep *, fid_t, const void *, size_t) { return -FI_ENOSYS; },
    [](struct fid_ep *, uint64_t) { return -FI_ENOSYS; },
    [](struct fid_ep *, const void *, uint64_t, struct fid_mc **, void *) { return -FI_ENOSYS; },
};

struct fi_ops_tagged g_tagged_ops;
struct fi_ops_atomic g_atomic_ops;
struct fi_ops_collective g_coll_ops;

int bind_cntr(Ep *ep, Cntr *c, uint64_t flags) {
    if (!flags) flags = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)) return -FI_EBADFLAGS;
    if (flags & FI_SEND) ep->c_send = c;
    if (flags & FI_RECV) ep->c_recv = c;
    if (flags & FI_READ) ep->c_read = c;
    if (flags & FI_WRITE) ep->c_write = c;
    if (flags & FI_REMOTE_READ) ep->c_rread = c;
    if (flags & FI_REMOTE_WRITE) ep->c_rwrite = c;
    c->refs++;
    return 0;
}

int ep_bind(struct fid *f, struct fid *b, uint64_t flags) {
    Ep *ep = E(f);
    switch (b->fclass) {
        case FI_CLASS_AV: {
            Av *av = reinterpret_cast<Av *>(b);
            if (av->domain != ep->domain) return -FI_EINVAL;
            if (ep->av) return -FI_EINVAL;  // as the efa provider: one AV per endpoint
            ep->av = av;
            av->refs++;
            return 0;
        }
        case FI_CLASS_CQ: {
            Cq *cq = reinterpret_cast<Cq *>(b);
            if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EBADFLAGS;
            if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq)) return -FI_EINVAL;
            if (flags & FI_TRANSMIT) {
                ep->tx_cq = cq;
                ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
                cq->refs++;
            }
            if (flags & FI_RECV) {
                ep->rx_cq = cq;
                ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
                cq->refs++;
            }
            return 0;
        }
        case FI_CLASS_CNTR: return bind_cntr(ep, reinterpret_cast<Cntr *>(b), flags);
        case FI_CLASS_EQ: return 0;  // no connection events on RDM endpoints
        default: return -FI_EINVAL;
    }
}

int ep_control(struct fid *f, int command, void *) {
    Ep *ep = E(f);
    if (command != FI_ENABLE) return -FI_ENOSYS;
    if (!ep->av) return -FI_ENOAV;
    if (!ep->tx_cq && !ep->rx_cq) return -FI_ENOCQ;
    if (ep->enabled) return 0;
    if (ep->domain->direct && ep->tx_cq && ep->tx_cq->ring) {
        uint32_t sq = 1;
        while (sq * 2 <= ep->tx_size && sq * 2 <= 65536) sq *= 2;
        std::string why;
        ep->gda = gda_qp_create(ep->domain, ep->addr, ep->tx_cq, sq, &why);
        if (!ep->gda) {
            EFA_WARN(FI_LOG_EP_CTRL, "cannot create the device queue pair: %s", why.c_str());
            return -FI_ENOMEM;
        }
    }
    ep->enabled = true;
    return 0;
}

int ep_close(struct fid *f) {
    Ep *ep = E(f);
    Engine &eng = Engine::instance();
    if (ep->gda) gda_qp_destroy(ep->gda);  // the doorbell stops being served before the endpoint goes
    ep->gda = nullptr;
    eng.remove_target(ep->domain->nic, ep->addr.qpn);
    eng.cancel(&ep->side);
    if (ep->av) ep->av->refs--;
    if (ep->tx_cq) ep->tx_cq->refs--;
    if (ep->rx_cq) ep->rx_cq->refs--;
    for (Cntr *c : {ep->c_send, ep->c_recv, ep->c_read, ep->c_write, ep->c_rread, ep->c_rwrite})
        if (c) c->refs--;
    domain_unref(ep->domain);
    delete ep;
    return 0;
}

struct fi_ops g_ep_fi_ops = {
    sizeof(struct fi_ops), ep_close, ep_bind, ep_control, fid_no_ops_open, nullptr, nullptr,
};

}  // namespace

bool ep_is_ours(struct fid_ep *f) { return f && f->fid.fclass == FI_CLASS_EP && f->fid.ops == &g_ep_fi_ops; }

int ep_query_addr(struct fid_ep *f, fi_addr_t addr, uint16_t *ahn, uint16_t *qpn, uint32_t *qkey) {
    if (!ep_is_ours(f)) return -FI_EINVAL;
    Ep *ep = E(f);
    EpAddr a;
    if (!ep->av || !av_lookup(ep->av, addr, &a)) {
        EFA_WARN(FI_LOG_EP_CTRL, "Failed to find connection for addr %llu", (unsigned long long)addr);
        return -FI_EINVAL;
    }
    *ahn = domain_ah(ep->domain, a.gid);
    *qpn = a.qpn;
    *qkey = a.qkey;
    return 0;
}

GdaQp *ep_gda_qp(struct fid_ep *f) { return ep_is_ours(f) ? E(f)->gda : nullptr; }

int ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out, void *context) {
    static std::once_flag once;
    std::call_once(once, [] {
        fill_enosys(&g_tagged_ops);
        fill_enosys(&g_atomic_ops);
        fill_enosys(&g_coll_ops);
    });
    Domain *d = reinterpret_cast<Domain *>(domain);
    if (!info || !info->ep_attr || info->ep_attr->type != FI_EP_RDM) return -FI_EINVAL;
    auto *ep = new Ep;
    memset(&ep->fid, 0, sizeof ep->fid);
    ep->fid.fid.fclass = FI_CLASS_EP;
    ep->fid.fid.context = context;
    ep->fid.fid.ops = &g_ep_fi_ops;
    ep->fid.ops = &g_ep_ops;
    ep->fid.cm = &g_cm_ops;
    ep->fid.msg = &g_msg_ops;
    ep->fid.rma = &g_rma_ops;
    ep->fid.tagged = &g_tagged_ops;
    ep->fid.atomic = &g_atomic_ops;
    ep->fid.collective = &g_coll_ops;
    ep->side.ep = ep;
    ep->domain = d;
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    ep->tx_size = info->tx_attr && info->tx_attr->size ? info->tx_attr->size : 1024;
    ep->rx_size = info->rx_attr && info->rx_attr->size ? info->rx_attr->size : 1024;
    memcpy(ep->addr.gid, d->gid, 16);
    ep->addr.qpn = Engine::instance().add_target(d->nic, &ep->side, &ep->addr.qkey);
    domain_ref(d);
    *out = &ep->fid;
    return 0;
}

}  // namespace efaemu
