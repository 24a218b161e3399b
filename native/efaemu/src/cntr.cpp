// Completion counters (FI_CNTR_EVENTS_COMP). NVSHMEM's quiet compares fi_cntr_read with the operations it
// posted and its progress checks fi_cntr_readerr first, so an error must bump the error count, never the
// success count.
#include <string.h>

#include <chrono>

#include "efaemu.h"

namespace efaemu {

namespace {

int cntr_close(struct fid *fid) {
    auto *c = reinterpret_cast<Cntr *>(fid);
    if (c->refs > 0) return -FI_EBUSY;
    domain_unref(c->domain);
    delete c;
    return 0;
}

struct fi_ops g_cntr_fi_ops = {
    sizeof(struct fi_ops), cntr_close, fid_no_bind, fid_no_control, fid_no_ops_open, nullptr, nullptr,
};

Cntr *C(struct fid_cntr *f) { return reinterpret_cast<Cntr *>(f); }

void set_and_wake(Cntr *c, std::atomic<uint64_t> &field, uint64_t v, bool add) {
    {
        std::lock_guard<std::mutex> g(c->mu);
        if (add) field += v;
        else field = v;
    }
    c->cv.notify_all();
}

struct fi_ops_cntr g_cntr_ops = {
    sizeof(struct fi_ops_cntr),
    [](struct fid_cntr *f) -> uint64_t {
        C(f)->reads.fetch_add(1, std::memory_order_relaxed);
        C(f)->last_read_ns.store(now_ns(), std::memory_order_relaxed);
        return C(f)->value.load();
    },
    [](struct fid_cntr *f) -> uint64_t { return C(f)->err.load(); },
    [](struct fid_cntr *f, uint64_t v) { set_and_wake(C(f), C(f)->value, v, true); return 0; },
    [](struct fid_cntr *f, uint64_t v) { set_and_wake(C(f), C(f)->value, v, false); return 0; },
    [](struct fid_cntr *f, uint64_t threshold, int timeout) {
        Cntr *c = C(f);
        std::unique_lock<std::mutex> lk(c->mu);
        const uint64_t err0 = c->err;
        auto done = [&] { return c->value >= threshold || c->err != err0; };
        if (timeout < 0) c->cv.wait(lk, done);
        else c->cv.wait_for(lk, std::chrono::milliseconds(timeout), done);
        if (c->err != err0) return -FI_EAVAIL;
        return c->value >= threshold ? 0 : -FI_ETIMEDOUT;
    },
    [](struct fid_cntr *f, uint64_t v) { set_and_wake(C(f), C(f)->err, v, true); return 0; },
    [](struct fid_cntr *f, uint64_t v) { set_and_wake(C(f), C(f)->err, v, false); return 0; },
};

}  // namespace

int cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **out, void *context) {
    if (attr) {
        if (attr->events != FI_CNTR_EVENTS_COMP) {
            EFA_WARN(FI_LOG_CNTR, "counter events %d not emulated (FI_CNTR_EVENTS_COMP is)", attr->events);
            return -FI_ENOSYS;
        }
        if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_YIELD &&
            attr->wait_obj != FI_WAIT_MUTEX_COND) {
            EFA_WARN(FI_LOG_CNTR, "counter wait object %d not emulated", attr->wait_obj);
            return -FI_ENOSYS;
        }
    }
    auto *c = new Cntr;
    memset(&c->fid, 0, sizeof c->fid);
    c->fid.fid.fclass = FI_CLASS_CNTR;
    c->fid.fid.context = context;
    c->fid.fid.ops = &g_cntr_fi_ops;
    c->fid.ops = &g_cntr_ops;
    c->domain = reinterpret_cast<Domain *>(domain);
    domain_ref(c->domain);
    *out = &c->fid;
    return 0;
}

void cntr_inc(Cntr *c) {
    if (c) set_and_wake(c, c->value, 1, true);
}

void cntr_inc_err(Cntr *c) {
    if (c) set_and_wake(c, c->err, 1, true);
}

}  // namespace efaemu
