// Address vectors (FI_AV_TABLE: fi_addr is the insertion index, which NVSHMEM relies on when it computes
// pe * 2 + ep). The reverse map answers the target's question "has this endpoint inserted the initiator?"
// (fi_efa(7): RMA from a peer the target has not inserted fails with UNKNOWN_PEER) and fills FI_SOURCE.
#include <string.h>

#include "efaemu.h"

namespace efaemu {

namespace {

std::string key_of(const EpAddr &a) { return gid_hex(a.gid) + ":" + std::to_string(a.qpn) + ":" + std::to_string(a.qkey); }

int av_close(struct fid *fid) {
    auto *av = reinterpret_cast<Av *>(fid);
    if (av->refs > 0) return -FI_EBUSY;
    domain_unref(av->domain);
    delete av;
    return 0;
}

struct fi_ops g_av_fi_ops = {
    sizeof(struct fi_ops), av_close, fid_no_bind, fid_no_control, fid_no_ops_open, nullptr, nullptr,
};

int av_insert(struct fid_av *fid, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t, void *) {
    auto *av = reinterpret_cast<Av *>(fid);
    std::lock_guard<std::mutex> g(av->mu);
    int inserted = 0;
    for (size_t i = 0; i < count; i++) {
        EpAddr a;
        memcpy(&a, static_cast<const uint8_t *>(addr) + i * kAddrLen, kAddrLen);
        if (!gid_is_ours(a.gid)) {
            EFA_WARN(FI_LOG_AV, "fi_av_insert: entry %zu is not an efaemu address", i);
            if (fi_addr) fi_addr[i] = FI_ADDR_NOTAVAIL;
            continue;
        }
        a.pad = 0;
        a.reserved = 0;
        std::string k = key_of(a);
        auto it = av->by_addr.find(k);
        fi_addr_t idx;
        domain_ah(av->domain, a.gid);  // the NIC creates an address handle per remote GID
        if (it != av->by_addr.end()) {
            idx = it->second;  // as the efa provider: inserting a known address returns its fi_addr
        } else {
            idx = av->table.size();
            av->table.push_back(a);
            av->valid.push_back(true);
            av->by_addr[k] = idx;
        }
        if (fi_addr) fi_addr[i] = idx;
        inserted++;
    }
    return inserted;
}

int av_remove(struct fid_av *fid, fi_addr_t *fi_addr, size_t count, uint64_t) {
    auto *av = reinterpret_cast<Av *>(fid);
    std::lock_guard<std::mutex> g(av->mu);
    for (size_t i = 0; i < count; i++) {
        fi_addr_t a = fi_addr[i];
        if (a >= av->table.size() || !av->valid[a]) return -FI_EINVAL;
        av->valid[a] = false;
        av->by_addr.erase(key_of(av->table[a]));
    }
    return 0;
}

int av_lookup_op(struct fid_av *fid, fi_addr_t fi_addr, void *addr, size_t *addrlen) {
    EpAddr a;
    if (!av_lookup(reinterpret_cast<Av *>(fid), fi_addr, &a)) return -FI_EINVAL;
    memcpy(addr, &a, std::min(*addrlen, kAddrLen));
    *addrlen = kAddrLen;
    return 0;
}

const char *av_straddr(struct fid_av *, const void *addr, char *buf, size_t *len) {
    EpAddr a;
    memcpy(&a, addr, kAddrLen);
    std::string s = addr_str(a);
    if (buf && *len) snprintf(buf, *len, "%s", s.c_str());
    *len = s.size() + 1;
    return buf;
}

struct fi_ops_av g_av_ops = {
    sizeof(struct fi_ops_av),
    av_insert,
    [](struct fid_av *, const char *, const char *, fi_addr_t *, uint64_t, void *) { return -FI_ENOSYS; },
    [](struct fid_av *, const char *, size_t, const char *, size_t, fi_addr_t *, uint64_t, void *) { return -FI_ENOSYS; },
    av_remove,
    av_lookup_op,
    av_straddr,
    [](struct fid_av *, struct fi_av_set_attr *, struct fid_av_set **, void *) { return -FI_ENOSYS; },
};

}  // namespace

int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **out, void *context) {
    if (attr) {
        if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP) return -FI_EINVAL;
        if (attr->name || (attr->flags & FI_EVENT)) {
            EFA_WARN(FI_LOG_AV, "named (shared) AVs and AV events are not emulated");
            return -FI_ENOSYS;
        }
    }
    auto *av = new Av;
    memset(&av->fid, 0, sizeof av->fid);
    av->fid.fid.fclass = FI_CLASS_AV;
    av->fid.fid.context = context;
    av->fid.fid.ops = &g_av_fi_ops;
    av->fid.ops = &g_av_ops;
    av->domain = reinterpret_cast<Domain *>(domain);
    domain_ref(av->domain);
    *out = &av->fid;
    return 0;
}

bool av_lookup(const Av *av, fi_addr_t a, EpAddr *out) {
    std::lock_guard<std::mutex> g(av->mu);
    if (a >= av->table.size() || !av->valid[a]) return false;
    *out = av->table[a];
    return true;
}

fi_addr_t av_reverse(const Av *av, const EpAddr &a) {
    std::lock_guard<std::mutex> g(av->mu);
    auto it = av->by_addr.find(key_of(a));
    return it == av->by_addr.end() ? FI_ADDR_NOTAVAIL : it->second;
}

}  // namespace efaemu
