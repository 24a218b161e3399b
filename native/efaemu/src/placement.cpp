#include "placement.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "addr.h"
#include "config.h"
#include "dump.h"

namespace efaemu {

namespace {
uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
}  // namespace

void Placement::configure() {
    const Config &c = config();
    order_ = c.place_order;
    window_ = c.place_window;
    defer_ = c.place_defer;
    defer_min_ = c.place_defer_min_ns;
    defer_max_ = c.place_defer_max_ns;
    dup_rate_ = c.dup_rate;
    dup_max_ = c.dup_max_ns;
    // PLACE_ORDER's seed makes its order reproducible; the other stages draw from the same stream.
    rng_ = (c.place_order ? c.place_seed : c.seed) ^ 0x5eed0f9ace11ull;
}

uint64_t Placement::rand(uint64_t lo, uint64_t hi) {
    return hi <= lo ? lo : lo + splitmix64(&rng_) % (hi - lo + 1);
}

std::string Placement::key(int nic, const MsgHdr &h) const {
    return std::to_string(nic) + ":" + gid_hex(h.src.gid) + ":" + std::to_string(h.op_id);
}

StagedWrite *Placement::begin(int nic, Path path, const MsgHdr &h, uint64_t now) {
    if (staged_bytes_ + h.total_len > kStageCapBytes) {
        // Never grow without bound: this write goes the direct way, after the NIC's deferred writes (its FIFO).
        stats().fault("place_cap_direct");
        flush_nic(nic, now);
        return nullptr;
    }
    const std::string k = key(nic, h);
    std::unique_ptr<StagedWrite> w(new StagedWrite());
    w->h = h;
    w->h.offset = 0;
    w->h.len = 0;
    w->nic = nic;
    w->path = path;
    w->bytes.resize(h.total_len);
    w->first_ns = now;
    staged_bytes_ += h.total_len;
    StagedWrite *raw = w.get();
    all_[k] = std::move(w);
    partial_[k] = raw;
    return raw;
}

StagedWrite *Placement::find(int nic, const MsgHdr &h) {
    auto it = partial_.find(key(nic, h));
    return it == partial_.end() ? nullptr : it->second;
}

void Placement::chunk(StagedWrite *w, const MsgHdr &h, const uint8_t *payload, uint64_t now) {
    if (h.offset + h.len <= w->bytes.size() && h.len) memcpy(w->bytes.data() + h.offset, payload, h.len);
    w->got += h.len;
    // The wire keeps one sender's chunks in order, so the last chunk means every byte is here.
    if (h.flags & kFlagLast) arrived(w, now);
}

void Placement::arrived(StagedWrite *w, uint64_t now) {
    partial_.erase(key(w->nic, w->h));
    if (!order_) {
        reach_nic(w, now);
        return;
    }
    Set &s = net_[std::to_string(w->nic) + ":" + gid_hex(w->h.src.gid)];
    w->seq = s.next_seq++;
    w->ready_ns = now + rand(kHoldMinNs, kHoldMaxNs);
    s.q.push_back(w);
}

void Placement::reach_nic(StagedWrite *w, uint64_t now) {
    if (!defer_) {
        land(w, now);
        return;
    }
    // The NIC has every byte: it acknowledges now; PCIe lands the bytes later, never before an earlier write of
    // this NIC (posted writes of one requester stay in order).
    host_->ack(*w);
    w->acked = true;
    stats().fault("deferred");
    std::deque<StagedWrite *> &q = nic_[w->nic];
    w->due_ns = std::max(now + rand(defer_min_, defer_max_), q.empty() ? 0 : q.back()->due_ns);
    q.push_back(w);
}

void Placement::land(StagedWrite *w, uint64_t now) {
    const bool ok = host_->land(*w, false);
    w->landed = true;
    if (ok && dup_rate_ > 0 && (double)(splitmix64(&rng_) >> 11) * 0x1.0p-53 < dup_rate_) {
        w->due_ns = now + rand(0, dup_max_);
        dups_.push_back(w);
        return;
    }
    release(w);
}

void Placement::release(StagedWrite *w) {
    staged_bytes_ -= w->bytes.size();
    all_.erase(key(w->nic, w->h));  // frees w
}

void Placement::flush_nic(int nic, uint64_t now) {
    auto it = nic_.find(nic);
    if (it == nic_.end()) return;
    while (!it->second.empty()) {
        StagedWrite *w = it->second.front();
        it->second.pop_front();
        land(w, now);
    }
}

size_t Placement::step(uint64_t now, uint64_t *next_due) {
    if (all_.empty()) return 0;
    size_t n = 0;
    for (auto &kv : net_) {
        std::deque<StagedWrite *> &q = kv.second.q;
        while (!q.empty()) {
            // Only the oldest `window_` writes may go: none waits behind more than window_ later ones.
            const size_t cand = std::min<size_t>(window_, q.size());
            std::vector<size_t> ready;
            for (size_t i = 0; i < cand; i++)
                if (q[i]->ready_ns <= now) ready.push_back(i);
            size_t pick;
            if (!ready.empty()) pick = ready[rand(0, ready.size() - 1)];
            else if (q.size() > window_) pick = rand(0, cand - 1);
            else break;
            if (pick != 0) stats().fault("placed_out_of_order");
            StagedWrite *w = q[pick];
            q.erase(q.begin() + (long)pick);
            reach_nic(w, now);
            n++;
        }
        for (size_t i = 0; i < std::min<size_t>(window_, q.size()); i++) *next_due = std::min(*next_due, q[i]->ready_ns);
    }
    for (auto &kv : nic_) {
        std::deque<StagedWrite *> &q = kv.second;
        while (!q.empty() && q.front()->due_ns <= now) {
            StagedWrite *w = q.front();
            q.pop_front();
            land(w, now);
            n++;
        }
        if (!q.empty()) *next_due = std::min(*next_due, q.front()->due_ns);
    }
    std::vector<StagedWrite *> later, due;
    for (StagedWrite *w : dups_) (w->due_ns <= now ? due : later).push_back(w);
    dups_.swap(later);
    for (StagedWrite *w : due) {
        if (host_->land(*w, true)) stats().fault("duplicated");
        release(w);
        n++;
    }
    for (StagedWrite *w : dups_) *next_due = std::min(*next_due, w->due_ns);
    return n;
}

void Placement::drop_if(const std::function<bool(const StagedWrite &)> &doomed) {
    std::vector<StagedWrite *> gone;
    for (auto &kv : all_)
        if (doomed(*kv.second)) gone.push_back(kv.second.get());
    if (gone.empty()) return;
    auto is_gone = [&](StagedWrite *w) { return std::find(gone.begin(), gone.end(), w) != gone.end(); };
    for (auto &kv : net_) kv.second.q.erase(std::remove_if(kv.second.q.begin(), kv.second.q.end(), is_gone), kv.second.q.end());
    for (auto &kv : nic_) kv.second.erase(std::remove_if(kv.second.begin(), kv.second.end(), is_gone), kv.second.end());
    dups_.erase(std::remove_if(dups_.begin(), dups_.end(), is_gone), dups_.end());
    for (StagedWrite *w : gone) {
        partial_.erase(key(w->nic, w->h));
        if (!w->landed) {
            stats().fault("place_dropped");
            host_->dropped(*w);
        }
        release(w);
    }
}

void Placement::drop_target(int nic, uint16_t qpn) {
    drop_if([&](const StagedWrite &w) { return w.nic == nic && w.h.dst_qpn == qpn; });
}

void Placement::drop_nic(int nic) {
    drop_if([&](const StagedWrite &w) { return w.nic == nic; });
}

void Placement::reap(uint64_t now, uint64_t timeout_ns) {
    if (partial_.empty()) return;
    drop_if([&](const StagedWrite &w) {
        if (!partial_.count(key(w.nic, w.h))) return false;  // complete: the stages bound its stay
        if (now - w.first_ns > timeout_ns) return true;
        const pid_t pid = (pid_t)gid_pid(w.h.src.gid);
        return kill(pid, 0) != 0 && errno == ESRCH;
    });
}

void Placement::describe(std::string &out, uint64_t now, std::vector<std::string> *findings) const {
    if (!active()) return;
    size_t in_net = 0, in_nic = 0;
    uint64_t oldest = 0;  // the first arrival of the oldest write not yet landed
    for (auto &kv : all_)
        if (!kv.second->landed && (!oldest || kv.second->first_ns < oldest)) oldest = kv.second->first_ns;
    for (auto &kv : net_) in_net += kv.second.q.size();
    for (auto &kv : nic_) in_nic += kv.second.size();
    char b[512];
    snprintf(b, sizeof b,
             "placement: order %s (window %u), defer %s, duplicate %.3g; %zu writes staged (%llu bytes, cap %llu), %zu "
             "arriving, %zu in the network stage, %zu acked and deferred at the NIC, %zu to land again; oldest pending %s\n",
             order_ ? "random" : "off", window_,
             defer_ ? (std::to_string(defer_min_ / 1000) + "-" + std::to_string(defer_max_ / 1000) + " us").c_str() : "off",
             dup_rate_, all_.size(), (unsigned long long)staged_bytes_, (unsigned long long)kStageCapBytes,
             partial_.size(), in_net, in_nic, dups_.size(), dump::age(oldest, now).c_str());
    out += b;
    if (oldest && now - oldest > 1000000000ull)
        findings->push_back("a staged write has waited " + dump::age(oldest, now) +
                            " for placement (the placement modes hold writes for milliseconds at most: an initiator "
                            "that stopped sending its chunks, or an engine that stopped stepping)");
}

}  // namespace efaemu
