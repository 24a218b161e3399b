// Completion queues in the four libfabric formats. An error entry at the head makes fi_cq_read return
// -FI_EAVAIL until the application takes it with fi_cq_readerr (what NVSHMEM's progress loop expects);
// fi_cq_strerror explains the EFA status in prov_errno.
#include <string.h>

#include <sched.h>

#include <chrono>

#include "efaemu.h"
#include "status.h"

namespace efaemu {

namespace {

Cq *Q(struct fid_cq *f) { return reinterpret_cast<Cq *>(f); }

int cq_close(struct fid *fid) {
    auto *cq = reinterpret_cast<Cq *>(fid);
    if (cq->refs > 0) return -FI_EBUSY;
    if (cq->ring) gda_ring_free(cq->ring);
    domain_unref(cq->domain);
    delete cq;
    return 0;
}

int cq_control(struct fid *, int, void *) {
    return -FI_ENOSYS;  // no FI_GETWAIT fd: fi_cq_sread waits internally
}

struct fi_ops g_cq_fi_ops = {
    sizeof(struct fi_ops), cq_close, fid_no_bind, cq_control, fid_no_ops_open, nullptr, nullptr,
};

size_t entry_size(enum fi_cq_format f) {
    switch (f) {
        case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
        case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
        case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
        default: return sizeof(struct fi_cq_tagged_entry);
    }
}

void write_entry(enum fi_cq_format f, uint8_t *dst, const struct fi_cq_tagged_entry &e) {
    switch (f) {
        case FI_CQ_FORMAT_CONTEXT: {
            struct fi_cq_entry o = {e.op_context};
            memcpy(dst, &o, sizeof o);
            break;
        }
        case FI_CQ_FORMAT_MSG: {
            struct fi_cq_msg_entry o = {e.op_context, e.flags, e.len};
            memcpy(dst, &o, sizeof o);
            break;
        }
        case FI_CQ_FORMAT_DATA: {
            struct fi_cq_data_entry o = {e.op_context, e.flags, e.len, e.buf, e.data};
            memcpy(dst, &o, sizeof o);
            break;
        }
        default: memcpy(dst, &e, sizeof e);
    }
}

ssize_t read_locked(Cq *cq, void *buf, size_t count, fi_addr_t *src) {
    if (cq->items.empty()) return -FI_EAGAIN;
    if (cq->items.front().is_err) return -FI_EAVAIL;
    size_t n = 0, sz = entry_size(cq->format);
    auto *out = static_cast<uint8_t *>(buf);
    while (n < count && !cq->items.empty() && !cq->items.front().is_err) {
        const CqEntry &e = cq->items.front().ok;
        write_entry(cq->format, out + n * sz, e.e);
        if (src) src[n] = e.src;
        cq->items.pop_front();
        n++;
    }
    return (ssize_t)n;
}

ssize_t cq_readfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src) {
    Cq *cq = Q(f);
    cq->reads.fetch_add(1, std::memory_order_relaxed);
    cq->last_read_ns.store(now_ns(), std::memory_order_relaxed);
    ssize_t r;
    {
        std::lock_guard<std::mutex> g(cq->mu);
        r = read_locked(cq, buf, count, src);
    }
    // A manual-progress application spins here; on a host with fewer cores than spinning threads that would
    // starve the engine threads that are to produce its completions. Yielding now and then costs nothing
    // when a core is free.
    if (r == -FI_EAGAIN && (++cq->empty_polls & 63) == 0) sched_yield();
    return r;
}

ssize_t cq_sreadfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src, const void *, int timeout) {
    Cq *cq = Q(f);
    std::unique_lock<std::mutex> lk(cq->mu);
    auto ready = [&] { return !cq->items.empty() || cq->signaled; };
    if (timeout < 0) cq->cv.wait(lk, ready);
    else cq->cv.wait_for(lk, std::chrono::milliseconds(timeout), ready);
    cq->signaled = false;
    return read_locked(cq, buf, count, src);
}

ssize_t cq_readerr(struct fid_cq *f, struct fi_cq_err_entry *buf, uint64_t) {
    Cq *cq = Q(f);
    std::lock_guard<std::mutex> g(cq->mu);
    if (cq->items.empty() || !cq->items.front().is_err) return -FI_EAGAIN;
    const CqErr &e = cq->items.front().err;
    // Field by field: the caller's struct is as large as its headers made it (src_addr exists from 1.20 on).
    buf->op_context = e.e.op_context;
    buf->flags = e.e.flags;
    buf->len = e.e.len;
    buf->buf = e.e.buf;
    buf->data = e.e.data;
    buf->tag = e.e.tag;
    buf->olen = e.e.olen;
    buf->err = e.e.err;
    buf->prov_errno = e.e.prov_errno;
    buf->err_data = nullptr;
    buf->err_data_size = 0;
#if FI_MAJOR_VERSION > 1 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION >= 20)
    if (FI_VERSION_GE(cq->domain->fabric->api_version, FI_VERSION(1, 20))) buf->src_addr = e.src;
#endif
    cq->items.pop_front();
    return 1;
}

const char *cq_strerror(struct fid_cq *, int prov_errno, const void *, char *buf, size_t len) {
    const char *text = status_text((uint32_t)prov_errno);
    if (buf && len) {
        snprintf(buf, len, "%s (EFA status %d, efaemu)", text, prov_errno);
        return buf;
    }
    return text;
}

struct fi_ops_cq g_cq_ops = {
    sizeof(struct fi_ops_cq),
    [](struct fid_cq *f, void *buf, size_t count) { return cq_readfrom(f, buf, count, nullptr); },
    cq_readfrom,
    cq_readerr,
    [](struct fid_cq *f, void *buf, size_t count, const void *cond, int timeout) {
        return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
    },
    cq_sreadfrom,
    [](struct fid_cq *f) {
        Cq *cq = Q(f);
        {
            std::lock_guard<std::mutex> g(cq->mu);
            cq->signaled = true;
        }
        cq->cv.notify_all();
        return 0;
    },
    cq_strerror,
};

}  // namespace

int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **out, void *context) {
    enum fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
    if (attr) {
        if (attr->format != FI_CQ_FORMAT_UNSPEC) format = attr->format;
        if (format > FI_CQ_FORMAT_TAGGED) return -FI_ENOSYS;
        if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_YIELD &&
            attr->wait_obj != FI_WAIT_MUTEX_COND) {
            EFA_WARN(FI_LOG_CQ, "CQ wait object %d not emulated (use FI_WAIT_NONE or FI_WAIT_UNSPEC)", attr->wait_obj);
            return -FI_ENOSYS;
        }
    }
    auto *cq = new Cq;
    memset(&cq->fid, 0, sizeof cq->fid);
    cq->fid.fid.fclass = FI_CLASS_CQ;
    cq->fid.fid.context = context;
    cq->fid.fid.ops = &g_cq_fi_ops;
    cq->fid.ops = &g_cq_ops;
    cq->domain = reinterpret_cast<Domain *>(domain);
    cq->format = format;
    cq->wait_obj = attr ? attr->wait_obj : FI_WAIT_NONE;
    domain_ref(cq->domain);
    *out = &cq->fid;
    return 0;
}

void cq_push(Cq *cq, const CqEntry &e) {
    {
        std::lock_guard<std::mutex> g(cq->mu);
        cq->items.push_back({false, e, CqErr{}});
    }
    cq->cv.notify_all();
}

void cq_push_err(Cq *cq, const CqErr &e) {
    {
        std::lock_guard<std::mutex> g(cq->mu);
        cq->items.push_back({true, CqEntry{}, e});
    }
    cq->cv.notify_all();
}

}  // namespace efaemu
