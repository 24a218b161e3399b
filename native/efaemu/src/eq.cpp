// Event queues: fabtests open one and bind it to RDM endpoints. RDM endpoints have no connection events, so
// the queue only ever reports "nothing yet" (or times out), as the real provider's does in that use.
#include <chrono>
#include <thread>

#include "efaemu.h"

namespace efaemu {

namespace {

struct Eq {
    struct fid_eq fid;
};

int eq_close(struct fid *fid) {
    delete reinterpret_cast<Eq *>(fid);
    return 0;
}

struct fi_ops g_eq_fi_ops = {
    sizeof(struct fi_ops), eq_close, fid_no_bind, fid_no_control, fid_no_ops_open, nullptr, nullptr,
};

struct fi_ops_eq g_eq_ops = {
    sizeof(struct fi_ops_eq),
    [](struct fid_eq *, uint32_t *, void *, size_t, uint64_t) -> ssize_t { return -FI_EAGAIN; },
    [](struct fid_eq *, struct fi_eq_err_entry *, uint64_t) -> ssize_t { return -FI_EAGAIN; },
    [](struct fid_eq *, uint32_t, const void *, size_t, uint64_t) -> ssize_t { return -FI_ENOSYS; },
    [](struct fid_eq *, uint32_t *, void *, size_t, int timeout, uint64_t) -> ssize_t {
        if (timeout > 0) std::this_thread::sleep_for(std::chrono::milliseconds(timeout));
        return -FI_EAGAIN;
    },
    [](struct fid_eq *, int prov_errno, const void *, char *buf, size_t len) -> const char * {
        const char *s = fi_strerror(prov_errno);
        if (buf && len) snprintf(buf, len, "%s", s);
        return buf && len ? buf : s;
    },
};

}  // namespace

int eq_open(struct fid_fabric *, struct fi_eq_attr *attr, struct fid_eq **eq, void *context) {
    if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) {
        EFA_WARN(FI_LOG_EQ, "EQ wait object %d not emulated", attr->wait_obj);
        return -FI_ENOSYS;
    }
    auto *e = new Eq;
    memset(&e->fid, 0, sizeof e->fid);
    e->fid.fid.fclass = FI_CLASS_EQ;
    e->fid.fid.context = context;
    e->fid.fid.ops = &g_eq_fi_ops;
    e->fid.ops = &g_eq_ops;
    *eq = &e->fid;
    return 0;
}

}  // namespace efaemu
