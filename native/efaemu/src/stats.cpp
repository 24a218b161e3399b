#include "stats.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "config.h"

namespace efaemu {

namespace {

const char *kKindNames[] = {"write", "read", "send", "recv", "remote_write", "remote_read"};
const char *kPathNames[] = {"rdm", "gda"};

void add(Tally &t, uint64_t bytes, MemKind local, uint32_t status) {
    t.ops++;
    if (status) {
        t.errors++;
        return;
    }
    t.bytes += bytes;
    if (local == MemKind::Cuda) t.gpu_bytes += bytes;
    if (bytes <= kSmallOp) {
        t.small_ops++;
        t.small_bytes += bytes;
        if (local == MemKind::Cuda) t.small_gpu_bytes += bytes;
    }
}

std::string quote(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o + "\"";
}

template <typename PP>
void render_paths(std::string &o, const PP &pp, const char *indent) {
    o += "{";
    for (int p = 0; p < 2; p++) {
        o += std::string(p ? ",\n" : "\n") + indent + "  " + quote(kPathNames[p]) + ": {";
        for (int k = 0; k < (int)Kind::kCount; k++) {
            const Tally &t = pp[p].k[k];
            char buf[320];
            snprintf(buf, sizeof buf,
                     "%s\"%s\": {\"ops\": %llu, \"bytes\": %llu, \"gpu_bytes\": %llu, \"errors\": %llu, "
                     "\"small_ops\": %llu, \"small_bytes\": %llu, \"small_gpu_bytes\": %llu}",
                     k ? ", " : "", kKindNames[k], (unsigned long long)t.ops, (unsigned long long)t.bytes,
                     (unsigned long long)t.gpu_bytes, (unsigned long long)t.errors, (unsigned long long)t.small_ops,
                     (unsigned long long)t.small_bytes, (unsigned long long)t.small_gpu_bytes);
            o += buf;
        }
        o += "}";
    }
    o += std::string("\n") + indent + "}";
}

}  // namespace

void Stats::record(Path p, Kind k, int nic, const std::string &peer, uint64_t bytes, MemKind local, uint32_t status) {
    std::lock_guard<std::mutex> g(mu_);
    add(paths_[(int)p].k[(int)k], bytes, local, status);
    add(per_nic_[nic][(int)p].k[(int)k], bytes, local, status);
    add(peers_[peer][(int)p].k[(int)k], bytes, local, status);
}

void Stats::fault(const char *what) {
    std::lock_guard<std::mutex> g(mu_);
    faults_[what]++;
}

void Stats::note_nic(const std::string &nic) {
    std::lock_guard<std::mutex> g(mu_);
    nics_[nic]++;
}

Tally Stats::total(Path p, Kind k) const {
    std::lock_guard<std::mutex> g(mu_);
    return paths_[(int)p].k[(int)k];
}

uint64_t Stats::faults(const char *what) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = faults_.find(what);
    return it == faults_.end() ? 0 : it->second;
}

std::string Stats::json() const {
    std::lock_guard<std::mutex> g(mu_);
    const Config &c = config();
    std::string o = "{\n  \"efaemu\": 1,\n  \"pid\": " + std::to_string(getpid()) + ",\n  \"nics\": [";
    bool first = true;
    for (auto &kv : nics_) {
        o += (first ? "" : ", ") + quote(kv.first);
        first = false;
    }
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "],\n  \"config\": {\"fail_every\": %llu, \"fail_status\": %u, \"reorder\": %u, \"delay_us\": [%llu, %llu], "
             "\"seed\": %llu, \"gda_order\": %s, \"fail_path\": \"%s\"",
             (unsigned long long)c.fail_every, c.fail_status, c.reorder, (unsigned long long)(c.delay_min_ns / 1000),
             (unsigned long long)(c.delay_max_ns / 1000), (unsigned long long)c.seed,
             quote(c.gda_order.empty() ? (c.reorder ? "random" : "inorder") : c.gda_order).c_str(),
             c.fail_path < 0 ? "all" : c.fail_path ? "gda" : "rdm");
    o += cfg;
    snprintf(cfg, sizeof cfg,
             ", \"place_order\": %s, \"place_defer_us\": [%llu, %llu], \"duplicate\": [%g, %llu]},\n  \"paths\": ",
             c.place_order ? quote("random:" + std::to_string(c.place_seed) + ":" + std::to_string(c.place_window)).c_str()
                           : "null",
             (unsigned long long)(c.place_defer_min_ns / 1000), (unsigned long long)(c.place_defer_max_ns / 1000),
             c.dup_rate, (unsigned long long)(c.dup_max_ns / 1000));
    o += cfg;
    render_paths(o, paths_, "  ");
    o += ",\n  \"per_nic\": {";
    first = true;
    for (auto &kv : per_nic_) {
        o += std::string(first ? "\n" : ",\n") + "    " + quote("efaemu" + std::to_string(kv.first)) + ": ";
        render_paths(o, kv.second, "    ");
        first = false;
    }
    o += "\n  },\n  \"peers\": {";
    first = true;
    for (auto &kv : peers_) {
        o += std::string(first ? "\n" : ",\n") + "    " + quote(kv.first) + ": ";
        render_paths(o, kv.second, "    ");
        first = false;
    }
    o += "\n  },\n  \"faults\": {";
    first = true;
    for (auto &kv : faults_) {
        o += (first ? "" : ", ") + quote(kv.first) + ": " + std::to_string(kv.second);
        first = false;
    }
    o += "}\n}\n";
    return o;
}

int Stats::write(const std::string &dir, const std::string &suffix, std::string *why) const {
    std::string path = dir + "/efaemu-" + std::to_string(getpid()) + suffix + ".json";
    // The temporary name is unique per writer thread: two snapshots of one label never share a half-written file.
    static std::atomic<uint64_t> seq{0};
    std::string tmp = path + ".tmp" + std::to_string(seq.fetch_add(1));
    std::string doc = json();
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f) {
        const int e = errno;
        *why = "cannot write " + tmp + ": " + strerror(e);
        return -e;
    }
    bool ok = fwrite(doc.data(), 1, doc.size(), f) == doc.size();
    int e = ok ? 0 : (errno ? errno : EIO);
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp.c_str(), path.c_str()) != 0) e = errno;
    if (e) {
        *why = "cannot write " + path + ": " + strerror(e);
        unlink(tmp.c_str());
        return -e;
    }
    return 0;
}

Stats &stats() {
    static Stats *s = new Stats;  // never destroyed: atexit handlers and late engine work may still use it
    return *s;
}

void write_stats_at_exit() {
    static std::atomic<bool> done{false};
    const Config &c = config();
    if (c.stats_dir.empty() || done.exchange(true)) return;
    std::string why;
    if (stats().write(c.stats_dir, "", &why)) fprintf(stderr, "efaemu: EFAEMU_STATS: %s\n", why.c_str());
}

int stats_snapshot(const char *label) {
    // The label becomes part of a file name in EFAEMU_STATS: one path component, not "." or "..".
    if (!label || !*label || strchr(label, '/') || !strcmp(label, ".") || !strcmp(label, "..")) return -EINVAL;
    const Config &c = config();
    if (c.stats_dir.empty()) return -ENOENT;
    std::string why;
    const int rc = stats().write(c.stats_dir, std::string(".") + label, &why);
    if (rc) fprintf(stderr, "efaemu: efaemu_stats_snapshot(%s): %s\n", label, why.c_str());
    return rc;
}

}  // namespace efaemu
