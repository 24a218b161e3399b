// fi_fabric for the `efa` (RDM) and `efa-direct` fabrics; the fabric's name decides what its domains offer.
#include <string.h>

#include "efaemu.h"

namespace efaemu {

namespace {

int fabric_close(struct fid *fid) {
    delete reinterpret_cast<Fabric *>(fid);
    return 0;
}

struct fi_ops g_fabric_fi_ops = {
    sizeof(struct fi_ops), fabric_close, fid_no_bind, fid_no_control, fid_no_ops_open, nullptr, nullptr,
};

struct fi_ops_fabric g_fabric_ops = {
    sizeof(struct fi_ops_fabric),
    domain_open,
    [](struct fid_fabric *, struct fi_info *, struct fid_pep **, void *) { return -FI_ENOSYS; },
    eq_open,
    [](struct fid_fabric *, struct fi_wait_attr *, struct fid_wait **) { return -FI_ENOSYS; },
    [](struct fid_fabric *, struct fid **, int) { return -FI_ENOSYS; },
    [](struct fid_fabric *f, struct fi_info *info, struct fid_domain **d, uint64_t flags, void *ctx) {
        return flags ? -FI_EINVAL : domain_open(f, info, d, ctx);
    },
};

}  // namespace

int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
    const bool direct = attr->name && strcmp(attr->name, kFabricDirect) == 0;
    if (attr->name && !direct && strcmp(attr->name, kFabricRdm) != 0) {
        EFA_WARN(FI_LOG_FABRIC, "fabric \"%s\" is not emulated (\"%s\" and \"%s\" are)", attr->name, kFabricRdm,
                 kFabricDirect);
        return -FI_ENODATA;
    }
    auto *f = new Fabric;
    memset(&f->fid, 0, sizeof f->fid);
    f->fid.fid.fclass = FI_CLASS_FABRIC;
    f->fid.fid.context = context;
    f->fid.fid.ops = &g_fabric_fi_ops;
    f->fid.ops = &g_fabric_ops;
    f->api_version = attr->api_version;
    f->name = direct ? kFabricDirect : kFabricRdm;
    *fabric = &f->fid;
    return 0;
}

}  // namespace efaemu
