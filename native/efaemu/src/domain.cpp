// fi_domain: one domain per opened efaemu<N>-rdm info (the efa and efa-direct fabrics name their domains alike,
// as the real provider does). Opening it attaches the process to the NIC's wire (its inbox), closing the last
// one detaches. fi_open_ops(FI_EFA_GDA_OPS) answers on efa-direct domains only (-FI_EOPNOTSUPP elsewhere, as
// the real provider).
#include <string.h>

#include "efaemu.h"

namespace efaemu {

namespace {

int domain_close(struct fid *fid) {
    auto *d = reinterpret_cast<Domain *>(fid);
    if (d->refs > 0) {
        EFA_WARN(FI_LOG_DOMAIN, "domain close with %d objects still open", d->refs.load());
        return -FI_EBUSY;
    }
    Engine::instance().detach_nic(d->nic);
    delete d;
    return 0;
}

int domain_ops_open(struct fid *fid, const char *name, uint64_t, void **ops, void *) {
    auto *d = reinterpret_cast<Domain *>(fid);
    if (name && strcmp(name, "efa gda ops") == 0) {  // FI_EFA_GDA_OPS
        if (!d->direct) {
            EFA_WARN(FI_LOG_DOMAIN, "Only efa direct supports FI_EFA_GDA_OPS");
            return -FI_EOPNOTSUPP;
        }
        *ops = gda_ops();
        return *ops ? 0 : -FI_ENOSYS;
    }
    EFA_WARN(FI_LOG_DOMAIN, "Unknown ops name: %s", name ? name : "(null)");
    return -FI_EINVAL;
}

struct fi_ops g_domain_fi_ops = {
    sizeof(struct fi_ops), domain_close, fid_no_bind, fid_no_control, domain_ops_open, nullptr, nullptr,
};

struct fi_ops_domain g_domain_ops = {
    sizeof(struct fi_ops_domain),
    av_open,
    cq_open,
    ep_open,
    [](struct fid_domain *, struct fi_info *, struct fid_ep **, void *) { return -FI_ENOSYS; },
    cntr_open,
    [](struct fid_domain *, struct fi_poll_attr *, struct fid_poll **) { return -FI_ENOSYS; },
    [](struct fid_domain *, struct fi_tx_attr *, struct fid_stx **, void *) { return -FI_ENOSYS; },
    [](struct fid_domain *, struct fi_rx_attr *, struct fid_ep **, void *) { return -FI_ENOSYS; },
    [](struct fid_domain *, enum fi_datatype, enum fi_op, struct fi_atomic_attr *, uint64_t) { return -FI_EOPNOTSUPP; },
    [](struct fid_domain *, enum fi_collective_op, struct fi_collective_attr *, uint64_t) { return -FI_ENOSYS; },
    [](struct fid_domain *d, struct fi_info *info, struct fid_ep **ep, uint64_t flags, void *ctx) {
        return flags ? -FI_EINVAL : ep_open(d, info, ep, ctx);
    },
};

}  // namespace

int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context) {
    auto *f = reinterpret_cast<Fabric *>(fabric);
    if (!info || !info->domain_attr || !info->fabric_attr || !info->fabric_attr->name ||
        strcmp(info->fabric_attr->name, f->name.c_str()) != 0)
        return -FI_EINVAL;
    int nic = nic_from_domain_name(info->domain_attr->name, "-rdm");
    if (nic < 0) {
        EFA_WARN(FI_LOG_DOMAIN, "unknown domain \"%s\"", info->domain_attr->name ? info->domain_attr->name : "(null)");
        return -FI_EINVAL;
    }
    auto *d = new Domain;
    memset(&d->fid, 0, sizeof d->fid);
    std::string why;
    if (!Engine::instance().attach_nic(nic, d->gid, &why)) {
        EFA_WARN(FI_LOG_DOMAIN, "cannot attach to efaemu%d: %s", nic, why.c_str());
        delete d;
        return -FI_ENODEV;
    }
    d->fid.fid.fclass = FI_CLASS_DOMAIN;
    d->fid.fid.context = context;
    d->fid.fid.ops = &g_domain_fi_ops;
    d->fid.ops = &g_domain_ops;
    d->fid.mr = &g_mr_ops;
    d->fabric = f;
    d->nic = nic;
    d->direct = f->name == kFabricDirect;
    d->mr_mode = (uint64_t)info->domain_attr->mr_mode;
    *domain = &d->fid;
    return 0;
}

uint16_t domain_ah(Domain *d, const uint8_t gid[16]) {
    std::lock_guard<std::mutex> g(d->ah_mu);
    std::string k(reinterpret_cast<const char *>(gid), 16);
    auto it = d->ah_by_gid.find(k);
    if (it != d->ah_by_gid.end()) return it->second;
    d->ah_gids.push_back(k);
    const uint16_t ahn = (uint16_t)d->ah_gids.size();
    d->ah_by_gid[k] = ahn;
    return ahn;
}

uint16_t domain_ah_find(Domain *d, const uint8_t gid[16]) {
    std::lock_guard<std::mutex> g(d->ah_mu);
    auto it = d->ah_by_gid.find(std::string(reinterpret_cast<const char *>(gid), 16));
    return it == d->ah_by_gid.end() ? kNoAh : it->second;
}

bool domain_ah_gid(Domain *d, uint16_t ahn, uint8_t gid[16]) {
    std::lock_guard<std::mutex> g(d->ah_mu);
    if (ahn == 0 || ahn > d->ah_gids.size()) return false;
    memcpy(gid, d->ah_gids[ahn - 1].data(), 16);
    return true;
}

}  // namespace efaemu
