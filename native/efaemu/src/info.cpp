// The fi_info list the emulated provider reports: per NIC efaemu<N>, the `efa` RDM fabric with the attributes
// the real efa provider (libfabric v2.3.0, efa_prov_info.c / efa_user_info.c) gives its RDM info where they
// matter to applications (names, caps, mr_mode, progress, ordering, sizes, the nic object NVSHMEM resolves in
// sysfs), and the hint matching libfabric's util layer applies (ofi_check_info / ofi_alter_info), re-done here
// because a DL provider built against public headers cannot link the util library.
//
// Before the RDM infos, one `efa-direct` info per NIC, shaped like the real provider's (v2.3.0 efa_prov.c lists
// every efa-direct info first; efa_prov_info_alloc gives it the RDM domain name, FI_CONTEXT2 mode, FI_MR_LOCAL,
// automatic progress, no ordering, the device's inline size and its max RDMA size).
//
// Deviations, on purpose and reported in the README: no FI_TAGGED, FI_ATOMIC, FI_DIRECTED_RECV or FI_MULTI_RECV,
// iov limits of 1, no DGRAM endpoints.
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "config.h"
#include "efaemu.h"

namespace efaemu {

uint32_t process_nonce();

namespace {

constexpr uint64_t kRdmTxCaps = FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE;
constexpr uint64_t kRdmRxCaps = FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE;
constexpr uint64_t kDomainCaps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t kPrimaryCaps = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_NAMED_RX_CTX |
                                  FI_DIRECTED_RECV | FI_HMEM | FI_COLLECTIVE | FI_READ | FI_WRITE | FI_RECV |
                                  FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kSecondaryCaps = FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SHARED_AV | FI_TRIGGER |
                                    FI_FENCE | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SOURCE_ERR | FI_RMA_PMEM;
constexpr uint64_t kTxOpFlags = FI_INJECT | FI_COMPLETION | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
constexpr int kRdmProtocolVersion = 4;
constexpr size_t kMtu = 8928;
constexpr uint64_t kDirectTxOpFlags = FI_TRANSMIT_COMPLETE | FI_INJECT | FI_COMPLETION | FI_DELIVERY_COMPLETE;
constexpr size_t kDirectInlineSize = 32;             // the device's inline_buf_size on p5
constexpr uint64_t kMaxRdmaSize = 1ull << 30;        // the device's max RDMA size (1 GiB)

// ---- the nic object ----------------------------------------------------------------------------------------------

int nic_close(struct fid *fid);
int nic_control(struct fid *fid, int command, void *arg);

struct fi_ops g_nic_ops = {
    sizeof(struct fi_ops), nic_close, fid_no_bind, nic_control, fid_no_ops_open, nullptr, nullptr,
};

char *dup(const char *s) { return s ? strdup(s) : nullptr; }

struct fid_nic *nic_alloc() {
    auto *nic = static_cast<struct fid_nic *>(calloc(1, sizeof(struct fid_nic)));
    nic->fid.fclass = FI_CLASS_NIC;
    nic->fid.ops = &g_nic_ops;
    nic->device_attr = static_cast<struct fi_device_attr *>(calloc(1, sizeof(struct fi_device_attr)));
    nic->bus_attr = static_cast<struct fi_bus_attr *>(calloc(1, sizeof(struct fi_bus_attr)));
    nic->link_attr = static_cast<struct fi_link_attr *>(calloc(1, sizeof(struct fi_link_attr)));
    return nic;
}

int nic_close(struct fid *fid) {
    auto *nic = reinterpret_cast<struct fid_nic *>(fid);
    if (struct fi_device_attr *d = nic->device_attr) {
        free(d->name);
        free(d->device_id);
        free(d->device_version);
        free(d->vendor_id);
        free(d->driver);
        free(d->firmware);
        free(d);
    }
    free(nic->bus_attr);
    if (nic->link_attr) {
        free(nic->link_attr->address);
        free(nic->link_attr->network_type);
        free(nic->link_attr);
    }
    free(nic);
    return 0;
}

int nic_control(struct fid *fid, int command, void *arg) {
    if (command != FI_DUP) return -FI_ENOSYS;
    auto *src = reinterpret_cast<struct fid_nic *>(fid);
    struct fid_nic *n = nic_alloc();
    if (src->device_attr) {
        const struct fi_device_attr *s = src->device_attr;
        *n->device_attr = {dup(s->name), dup(s->device_id), dup(s->device_version), dup(s->vendor_id), dup(s->driver),
                           dup(s->firmware)};
    }
    if (src->bus_attr) *n->bus_attr = *src->bus_attr;
    if (src->link_attr) {
        *n->link_attr = *src->link_attr;
        n->link_attr->address = dup(src->link_attr->address);
        n->link_attr->network_type = dup(src->link_attr->network_type);
    }
    *static_cast<struct fid_nic **>(arg) = n;
    return 0;
}

// The PCI function the NIC's sysfs entry points at (a GPU's, in the test namespace), for bus_attr.
void fill_bus(struct fi_bus_attr *bus, const std::string &nic) {
    bus->bus_type = FI_BUS_UNKNOWN;
    std::string link = "/sys/class/infiniband/" + nic + "/device";
    char *real = realpath(link.c_str(), nullptr);
    if (!real) return;
    const char *base = strrchr(real, '/');
    unsigned dom, b, d, f;
    if (base && sscanf(base + 1, "%x:%x:%x.%x", &dom, &b, &d, &f) == 4) {
        bus->bus_type = FI_BUS_PCI;
        bus->attr.pci.domain_id = (uint16_t)dom;
        bus->attr.pci.bus_id = (uint8_t)b;
        bus->attr.pci.device_id = (uint8_t)d;
        bus->attr.pci.function_id = (uint8_t)f;
    }
    free(real);
}

std::string gid_ipv6(const uint8_t gid[16]) {
    EpAddr a{};
    memcpy(a.gid, gid, 16);
    std::string s = addr_str(a);
    return s.substr(0, s.find(' '));
}

struct fid_nic *make_nic(int index, const uint8_t gid[16]) {
    std::string name = "efaemu" + std::to_string(index);
    struct fid_nic *nic = nic_alloc();
    *nic->device_attr = {strdup(name.c_str()), strdup("0xefa1"), strdup("efaemu-1"), strdup("0x1d0f"),
                         strdup("efaemu"), strdup("efaemu-1")};
    fill_bus(nic->bus_attr, name);
    nic->link_attr->address = strdup(("EFA-" + gid_ipv6(gid)).c_str());
    nic->link_attr->mtu = kMtu;
    nic->link_attr->speed = 100000000000ull;
    nic->link_attr->state = FI_LINK_UP;
    nic->link_attr->network_type = strdup("Ethernet");
    return nic;
}

// ---- the RDM info ------------------------------------------------------------------------------------------------

struct fi_info *make_rdm_info(int index, bool hmem) {
    struct fi_info *fi = fi_allocinfo();  // allocated by the running libfabric: its struct sizes, not ours
    if (!fi) return nullptr;
    const Config &c = config();
    uint8_t gid[16];
    make_gid(gid, index, (uint32_t)getpid(), process_nonce());

    fi->caps = kRdmTxCaps | kRdmRxCaps | kDomainCaps | (hmem ? FI_HMEM : 0);
    fi->mode = 0;
    fi->addr_format = FI_ADDR_EFA;
    auto *src = static_cast<EpAddr *>(calloc(1, kAddrLen));
    memcpy(src->gid, gid, 16);
    fi->src_addr = src;
    fi->src_addrlen = kAddrLen;

    fi->tx_attr->caps = kRdmTxCaps | (hmem ? FI_HMEM : 0);
    fi->tx_attr->mode = 0;
    fi->tx_attr->op_flags = kTxOpFlags;
    fi->tx_attr->msg_order = FI_ORDER_SAS;
    fi->tx_attr->inject_size = kInjectSize;
    fi->tx_attr->size = c.tx_size;
    fi->tx_attr->iov_limit = 1;
    fi->tx_attr->rma_iov_limit = 1;

    fi->rx_attr->caps = kRdmRxCaps | (hmem ? FI_HMEM : 0);
    fi->rx_attr->mode = 0;
    fi->rx_attr->op_flags = FI_COMPLETION;
    fi->rx_attr->msg_order = FI_ORDER_SAS;
    fi->rx_attr->size = c.rx_size;
    fi->rx_attr->iov_limit = 1;

    fi->ep_attr->type = FI_EP_RDM;
    fi->ep_attr->protocol = FI_PROTO_EFA;
    fi->ep_attr->protocol_version = kRdmProtocolVersion;
    fi->ep_attr->max_msg_size = UINT64_MAX;  // the RDM protocol segments messages
    fi->ep_attr->tx_ctx_cnt = 1;
    fi->ep_attr->rx_ctx_cnt = 1;

    struct fi_domain_attr *d = fi->domain_attr;
    d->name = strdup(("efaemu" + std::to_string(index) + "-rdm").c_str());
    d->threading = FI_THREAD_SAFE;
    d->control_progress = FI_PROGRESS_MANUAL;
    d->data_progress = FI_PROGRESS_MANUAL;
    d->resource_mgmt = FI_RM_ENABLED;
    d->av_type = FI_AV_TABLE;
    d->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
    d->mr_key_size = 4;
    d->cq_data_size = kCqDataSize;
    d->cq_cnt = 1024;
    d->ep_cnt = 1024;
    d->tx_ctx_cnt = 1024;
    d->rx_ctx_cnt = 1024;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->cntr_cnt = 1024;
    d->mr_iov_limit = 1;
    d->caps = kDomainCaps;
    d->mr_cnt = 65536;

    fi->fabric_attr->name = strdup(kFabricRdm);
    fi->fabric_attr->prov_version = kApiVersion;
    fi->nic = make_nic(index, gid);
    return fi;
}

// The efa-direct info: the device's own capabilities (efa_prov_info_alloc), no emulated protocol on top.
struct fi_info *make_direct_info(int index, bool hmem) {
    struct fi_info *fi = make_rdm_info(index, hmem);
    if (!fi) return nullptr;
    const Config &c = config();
    fi->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE |
               kDomainCaps | (hmem ? FI_HMEM : 0);
    fi->mode = FI_CONTEXT2;
    fi->tx_attr->caps = FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE | (hmem ? FI_HMEM : 0);
    fi->tx_attr->mode = FI_CONTEXT2;
    fi->tx_attr->op_flags = kDirectTxOpFlags;
    fi->tx_attr->msg_order = 0;
    fi->tx_attr->inject_size = kDirectInlineSize;
    size_t tx = 1;
    while (tx * 2 <= c.tx_size && tx * 2 <= 65536) tx *= 2;  // rounddown_power_of_two(max_sq_wr)
    fi->tx_attr->size = tx;
    fi->rx_attr->caps = FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | (hmem ? FI_HMEM : 0);
    fi->rx_attr->mode = FI_CONTEXT2;
    fi->rx_attr->op_flags = FI_COMPLETION;
    fi->rx_attr->msg_order = 0;
    fi->ep_attr->protocol_version = 1;
    fi->ep_attr->max_msg_size = kMaxRdmaSize;
    struct fi_domain_attr *d = fi->domain_attr;
    d->control_progress = FI_PROGRESS_AUTO;
    d->data_progress = FI_PROGRESS_AUTO;
    d->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
    free(fi->fabric_attr->name);
    fi->fabric_attr->name = strdup(kFabricDirect);
    return fi;
}

// ---- matching hints (the util layer's rules, for what our infos carry) --------------------------------------------

bool why_not(const char *what) {
    EFA_INFO(FI_LOG_CORE, "hints not supported: %s", what);
    return false;
}

// The pre-1.5 registration modes, deprecated in libfabric 2.x headers but still sent by old applications
// (util's OFI_MR_BASIC and friends; the values are ABI).
constexpr int kMrUnspec = 0, kMrBasic = 1, kMrScalable = 2;
constexpr uint64_t kLocalMrMode = 1ULL << 55;  // FI_LOCAL_MR

// ofi_check_mr_mode for API >= 1.5: every mode bit the provider requires must be one the application supports.
bool mr_mode_ok(uint32_t version, int prov, const struct fi_info *hints) {
    int user = hints->domain_attr->mr_mode;
    if ((prov & FI_MR_LOCAL) && !((hints->mode & kLocalMrMode) || (user & FI_MR_LOCAL))) return false;
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) return user == kMrUnspec || user == kMrBasic;
    if (user & (kMrBasic | kMrScalable)) return (user & ~kMrBasic) == 0 && (prov & kMrBasic);
    if (!(hints->caps & FI_HMEM)) prov &= ~FI_MR_HMEM;
    return user == kMrUnspec || (user & prov) == prov;
}

bool matches(const struct fi_info *fi, const struct fi_info *h, uint32_t version) {
    if (!h) return true;
    if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != fi->ep_attr->type)
        return why_not("endpoint type");
    if ((h->caps & FI_HMEM) && !(fi->caps & FI_HMEM))
        return why_not("FI_HMEM: no usable CUDA here (EFAEMU_HMEM=on claims it anyway)");
    if (h->caps & ~fi->caps) return why_not("capabilities (FI_TAGGED, FI_ATOMIC and others are not emulated)");
    if ((h->mode & fi->mode) != fi->mode) return why_not("mode");
    if (h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != fi->addr_format) return why_not("address format");
    if (h->src_addr && h->src_addrlen != kAddrLen) return why_not("source address length");
    if (h->dest_addr && h->dest_addrlen != kAddrLen) return why_not("destination address length");
    if (h->fabric_attr && h->fabric_attr->name && strcasecmp(h->fabric_attr->name, fi->fabric_attr->name))
        return why_not("fabric name");
    if (const struct fi_domain_attr *d = h->domain_attr) {
        if (d->name && strcasecmp(d->name, fi->domain_attr->name)) return why_not("domain name");
        if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_TABLE && d->av_type != FI_AV_MAP)
            return why_not("av_type");
        if (d->cq_data_size > fi->domain_attr->cq_data_size) return why_not("cq_data_size");
        if (!mr_mode_ok(version, fi->domain_attr->mr_mode, h)) return why_not("mr_mode");
        if (d->mr_iov_limit > fi->domain_attr->mr_iov_limit) return why_not("mr_iov_limit");
        if (d->caps & ~fi->domain_attr->caps) return why_not("domain caps");
        if (d->mr_cnt > fi->domain_attr->mr_cnt || d->cntr_cnt > fi->domain_attr->cntr_cnt) return why_not("counts");
    }
    if (const struct fi_ep_attr *e = h->ep_attr) {
        if (e->protocol != FI_PROTO_UNSPEC && e->protocol != fi->ep_attr->protocol) return why_not("protocol");
        if (e->max_msg_size > fi->ep_attr->max_msg_size) return why_not("max_msg_size");
        if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1) return why_not("contexts");
        if ((h->caps & (FI_RMA | FI_ATOMIC)) && (e->max_order_raw_size || e->max_order_war_size || e->max_order_waw_size))
            return why_not("atomic ordering sizes");
    }
    if (const struct fi_tx_attr *t = h->tx_attr) {
        if (t->caps & ~(fi->tx_attr->caps | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | kSecondaryCaps))
            return why_not("tx caps");
        if (((t->mode ? t->mode : h->mode) & fi->tx_attr->mode) != fi->tx_attr->mode) return why_not("tx mode");
        if (t->op_flags & ~fi->tx_attr->op_flags) return why_not("tx op_flags");
        if (t->msg_order & ~fi->tx_attr->msg_order) return why_not("tx msg_order (RMA and atomics are unordered)");
        if (t->inject_size > fi->tx_attr->inject_size || t->size > fi->tx_attr->size ||
            t->iov_limit > fi->tx_attr->iov_limit || t->rma_iov_limit > fi->tx_attr->rma_iov_limit)
            return why_not("tx sizes");
    }
    if (const struct fi_rx_attr *r = h->rx_attr) {
        if (r->caps & ~(fi->rx_attr->caps | FI_SEND | FI_READ | FI_WRITE | kSecondaryCaps)) return why_not("rx caps");
        if (((r->mode ? r->mode : h->mode) & fi->rx_attr->mode) != fi->rx_attr->mode) return why_not("rx mode");
        if (r->op_flags & ~(fi->rx_attr->op_flags | FI_MULTI_RECV)) return why_not("rx op_flags");
        if (r->msg_order & ~fi->rx_attr->msg_order) return why_not("rx msg_order");
        if (r->size > fi->rx_attr->size || r->iov_limit > fi->rx_attr->iov_limit || r->total_buffered_recv)
            return why_not("rx sizes");
    }
    return true;
}

// ofi_get_caps: requested primary caps (or all the info has), plus the info's secondary caps.
uint64_t narrow_caps(uint64_t info_caps, uint64_t hint_caps, uint64_t attr_caps) {
    uint64_t caps;
    if (!hint_caps) {
        caps = (info_caps & attr_caps & kPrimaryCaps) | (attr_caps & kSecondaryCaps);
    } else {
        caps = (hint_caps & kPrimaryCaps) | (attr_caps & kSecondaryCaps);
        caps = (caps & ~FI_SOURCE) | (hint_caps & FI_SOURCE);
    }
    const uint64_t msg_dir = FI_SEND | FI_RECV, rma_dir = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    if ((caps & FI_MSG) && !(caps & msg_dir)) caps |= attr_caps & msg_dir;
    if ((caps & FI_RMA) && !(caps & rma_dir)) caps |= attr_caps & rma_dir;
    return caps;
}

// ofi_alter_info: the returned info reflects what the application asked for.
void alter(struct fi_info *fi, const struct fi_info *h, uint32_t version) {
    fi->fabric_attr->api_version = version;
    if (!h) return;
    fi->caps = narrow_caps(fi->caps, h->caps, fi->caps);
    fi->handle = h->handle;
    if (const struct fi_domain_attr *d = h->domain_attr) {
        int hm = d->mr_mode;
        if (!(hm & (kMrBasic | kMrScalable)) && (hm & fi->domain_attr->mr_mode) != fi->domain_attr->mr_mode) {
            int m = fi->domain_attr->mr_mode & hm;
            if (!(fi->caps & FI_HMEM)) m &= ~FI_MR_HMEM;
            fi->domain_attr->mr_mode = m;
        }
        fi->domain_attr->caps = narrow_caps(fi->caps, d->caps, fi->domain_attr->caps);
        if (d->threading) fi->domain_attr->threading = d->threading;
        if (d->data_progress) {
            fi->domain_attr->data_progress = d->data_progress;
            fi->domain_attr->control_progress = d->data_progress;
        }
        if (d->av_type == FI_AV_MAP) EFA_INFO(FI_LOG_CORE, "FI_AV_MAP requested: using FI_AV_TABLE, as the efa provider does");
    } else {
        fi->domain_attr->caps = narrow_caps(fi->caps, 0, fi->domain_attr->caps);
    }
    if (!(fi->caps & FI_HMEM)) fi->domain_attr->mr_mode &= ~FI_MR_HMEM;
    fi->tx_attr->caps = narrow_caps(fi->caps, h->tx_attr ? h->tx_attr->caps : 0, fi->tx_attr->caps);
    fi->rx_attr->caps = narrow_caps(fi->caps, h->rx_attr ? h->rx_attr->caps : 0, fi->rx_attr->caps);
    if (h->tx_attr) {
        fi->tx_attr->op_flags = h->tx_attr->op_flags;
        if (h->tx_attr->inject_size) fi->tx_attr->inject_size = h->tx_attr->inject_size;
        if (h->tx_attr->size) fi->tx_attr->size = h->tx_attr->size;
        fi->tx_attr->msg_order &= h->tx_attr->msg_order;
    }
    if (h->rx_attr) {
        fi->rx_attr->op_flags = h->rx_attr->op_flags;
        if (h->rx_attr->size) fi->rx_attr->size = h->rx_attr->size;
        fi->rx_attr->msg_order &= h->rx_attr->msg_order;
    }
}

// The application named a destination (node/service without FI_SOURCE): only our own printed address form
// ("fe80:...:... qpn:N qkey:0xK") can name an EFA endpoint, as with the real provider, which cannot resolve IP
// addresses either (fabtests need -E, out-of-band address exchange, on EFA).
bool parse_dest(const char *node, EpAddr *out) {
    unsigned g[8], qpn, qkey;
    if (sscanf(node, "%x:%x:%x:%x:%x:%x:%x:%x qpn:%u qkey:0x%x", &g[0], &g[1], &g[2], &g[3], &g[4], &g[5], &g[6],
               &g[7], &qpn, &qkey) != 10)
        return false;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 8; i++) {
        out->gid[2 * i] = (uint8_t)(g[i] >> 8);
        out->gid[2 * i + 1] = (uint8_t)g[i];
    }
    out->qpn = (uint16_t)qpn;
    out->qkey = qkey;
    return gid_is_ours(out->gid);
}

}  // namespace

bool hmem_claimed() {
    switch (config().hmem) {
        case HmemMode::On: return true;
        case HmemMode::Off: return false;
        default: return hmem::cuda_available();
    }
}

int nic_from_domain_name(const char *name, const char *suffix) {
    int n = -1, used = 0;
    if (!name || sscanf(name, "efaemu%d%n", &n, &used) != 1 || strcmp(name + used, suffix) != 0) return -1;
    return n >= 0 && n < config().nics ? n : -1;
}

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags, const struct fi_info *hints,
            struct fi_info **info) {
    (void)service;
    *info = nullptr;
    const Config &c = config();
    if (!c.error.empty()) {
        fprintf(stderr, "efaemu: %s\n", c.error.c_str());
        EFA_WARN(FI_LOG_CORE, "%s", c.error.c_str());
        return -FI_EINVAL;
    }
    EpAddr dest{};
    bool have_dest = false;
    if (node && !(flags & FI_SOURCE)) {
        if (!parse_dest(node, &dest)) {
            EFA_INFO(FI_LOG_CORE, "node \"%s\" is not an efaemu endpoint address (exchange addresses out of band)", node);
            return -FI_ENODATA;
        }
        have_dest = true;
    }
    const bool hmem = hmem_claimed();
    struct fi_info *head = nullptr, *tail = nullptr;
    for (int k = 0; k < 2 * c.nics; k++) {  // every NIC's efa-direct info first, then every NIC's RDM info
        const int n = k % c.nics;
        struct fi_info *fi = k < c.nics ? make_direct_info(n, hmem) : make_rdm_info(n, hmem);
        if (!fi) return -FI_ENOMEM;
        if (!matches(fi, hints, version)) {
            fi_freeinfo(fi);
            continue;
        }
        alter(fi, hints, version);
        if (have_dest || (hints && hints->dest_addr)) {
            fi->dest_addr = malloc(kAddrLen);
            memcpy(fi->dest_addr, have_dest ? &dest : hints->dest_addr, kAddrLen);
            fi->dest_addrlen = kAddrLen;
        }
        (tail ? tail->next : head) = fi;
        tail = fi;
    }
    *info = head;
    return head ? 0 : -FI_ENODATA;
}

}  // namespace efaemu
