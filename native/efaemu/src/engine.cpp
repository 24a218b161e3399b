#include "engine.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "config.h"
#include "dump.h"
#include "log.h"
#include "status.h"

namespace efaemu {

uint32_t process_nonce();

uint64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

namespace {

constexpr uint64_t kMaxHoldNs = 1000000;       // a reordered completion waits at most 1 ms for company
constexpr uint64_t kCheckEveryNs = 10000000;   // peer liveness and op timeouts
constexpr int64_t kIdleSleepNs = 10000000;     // with nothing due: woken by the futex anyway
constexpr int64_t kBacklogSleepNs = 20000;     // a peer's ring was full: retry soon

uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Removes /dev/shm/efaemu-<gid> segments whose owner process is gone (killed before it could unlink).
void reap_stale_inboxes() {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    while (struct dirent *e = readdir(d)) {
        const char *n = e->d_name;
        if (strncmp(n, "efaemu-", 7) != 0 || strlen(n) != 7 + 32) continue;
        uint8_t gid[16];
        bool ok = true;
        for (int i = 0; i < 16 && ok; i++) ok = sscanf(n + 7 + 2 * i, "%2hhx", &gid[i]) == 1;
        if (!ok || !gid_is_ours(gid)) continue;
        if (kill((pid_t)gid_pid(gid), 0) != 0 && errno == ESRCH) shm_unlink((std::string("/") + n).c_str());
    }
    closedir(d);
}

}  // namespace

struct Engine::Nic {
    int index = 0;
    uint8_t gid[16];
    Inbox inbox;
    int refs = 0;
    bool closing = false;
    uint16_t next_qpn = 1;
    struct Entry {
        Target *t;
        uint32_t qkey;
    };
    std::map<uint16_t, Entry> targets;
};

struct Engine::Out {  // a read being served: data chunks still to push to the initiator
    MsgHdr req;
    EpAddr self;
    MemRef mem;
    uint64_t sent = 0;
    Target *t;
    Path path;
};

struct Engine::Peer {
    uint8_t gid[16];
    std::string key;
    PeerLink link;
    bool opened = false;
    bool unreachable = false;
    std::string why;
    std::deque<MsgHdr> control;  // acks, read requests, header-only read responses
    std::deque<Op *> ops;        // writes and sends with chunks left to push
    std::deque<Out> reads;       // read responses with data left to push
    bool backlog() const { return !control.empty() || !ops.empty() || !reads.empty(); }
};

struct Engine::Held {
    Op *op;
    uint32_t status;
    uint64_t due;
    uint64_t since;
};

namespace {
std::mutex g_kick_mu;
Inbox *g_primary = nullptr;  // the inbox the engine sleeps on; guarded by g_kick_mu
std::atomic<bool> g_pending{false};
}  // namespace

Engine &Engine::instance() {
    static Engine *e = new Engine;  // never destroyed: exit-time paths may still reach it
    return *e;
}

bool Engine::attach_nic(int nic, uint8_t gid[16], std::string *why) {
    std::unique_lock<std::mutex> lk(mu_);
    auto it = nics_.find(nic);
    if (it != nics_.end() && !it->second->closing) {
        it->second->refs++;
        memcpy(gid, it->second->gid, 16);
        return true;
    }
    if (it != nics_.end()) {  // closing but not yet collected by the engine: revive it
        it->second->closing = false;
        it->second->refs = 1;
        memcpy(gid, it->second->gid, 16);
        return true;
    }
    if (!nonce_) {
        nonce_ = process_nonce();
        rng_ = config().seed;
        placement_.configure();
        reap_stale_inboxes();
    }
    auto n = std::make_unique<Nic>();
    n->index = nic;
    make_gid(n->gid, nic, (uint32_t)getpid(), nonce_);
    if (!n->inbox.create(n->gid, why)) return false;
    n->refs = 1;
    memcpy(gid, n->gid, 16);
    stats().note_nic("efaemu" + std::to_string(nic));
    nics_[nic] = std::move(n);
    if (!running_) start_locked();
    return true;
}

void Engine::start_locked() {
    if (thread_.joinable()) thread_.join();  // a previous engine that already left its loop
    running_ = true;
    {
        std::lock_guard<std::mutex> g(g_kick_mu);
        g_primary = &nics_.begin()->second->inbox;
    }
    thread_ = std::thread([this] { run(); });
    dump::start();
}

void Engine::detach_nic(int nic) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = nics_.find(nic);
        if (it == nics_.end() || --it->second->refs > 0) return;
        it->second->closing = true;  // the engine collects it (it may be asleep on this inbox)
    }
    kick();
}

uint16_t Engine::add_target(int nic, Target *t, uint32_t *qkey) {
    std::lock_guard<std::mutex> lk(mu_);
    Nic &n = *nics_.at(nic);
    uint16_t q = n.next_qpn;
    while (n.targets.count(q) || q == 0) q++;
    n.next_qpn = (uint16_t)(q + 1);
    *qkey = (uint32_t)splitmix64(&rng_) | 1;
    n.targets[q] = {t, *qkey};
    return q;
}

void Engine::remove_target(int nic, uint16_t qpn) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = nics_.find(nic);
    if (it == nics_.end()) return;
    auto t = it->second->targets.find(qpn);
    if (t == it->second->targets.end()) return;
    Target *target = t->second.t;
    it->second->targets.erase(t);
    placement_.drop_target(nic, qpn);  // staged writes must not outlive the endpoint they point at
    for (auto &kv : peers_) {
        auto &reads = kv.second->reads;
        reads.erase(std::remove_if(reads.begin(), reads.end(), [&](const Out &o) { return o.t == target; }), reads.end());
    }
}

void Engine::cancel(OpSink *sink) {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<Op *> doomed;
    {
        std::lock_guard<std::mutex> g(submit_mu_);
        auto keep = std::remove_if(submitted_.begin(), submitted_.end(), [&](Op *o) {
            if (o->sink != sink) return false;
            doomed.push_back(o);
            return true;
        });
        submitted_.erase(keep, submitted_.end());
    }
    for (auto it = inflight_.begin(); it != inflight_.end();) {
        if (it->second->sink == sink) {
            doomed.push_back(it->second);
            it = inflight_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto &kv : peers_) {
        auto &ops = kv.second->ops;
        ops.erase(std::remove_if(ops.begin(), ops.end(), [&](Op *o) { return o->sink == sink; }), ops.end());
    }
    held_.erase(std::remove_if(held_.begin(), held_.end(),
                               [&](const Held &h) {
                                   if (h.op->sink != sink) return false;
                                   doomed.push_back(h.op);
                                   return true;
                               }),
                held_.end());
    for (Op *o : doomed) delete o;
}

void Engine::submit(Op *op) {
    {
        std::lock_guard<std::mutex> g(submit_mu_);
        submitted_.push_back(op);
    }
    kick();
}

void Engine::kick() {
    g_pending.store(true, std::memory_order_seq_cst);
    std::lock_guard<std::mutex> g(g_kick_mu);
    if (g_primary) g_primary->wake();
}

void Engine::add_source(Source *s) {
    std::lock_guard<std::mutex> lk(mu_);
    sources_.push_back(s);
}

void Engine::remove_source(Source *s) {
    std::lock_guard<std::mutex> lk(mu_);
    sources_.erase(std::remove(sources_.begin(), sources_.end(), s), sources_.end());
}

void Engine::shutdown() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (auto &kv : nics_) kv.second->closing = true;
    }
    kick();
    if (thread_.joinable()) thread_.join();
}

Engine::Peer &Engine::peer(const uint8_t gid[16]) {
    std::string k = gid_hex(gid);
    auto it = peers_.find(k);
    if (it != peers_.end()) return *it->second;
    auto p = std::make_unique<Peer>();
    memcpy(p->gid, gid, 16);
    p->key = peer_key(gid);
    Peer &ref = *p;
    peers_[k] = std::move(p);
    return ref;
}

void Engine::begin(Op *op, uint64_t now) {
    op->id = next_id_++;
    op->start_ns = now;
    const Config &c = config();
    const bool counted = c.fail_path < 0 || c.fail_path == (int)op->path;
    if (counted) ops_seen_++;
    if (counted && c.fail_every && ops_seen_ % c.fail_every == 0) {
        stats().fault("failed");
        EFA_INFO(FI_LOG_EP_DATA, "fault injection: op %llu completes with status %u (%s)",
                 (unsigned long long)op->id, c.fail_status, status_name(c.fail_status));
        finish(op, c.fail_status);
        return;
    }
    if (op->local_status) {
        finish(op, op->local_status);
        return;
    }
    if (!op->mem_known) {
        op->mem = hmem::classify(reinterpret_cast<const void *>(op->local));
        op->mem_known = true;
    }
    Peer &p = peer(op->dst.gid);
    if (!p.opened) {
        p.opened = p.link.open(p.gid, &p.why);
        if (!p.opened) {
            EFA_WARN(FI_LOG_EP_DATA, "peer %s unreachable: %s", p.key.c_str(), p.why.c_str());
            finish(op, kLocalUnreachRemote);
            return;
        }
    }
    inflight_[op->id] = op;
    if (op->kind == OpKind::Read) {
        MsgHdr h{};
        h.type = kMsgReadReq;
        h.flags = (uint16_t)(op->path == Path::Gda ? kFlagPathGda : 0);
        h.src = op->src;
        h.dst_qpn = op->dst.qpn;
        h.dst_qkey = op->dst.qkey;
        h.op_id = op->id;
        h.remote_addr = op->remote_addr;
        h.rkey = op->rkey;
        h.total_len = op->len;
        p.control.push_back(h);
    } else {
        p.ops.push_back(op);
    }
}

void Engine::finish(Op *op, uint32_t status) {
    inflight_.erase(op->id);
    auto pit = peers_.find(gid_hex(op->dst.gid));
    if (pit != peers_.end()) {
        auto &ops = pit->second->ops;
        auto it = std::find(ops.begin(), ops.end(), op);
        if (it != ops.end()) ops.erase(it);
    }
    static const Kind kinds[] = {Kind::Write, Kind::Read, Kind::Send};
    stats().record(op->path, kinds[(int)op->kind], gid_nic(op->src.gid), peer_key(op->dst.gid), op->len, op->mem.kind, status);
    const Config &c = config();
    uint64_t now = now_ns();
    uint64_t due = now;
    if (c.delay_max_ns) {
        uint64_t span = c.delay_max_ns - c.delay_min_ns;
        due += c.delay_min_ns + (span ? splitmix64(&rng_) % (span + 1) : 0);
        stats().fault("delayed");
    }
    held_.push_back({op, status, due, now});
}

void Engine::deliver(Op *op, uint32_t status) { op->sink->op_done(*op, status); }

size_t Engine::release_completions(uint64_t now, uint64_t *next_due) {
    const uint32_t window = config().reorder;
    size_t n = 0;
    for (;;) {
        // Completions whose delay has passed, oldest first.
        std::vector<size_t> ready;
        uint64_t oldest_since = UINT64_MAX;
        for (size_t i = 0; i < held_.size(); i++) {
            if (held_[i].due <= now) {
                ready.push_back(i);
                oldest_since = std::min(oldest_since, held_[i].since);
            }
        }
        if (ready.empty()) break;
        size_t pick;
        if (!window) {
            pick = ready.front();
        } else if (ready.size() > window || oldest_since + kMaxHoldNs <= now) {
            pick = ready[splitmix64(&rng_) % ready.size()];
            if (pick != ready.front()) stats().fault("reordered");
        } else {
            break;  // wait for more company (or for the hold limit)
        }
        Held h = held_[pick];
        held_.erase(held_.begin() + (long)pick);
        deliver(h.op, h.status);
        n++;
    }
    for (const Held &h : held_) {
        uint64_t t = h.due > now ? h.due : h.since + kMaxHoldNs;
        *next_due = std::min(*next_due, t);
    }
    return n;
}

void Engine::fail_peer_ops(Peer &p, uint32_t status) {
    std::vector<Op *> doomed;
    for (auto &kv : inflight_)
        if (memcmp(kv.second->dst.gid, p.gid, 16) == 0) doomed.push_back(kv.second);
    for (Op *o : doomed) finish(o, status);
    p.ops.clear();
    p.control.clear();
    p.reads.clear();
}

void Engine::check_peers(uint64_t now) {
    last_check_ns_ = now;
    for (auto &kv : peers_) {
        Peer &p = *kv.second;
        if (!p.opened) continue;
        bool waiting = p.backlog();
        if (!waiting)
            for (auto &op : inflight_)
                if (memcmp(op.second->dst.gid, p.gid, 16) == 0) {
                    waiting = true;
                    break;
                }
        if (waiting && !p.link.alive()) {
            EFA_WARN(FI_LOG_EP_DATA, "peer %s went away: failing its operations", p.key.c_str());
            fail_peer_ops(p, kLocalUnrespRemote);
            p.link.close();
            p.opened = false;
        }
    }
    const uint64_t timeout = config().timeout_ns;
    placement_.reap(now, timeout);  // partial writes of initiators that died
    std::vector<Op *> late;
    for (auto &kv : inflight_)
        if (kv.second->start_ns + timeout < now) late.push_back(kv.second);
    for (Op *o : late) {
        EFA_WARN(FI_LOG_EP_DATA, "op %llu to %s unanswered after %llu ms", (unsigned long long)o->id,
                 peer_key(o->dst.gid).c_str(), (unsigned long long)(timeout / 1000000));
        finish(o, kLocalUnrespRemote);
    }
}

size_t Engine::take_submissions() {
    std::vector<Op *> batch;
    {
        std::lock_guard<std::mutex> g(submit_mu_);
        batch.swap(submitted_);
    }
    uint64_t now = now_ns();
    for (Op *op : batch) begin(op, now);
    return batch.size();
}

bool Engine::push_op_chunk(Peer &p, Op *op) {
    uint64_t chunk = std::min<uint64_t>(kSlotPayload, op->len - op->sent);
    MsgHdr h{};
    h.type = op->kind == OpKind::Send ? kMsgSend : kMsgWrite;
    h.flags = (uint16_t)((op->sent + chunk == op->len ? kFlagLast : 0) | (op->has_data ? kFlagRemoteData : 0) |
                         (op->path == Path::Gda ? kFlagPathGda : 0));
    h.src = op->src;
    h.dst_qpn = op->dst.qpn;
    h.dst_qkey = op->dst.qkey;
    h.op_id = op->id;
    h.remote_addr = op->remote_addr;
    h.rkey = op->rkey;
    h.total_len = op->len;
    h.offset = op->sent;
    h.len = (uint32_t)chunk;
    h.data = op->data;
    std::string why;
    bool failed = false;
    bool pushed = p.link.push(h, [&](uint8_t *dst) {
        failed = !hmem::copy_to_host(dst, op->local + op->sent, op->mem, chunk, &why);
        return !failed;
    });
    if (!pushed) return false;
    op->sent += chunk;
    op->header_sent = true;
    if (failed) {
        EFA_WARN(FI_LOG_EP_DATA, "op %llu: reading the local buffer failed: %s", (unsigned long long)op->id, why.c_str());
        finish(op, kLocalQpInternalError);
    }
    return true;
}

bool Engine::push_read_chunk(Peer &p, Out &o) {
    uint64_t chunk = std::min<uint64_t>(kSlotPayload, o.req.total_len - o.sent);
    MsgHdr h{};
    h.type = kMsgReadResp;
    h.flags = (uint16_t)(o.sent + chunk == o.req.total_len ? kFlagLast : 0);
    h.src = o.self;
    h.dst_qpn = o.req.src.qpn;
    h.dst_qkey = o.req.src.qkey;
    h.op_id = o.req.op_id;
    h.total_len = o.req.total_len;
    h.offset = o.sent;
    h.len = (uint32_t)chunk;
    std::string why;
    bool pushed = p.link.push(h, [&](uint8_t *dst) {
        bool ok = hmem::copy_to_host(dst, o.req.remote_addr + o.sent, o.mem, chunk, &why);
        if (!ok) EFA_WARN(FI_LOG_EP_DATA, "serving a read from %s failed: %s", p.key.c_str(), why.c_str());
        return ok;
    });
    if (!pushed) return false;
    o.sent += chunk;
    if (o.sent == o.req.total_len) {
        o.t->rma_done(o.req.src, false, o.req.total_len, false, 0);
        stats().record(o.path, Kind::RemoteRead, gid_nic(o.self.gid), p.key, o.req.total_len, o.mem.kind, 0);
    }
    return true;
}

size_t Engine::pump() {
    size_t n = 0;
    for (auto &kv : peers_) {
        Peer &p = *kv.second;
        if (!p.backlog()) continue;
        if (!p.opened && !(p.opened = p.link.open(p.gid, &p.why))) {
            fail_peer_ops(p, kLocalUnreachRemote);
            continue;
        }
        bool full = false;
        while (!full && !p.control.empty()) {
            if (p.link.push(p.control.front(), [](uint8_t *) { return true; })) {
                p.control.pop_front();
                n++;
            } else {
                full = true;
            }
        }
        while (!full && !p.ops.empty()) {
            Op *op = p.ops.front();
            if (!push_op_chunk(p, op)) {
                full = true;
                break;
            }
            n++;
            // push_op_chunk may have finished (and unlinked) the op on a local read failure.
            if (!p.ops.empty() && p.ops.front() == op && op->sent == op->len && op->header_sent) p.ops.pop_front();
        }
        while (!full && !p.reads.empty()) {
            if (!push_read_chunk(p, p.reads.front())) {
                full = true;
                break;
            }
            n++;
            if (p.reads.front().sent == p.reads.front().req.total_len) p.reads.pop_front();
        }
        if (full && !p.link.alive()) fail_peer_ops(p, kLocalUnrespRemote);
    }
    return n;
}

bool Engine::land(StagedWrite &w, bool again) {
    auto n = nics_.find(w.nic);
    Target *t = nullptr;
    if (n != nics_.end()) {
        auto it = n->second->targets.find(w.h.dst_qpn);
        if (it != n->second->targets.end() && it->second.qkey == w.h.dst_qkey) t = it->second.t;
    }
    // Checked again: the registration or the initiator's AV entry may have gone while the write was staged.
    MemRef mem;
    uint32_t st = t ? t->rma_check(w.h.src, w.h.remote_addr, w.h.total_len, w.h.rkey, true, false, &mem) : kRemoteBadDestQpn;
    std::string why;
    if (!st && !hmem::copy_from_host(w.h.remote_addr, mem, w.bytes.data(), w.h.total_len, &why)) {
        EFA_WARN(FI_LOG_EP_DATA, "placing a staged write from %s failed: %s", peer_key(w.h.src.gid).c_str(), why.c_str());
        st = kRemoteBadStatus;
    }
    if (again) return st == kOk;
    if (st) {
        stats().fault("place_dropped");
        if (!w.acked && n != nics_.end()) reply(*n->second, w.h, kMsgAck, st, 0);
        return false;
    }
    // The immediate's RX completion after its bytes, then the ack (unless the deferred stage sent it already).
    t->rma_done(w.h.src, true, w.h.total_len, w.h.flags & kFlagRemoteData, w.h.data);
    stats().record(w.path, Kind::RemoteWrite, w.nic, peer_key(w.h.src.gid), w.h.total_len, mem.kind, 0);
    if (!w.acked) reply(*n->second, w.h, kMsgAck, kOk, 0);
    return true;
}

void Engine::ack(StagedWrite &w) {
    auto n = nics_.find(w.nic);
    if (n != nics_.end()) reply(*n->second, w.h, kMsgAck, kOk, 0);
}

void Engine::dropped(StagedWrite &w) {
    auto n = nics_.find(w.nic);
    if (!w.acked && n != nics_.end()) reply(*n->second, w.h, kMsgAck, kRemoteBadDestQpn, 0);
}

void Engine::reply(const Nic &nic, const MsgHdr &req, uint16_t type, uint32_t status, uint16_t flags) {
    Peer &p = peer(req.src.gid);
    MsgHdr r{};
    r.type = type;
    r.flags = flags;
    r.status = status;
    memcpy(r.src.gid, nic.gid, 16);  // the answering endpoint
    r.src.qpn = req.dst_qpn;
    r.src.qkey = req.dst_qkey;
    r.dst_qpn = req.src.qpn;
    r.dst_qkey = req.src.qkey;
    r.op_id = req.op_id;
    r.total_len = req.total_len;
    p.control.push_back(r);
}

void Engine::handle(Nic &nic, const MsgHdr &h, const uint8_t *payload) {
    const Path path = (h.flags & kFlagPathGda) ? Path::Gda : Path::Rdm;
    if (h.type == kMsgAck || h.type == kMsgReadResp) {
        auto it = inflight_.find(h.op_id);
        if (it == inflight_.end()) return;  // already failed or timed out
        Op *op = it->second;
        if (h.status) {
            finish(op, h.status == kLocalQpInternalError ? kRemoteBadStatus : h.status);
            return;
        }
        if (h.type == kMsgAck) {
            finish(op, kOk);
            return;
        }
        std::string why;
        if (h.offset + h.len > op->len || !hmem::copy_from_host(op->local + h.offset, op->mem, payload, h.len, &why)) {
            EFA_WARN(FI_LOG_EP_DATA, "op %llu: placing read data failed: %s", (unsigned long long)op->id,
                     why.empty() ? "response longer than the request" : why.c_str());
            finish(op, kLocalQpInternalError);
            return;
        }
        op->received += h.len;
        if (op->received >= op->len) finish(op, kOk);
        return;
    }

    auto t = nic.targets.find(h.dst_qpn);
    if (t == nic.targets.end() || t->second.qkey != h.dst_qkey) {
        if (h.type == kMsgReadReq) reply(nic, h, kMsgReadResp, kRemoteBadDestQpn, kFlagLast);
        else if (h.offset == 0) reply(nic, h, kMsgAck, kRemoteBadDestQpn, 0);
        return;
    }
    Target *target = t->second.t;
    if (h.status) return;  // the initiator could not produce this chunk; it fails the op itself
    std::string pk = peer_key(h.src.gid);
    // EFAEMU_FAIL_AS_TARGET: this PE refuses the path's remote writes and reads, as a peer that stopped answering;
    // each fails at its initiator (once: on a write's first chunk), whoever else that initiator writes to.
    const int refuse = config().fail_as_target;
    if ((h.type == kMsgWrite || h.type == kMsgReadReq) && (refuse == -1 || refuse == (int)path)) {
        if (h.type == kMsgReadReq) reply(nic, h, kMsgReadResp, config().fail_status, kFlagLast);
        else if (h.offset == 0) reply(nic, h, kMsgAck, config().fail_status, 0);
        if (h.offset == 0) stats().fault("refused");
        return;
    }
    switch (h.type) {
        case kMsgWrite: {
            MemRef mem;
            uint32_t st = target->rma_check(h.src, h.remote_addr, h.total_len, h.rkey, true, h.flags & kFlagRemoteData, &mem);
            if (st) {
                if (h.offset == 0) {
                    reply(nic, h, kMsgAck, st, 0);
                    stats().record(path, Kind::RemoteWrite, nic.index, pk, h.total_len, mem.kind, st);
                }
                return;
            }
            if (placement_.active()) {  // staged: the placement model decides when the bytes land and the ack goes
                const uint64_t now = now_ns();
                StagedWrite *w = h.offset == 0 ? placement_.begin(nic.index, path, h, now) : placement_.find(nic.index, h);
                if (w) {
                    placement_.chunk(w, h, payload, now);
                    return;
                }
            }
            std::string why;
            if (!hmem::copy_from_host(h.remote_addr + h.offset, mem, payload, h.len, &why)) {
                EFA_WARN(FI_LOG_EP_DATA, "placing a write from %s failed: %s", pk.c_str(), why.c_str());
                reply(nic, h, kMsgAck, kRemoteBadStatus, 0);
                return;
            }
            if (h.flags & kFlagLast) {
                target->rma_done(h.src, true, h.total_len, h.flags & kFlagRemoteData, h.data);
                stats().record(path, Kind::RemoteWrite, nic.index, pk, h.total_len, mem.kind, 0);
                reply(nic, h, kMsgAck, kOk, 0);
            }
            return;
        }
        case kMsgReadReq: {
            MemRef mem;
            uint32_t st = target->rma_check(h.src, h.remote_addr, h.total_len, h.rkey, false, false, &mem);
            if (st) {
                reply(nic, h, kMsgReadResp, st, kFlagLast);
                stats().record(path, Kind::RemoteRead, nic.index, pk, h.total_len, mem.kind, st);
                return;
            }
            // A read does not pass the posted writes of this NIC: they land before it is served.
            if (placement_.active()) placement_.flush_nic(nic.index, now_ns());
            Out o;
            o.req = h;
            memcpy(o.self.gid, nic.gid, 16);
            o.self.qpn = h.dst_qpn;
            o.self.qkey = h.dst_qkey;
            o.mem = mem;
            o.t = target;
            o.path = path;
            peer(h.src.gid).reads.push_back(o);
            return;
        }
        case kMsgSend: {
            bool complete = false;
            uint32_t st = target->msg_chunk(h, payload, &complete);
            if (complete) reply(nic, h, kMsgAck, st, 0);
            return;
        }
        default:
            EFA_WARN(FI_LOG_EP_DATA, "dropping a message of unknown type %u from %s", h.type, pk.c_str());
    }
}

size_t Engine::drain_inboxes() {
    size_t n = 0;
    for (auto &kv : nics_) {
        Nic &nic = *kv.second;
        if (nic.closing) continue;
        n += nic.inbox.drain([&](const MsgHdr &h, const uint8_t *payload) { handle(nic, h, payload); }, 256);
    }
    return n;
}

void Engine::run() {
    hmem::mark_engine_thread();
    pthread_setname_np(pthread_self(), "efaemu-engine");
    std::vector<std::unique_ptr<Nic>> graveyard;  // closed inboxes stay mapped until the thread leaves
    std::unique_lock<std::mutex> lk(mu_);
    while (running_) {
        // Collect NICs whose last domain closed.
        for (auto it = nics_.begin(); it != nics_.end();) {
            if (it->second->closing) {
                placement_.drop_nic(it->first);
                it->second->inbox.close_name();
                graveyard.push_back(std::move(it->second));
                it = nics_.erase(it);
            } else {
                ++it;
            }
        }
        if (nics_.empty()) break;

        dump::set_activity(dump::Act::Submissions);
        size_t work = take_submissions();
        dump::set_activity(dump::Act::Inbox);
        work += drain_inboxes();
        dump::set_activity(dump::Act::Targets);
        for (auto &kv : nics_)
            for (auto &t : kv.second->targets) t.second.t->progress();
        dump::set_activity(dump::Act::Pump);
        work += pump();
        bool spin = false;
        dump::set_activity(dump::Act::Sources);
        for (Source *s : sources_) {
            work += s->poll();
            spin = spin || s->needs_spin();
        }
        uint64_t now = now_ns();
        uint64_t next_due = UINT64_MAX;
        dump::set_activity(dump::Act::Completions);
        work += release_completions(now, &next_due);
        work += placement_.step(now, &next_due);
        dump::set_activity(dump::Act::Checks);
        if (now - last_check_ns_ > kCheckEveryNs) check_peers(now);
        dump::set_activity(dump::Act::Idle);
        if (work) continue;
        if (spin) {
            lk.unlock();
            sched_yield();
            lk.lock();
            continue;
        }
        bool backlog = false;
        for (auto &kv : peers_) backlog = backlog || kv.second->backlog();
        int64_t timeout = backlog ? kBacklogSleepNs : kIdleSleepNs;
        if (next_due != UINT64_MAX) timeout = std::min<int64_t>(timeout, (int64_t)(next_due > now ? next_due - now : 0));
        if (nics_.size() > 1) timeout = std::min<int64_t>(timeout, 100000);  // other inboxes' producers wake theirs
        if (!sources_.empty()) timeout = std::min<int64_t>(timeout, kSourcePollNs);  // doorbells wake nobody
        if (timeout <= 0) continue;
        Inbox *in = &nics_.begin()->second->inbox;
        {
            std::lock_guard<std::mutex> g(g_kick_mu);
            g_primary = in;
        }
        dump::set_activity(dump::Act::Sleeping);
        lk.unlock();
        in->sleep(timeout, [] { return g_pending.exchange(false); });
        lk.lock();
    }
    // Leaving: nothing can complete any more. Operations still held or in flight belong to closed endpoints.
    {
        std::lock_guard<std::mutex> g(g_kick_mu);
        g_primary = nullptr;
    }
    running_ = false;
    hmem::engine_thread_release();
    graveyard.clear();
}

std::string Engine::describe(uint64_t now, std::vector<std::string> *findings) {
    std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
    for (int i = 0; i < 2000 && !lk.try_lock(); i++) usleep(1000);
    if (!lk.owns_lock()) {
        findings->push_back("the engine lock was held for more than 2 s (the engine thread is stuck in what the line "
                            "'engine thread:' names): per-object state not read");
        return "engine: lock held for more than 2 s; per-object state not read\n";
    }
    static const char *kinds[] = {"write", "read", "send"};
    static const char *paths[] = {"rdm", "gda"};
    size_t pending_submit;
    {
        std::lock_guard<std::mutex> g(submit_mu_);
        pending_submit = submitted_.size();
    }
    std::string o;
    char b[512];
    size_t by[2][3] = {};
    std::vector<Op *> ops;
    for (auto &kv : inflight_) {
        by[(int)kv.second->path][(int)kv.second->kind]++;
        ops.push_back(kv.second);
    }
    std::sort(ops.begin(), ops.end(), [](const Op *a, const Op *b) { return a->start_ns < b->start_ns; });
    uint64_t oldest_held = 0;
    for (const Held &h : held_)
        if (!oldest_held || h.since < oldest_held) oldest_held = h.since;
    snprintf(b, sizeof b,
             "engine: %zu posted not yet taken; %zu in flight (rdm write %zu read %zu send %zu; gda write %zu read %zu); "
             "%zu finished, held by the fault model (oldest %s); %llu operations begun\n",
             pending_submit, inflight_.size(), by[0][0], by[0][1], by[0][2], by[1][0], by[1][1], held_.size(),
             dump::age(oldest_held, now).c_str(), (unsigned long long)(next_id_ - 1));
    o += b;
    placement_.describe(o, now, findings);
    for (size_t i = 0; i < ops.size() && i < 5; i++) {
        const Op *op = ops[i];
        snprintf(b, sizeof b, "  in flight: op %llu %s %s to %s qpn %u, %llu bytes, %llu pushed, %llu received, for %s\n",
                 (unsigned long long)op->id, paths[(int)op->path], kinds[(int)op->kind], peer_key(op->dst.gid).c_str(),
                 op->dst.qpn, (unsigned long long)op->len, (unsigned long long)op->sent, (unsigned long long)op->received,
                 dump::age(op->start_ns, now).c_str());
        o += b;
    }
    if (!ops.empty() && now - ops.front()->start_ns > 1000000000ull)
        findings->push_back("op " + std::to_string(ops.front()->id) + " to " + peer_key(ops.front()->dst.gid) +
                            " unanswered for " + dump::age(ops.front()->start_ns, now) +
                            " (the peer's engine has not acknowledged it; see the peer's dump)");
    if (oldest_held && now - oldest_held > 100000000ull)
        findings->push_back("completions held by the fault model for " + dump::age(oldest_held, now) +
                            " (EFAEMU_REORDER/EFAEMU_DELAY_US should release them within milliseconds)");
    for (auto &kv : peers_) {
        const Peer &p = *kv.second;
        snprintf(b, sizeof b, "peer %s: link %s; to push: %zu control, %zu ops, %zu read responses\n", p.key.c_str(),
                 p.opened ? (p.link.alive() ? "open, peer alive" : "open, PEER GONE") : "not open", p.control.size(),
                 p.ops.size(), p.reads.size());
        o += b;
    }
    for (auto &kv : nics_) {
        Nic &n = *kv.second;
        snprintf(b, sizeof b, "nic efaemu%d: inbox %s, %llu messages not yet drained; %zu endpoints\n", n.index,
                 gid_hex(n.gid).c_str(), (unsigned long long)n.inbox.pending(), n.targets.size());
        o += b;
        for (auto &t : n.targets) t.second.t->describe(o, now, findings);
    }
    for (Source *s : sources_) s->describe(o, now, findings);
    return o;
}

}  // namespace efaemu
