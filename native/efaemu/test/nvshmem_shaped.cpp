// Two PEs that make the libfabric calls NVSHMEM 3.4.5's libfabric transport makes with provider "efa", in its
// order (read from src/modules/transport/libfabric/libfabric.cpp at tag v3.4.5-0; this program is written for
// efaemu, nothing of NVSHMEM's is copied): init_state's fi_getinfo and NIC filtering, connect_endpoints (two
// endpoints per PE, two FI_AV_TABLE AVs, MSG CQs, counters, CUDA_API_PERMITTED, pre-posted receives, names,
// one-at-a-time inserts), get_mem_handle (fi_mr_regattr), rma (put, P with a NULL descriptor, get), the
// staged atomics over fi_send/fi_recv with a proxy-side read-modify-write and an ACK for fetching ones, quiet
// (counter against submitted ops, progress in between), the error path of progress (fi_cntr_readerr,
// fi_cq_readerr, fi_cq_strerror), enforce_cst's fi_readmsg, and finalize's close order.
//
//   efaemu_nvshmem_shaped [--sysfs require|report]
// --sysfs require: the NIC's /sys/class/infiniband/<name>/device must resolve (as NVSHMEM requires; run it in
// the namespace made by scripts/sysfs-ns.sh). report: print whether it does and go on.
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <deque>
#include <string>
#include <vector>

#include "harness.h"

using namespace th;

namespace {

constexpr int kEps = 2;  // per PE: [0] host, [1] proxy
constexpr int kHost = 0, kProxy = 1;
constexpr int kNpes = 2;

// The staged-atomic message: one fixed-size buffer serves as send buffer, receive buffer and ACK.
enum AmoKind : uint32_t { kAmoRequest = 1, kAmoAck = 2 };
enum AmoOp : uint32_t { kAdd = 1, kFetchAdd = 2, kSet = 3, kCswap = 4 };
struct OpCtx {
    uint32_t kind;
    uint32_t op;
    uint64_t target_addr, ret_addr, retflag, operand, compare;
    uint32_t size;
    int32_t ret_ep;
    uint64_t ret_data, ret_flag;  // ACK payload (the g element: value + flag)
    uint64_t p_value;             // P: the value written with fi_write from this buffer
    struct fid_ep *ep;            // which endpoint received it (set locally)
};

struct Ep {
    struct fid_ep *ep = nullptr;
    struct fid_cq *cq = nullptr;
    struct fid_cntr *cntr = nullptr;
    uint64_t submitted = 0;
};

struct Pe {
    Pair pair;
    int me = 0;
    struct fi_info *all = nullptr, *prov = nullptr;
    struct fid_fabric *fabric = nullptr;
    struct fid_domain *domain = nullptr;
    struct fid_av *av[kEps] = {};
    Ep eps[kEps];
    std::vector<OpCtx> send_buf, recv_buf;
    std::deque<OpCtx *> free_send;
    std::deque<OpCtx *> to_process;
    std::vector<uint8_t> heap;
    struct fid_mr *mr = nullptr;
    uint64_t key = 0;
    void *desc = nullptr;
    uint64_t peer_heap = 0, peer_key = 0;
};

int target_ep(int pe, int idx) { return pe * kEps + idx; }

OpCtx *get_send(Pe &pe) {
    if (pe.free_send.empty()) return nullptr;
    OpCtx *o = pe.free_send.back();
    pe.free_send.pop_back();
    return o;
}

// The transport's progress(): errors first, then drain each CQ, then the queued atomics.
int progress(Pe &pe, bool quiet_errors = false);

void process_amos(Pe &pe) {
    while (!pe.to_process.empty()) {
        OpCtx *op = pe.to_process.front();
        pe.to_process.pop_front();
        if (op->kind == kAmoRequest) {
            uint64_t *p = reinterpret_cast<uint64_t *>(op->target_addr);  // host heap: the "GDRCopy" pointer
            uint64_t old = *p;
            switch (op->op) {
                case kAdd:
                case kFetchAdd: *p = old + op->operand; break;
                case kSet: *p = op->operand; break;
                case kCswap: *p = old == op->compare ? op->operand : old; break;
            }
            if (op->op == kFetchAdd || op->op == kCswap) {
                OpCtx *resp;
                while (!(resp = get_send(pe))) progress(pe);
                resp->kind = kAmoAck;
                resp->ret_data = old;
                resp->ret_flag = op->retflag;
                resp->ret_addr = op->ret_addr;
                ssize_t r;
                while ((r = fi_send(op->ep, resp, sizeof *resp, nullptr, (fi_addr_t)op->ret_ep, resp)) == -FI_EAGAIN)
                    progress(pe);
                if (r) fail("ACK fi_send", fmt("%zd", r));
                for (auto &e : pe.eps)
                    if (e.ep == op->ep) e.submitted++;
            }
        } else {
            uint64_t *g = reinterpret_cast<uint64_t *>(op->ret_addr);
            g[0] = op->ret_data;
            g[1] = op->ret_flag;
        }
        ssize_t r = fi_recv(op->ep, op, sizeof *op, nullptr, FI_ADDR_UNSPEC, op);
        if (r) fail("re-post fi_recv", fmt("%zd", r));
    }
}

int progress(Pe &pe, bool quiet_errors) {
    for (int i = 0; i < kEps; i++) {
        Ep &e = pe.eps[i];
        uint64_t cnt = fi_cntr_readerr(e.cntr);
        if (cnt > 0) {
            struct fi_cq_err_entry err;
            memset(&err, 0, sizeof err);
            ssize_t n = fi_cq_readerr(e.cq, &err, 0);
            char str[100] = "\0";
            const char *s = n > 0 ? fi_cq_strerror(e.cq, err.prov_errno, err.err_data, str, 100) : nullptr;
            if (!quiet_errors)
                fail("progress", fmt("EP %d error count %llu: %s", i, (unsigned long long)cnt, s ? s : "?"));
            return n > 0 ? err.prov_errno : -1;
        }
        char buf[8192];
        ssize_t q;
        do {
            q = fi_cq_read(e.cq, buf, 8192 / sizeof(struct fi_cq_msg_entry));
            auto *ent = reinterpret_cast<struct fi_cq_msg_entry *>(buf);
            for (ssize_t k = 0; k < q; k++, ent++) {
                if (!ent->op_context) continue;  // puts and gets carry no context
                OpCtx *op = static_cast<OpCtx *>(ent->op_context);
                if (ent->flags & FI_SEND) pe.free_send.push_back(op);
                else if (ent->flags & FI_RMA) pe.free_send.push_back(op);
                else if (ent->flags & FI_RECV) {
                    op->ep = e.ep;
                    pe.to_process.push_back(op);
                } else fail("progress", "completion with unexpected flags");
            }
        } while (q > 0);
        if (q < 0 && q != -FI_EAGAIN && q != -FI_EAVAIL) fail("fi_cq_read", fmt("%zd", q));
    }
    process_amos(pe);
    return 0;
}

bool quiet(Pe &pe, int idx) {
    Ep &e = pe.eps[idx];
    uint64_t t0 = now_ms();
    while (fi_cntr_read(e.cntr) != e.submitted) {
        if (progress(pe)) return false;
        if (now_ms() - t0 > 20000) {
            fail("quiet", "counter never reached the submitted count");
            return false;
        }
    }
    return true;
}

bool init_state(Pe &pe, bool require_sysfs) {
    setenv("FI_EFA_USE_DEVICE_RDMA", "1", 0);
    setenv("FI_HMEM_CUDA_USE_GDRCOPY", "1", 0);
    // NVSHMEM builds its hints on the stack, with a zeroed nic object.
    struct fi_info info;
    struct fi_tx_attr tx;
    struct fi_rx_attr rx;
    struct fi_ep_attr ep;
    struct fi_domain_attr dom;
    struct fi_fabric_attr fab;
    struct fid_nic nic;
    memset(&info, 0, sizeof info);
    memset(&tx, 0, sizeof tx);
    memset(&rx, 0, sizeof rx);
    memset(&ep, 0, sizeof ep);
    memset(&dom, 0, sizeof dom);
    memset(&fab, 0, sizeof fab);
    memset(&nic, 0, sizeof nic);
    info.tx_attr = &tx;
    info.rx_attr = &rx;
    info.ep_attr = &ep;
    info.domain_attr = &dom;
    info.fabric_attr = &fab;
    info.nic = &nic;
    info.addr_format = FI_FORMAT_UNSPEC;
    info.caps = FI_RMA | FI_HMEM | FI_MSG;
    dom.mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
    dom.threading = FI_THREAD_COMPLETION;
    ep.type = FI_EP_RDM;
    int ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, &info, &pe.all);
    if (!expect(ret == 0, "fi_getinfo(FI_VERSION(1,5)) with the transport's hints", fmt("%d %s", ret, fi_strerror(-ret))))
        return false;
    std::vector<std::string> names;
    for (struct fi_info *c = pe.all; c; c = c->next) {
        if (!c->nic || !c->tx_attr || !(c->domain_attr->mr_mode & FI_MR_PROV_KEY)) continue;
        std::string n = c->nic->device_attr->name;
        bool seen = false;
        for (auto &x : names) seen = seen || x == n;
        if (!seen) names.push_back(n);
    }
    if (!expect(!names.empty(), "an info with nic, tx_attr and FI_MR_PROV_KEY exists")) return false;
    for (auto &n : names) {
        std::string p = "/sys/class/infiniband/" + n + "/device";
        char *real = realpath(p.c_str(), nullptr);
        if (require_sysfs) expect(real != nullptr, "NIC path resolves: " + p + " -> " + (real ? real : "(missing)"));
        else ok("NIC path " + p + (real ? " -> " + std::string(real) : " does not resolve here (report only)"));
        free(real);
    }
    for (struct fi_info *c = pe.all; c; c = c->next)
        if (c->nic && names[0] == c->nic->device_attr->name) {
            pe.prov = fi_dupinfo(c);
            break;
        }
    return pe.prov != nullptr;
}

bool connect_endpoints(Pe &pe) {
    size_t num_sends = pe.prov->tx_attr->size * kEps * kNpes;
    size_t num_recvs = pe.prov->rx_attr->size * kEps * kNpes;
    size_t recvs_per_ep = num_recvs / (kNpes * kEps);
    pe.send_buf.resize(num_sends);
    pe.recv_buf.resize(num_recvs);
    for (auto &o : pe.send_buf) pe.free_send.push_back(&o);
    int ret = fi_fabric(pe.prov->fabric_attr, &pe.fabric, nullptr);
    if (ret == 0) ret = fi_domain(pe.fabric, pe.prov, &pe.domain, nullptr);
    if (!expect(ret == 0, "fi_fabric + fi_domain on the selected info", fmt("%d", ret))) return false;
    struct fi_av_attr av_attr;
    memset(&av_attr, 0, sizeof av_attr);
    av_attr.type = FI_AV_TABLE;
    av_attr.count = kEps * kNpes;
    av_attr.ep_per_node = kEps;
    for (int i = 0; i < kEps; i++)
        if ((ret = fi_av_open(pe.domain, &av_attr, &pe.av[i], nullptr))) return expect(false, "fi_av_open x2", fmt("%d", ret));
    pe.prov->ep_attr->tx_ctx_cnt = 0;
    pe.prov->caps = FI_RMA | FI_MSG;
    pe.prov->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
    pe.prov->mode = 0;
    pe.prov->tx_attr->mode = 0;
    pe.prov->rx_attr->mode = 0;
    struct fi_cq_attr cq_attr;
    struct fi_cntr_attr cntr_attr;
    memset(&cq_attr, 0, sizeof cq_attr);
    memset(&cntr_attr, 0, sizeof cntr_attr);
    cntr_attr.events = FI_CNTR_EVENTS_COMP;
    cntr_attr.wait_obj = FI_WAIT_UNSPEC;
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_attr.size = 0;
    char names[kEps][128];
    for (int i = 0; i < kEps; i++) {
        Ep &e = pe.eps[i];
        if ((ret = fi_endpoint(pe.domain, pe.prov, &e.ep, nullptr))) return expect(false, "fi_endpoint", fmt("%d", ret));
        bool prohibit = false;
        ret = fi_setopt(&e.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &prohibit, sizeof(bool));
        expect(ret == 0 || ret == -FI_ENOPROTOOPT, "fi_setopt(FI_OPT_CUDA_API_PERMITTED, false)", fmt("%d", ret));
        if ((ret = fi_cq_open(pe.domain, &cq_attr, &e.cq, nullptr)) ||
            (ret = fi_cntr_open(pe.domain, &cntr_attr, &e.cntr, nullptr)) ||
            (ret = fi_ep_bind(e.ep, &pe.av[i]->fid, 0)) || (ret = fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV)) ||
            (ret = fi_ep_bind(e.ep, &e.cntr->fid, FI_READ | FI_WRITE | FI_SEND)) || (ret = fi_enable(e.ep)))
            return expect(false, "cq/cntr open, binds, fi_enable", fmt("%d", ret));
        for (size_t j = 0; j < recvs_per_ep; j++) {
            OpCtx *op = &pe.recv_buf[recvs_per_ep * i + j];
            if ((ret = (int)fi_recv(e.ep, op, sizeof *op, nullptr, FI_ADDR_UNSPEC, op)))
                return expect(false, "pre-post fi_recv", fmt("%d after %zu", ret, j));
        }
        size_t len = 128;
        if ((ret = fi_getname(&e.ep->fid, names[i], &len)) || len > 128) return expect(false, "fi_getname <= 128 bytes");
    }
    ok(fmt("two endpoints per PE, each with %zu receives pre-posted", recvs_per_ep));
    // The bootstrap all-gather of endpoint names.
    char all[kNpes * kEps][128];
    put(pe.pair, names, sizeof names);
    get(pe.pair, all[pe.me ? 0 : kEps], sizeof names);
    memcpy(all[pe.me * kEps], names, sizeof names);
    for (int j = 0; j < kEps; j++)
        for (int i = 0; i < kNpes * kEps; i++) {
            ret = fi_av_insert(pe.av[j], all[i], 1, nullptr, 0, nullptr);
            if (ret < 1) return expect(false, "fi_av_insert one address at a time", fmt("%d", ret));
        }
    ok("fi_av_insert of every PE's two names into both AVs, one at a time");
    return true;
}

bool get_mem_handle(Pe &pe) {
    pe.heap.assign(8 << 20, 0);
    struct iovec iov = {pe.heap.data(), pe.heap.size()};
    struct fi_mr_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    attr.iface = FI_HMEM_SYSTEM;  // a host heap; device heaps register as FI_HMEM_CUDA with the device id
    int ret = fi_mr_regattr(pe.domain, &attr, 0, &pe.mr);
    if (!expect(ret == 0, "fi_mr_regattr(FI_HMEM_SYSTEM) of the symmetric heap", fmt("%d", ret))) return false;
    pe.key = fi_mr_key(pe.mr);
    pe.desc = fi_mr_desc(pe.mr);
    uint64_t mine[2] = {(uint64_t)(uintptr_t)pe.heap.data(), pe.key}, theirs[2];
    put(pe.pair, mine, sizeof mine);
    get(pe.pair, theirs, sizeof theirs);
    pe.peer_heap = theirs[0];
    pe.peer_key = theirs[1];
    return true;
}

bool peer_done(Pe &pe) {
    struct pollfd p = {pe.pair.rd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

void initiator(Pe &pe) {
    const int peer = 1 - pe.me;
    Ep &host = pe.eps[kHost];
    Ep &proxy = pe.eps[kProxy];
    // put: 256 KiB from the local heap into the peer's heap, then quiet.
    for (size_t i = 0; i < (256 << 10); i++) pe.heap[i] = (uint8_t)(i * 7 + 3);
    ssize_t r = fi_write(host.ep, pe.heap.data(), 256 << 10, pe.desc, target_ep(peer, kHost), pe.peer_heap, pe.peer_key, nullptr);
    host.submitted++;
    expect(r == 0 && quiet(pe, kHost), "put (fi_write with the MR descriptor) + quiet on the counter");
    // P: fi_write of 8 bytes from a send-op buffer, NULL descriptor, the buffer as context.
    OpCtx *p = get_send(pe);
    p->p_value = 0x0123456789abcdefull;
    r = fi_write(proxy.ep, &p->p_value, 8, nullptr, target_ep(peer, kProxy), pe.peer_heap + (1 << 20), pe.peer_key, p);
    proxy.submitted++;
    expect(r == 0 && quiet(pe, kProxy), "P (fi_write, NULL descriptor, context returned to the pool)");
    // get: read it back.
    r = fi_read(host.ep, pe.heap.data() + (2 << 20), 256 << 10, pe.desc, target_ep(peer, kHost), pe.peer_heap,
                pe.peer_key, nullptr);
    host.submitted++;
    expect(r == 0 && quiet(pe, kHost) && !memcmp(pe.heap.data(), pe.heap.data() + (2 << 20), 256 << 10),
           "get (fi_read) returns the put's bytes");
    // Staged atomics: 100 non-fetching adds, then a fetch-add and a compare-swap answered by ACKs.
    const uint64_t counter = pe.peer_heap + (3 << 20);
    for (int i = 0; i < 100; i++) {
        OpCtx *a;
        while (!(a = get_send(pe))) progress(pe);
        memset(a, 0, sizeof *a);
        a->kind = kAmoRequest;
        a->op = kAdd;
        a->target_addr = counter;
        a->operand = 5;
        a->size = 8;
        a->ret_ep = target_ep(pe.me, kProxy);
        while ((r = fi_send(proxy.ep, a, sizeof *a, nullptr, target_ep(peer, kProxy), a)) == -FI_EAGAIN) progress(pe);
        proxy.submitted++;
    }
    expect(quiet(pe, kProxy), "100 staged AMOs (fi_send) + quiet");
    uint64_t *g = reinterpret_cast<uint64_t *>(pe.heap.data() + (3 << 20) + 64);
    g[0] = g[1] = 0;
    OpCtx *a = get_send(pe);
    memset(a, 0, sizeof *a);
    a->kind = kAmoRequest;
    a->op = kFetchAdd;
    a->target_addr = counter;
    a->ret_addr = (uint64_t)(uintptr_t)g;
    a->retflag = 77;
    a->operand = 1;
    a->size = 8;
    a->ret_ep = target_ep(pe.me, kProxy);
    r = fi_send(proxy.ep, a, sizeof *a, nullptr, target_ep(peer, kProxy), a);
    proxy.submitted++;
    uint64_t t0 = now_ms();
    while (g[1] != 77 && now_ms() - t0 < 10000) progress(pe);
    expect(r == 0 && g[1] == 77 && g[0] == 500, "fetching AMO: the peer's proxy ACKs the old value (500) over fi_send",
           fmt("flag %llu value %llu", (unsigned long long)g[1], (unsigned long long)g[0]));
    quiet(pe, kProxy);
    // The error path of progress(): a put outside the peer's registration.
    r = fi_write(host.ep, pe.heap.data(), 64, pe.desc, target_ep(peer, kHost), pe.peer_heap + pe.heap.size(), pe.peer_key,
                 nullptr);
    host.submitted++;
    int st = 0;
    t0 = now_ms();
    while (!st && now_ms() - t0 < 10000) st = progress(pe, true);
    expect(st == 7, "progress sees fi_cntr_readerr > 0, fi_cq_readerr gives REMOTE_ERROR_BAD_ADDRESS (7)", fmt("%d", st));
    fi_cntr_seterr(host.cntr, 0);  // NVSHMEM would abort here; the test goes on to the next check
    // enforce_cst: fi_readmsg of 8 bytes at offset 0 of the first registration, FI_DELIVERY_COMPLETE, from the
    // PE's own proxy endpoint. With FI_MR_VIRT_ADDR, address 0 is outside the registration: a VIRT_ADDR NIC
    // refuses it. (NVSHMEM 3.4.5 reaches this only where cuFlushGPUDirectRDMAWrites is unavailable.)
    struct iovec l = {pe.heap.data(), 8};
    struct fi_rma_iov ri = {0, 8, pe.key};
    void *desc = pe.desc;
    struct fi_msg_rma msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &l;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = target_ep(pe.me, kProxy);
    msg.rma_iov = &ri;
    msg.rma_iov_count = 1;
    r = fi_readmsg(proxy.ep, &msg, FI_DELIVERY_COMPLETE);
    proxy.submitted++;
    st = 0;
    t0 = now_ms();
    while (!st && now_ms() - t0 < 10000) st = progress(pe, true);
    expect(r == 0 && st == 7, "enforce_cst's fi_readmsg at address 0 under FI_MR_VIRT_ADDR fails like on the NIC (7)",
           fmt("r=%zd status %d", r, st));
}

void finalize(Pe &pe) {
    fi_close(&pe.mr->fid);  // release_mem_handle comes first
    fi_freeinfo(pe.prov);
    int bad = 0;
    for (auto &e : pe.eps) {
        bad += fi_close(&e.ep->fid) != 0;
        bad += fi_close(&e.cq->fid) != 0;
        bad += fi_close(&e.cntr->fid) != 0;
    }
    for (auto *a : pe.av) bad += fi_close(&a->fid) != 0;
    bad += fi_close(&pe.domain->fid) != 0;
    bad += fi_close(&pe.fabric->fid) != 0;
    fi_freeinfo(pe.all);
    expect(bad == 0, "finalize closes endpoints, CQs, counters, AVs, domain, fabric in the transport's order");
}

// DeepEP's combine over NVSHMEM's proxy, from both PEs at once: per expert a fence (the proxy's quiet on its
// endpoint, progressing incoming atomics meanwhile) then a staged add of 1 into the peer's flag for that expert;
// then each PE waits (progressing) until every flag the peer sent it is set. Rounds repeat it on fresh flags.
void burst(Pe &pe, int experts, int rounds) {
    const int peer = 1 - pe.me;
    Ep &proxy = pe.eps[kProxy];
    auto *flags = reinterpret_cast<volatile uint64_t *>(pe.heap.data() + (4 << 20));
    bool all_ok = true;
    uint64_t t_start = now_ms();
    for (int round = 0; round < rounds && all_ok; round++) {
        const uint64_t base = (uint64_t)round * experts;
        for (int e = 0; e < experts; e++) {
            if (!quiet(pe, kProxy)) {
                all_ok = false;
                break;
            }
            OpCtx *a;
            while (!(a = get_send(pe))) progress(pe);
            memset(a, 0, sizeof *a);
            a->kind = kAmoRequest;
            a->op = kAdd;
            a->target_addr = pe.peer_heap + (4 << 20) + (base + e) * 8;
            a->operand = 1;
            a->size = 8;
            a->ret_ep = target_ep(pe.me, kProxy);
            ssize_t r;
            while ((r = fi_send(proxy.ep, a, sizeof *a, nullptr, target_ep(peer, kProxy), a)) == -FI_EAGAIN) progress(pe);
            if (r) {
                fail("burst fi_send", fmt("%zd", r));
                all_ok = false;
                break;
            }
            proxy.submitted++;
        }
        const uint64_t t0 = now_ms();
        int missing = experts;
        while (missing && now_ms() - t0 < 20000) {
            progress(pe);
            missing = 0;
            for (int e = 0; e < experts; e++) missing += flags[base + e] != 1;
        }
        if (missing) {
            fail("burst", fmt("round %d: %d of %d flags from PE %d never arrived", round, missing, experts, peer));
            all_ok = false;
        }
    }
    expect(all_ok && quiet(pe, kProxy),
           fmt("%d rounds of %d fenced staged adds in both directions at once: every flag arrived", rounds, experts),
           fmt("%llu ms", (unsigned long long)(now_ms() - t_start)));
}

}  // namespace

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    bool require_sysfs = argc > 2 && !strcmp(argv[1], "--sysfs") && !strcmp(argv[2], "require");
    Pe pe;
    pe.pair = fork_pair();
    pe.me = pe.pair.a ? 0 : 1;
    if (!init_state(pe, require_sysfs) || !connect_endpoints(pe) || !get_mem_handle(pe)) return finish(pe.pair);
    sync(pe.pair);
    if (argc > 1 && !strcmp(argv[1], "--burst")) {
        burst(pe, argc > 2 ? atoi(argv[2]) : 144, argc > 3 ? atoi(argv[3]) : 4);
        sync(pe.pair);
        finalize(pe);
        return finish(pe.pair);
    }
    if (pe.me == 0) {
        initiator(pe);
        put(pe.pair, (char)'d');  // tell the target's proxy to stop progressing
        get<char>(pe.pair);
    } else {
        while (!peer_done(pe)) progress(pe);
        get<char>(pe.pair);
        const uint8_t *h = pe.heap.data();
        bool put_ok = true;
        for (size_t i = 0; i < (256 << 10); i++) put_ok = put_ok && h[i] == (uint8_t)(i * 7 + 3);
        uint64_t pv, cnt;
        memcpy(&pv, h + (1 << 20), 8);
        memcpy(&cnt, h + (3 << 20), 8);
        expect(put_ok, "target: the put's bytes are in the heap");
        expect(pv == 0x0123456789abcdefull, "target: the P value landed");
        expect(cnt == 501, "target: 100 x add 5 + fetch-add 1 = 501 by the proxy's read-modify-write",
               fmt("%llu", (unsigned long long)cnt));
        put(pe.pair, (char)'k');
    }
    finalize(pe);
    return finish(pe.pair);
}
