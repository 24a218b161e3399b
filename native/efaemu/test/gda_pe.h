// One PE of the efa-direct GDA tests over efaemu (gda_test.cpp, strict_test.cpp): what the GDA host code
// (templates/transport_efa_gda/transport_efa_gda.cpp) sets up, from the efa-direct fabric to the device state,
// with CQ rings in host memory, and the pipe exchange of addresses and keys between the two processes.
// Header-only, for one translation unit per test program.
#pragma once

#include "cuda_on_cpu.h"

#include "nvshmemx_efa_gda_device.cuh"

#include <rdma/fi_ext_efa.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using namespace th;

constexpr int kPes = 2;
constexpr uint64_t M = 1ull << 20;
constexpr uint64_t kHeap = 12 * M;
constexpr uint64_t kPieces[3] = {5 * M, 4 * M, 3 * M};  // one heap, registered in three pieces, as NVSHMEM does
constexpr uint64_t kMaxRdma = 256 << 10;                // small, so transfers split (the device's is 1 GiB)

uint8_t pattern(int pe, uint64_t i) { return (uint8_t)(i * 131 + (i >> 9) + 17 * pe + 3); }

struct Published {  // what one PE tells the other (the bootstrap all-gather of the host code)
    uint8_t name[32];
    uint64_t heap;
    uint32_t rkey[3];
    uint64_t credits;
    uint32_t credits_rkey;
    uint8_t owned_name[2][32];  // the owned queues' endpoints (scenario owned)
};

// One PE: the libfabric objects of the GDA host code and the device state it publishes (here in host memory).
struct Pe {
    int me = 0;
    struct fi_info *info = nullptr;
    struct fid_fabric *fabric = nullptr;
    struct fid_domain *domain = nullptr;
    struct fi_efa_ops_gda *ops = nullptr;
    struct fid_av *av = nullptr;
    struct fid_ep *ep = nullptr;
    struct fid_cq *tx = nullptr, *rx = nullptr;
    struct fi_efa_cq_attr tx_attr{}, rx_attr{};
    struct fi_efa_wq_attr sq{}, rq{};
    std::vector<uint8_t> txbuf, rxbuf;
    uint8_t *heap = nullptr;
    struct fid_mr *mr[3] = {};
    uint64_t *credit_words = nullptr;
    struct fid_mr *credit_mr = nullptr;
    Published mine{}, all[kPes]{};
    std::vector<uint32_t> slot_done;
    // The device state (ABI 5 and later: about 260 KiB with the fixed peer entries of every rail, so on the heap) and its
    // queue, which sits inside it: one rail here (the host-code test drives two).
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> state{new nvshmemx_efa_gda_device_state_t()};
    nvshmemx_efa_gda_device_state_t &s = *state;
    nvshmemx_efa_gda_qp_t &qp = s.rail[0].qp;
    nvshmemx_efa_gda_rx_cq_t rxq{};
    nvshmemx_efa_gda_peer_t peers[kPes]{};
    nvshmemx_efa_gda_region_t local[3]{}, remote[kPes * 3]{}, peer_consumed[kPes]{};
    // The published table: a header, then per region a row of 1 + n_pes entries (ours with the lkey, then every
    // PE's view with its rkey), as the host code lays it out.
    std::vector<uint64_t> table_mem;
    nvshmemx_efa_gda_regions_t *table = nullptr;
    nvshmemx_efa_gda_region_t *entry(int region, int e) {
        return reinterpret_cast<nvshmemx_efa_gda_region_t *>(table + 1) + (size_t)region * (1 + kPes) + e;
    }
    nvshmemx_efa_gda_credits_t credits{};
    // Owned queues (scenario owned): endpoints of their own on the domain, each with its TX CQ; the RX CQ shared.
    struct Owned {
        struct fid_ep *ep = nullptr;
        struct fid_cq *tx = nullptr;
        struct fi_efa_cq_attr tx_attr{};
        struct fi_efa_wq_attr sq{}, rq{};
        std::vector<uint8_t> txbuf;
        std::vector<uint32_t> slot_done;
    };
    std::vector<std::unique_ptr<Owned>> owned_eps;
    std::vector<nvshmemx_efa_gda_qp_t> owned;
    std::vector<uint32_t> owner;
};

void check(int rc, const char *what) {
    if (rc) die(fmt("%s: %s (%d)", what, fi_strerror(-rc), rc));
}

struct fi_info *gda_hints() {  // start_local()'s hints
    struct fi_info *h = fi_allocinfo();
    h->caps = FI_MSG | FI_RMA;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
    h->tx_attr->inject_size = 32;
    h->fabric_attr->prov_name = strdup("efa");
    h->fabric_attr->name = strdup("efa-direct");
    h->domain_attr->name = strdup("efaemu0-rdm");
    return h;
}

struct fid_cq *open_ext_cq(Pe &p, size_t entries, std::vector<uint8_t> &buf, struct fi_efa_cq_attr *attr) {
    buf.assign(entries * 32 + 4096, 0);
    struct fi_cq_attr a = {};
    a.format = FI_CQ_FORMAT_DATA;
    a.wait_obj = FI_WAIT_NONE;
    a.size = entries;
    struct fi_efa_cq_init_attr init = {};
    init.flags = FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
    init.ext_mem_dmabuf.buffer = buf.data();
    init.ext_mem_dmabuf.length = buf.size();
    init.ext_mem_dmabuf.fd = (uint32_t)-1;
    struct fid_cq *cq = nullptr;
    check(p.ops->cq_open_ext(p.domain, &a, &init, &cq, nullptr), "cq_open_ext");
    check(p.ops->query_cq(cq, attr), "query_cq");
    return cq;
}

// The efa-direct fabric and domain on the NIC, the GDA ops and the AV (start_local()'s first steps).
void open_domain(Pe &p) {
    struct fi_info *h = gda_hints();
    check(fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, h, &p.info), "fi_getinfo(efa-direct)");
    fi_freeinfo(h);
    check(fi_fabric(p.info->fabric_attr, &p.fabric, nullptr), "fi_fabric");
    check(fi_domain(p.fabric, p.info, &p.domain, nullptr), "fi_domain");
    check(fi_open_ops(&p.domain->fid, FI_EFA_GDA_OPS, 0, (void **)&p.ops, nullptr), "fi_open_ops(FI_EFA_GDA_OPS)");
    struct fi_av_attr av = {};
    av.type = FI_AV_TABLE;
    check(fi_av_open(p.domain, &av, &p.av, nullptr), "fi_av_open");
}

// One QP on the domain (open_qp() in the host code): its endpoint bound to the AV, to tx and to the PE's RX CQ
// if it has one, enabled, its queues from query_qp_wqs, its name (32 bytes) in name.
void open_endpoint(Pe &p, struct fid_cq *tx, struct fid_ep **ep, struct fi_efa_wq_attr *sq, struct fi_efa_wq_attr *rq, uint8_t *name) {
    check(fi_endpoint(p.domain, p.info, ep, nullptr), "fi_endpoint");
    check(fi_ep_bind(*ep, &p.av->fid, 0), "bind av");
    check(fi_ep_bind(*ep, &tx->fid, FI_TRANSMIT), "bind tx cq");
    if (p.rx) check(fi_ep_bind(*ep, &p.rx->fid, FI_RECV), "bind rx cq");
    check(fi_enable(*ep), "fi_enable");
    check(p.ops->query_qp_wqs(*ep, sq, rq), "query_qp_wqs");
    size_t len = sizeof p.mine.name;
    check(fi_getname(&(*ep)->fid, name, &len), "fi_getname");
}

// The local half of start_local(): everything before the peers' addresses are known.
void open_pe(Pe &p, int me, bool with_rx_cq = true) {
    p.me = me;
    open_domain(p);
    p.tx = open_ext_cq(p, p.info->tx_attr->size, p.txbuf, &p.tx_attr);
    if (with_rx_cq) p.rx = open_ext_cq(p, 64, p.rxbuf, &p.rx_attr);
    open_endpoint(p, p.tx, &p.ep, &p.sq, &p.rq, p.mine.name);

    p.heap = static_cast<uint8_t *>(aligned_alloc(4096, kHeap));
    for (uint64_t i = 0; i < kHeap; i++) p.heap[i] = pattern(me, i);
    uint64_t off = 0;
    for (int i = 0; i < 3; i++) {
        check(fi_mr_reg(p.domain, p.heap + off, kPieces[i], FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
                        &p.mr[i], nullptr),
              "fi_mr_reg(heap)");
        const uint64_t lkey = p.ops->get_mr_lkey(p.mr[i]);
        if (lkey == FI_KEY_NOTAVAIL || lkey >> 24) die(fmt("get_mr_lkey: 0x%llx", (unsigned long long)lkey));
        p.local[i] = {(uint64_t)(p.heap + off), kPieces[i], (uint32_t)lkey, 1};
        p.mine.rkey[i] = (uint32_t)fi_mr_key(p.mr[i]);
        off += kPieces[i];
    }
    p.mine.heap = (uint64_t)p.heap;
    // Credits: consumed, sent, seen, landing ([n] x u64 each), then lock ([n] x u32).
    const size_t credit_bytes = 4 * kPes * sizeof(uint64_t) + kPes * sizeof(uint32_t);
    p.credit_words = static_cast<uint64_t *>(calloc(1, credit_bytes));
    check(fi_mr_reg(p.domain, p.credit_words, credit_bytes, FI_READ | FI_WRITE | FI_REMOTE_READ, 0, 0, 0, &p.credit_mr, nullptr),
          "fi_mr_reg(credits)");
    p.mine.credits = (uint64_t)p.credit_words;
    p.mine.credits_rkey = (uint32_t)fi_mr_key(p.credit_mr);
}

// insert_peers() + finish_start(): every PE's address in PE order, the device state.
void connect_pe(Pe &p, bool insert_peer = true) {
    for (int pe = 0; pe < kPes; pe++) {
        if (pe != p.me && !insert_peer) continue;
        fi_addr_t fa;
        if (fi_av_insert(p.av, p.all[pe].name, 1, &fa, 0, nullptr) != 1) die("fi_av_insert");
        check(p.ops->query_addr(p.ep, fa, &p.peers[pe].ah, &p.peers[pe].qpn, &p.peers[pe].qkey), "query_addr");
    }
    if (!insert_peer) {  // the peer's QP is still needed to address it (a test of the target's AV check)
        const uint16_t *q = reinterpret_cast<const uint16_t *>(p.all[1 - p.me].name + 16);
        p.peers[1 - p.me].qpn = *q;
        memcpy(&p.peers[1 - p.me].qkey, p.all[1 - p.me].name + 20, 4);
        p.peers[1 - p.me].ah = 0xfffe;  // no AH: never used by this PE
    }
    p.slot_done.resize(p.sq.num_entries);
    for (uint32_t i = 0; i < p.sq.num_entries; i++) p.slot_done[i] = i - p.sq.num_entries;
    nvshmemx_efa_gda_qp_t &q = p.qp;
    q.sq_buf = p.sq.buffer;
    q.sq_db = p.sq.doorbell;
    q.sq_entries = p.sq.num_entries;
    q.sq_log2 = (uint32_t)__builtin_ctz(p.sq.num_entries);
    q.max_batch = p.sq.max_batch;
    q.wqe_size = p.sq.entry_size;
    q.cq_buf = p.tx_attr.buffer;
    q.cq_entries = p.tx_attr.num_entries;
    q.cq_log2 = (uint32_t)__builtin_ctz(p.tx_attr.num_entries);
    q.cq_entry_size = p.tx_attr.entry_size;
    q.qp_num = p.peers[p.me].qpn;
    q.max_rdma_size = kMaxRdma;
    q.slot_done = p.slot_done.data();
    if (p.rx) {
        p.rxq.cq_buf = p.rx_attr.buffer;
        p.rxq.cq_entries = p.rx_attr.num_entries;
        p.rxq.cq_log2 = (uint32_t)__builtin_ctz(p.rx_attr.num_entries);
        p.rxq.cq_entry_size = p.rx_attr.entry_size;
        p.rxq.qp_num = q.qp_num;
    }
    for (int pe = 0; pe < kPes; pe++) {
        uint64_t off = 0;
        for (int i = 0; i < 3; i++) {
            p.remote[pe * 3 + i] = {p.all[pe].heap + off, kPieces[i], p.all[pe].rkey[i], 1};
            off += kPieces[i];
        }
        p.peer_consumed[pe] = {p.all[pe].credits, kPes * sizeof(uint64_t), p.all[pe].credits_rkey, 1};
    }
    p.table_mem.assign((sizeof(nvshmemx_efa_gda_regions_t) + 3 * (1 + kPes) * sizeof(nvshmemx_efa_gda_region_t)) / 8 + 1, 0);
    p.table = reinterpret_cast<nvshmemx_efa_gda_regions_t *>(p.table_mem.data());
    *p.table = {3, kPes, 1, 0};
    for (int i = 0; i < 3; i++) {
        *p.entry(i, 0) = p.local[i];
        for (int pe = 0; pe < kPes; pe++) *p.entry(i, 1 + pe) = p.remote[pe * 3 + i];
    }
    uint64_t *w = p.credit_words;
    p.credits.consumed = w;
    p.credits.sent = w + kPes;
    p.credits.seen = w + 2 * kPes;
    p.credits.landing = w + 3 * kPes;
    p.credits.lock = reinterpret_cast<uint32_t *>(w + 4 * kPes);
    p.credits.lkey = (uint32_t)p.ops->get_mr_lkey(p.credit_mr);
    p.credits.peer_consumed = p.peer_consumed;
    nvshmemx_efa_gda_device_state_t &st = p.s;
    st.abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
    st.my_pe = p.me;
    st.n_pes = kPes;
    st.n_rails = 1;
    st.rail[0].imm_window = p.rx ? p.rx_attr.num_entries / kPes : 0;
    st.rail[0].rx_cq = &p.rxq;
    st.rail[0].peers = p.peers;
    st.regions = p.table;
    st.rail[0].credits = &p.credits;
    st.credit_timeout_ns = 5000000000ull;
    // As the host code: every peer's address at its fixed offset, and the three heap regions (one length on both
    // PEs) in the hot slots; the table stays the complete list.
    for (int pe = 0; pe < kPes; pe++) st.rail[0].fast[pe].addr = p.peers[pe];
    for (int i = 0; i < 3; i++) {
        st.rail[0].hot[i] = {p.local[i].base, p.local[i].length, p.local[i].key, 1, 0};
        for (int pe = 0; pe < kPes; pe++) st.rail[0].fast[pe].hot[i] = {p.remote[pe * 3 + i].base, p.remote[pe * 3 + i].key, 1};
    }
}

// As start_owned() in the host code: n owned queues after open_pe, named in p.mine.owned_name.
[[maybe_unused]] void open_owned(Pe &p, int n) {
    for (int k = 0; k < n; k++) {
        std::unique_ptr<Pe::Owned> o(new Pe::Owned());
        o->tx = open_ext_cq(p, p.info->tx_attr->size, o->txbuf, &o->tx_attr);
        open_endpoint(p, o->tx, &o->ep, &o->sq, &o->rq, p.mine.owned_name[k]);  // the RX CQ is the PE's
        p.owned_eps.push_back(std::move(o));
    }
}

// As insert_peers() + finish_start() for the owned queues: every PE's owned queues inserted (a target accepts RMA
// only from initiators it inserted), ours resolved to their QP numbers, the queues in the state.
[[maybe_unused]] void connect_owned(Pe &p) {
    const int n = (int)p.owned_eps.size();
    for (int pe = 0; pe < kPes; pe++)
        for (int k = 0; k < n; k++) {
            fi_addr_t fa;
            if (fi_av_insert(p.av, p.all[pe].owned_name[k], 1, &fa, 0, nullptr) != 1) die("fi_av_insert (owned queue)");
            nvshmemx_efa_gda_peer_t a;
            check(p.ops->query_addr(p.ep, fa, &a.ah, &a.qpn, &a.qkey), "query_addr (owned queue)");
            if (pe != p.me) continue;
            Pe::Owned &o = *p.owned_eps[(size_t)k];
            o.slot_done.resize(o.sq.num_entries);
            for (uint32_t i = 0; i < o.sq.num_entries; i++) o.slot_done[i] = i - o.sq.num_entries;
            nvshmemx_efa_gda_qp_t q = p.qp;
            q.sq_buf = o.sq.buffer;
            q.sq_db = o.sq.doorbell;
            q.max_batch = o.sq.max_batch;
            q.cq_buf = o.tx_attr.buffer;
            q.cq_entries = o.tx_attr.num_entries;
            q.cq_log2 = (uint32_t)__builtin_ctz(o.tx_attr.num_entries);
            q.qp_num = a.qpn;
            q.slot_done = o.slot_done.data();
            q.sq_reserved = q.sq_rung = q.sq_retired = q.cq_head = 0;
            q.req_id_sum = 0;
            p.owned.push_back(q);
        }
    p.owner.assign((size_t)n, 0);
    p.s.rail[0].owned = p.owned.data();
    p.s.rail[0].owner = p.owner.data();
    p.s.rail[0].n_owned = (uint32_t)n;
}

void close_pe(Pe &p) {
    for (auto &o : p.owned_eps) {
        if (o->ep) fi_close(&o->ep->fid);
        if (o->tx) fi_close(&o->tx->fid);
    }
    if (p.ep) fi_close(&p.ep->fid);
    if (p.tx) fi_close(&p.tx->fid);
    if (p.rx) fi_close(&p.rx->fid);
    for (auto *m : p.mr)
        if (m) fi_close(&m->fid);
    if (p.credit_mr) fi_close(&p.credit_mr->fid);
    if (p.av) fi_close(&p.av->fid);
    if (p.domain) fi_close(&p.domain->fid);
    if (p.fabric) fi_close(&p.fabric->fid);
    if (p.info) fi_freeinfo(p.info);
}

// Opens this side, swaps addresses and keys with the other, connects.
void setup(Pair &pair, Pe &p, bool with_rx_cq = true, bool insert_peer = true) {
    open_pe(p, pair.a ? 0 : 1, with_rx_cq);
    put(pair, p.mine);
    const Published other = get<Published>(pair);
    p.all[p.me] = p.mine;
    p.all[1 - p.me] = other;
    connect_pe(p, insert_peer);
    sync(pair);  // fi_efa(7): every target knows every initiator before any RMA
}

}  // namespace
