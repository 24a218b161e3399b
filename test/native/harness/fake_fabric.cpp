// Test double of libfabric's efa-direct provider with the GDA ops, linked into the host harness in place of
// libfabric (the GDA host code reaches libfabric only through fi_getinfo / fi_dupinfo / fi_freeinfo /
// fi_fabric / fi_strerror and the ops tables of the objects these hand out). Queues are host memory; the
// NIC does nothing. What the host code asked for is kept in fake_fabric_* for the harness to check.
//
// Per-process knobs (environment): FAKE_PE (this PE's number: QP number 100 + PE + 10 x the domain's index,
// in the order domains are opened), FAKE_NO_EFA_DIRECT (fi_getinfo finds nothing), FAKE_NO_EFA_DIRECT_DOMAIN
// (fi_getinfo finds nothing for that domain name only: one rail that cannot be opened), FAKE_WQE_SIZE (SQ
// entry size, default 64), FAKE_AV_FAIL (fi_av_insert fails), FAKE_MR_FAIL_NTH (the Nth fi_mr_regattr fails),
// FAKE_CQ_OVERSIZE (query_cq reports more entries than were asked for, so the buffer is too small). Every
// domain, endpoint and AV keeps its own state, so several rails (domains) of one process stay apart.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "fake_fabric.h"

FakeFabricLog fake_fabric;

namespace {

int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v ? atoi(v) : def;
}

struct Address {
    char tag[4];
    uint16_t qpn;
    uint16_t pad;
    uint32_t qkey;
};

struct Queues {
    std::vector<uint8_t> sq, rq;
    uint32_t sq_db = 0, rq_db = 0;
};
struct FakeDomain {
    struct fid_domain domain;
    int index;  // opening order: the rail
    int eps;    // endpoints opened on it
};
struct FakeAv {
    struct fid_av av;
    std::vector<Address> entries;
};
struct FakeEp {
    struct fid_ep ep;
    int domain_index;
    int index;  // opening order on its domain: 0 is the rail's own QP, then the owned queues
    FakeAv *av;
    Queues q;
};
int g_domains = 0;
int g_mr_count = 0;
uint64_t g_next_key = 0x1000;

int fid_close_noop(struct fid *) { return 0; }

template <typename T>
T *make(size_t fclass) {
    char *mem = new char[sizeof(T)]();
    T *o = reinterpret_cast<T *>(mem);
    o->fid.fclass = fclass;
    return o;
}

struct fi_ops g_fid_ops;
struct fi_ops g_ep_fid_ops;
struct fi_ops g_domain_fid_ops;
struct fi_ops_fabric g_fabric_ops;
struct fi_ops_domain g_domain_ops;
struct fi_ops_mr g_mr_ops;
struct fi_ops_av g_av_ops;
struct fi_ops_cm g_cm_ops;
struct fi_efa_ops_gda g_gda;
struct fi_ops_ep g_ep_ops;

int av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t, void *) {
    if (getenv("FAKE_AV_FAIL") || count != 1) return -FI_EINVAL;
    Address a;
    memcpy(&a, addr, sizeof a);
    if (memcmp(a.tag, "FAKE", 4)) return -FI_EINVAL;
    FakeAv *f = reinterpret_cast<FakeAv *>(av);
    f->entries.push_back(a);
    *fi_addr = f->entries.size() - 1;
    fake_fabric.av_inserts++;
    return 1;
}

int getname(fid_t fid, void *addr, size_t *len) {
    if (*len < sizeof(Address)) return -FI_ETOOSMALL;
    const FakeEp *e = reinterpret_cast<const FakeEp *>(fid);
    const int pe = env_int("FAKE_PE", 0);
    // QP 100 + pe + 10 x domain for a domain's first endpoint; later ones (owned queues) 1000 x their index more.
    Address a = {{'F', 'A', 'K', 'E'}, (uint16_t)(100 + pe + 10 * e->domain_index + 1000 * e->index), 0, 0x11110000u + (uint32_t)pe};
    memcpy(addr, &a, sizeof a);
    *len = sizeof a;
    return 0;
}

int ep_bind(struct fid *ep, struct fid *bfid, uint64_t flags) {
    if (bfid->fclass == FI_CLASS_CQ) fake_fabric.cq_binds.push_back(flags);
    if (bfid->fclass == FI_CLASS_AV) reinterpret_cast<FakeEp *>(ep)->av = reinterpret_cast<FakeAv *>(bfid);
    return 0;
}
int ep_close(struct fid *) {
    fake_fabric.endpoints_closed++;
    return 0;
}
int ep_control(struct fid *, int command, void *) {
    if (command == FI_ENABLE) fake_fabric.enabled = true;
    return 0;
}

// FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (rdma/fi_ext.h, an enum; the value is ABI): granted unless
// FAKE_DELIVERED_ONCE=0 (a device without in-order aligned 128-byte writes answers -FI_EOPNOTSUPP, fi_efa(7)).
int ep_setopt(fid_t, int level, int name, const void *val, size_t len) {
    if (level != FI_OPT_ENDPOINT || name != -(0xefa << 16) + 6) return -FI_ENOPROTOOPT;
    if (len != sizeof(bool)) return -FI_EINVAL;
    fake_fabric.delivered_once_asked++;
    return *static_cast<const bool *>(val) && env_int("FAKE_DELIVERED_ONCE", 1) == 0 ? -FI_EOPNOTSUPP : 0;
}

int endpoint(struct fid_domain *d, struct fi_info *, struct fid_ep **ep, void *) {
    FakeDomain *fd = reinterpret_cast<FakeDomain *>(d);
    // FAKE_EP_LIMIT: the NIC's QP limit, endpoints per domain (fi_endpoint then fails as efa does: ENOMEM).
    if (fd->eps >= env_int("FAKE_EP_LIMIT", 1 << 30)) return -FI_ENOMEM;
    fake_fabric.endpoints++;
    FakeEp *e = new FakeEp();
    e->index = fd->eps++;
    e->ep.fid.fclass = FI_CLASS_EP;
    e->ep.fid.ops = &g_ep_fid_ops;
    e->ep.cm = &g_cm_ops;
    e->ep.ops = &g_ep_ops;
    e->domain_index = reinterpret_cast<FakeDomain *>(d)->index;
    *ep = &e->ep;
    return 0;
}

int av_open(struct fid_domain *, struct fi_av_attr *, struct fid_av **av, void *) {
    FakeAv *a = new FakeAv();
    a->av.fid.fclass = FI_CLASS_AV;
    a->av.fid.ops = &g_fid_ops;
    a->av.ops = &g_av_ops;
    *av = &a->av;
    return 0;
}

int mr_regattr(struct fid *, const struct fi_mr_attr *attr, uint64_t, struct fid_mr **mr) {
    g_mr_count++;
    fake_fabric.mr_ifaces.push_back(attr->iface);
    if (g_mr_count == env_int("FAKE_MR_FAIL_NTH", -1)) return -FI_ENOMEM;
    struct fid_mr *m = make<struct fid_mr>(FI_CLASS_MR);
    m->fid.ops = &g_fid_ops;
    m->key = g_next_key++;
    *mr = m;
    return 0;
}

int query_addr(struct fid_ep *ep, fi_addr_t addr, uint16_t *ahn, uint16_t *qpn, uint32_t *qkey) {
    const FakeAv *av = reinterpret_cast<FakeEp *>(ep)->av;
    if (!av || addr >= av->entries.size()) return -FI_EINVAL;
    *ahn = (uint16_t)(500 + addr);
    *qpn = av->entries[addr].qpn;
    *qkey = av->entries[addr].qkey;
    return 0;
}

int query_qp_wqs(struct fid_ep *ep, struct fi_efa_wq_attr *sq, struct fi_efa_wq_attr *rq) {
    Queues &q = reinterpret_cast<FakeEp *>(ep)->q;
    const uint32_t wqe = (uint32_t)env_int("FAKE_WQE_SIZE", 64);
    q.sq.assign(256 * wqe + 4096, 0);
    q.rq.assign(256 * 16, 0);
    sq->buffer = q.sq.data() + 64;  // like the LLQ: not page aligned
    sq->entry_size = wqe;
    sq->num_entries = 256;
    sq->doorbell = &q.sq_db;
    sq->max_batch = 16;
    rq->buffer = q.rq.data();
    rq->entry_size = 16;
    rq->num_entries = 256;
    rq->doorbell = &q.rq_db;
    rq->max_batch = 256;
    // FAKE_WQ_CAPS: the caps word libfabric after 2.3.0 appends in the struct's tail padding (offset 28).
    const uint16_t caps = (uint16_t)env_int("FAKE_WQ_CAPS", 0);
    if (caps) memcpy((uint8_t *)sq + offsetof(struct fi_efa_wq_attr, max_batch) + sizeof(uint32_t), &caps, sizeof caps);
    return 0;
}

struct FakeCq {
    struct fid_cq cq;
    size_t size;
    uint32_t entries;
};

int query_cq(struct fid_cq *cq, struct fi_efa_cq_attr *attr) {
    FakeCq *c = reinterpret_cast<FakeCq *>(cq);
    attr->buffer = nullptr;  // the buffer is the caller's GPU memory (dma-buf)
    attr->entry_size = 32;
    attr->num_entries = c->entries;
    return 0;
}

int cq_open_ext(struct fid_domain *, struct fi_cq_attr *attr, struct fi_efa_cq_init_attr *init, struct fid_cq **cq, void *) {
    if (attr->wait_obj != FI_WAIT_NONE || !(init->flags & FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF) || !init->ext_mem_dmabuf.length)
        return -FI_EINVAL;
    FakeCq *c = reinterpret_cast<FakeCq *>(new char[sizeof(FakeCq)]());
    c->cq.fid.fclass = FI_CLASS_CQ;
    c->cq.fid.ops = &g_fid_ops;
    c->size = attr->size;
    c->entries = 1;
    while (c->entries < attr->size) c->entries <<= 1;
    if (getenv("FAKE_CQ_OVERSIZE")) c->entries *= 1024;
    fake_fabric.cq_requests.push_back({attr->size, init->ext_mem_dmabuf.length, init->ext_mem_dmabuf.offset});
    *cq = &c->cq;
    return 0;
}

uint64_t get_mr_lkey(struct fid_mr *mr) { return mr->key & 0xffffff; }

int ops_open(struct fid *, const char *name, uint64_t, void **ops, void *) {
    if (strcmp(name, FI_EFA_GDA_OPS) == 0) {
        *ops = &g_gda;
        return 0;
    }
    return -FI_EINVAL;
}

int domain(struct fid_fabric *, struct fi_info *, struct fid_domain **dom, void *) {
    FakeDomain *d = new FakeDomain();
    d->domain.fid.fclass = FI_CLASS_DOMAIN;
    d->domain.fid.ops = &g_domain_fid_ops;
    d->domain.ops = &g_domain_ops;
    d->domain.mr = &g_mr_ops;
    d->index = g_domains++;
    *dom = &d->domain;
    return 0;
}

struct Init {
    Init() {
        g_fid_ops.size = sizeof g_fid_ops;
        g_fid_ops.close = fid_close_noop;
        g_ep_fid_ops = g_fid_ops;
        g_ep_fid_ops.bind = ep_bind;
        g_ep_fid_ops.control = ep_control;
        g_ep_fid_ops.close = ep_close;
        g_domain_fid_ops = g_fid_ops;
        g_domain_fid_ops.ops_open = ops_open;
        g_fabric_ops.size = sizeof g_fabric_ops;
        g_fabric_ops.domain = domain;
        g_domain_ops.size = sizeof g_domain_ops;
        g_domain_ops.av_open = av_open;
        g_domain_ops.endpoint = endpoint;
        g_mr_ops.size = sizeof g_mr_ops;
        g_mr_ops.regattr = mr_regattr;
        g_av_ops.size = sizeof g_av_ops;
        g_av_ops.insert = av_insert;
        g_cm_ops.size = sizeof g_cm_ops;
        g_cm_ops.getname = getname;
        g_ep_ops.size = sizeof g_ep_ops;
        g_ep_ops.setopt = ep_setopt;
        g_gda.query_addr = query_addr;
        g_gda.query_qp_wqs = query_qp_wqs;
        g_gda.query_cq = query_cq;
        g_gda.cq_open_ext = cq_open_ext;
        g_gda.get_mr_lkey = get_mr_lkey;
    }
} g_init;

char *dup_or_null(const char *s) { return s ? strdup(s) : nullptr; }

}  // namespace

extern "C" {

struct fi_info *fi_dupinfo(const struct fi_info *in) {
    struct fi_info *i = (struct fi_info *)calloc(1, sizeof *i);
    i->tx_attr = (struct fi_tx_attr *)calloc(1, sizeof *i->tx_attr);
    i->rx_attr = (struct fi_rx_attr *)calloc(1, sizeof *i->rx_attr);
    i->ep_attr = (struct fi_ep_attr *)calloc(1, sizeof *i->ep_attr);
    i->domain_attr = (struct fi_domain_attr *)calloc(1, sizeof *i->domain_attr);
    i->fabric_attr = (struct fi_fabric_attr *)calloc(1, sizeof *i->fabric_attr);
    if (in) {
        i->caps = in->caps;
        i->mode = in->mode;
        *i->tx_attr = *in->tx_attr;
        *i->rx_attr = *in->rx_attr;
        *i->ep_attr = *in->ep_attr;
        *i->domain_attr = *in->domain_attr;
        i->domain_attr->name = dup_or_null(in->domain_attr->name);
        *i->fabric_attr = *in->fabric_attr;
        i->fabric_attr->name = dup_or_null(in->fabric_attr->name);
        i->fabric_attr->prov_name = dup_or_null(in->fabric_attr->prov_name);
    }
    return i;
}

void fi_freeinfo(struct fi_info *i) {
    if (!i) return;
    if (i->nic) {
        free(i->nic->device_attr->name);
        free(i->nic->device_attr->device_id);
        free(i->nic->device_attr);
        free(i->nic);
    }
    free(i->domain_attr->name);
    free(i->fabric_attr->name);
    free(i->fabric_attr->prov_name);
    free(i->tx_attr);
    free(i->rx_attr);
    free(i->ep_attr);
    free(i->domain_attr);
    free(i->fabric_attr);
    free(i);
}

int fi_getinfo(uint32_t, const char *, const char *, uint64_t, const struct fi_info *hints, struct fi_info **info) {
    fake_fabric.hint_inject_size = hints->tx_attr->inject_size;
    fake_fabric.hint_fabric = hints->fabric_attr->name ? hints->fabric_attr->name : "";
    fake_fabric.hint_mode = hints->mode;
    fake_fabric.hint_mr_mode = hints->domain_attr->mr_mode;
    if (getenv("FAKE_NO_EFA_DIRECT")) return -FI_ENODATA;
    const char *no_domain = getenv("FAKE_NO_EFA_DIRECT_DOMAIN");
    if (no_domain && hints->domain_attr->name && strcmp(no_domain, hints->domain_attr->name) == 0) return -FI_ENODATA;
    fake_fabric.getinfo_domains.push_back(hints->domain_attr->name ? hints->domain_attr->name : "");
    struct fi_info *i = fi_dupinfo(hints);
    i->domain_attr->name = strdup(hints->domain_attr->name ? hints->domain_attr->name : "rdmap0s0-rdm");
    i->tx_attr->size = 256;
    // Small on purpose: the RX CQ must be sized for n_pes anyway. FAKE_RX_SIZE: this PE's (FI_EFA_RX_SIZE's stand-in).
    i->rx_attr->size = getenv("FAKE_RX_SIZE") ? strtoull(getenv("FAKE_RX_SIZE"), nullptr, 10) : 8;
    i->ep_attr->max_msg_size = 1ull << 30;
    // FAKE_DEVICE_ID: a nic object whose device id is that (the efa provider's "0x%x" of the PCI device id).
    if (const char *id = getenv("FAKE_DEVICE_ID")) {
        i->nic = (struct fid_nic *)calloc(1, sizeof *i->nic);
        i->nic->device_attr = (struct fi_device_attr *)calloc(1, sizeof *i->nic->device_attr);
        i->nic->device_attr->name = strdup("rdmap0s0");
        i->nic->device_attr->device_id = strdup(id);
    }
    *info = i;
    return 0;
}

int fi_fabric(struct fi_fabric_attr *, struct fid_fabric **fabric, void *) {
    struct fid_fabric *f = make<struct fid_fabric>(FI_CLASS_FABRIC);
    f->fid.ops = &g_fid_ops;
    f->ops = &g_fabric_ops;
    *fabric = f;
    return 0;
}

const char *fi_strerror(int err) {
    static char buf[32];
    snprintf(buf, sizeof buf, "fi error %d", err);
    return buf;
}
}
