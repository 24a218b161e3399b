// The GDA host code itself (templates/transport_efa_gda: every source its manifest lists, unmodified) against efaemu, two
// processes on the CPU: `efaemu_gda_host_test [RAILS|missing]`. Run with the stand-in driver on LD_LIBRARY_PATH,
// the interposer in LD_PRELOAD, FI_PROVIDER_PATH at efaemu, NVSHMEM_EFA_GDA_ENABLE=1 and, for 2 rails,
// EFAEMU_NICS=2.
//
// Each PE calls the GDA init as NVSHMEM's patched connect_endpoints does (its all-gathers meet over a pipe):
// with 1 rail nvshmemt_efa_gda_init with NVSHMEM's info of efaemu0, as single-rail NVSHMEM does; with RAILS > 1
// nvshmemt_efa_gda_init_rails with NVSHMEM's infos of efaemu0 .. efaemu<RAILS-1>, as multi-rail NVSHMEM does;
// `missing`: efaemu0 and a NIC that does not exist (efaemu7), which GDA leaves out. It registers a heap region of
// "GPU memory", then the test plays the GPU on every rail: it reads the published device state back through the
// driver, writes a WQE into the SQ of that rail the host code mapped, rings its doorbell, and reads the TX CQE
// (and, at the target, the RX CQE of the write with immediate and the data) from that rail's GPU CQs the host
// code handed to efaemu as dma-buf fds. Rail k writes 100000 + 1000 k bytes (efaemu's per-NIC statistics show
// which NIC carried them). `owned` (with NVSHMEM_EFA_GDA_OWNED_QUEUES=N): one rail with N owned queues, each
// playing the GPU through its own SQ and GPU TX CQ: a write of 50000 + 1000 k bytes to PE 1 (which inserted
// the owned queues' addresses: efaemu refuses RMA from an initiator the target did not insert).
#include <cuda.h>
#include "nvshmemx_efa_gda_api.h"
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "nvshmemx_efa_gda_wqe.h"
#include "transport_efa_gda.h"

using namespace th;

namespace {

constexpr size_t kHeap = 4 << 20;

struct Drv {
    CUresult (*memAlloc)(CUdeviceptr *, size_t);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    void load() {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) die("no libcuda.so.1");
        memAlloc = (decltype(memAlloc))dlsym(h, "cuMemAlloc_v2");
        htod = (decltype(htod))dlsym(h, "cuMemcpyHtoD_v2");
        dtoh = (decltype(dtoh))dlsym(h, "cuMemcpyDtoH_v2");
        if (!memAlloc || !htod || !dtoh) die("driver entry points");
    }
    template <typename T>
    T read(const void *dev) {
        T v;
        if (dtoh(&v, (CUdeviceptr)dev, sizeof v)) die("cuMemcpyDtoH");
        return v;
    }
};

Pair *g_pair;
int g_me;

// NVSHMEM's bootstrap all-gather for two PEs: send ours, take theirs, lay both out in PE order.
int allgather(const void *in, void *out, int bytes, void *) {
    put(*g_pair, in, (size_t)bytes);
    std::vector<uint8_t> other((size_t)bytes);
    get(*g_pair, other.data(), (size_t)bytes);
    memcpy(static_cast<uint8_t *>(out) + (size_t)g_me * bytes, in, (size_t)bytes);
    memcpy(static_cast<uint8_t *>(out) + (size_t)(1 - g_me) * bytes, other.data(), (size_t)bytes);
    return 0;
}

uint8_t pattern(int pe, uint64_t i) { return (uint8_t)(i * 7 + 29 * pe + 1); }

// NVSHMEM's fi_info of a NIC: its RDM info on efaemu<nic> from fi_getinfo (with the nic object, as NVSHMEM
// requires), or, for a NIC that does not exist, an info naming its domain only.
struct fi_info *nvshmem_info_of(int nic) {
    const std::string domain = "efaemu" + std::to_string(nic) + "-rdm";
    struct fi_info *hints = fi_allocinfo(), *info = nullptr;
    hints->caps = FI_RMA;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup("efa");
    hints->fabric_attr->name = strdup("efa");
    hints->domain_attr->name = strdup(domain.c_str());
    const int rc = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc == 0 && info) {
        struct fi_info *one = fi_dupinfo(info);
        fi_freeinfo(info);
        return one;
    }
    struct fi_info *fake = fi_allocinfo();
    fake->domain_attr->name = strdup(domain.c_str());
    return fake;
}

bool wait_cqe(Drv &cu, const uint8_t *ring, uint32_t index, uint32_t entry_size, uint8_t *e) {
    const uint64_t end = now_ms() + 10000;
    while (now_ms() < end) {
        if (cu.dtoh(e, (CUdeviceptr)(ring + (size_t)index * entry_size), entry_size)) return false;
        if (e[offsetof(efa_io_cdesc_common, flags)] & EFA_IO_CDESC_COMMON_PHASE_MASK) return true;
        usleep(200);
    }
    return false;
}

// Posts one RDMA WQE at slot of qp through the host's mapping of its SQ, rings the doorbell and waits for the CQE at
// that slot: false when none came; *c is its common part.
bool post_and_wait(Drv &cu, const nvshmemx_efa_gda_qp_t &qp, uint32_t slot, const efa_gda_rdma_desc &d, efa_io_cdesc_common *c) {
    union efa_gda_wqe_words w;
    efa_gda_build_rdma_wqe(&w, &d, efa_gda_sq_phase(slot, qp.sq_log2));
    volatile uint64_t *at = (volatile uint64_t *)(qp.sq_buf + (size_t)slot * qp.wqe_size);
    for (int i = 0; i < 8; i++) at[i] = w.q[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile uint32_t *)qp.sq_db = slot + 1;
    uint8_t e[64];
    const bool got = wait_cqe(cu, qp.cq_buf, slot, qp.cq_entry_size, e);
    memcpy(c, e, sizeof *c);
    return got;
}

}  // namespace

int main(int argc, char **argv) {
    const std::string mode = argc > 1 ? argv[1] : "1";
    const bool missing = mode == "missing", owned = mode == "owned";
    const int offered = missing ? 2 : owned ? 1 : atoi(mode.c_str());
    if (offered < 1 || offered > NVSHMEMX_EFA_GDA_MAX_RAILS) die("usage: efaemu_gda_host_test [RAILS|missing|owned]");
    const int n_owned = owned ? atoi(getenv("NVSHMEM_EFA_GDA_OWNED_QUEUES") ? getenv("NVSHMEM_EFA_GDA_OWNED_QUEUES") : "0") : 0;
    const int rails = missing ? 1 : offered;
    Pair pair = fork_pair();
    g_pair = &pair;
    g_me = pair.a ? 0 : 1;
    Drv cu;
    cu.load();
    std::vector<struct fi_info *> infos;
    for (int k = 0; k < offered; k++) infos.push_back(nvshmem_info_of(missing && k == 1 ? 7 : k));
    nvshmemt_efa_gda_bootstrap_t boot = {g_me, 2, allgather, nullptr};
    expect(nvshmemt_efa_gda_enabled() == 1, "GDA compiled in (against fi_ext_efa.h)");
    const int rc = offered == 1 ? nvshmemt_efa_gda_init(infos[0], &boot) : nvshmemt_efa_gda_init_rails(infos.data(), offered, &boot);
    const std::string status = nvshmemx_efa_gda_status();
    std::string want = rails == 1 ? "EFA GDA active on 1 rail (efaemu0)" : "EFA GDA active on " + std::to_string(rails) + " rails (efaemu0";
    if (missing) want = "EFA GDA active on 1 of 2 rails (efaemu0); rail 1 (efaemu7-rdm) left out: no efa-direct fabric for efaemu7-rdm";
    expect(rc == 0 && nvshmemx_efa_gda_is_active() == 1 && status.rfind(want, 0) == 0 && nvshmemx_efa_gda_rails() == rails,
           "the host code starts GDA on efaemu: init 0, status active, " + std::to_string(rails) + " rail(s)",
           fmt("rc %d rails %d status: %s", rc, nvshmemx_efa_gda_rails(), status.c_str()));
    // GDA signals only where the GPU orders GPUDirect RDMA writes (FAKECUDA_GDR_ORDERING, default OWNER = 100),
    // with the reason, and the status line says the same.
    const char *gdr = getenv("FAKECUDA_GDR_ORDERING");
    const bool ordered_expected = !gdr || atoi(gdr) >= 100;
    const char *sig_why = nullptr;
    const int ordered = nvshmemx_efa_gda_signals_ordered(&sig_why);
    expect(ordered == (ordered_expected ? 1 : 0) && sig_why &&
               (ordered || status.find(std::string("GDA signals off: ") + sig_why) != std::string::npos),
           "GDA signals follow the GPU's GPUDirect RDMA write ordering (nvshmemx_efa_gda_signals_ordered, status line)",
           fmt("ordered %d why: %s", ordered, sig_why ? sig_why : "(null)"));
    // Writes delivered once only where every rail's endpoint was granted FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES:
    // efaemu refuses it under EFAEMU_DUPLICATE (it places writes again), and GDA signals are then off, saying why.
    const char *dup = getenv("EFAEMU_DUPLICATE");
    const bool once_expected = !dup || atof(dup) <= 0;
    const char *once_why = nullptr;
    const int once = nvshmemx_efa_gda_writes_delivered_once(&once_why);
    expect(once == (once_expected ? 1 : 0) && once_why &&
               (once || !ordered || status.find(std::string("GDA signals off: ") + once_why) != std::string::npos) &&
               (!once || !ordered || status.find("GDA signals on") != std::string::npos),
           "GDA signals need writes delivered once (nvshmemx_efa_gda_writes_delivered_once, status line)",
           fmt("once %d why: %s", once, once_why ? once_why : "(null)"));
    printf("%s: status: %s\n", pair.a ? "A" : "B", status.c_str());
    fflush(stdout);

    CUdeviceptr heap = 0;
    if (cu.memAlloc(&heap, kHeap)) die("cuMemAlloc");
    std::vector<uint8_t> h(kHeap);
    for (size_t i = 0; i < kHeap; i++) h[i] = pattern(g_me, i);
    cu.htod(heap, h.data(), kHeap);
    nvshmemt_efa_gda_register_region((void *)heap, kHeap);  // collective, like NVSHMEM's heap registration
    const std::string status2 = nvshmemx_efa_gda_status();
    expect(status2.rfind("EFA GDA active", 0) == 0 && status2.find("unreachable") == std::string::npos,
           "a GPU heap region registers on every PE and every rail (FI_HMEM_CUDA, lkey, rkeys exchanged)", status2);

    // The published device state, read back as a kernel would see it (about 260 KiB: on the heap).
    auto *d_state = nvshmemx_efa_gda_get_device_state();
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> sp(new nvshmemx_efa_gda_device_state_t());
    cu.dtoh(sp.get(), (CUdeviceptr)d_state, sizeof *sp);
    const nvshmemx_efa_gda_device_state_t &s = *sp;
    // The table: a header, then per region and rail a row of 1 + n_pes entries (ours, then every PE's view).
    const auto table = cu.read<nvshmemx_efa_gda_regions_t>(s.regions);
    std::vector<nvshmemx_efa_gda_region_t> rows((size_t)table.count * table.n_rails * (1 + table.n_pes));
    cu.dtoh(rows.data(), (CUdeviceptr)(s.regions + 1), rows.size() * sizeof rows[0]);
    auto row = [&](uint32_t k) { return &rows[(size_t)k * (1 + table.n_pes)]; };  // region 0 on rail k
    bool rails_ok = s.n_rails == (uint32_t)rails && table.n_rails == (uint32_t)rails && table.count == 1 && s.my_pe == g_me && s.n_pes == 2;
    std::string detail = fmt("n_rails %u table %u/%u", s.n_rails, table.count, table.n_rails);
    // The device's WQE size (EFAEMU_WQE_SIZE, 64 unless a 128-byte device is emulated) is what the host must map.
    const uint32_t expected_wqe_size = getenv("EFAEMU_WQE_SIZE") ? (uint32_t)atoi(getenv("EFAEMU_WQE_SIZE")) : 64;
    std::vector<std::vector<nvshmemx_efa_gda_peer_t>> peers(rails, std::vector<nvshmemx_efa_gda_peer_t>(2));
    for (int k = 0; k < rails && rails_ok; k++) {
        const nvshmemx_efa_gda_qp_t &qp = s.rail[k].qp;
        const auto rx = cu.read<nvshmemx_efa_gda_rx_cq_t>(s.rail[k].rx_cq);
        cu.dtoh(peers[k].data(), (CUdeviceptr)s.rail[k].peers, 2 * sizeof(nvshmemx_efa_gda_peer_t));
        rails_ok = qp.qp_num == peers[k][g_me].qpn && rx.qp_num == qp.qp_num && qp.wqe_size == expected_wqe_size && qp.sq_entries >= 64 &&
                   qp.cq_entries >= qp.sq_entries && row(k)[0].base == heap && row(k)[0].valid && row(k)[1 + (1 - g_me)].valid;
        for (int j = 0; j < k && rails_ok; j++)  // every rail its own QP, queue and keys
            rails_ok = s.rail[j].qp.sq_buf != qp.sq_buf && s.rail[j].qp.cq_buf != qp.cq_buf && row(j)[0].key != row(k)[0].key;
        detail += fmt("; rail %d: qp %u/%u/%u sq %u cq %u key 0x%x", k, qp.qp_num, peers[k][g_me].qpn, rx.qp_num, qp.sq_entries,
                      qp.cq_entries, row(k)[0].key);
    }
    expect(rails_ok, "device state: per rail its own QP number from query_addr, SQ/CQ geometry from query_qp_wqs/query_cq, keys in the region table",
           detail);

    for (int k = 0; k < rails; k++) {
        const nvshmemx_efa_gda_qp_t &qp = s.rail[k].qp;
        const uint32_t len = 100000 + 1000 * (uint32_t)k;
        const uint64_t src_off = 4096 + 8192 * (uint64_t)k, dst_off = (1 << 20) + (uint64_t)k * (256 << 10);
        const std::string on = fmt(" (rail %d)", k);
        if (pair.a) {
            // The GPU's first WQE on this rail: a write with immediate into PE 1's heap, with this rail's keys.
            efa_gda_rdma_desc d{};
            d.op = EFA_IO_RDMA_WRITE;
            d.has_imm = 1;
            d.imm = 0xfeed0001 + (uint32_t)k;
            d.req_id = 0;
            d.dest_qpn = peers[k][1].qpn;
            d.ah = peers[k][1].ah;
            d.qkey = peers[k][1].qkey;
            d.local_addr = row(k)[0].base + src_off;
            d.lkey = row(k)[0].key;
            d.remote_addr = row(k)[2].base + dst_off;
            d.rkey = row(k)[2].key;
            d.length = len;
            efa_io_cdesc_common c;
            const bool got = post_and_wait(cu, qp, 0, d, &c);
            expect(got && c.status == 0 && c.req_id == 0 && c.qp_num == qp.qp_num,
                   "a WQE in the SQ the host code mapped completes into its GPU TX CQ (status OK, this QP)" + on,
                   fmt("got %d status %u req %u qp %u", got, c.status, c.req_id, c.qp_num));
            put(pair, 1);
        } else {
            (void)get<int>(pair);
            const auto rx = cu.read<nvshmemx_efa_gda_rx_cq_t>(s.rail[k].rx_cq);
            uint8_t e[64];
            const bool got = wait_cqe(cu, rx.cq_buf, 0, rx.cq_entry_size, e);
            efa_io_rx_cdesc_ex c;
            memcpy(&c, e, sizeof c);
            expect(got && c.base.imm == 0xfeed0001 + (uint32_t)k && c.base.src_qp_num == peers[k][0].qpn && c.base.ah == peers[k][0].ah &&
                       (c.base.length | (uint32_t)c.u.rdma_write.length_hi << 16) == len,
                   "its immediate arrives in the GPU RX CQ with the sender's AH and QP as query_addr resolved them" + on,
                   fmt("got %d imm 0x%x src_qp %u ah %u", got, c.base.imm, c.base.src_qp_num, c.base.ah));
            std::vector<uint8_t> back(len);
            cu.dtoh(back.data(), heap + dst_off, back.size());
            bool same = true;
            for (size_t i = 0; i < back.size() && same; i++) same = back[i] == pattern(0, src_off + i);
            expect(same, fmt("the %u bytes landed in PE 1's GPU heap, byte-exact", len) + on);
        }
    }
    if (owned) {
        const uint32_t n = s.rail[0].n_owned;
        std::vector<nvshmemx_efa_gda_qp_t> oq(n);
        if (n) cu.dtoh(oq.data(), (CUdeviceptr)s.rail[0].owned, n * sizeof oq[0]);
        std::vector<uint32_t> owner(n);
        if (n) cu.dtoh(owner.data(), (CUdeviceptr)s.rail[0].owner, n * sizeof owner[0]);
        bool shape = (int)n == n_owned;
        std::string d = fmt("n_owned %u", n);
        for (uint32_t k = 0; k < n; k++) {
            shape = shape && oq[k].qp_num != s.rail[0].qp.qp_num && oq[k].sq_buf != s.rail[0].qp.sq_buf &&
                    oq[k].cq_buf != s.rail[0].qp.cq_buf && oq[k].sq_entries == s.rail[0].qp.sq_entries && owner[k] == 0;
            for (uint32_t j = 0; j < k; j++) shape = shape && oq[j].qp_num != oq[k].qp_num && oq[j].cq_buf != oq[k].cq_buf;
            d += fmt("; owned %u: qp %u sq %u cq %u", k, oq[k].qp_num, oq[k].sq_entries, oq[k].cq_entries);
        }
        expect(shape, fmt("device state: %d owned queues on the rail, each its own QP (query_addr), SQ and GPU TX CQ, all free", n_owned), d);
        for (uint32_t k = 0; k < n; k++) {
            const uint32_t len = 50000 + 1000 * k;
            const uint64_t src_off = 3 << 20, dst_off = (2 << 20) + (uint64_t)k * (64 << 10);
            const std::string on = fmt(" (owned queue %u)", k);
            if (pair.a) {
                efa_gda_rdma_desc w{};
                w.op = EFA_IO_RDMA_WRITE;
                w.dest_qpn = peers[0][1].qpn;  // PE 1's rail QP: owned queues address the peers' own queues
                w.ah = peers[0][1].ah;
                w.qkey = peers[0][1].qkey;
                w.local_addr = row(0)[0].base + src_off;
                w.lkey = row(0)[0].key;
                w.remote_addr = row(0)[2].base + dst_off;
                w.rkey = row(0)[2].key;
                w.length = len;
                efa_io_cdesc_common c;
                const bool got = post_and_wait(cu, oq[k], 0, w, &c);
                expect(got && c.status == 0 && c.req_id == 0 && c.qp_num == oq[k].qp_num,
                       "a write posted on the owned queue completes OK into its own GPU TX CQ with its own QP number" + on,
                       fmt("got %d status %u req %u qp %u", got, c.status, c.req_id, c.qp_num));
                put(pair, 1);
            } else {
                (void)get<int>(pair);
                std::vector<uint8_t> back(len);
                cu.dtoh(back.data(), heap + dst_off, back.size());
                bool same = true;
                for (size_t i = 0; i < back.size() && same; i++) same = back[i] == pattern(0, src_off + i);
                expect(same, fmt("its %u bytes landed in PE 1's GPU heap, byte-exact", len) + on);
            }
        }
    }
    sync(pair);
    // The slot NVSHMEM's patched host library asks for (the device API over GDA, issue 23): on while GDA is active,
    // with the device state and the shared counters in GPU memory, and the status line says so.
    nvshmemx_efa_gda_api_slot_t slot;
    const int got_slot = nvshmemx_efa_gda_get_api_slot(&slot);
    nvshmemx_efa_gda_api_shared_t shared;
    memset(&shared, 0xff, sizeof shared);
    const bool read_back = got_slot == 0 && slot.shared && cu.dtoh(&shared, (CUdeviceptr)(uintptr_t)slot.shared, sizeof shared) == 0;
    expect(got_slot == 0 && slot.on == 1 && slot.abi == NVSHMEMX_EFA_GDA_API_ABI && slot.state == nvshmemx_efa_gda_get_device_state() && read_back &&
               shared.proxy_issued == 0 && shared.flushed_at != nullptr && strstr(nvshmemx_efa_gda_status(), "; NVSHMEM device API over GDA on"),
           "the device API slot is on, with the device state and zeroed counters in GPU memory, and the status line says so",
           fmt("rc %d on %u abi %u issued %llu status %s", got_slot, slot.on, slot.abi, shared.proxy_issued, nvshmemx_efa_gda_status()));
    // g over GDA: its scratch is in the region table as a local-only region (this PE's keys on every rail, no peer's
    // view), and the slot says how many slots it has.
    {
        std::unique_ptr<nvshmemx_efa_gda_device_state_t> after(new nvshmemx_efa_gda_device_state_t());
        cu.dtoh(after.get(), (CUdeviceptr)nvshmemx_efa_gda_get_device_state(), sizeof *after);
        const auto t = cu.read<nvshmemx_efa_gda_regions_t>(after->regions);
        std::vector<nvshmemx_efa_gda_region_t> r((size_t)t.count * t.n_rails * (1 + t.n_pes));
        cu.dtoh(r.data(), (CUdeviceptr)(after->regions + 1), r.size() * sizeof r[0]);
        // On a GPU that does not order GPUDirect RDMA writes (FAKECUDA_GDR_ORDERING=0), g and get go through the proxy:
        // no slot, no READS_OVER_GDA, and the status says so; the scratch is registered all the same.
        const bool ordered = nvshmemx_efa_gda_signals_ordered(nullptr) == 1;
        bool ok = read_back && slot.g_slots == (ordered ? 1024u : 0u) &&
                  (slot.flags & NVSHMEMX_EFA_GDA_API_READS_OVER_GDA) == (ordered ? NVSHMEMX_EFA_GDA_API_READS_OVER_GDA : 0u) &&
                  shared.g_value != nullptr && shared.g_lock != nullptr && t.count == 2 &&
                  strstr(nvshmemx_efa_gda_status(), ordered ? "g as GDA reads" : "g and get through NVSHMEM's proxy") != nullptr;
        for (uint32_t k = 0; ok && k < t.n_rails; k++) {
            const nvshmemx_efa_gda_region_t *gr = &r[((size_t)1 * t.n_rails + k) * (1 + t.n_pes)];
            ok = gr[0].base == (uint64_t)(uintptr_t)shared.g_value && gr[0].length == 1024 * 8 && gr[0].valid && !gr[1].valid && !gr[2].valid &&
                 (k == 0 || gr[0].key != r[((size_t)1 * t.n_rails) * (1 + t.n_pes)].key);
        }
        expect(ok, "g's scratch (1024 slots) is a local-only GDA region: this PE's key on every rail, no peer's view; the status says g is GDA reads (through the proxy, with get, where a GPU does not order GPUDirect RDMA writes)",
               fmt("g_slots %u value %p lock %p regions %u status %s", slot.g_slots, (void *)shared.g_value, (void *)shared.g_lock, t.count,
                   nvshmemx_efa_gda_status()));
        // What a g does with it: a read of 8 bytes of PE 1's heap into slot 5, with the scratch's key, on rail 0's
        // queue (its second WQE), the data in the slot at completion.
        if (ok && pair.a) {
            const nvshmemx_efa_gda_region_t *gr = &r[(size_t)1 * t.n_rails * (1 + t.n_pes)], *hr = &r[0];
            const nvshmemx_efa_gda_qp_t &qp = s.rail[0].qp;
            efa_gda_rdma_desc d{};
            d.op = EFA_IO_RDMA_READ;
            d.req_id = 1;
            d.dest_qpn = peers[0][1].qpn;
            d.ah = peers[0][1].ah;
            d.qkey = peers[0][1].qkey;
            d.local_addr = gr[0].base + 5 * 8;
            d.lkey = gr[0].key;
            d.remote_addr = hr[2].base + 64;
            d.rkey = hr[2].key;
            d.length = 8;
            efa_io_cdesc_common c;
            const bool got = post_and_wait(cu, qp, 1, d, &c);
            uint8_t v[8] = {};
            cu.dtoh(v, (CUdeviceptr)(gr[0].base + 5 * 8), 8);
            bool same = true;
            for (int i = 0; i < 8; i++) same = same && v[i] == pattern(1, 64 + i);
            expect(got && c.status == 0 && c.req_id == 1 && same, "a GDA read into g's scratch, with its key, completes OK and the 8 bytes are PE 1's",
                   fmt("got %d status %u req %u first byte 0x%02x (want 0x%02x)", got, c.status, c.req_id, v[0], pattern(1, 64)));
        }
        sync(pair);
    }
    nvshmemt_efa_gda_fini();
    expect(nvshmemx_efa_gda_is_active() == 0 && nvshmemx_efa_gda_rails() == 0 && std::string(nvshmemx_efa_gda_status()) == "EFA GDA off: finalized",
           "fini closes everything (endpoints before CQs, MRs and AVs before the domains)", nvshmemx_efa_gda_status());
    for (struct fi_info *i : infos) fi_freeinfo(i);
    return finish(pair);
}
