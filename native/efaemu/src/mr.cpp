// Memory registration. Keys are chosen by the provider (FI_MR_PROV_KEY) from one process-wide space, so a key
// presented to the wrong domain is recognised as foreign (the NIC's protection-domain check) rather than
// matching by accident. Each MR gets two keys from that space (mr_lkey.h): the rkey (fi_mr_key, Mr::key), which
// targets check, and a different lkey (get_mr_lkey), which device-posted WQEs name their local buffer with, so
// a swapped key never matches. The descriptor (fi_mr_desc) is the registration itself; the initiator checks
// that a local buffer lies inside it, the target checks key, access, range and domain.
#include <string.h>

#include <map>
#include <shared_mutex>

#include "efaemu.h"
#include "mr_lkey.h"

namespace efaemu {

uint32_t process_nonce();

namespace {

// Never destroyed: the engine thread may still check keys while the process exits.
std::shared_mutex &g_mu = *new std::shared_mutex;
std::map<uint32_t, Mr *> &g_by_key = *new std::map<uint32_t, Mr *>;
std::map<const Mr *, uint32_t> &g_by_ptr = *new std::map<const Mr *, uint32_t>;  // live MRs -> their lkey
std::map<uint32_t, Mr *> &g_by_lkey = *new std::map<uint32_t, Mr *>;
uint32_t g_next_key = 0;

// Keys stay within 24 bits: a device-posted WQE carries the lkey in 24 bits (efa_io_tx_buf_desc), and a device
// code that masks a key to 24 bits must not turn an rkey into a valid lkey. lkeys and rkeys share the space, so
// neither is ever the other.
uint32_t new_key() {  // g_mu held exclusively
    constexpr uint32_t kKeyLimit = 1u << 24;
    if (!g_next_key) g_next_key = (process_nonce() & 0x00ffff00u) | 1u;
    while (g_next_key == 0 || g_next_key >= kKeyLimit || g_by_key.count(g_next_key) || g_by_lkey.count(g_next_key))
        g_next_key = g_next_key >= kKeyLimit ? 1 : g_next_key + 1;
    return g_next_key++;
}

int mr_close(struct fid *fid) {
    auto *m = reinterpret_cast<Mr *>(fid);
    {
        std::unique_lock<std::shared_mutex> g(g_mu);
        g_by_key.erase(m->key);
        auto it = g_by_ptr.find(m);
        if (it != g_by_ptr.end()) g_by_lkey.erase(it->second);
        g_by_ptr.erase(m);
    }
    domain_unref(m->domain);
    delete m;
    return 0;
}

int mr_control(struct fid *, int command, void *) {
    // fi_mr_enable: only meaningful with FI_MR_ENDPOINT, which this provider does not require.
    return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

struct fi_ops g_mr_fi_ops = {
    sizeof(struct fi_ops), mr_close, [](struct fid *, struct fid *, uint64_t) { return -FI_EINVAL; },
    mr_control, fid_no_ops_open, nullptr, nullptr,
};

int reg_common(struct fid *fid, const void *buf, size_t len, uint64_t access, MemRef mem, void *context,
               struct fid_mr **out) {
    if (fid->fclass != FI_CLASS_DOMAIN) return -FI_EINVAL;
    auto *d = reinterpret_cast<Domain *>(fid);
    if (!access) access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    auto *m = new Mr;
    memset(&m->fid, 0, sizeof m->fid);
    m->fid.fid.fclass = FI_CLASS_MR;
    m->fid.fid.context = context;
    m->fid.fid.ops = &g_mr_fi_ops;
    m->domain = d;
    m->base = (uint64_t)(uintptr_t)buf;
    m->len = len;
    m->access = access;
    m->mem = mem;
    {
        std::unique_lock<std::shared_mutex> g(g_mu);
        m->key = new_key();
        g_by_key[m->key] = m;
        const uint32_t lkey = new_key();
        g_by_lkey[lkey] = m;
        g_by_ptr[m] = lkey;
    }
    m->fid.key = m->key;
    m->fid.mem_desc = m;
    domain_ref(d);
    *out = &m->fid;
    return 0;
}

MemRef mem_for(enum fi_hmem_iface iface, int device, int *err) {
    MemRef m;
    *err = 0;
    if (iface == FI_HMEM_SYSTEM) return m;
    if (iface != FI_HMEM_CUDA) {
        *err = -FI_ENOSYS;
        EFA_WARN(FI_LOG_MR, "memory interface %d is not emulated (system and CUDA are)", iface);
        return m;
    }
    std::string why;
    if (!hmem::cuda_available(&why)) {
        *err = -FI_ENOSYS;
        EFA_WARN(FI_LOG_MR, "FI_HMEM_CUDA registration without a usable CUDA driver: %s", why.c_str());
        return m;
    }
    m.kind = MemKind::Cuda;
    m.device = device;
    return m;
}

}  // namespace

struct fi_ops_mr g_mr_ops = {
    sizeof(struct fi_ops_mr),
    [](struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t, uint64_t, uint64_t, struct fid_mr **mr,
       void *context) { return reg_common(fid, buf, len, access, MemRef{}, context, mr); },
    [](struct fid *fid, const struct iovec *iov, size_t count, uint64_t access, uint64_t, uint64_t, uint64_t,
       struct fid_mr **mr, void *context) {
        if (count != 1) return -FI_EINVAL;  // mr_iov_limit = 1
        return reg_common(fid, iov[0].iov_base, iov[0].iov_len, access, MemRef{}, context, mr);
    },
    [](struct fid *fid, const struct fi_mr_attr *attr, uint64_t, struct fid_mr **mr) {
        if (!attr || attr->iov_count != 1) return -FI_EINVAL;
        int err;
        MemRef mem = mem_for(attr->iface, attr->device.cuda, &err);
        if (err) return err;
        return reg_common(fid, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access, mem, attr->context, mr);
    },
};

namespace {
void copy_out(const Mr *m, Mr *out) {
    out->domain = m->domain;
    out->base = m->base;
    out->len = m->len;
    out->access = m->access;
    out->mem = m->mem;
    out->key = m->key;
}
}  // namespace

bool mr_by_key(uint64_t key, Mr *out) {
    std::shared_lock<std::shared_mutex> g(g_mu);
    if (key > UINT32_MAX) return false;
    auto it = g_by_key.find((uint32_t)key);
    if (it == g_by_key.end()) return false;
    copy_out(it->second, out);
    return true;
}

bool mr_by_lkey(uint32_t lkey, Mr *out) {
    std::shared_lock<std::shared_mutex> g(g_mu);
    auto it = g_by_lkey.find(lkey);
    if (it == g_by_lkey.end()) return false;
    copy_out(it->second, out);
    return true;
}

bool mr_lkey(const void *desc, uint32_t *lkey) {
    std::shared_lock<std::shared_mutex> g(g_mu);
    auto it = g_by_ptr.find(static_cast<const Mr *>(desc));
    if (it == g_by_ptr.end()) return false;
    *lkey = it->second;
    return true;
}

bool mr_by_desc(const void *desc, Mr *out) {
    std::shared_lock<std::shared_mutex> g(g_mu);
    auto it = g_by_ptr.find(static_cast<const Mr *>(desc));  // live? never dereference a stale descriptor
    if (it == g_by_ptr.end()) return false;
    copy_out(it->first, out);
    return true;
}

}  // namespace efaemu
