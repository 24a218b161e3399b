// The GDA host code itself (templates/transport_efa_gda/transport_efa_gda.cpp, unmodified) against efaemu, two
// processes on the CPU: `efaemu_gda_host_test`. Run with the stand-in driver on LD_LIBRARY_PATH, the interposer
// in LD_PRELOAD, FI_PROVIDER_PATH at efaemu and NVSHMEM_EFA_GDA_ENABLE=1.
//
// Each PE calls nvshmemt_efa_gda_init as NVSHMEM's patched connect_endpoints does (its all-gathers meet over a
// pipe), registers a heap region of "GPU memory", then the test plays the GPU: it reads the published device
// state back through the driver, writes a WQE into the SQ the host code mapped, rings the doorbell, and reads the
// TX CQE (and, at the target, the RX CQE of a write with immediate and the data) from the GPU CQs the host code
// handed to efaemu as dma-buf fds.
#include <cuda.h>
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

bool wait_cqe(Drv &cu, const uint8_t *ring, uint32_t index, uint32_t entry_size, uint8_t *e) {
    const uint64_t end = now_ms() + 10000;
    while (now_ms() < end) {
        if (cu.dtoh(e, (CUdeviceptr)(ring + (size_t)index * entry_size), entry_size)) return false;
        if (e[offsetof(efa_io_cdesc_common, flags)] & EFA_IO_CDESC_COMMON_PHASE_MASK) return true;
        usleep(200);
    }
    return false;
}

}  // namespace

int main() {
    Pair pair = fork_pair();
    g_pair = &pair;
    g_me = pair.a ? 0 : 1;
    Drv cu;
    cu.load();
    struct fi_info *nvshmem_info = fi_allocinfo();  // what NVSHMEM hands over: its RDM info on the chosen NIC
    nvshmem_info->domain_attr->name = strdup("efaemu0-rdm");
    nvshmemt_efa_gda_bootstrap_t boot = {g_me, 2, allgather, nullptr};
    expect(nvshmemt_efa_gda_enabled() == 1, "GDA compiled in (against fi_ext_efa.h)");
    const int rc = nvshmemt_efa_gda_init(nvshmem_info, &boot);
    const std::string status = nvshmemx_efa_gda_status();
    expect(rc == 0 && nvshmemx_efa_gda_is_active() == 1 && status.rfind("EFA GDA active: efa-direct efaemu0-rdm", 0) == 0,
           "the host code starts GDA on efaemu: init 0, status active", fmt("rc %d status: %s", rc, status.c_str()));
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
           "a GPU heap region registers on every PE (FI_HMEM_CUDA, lkey, rkey exchanged)", status2);

    // The published device state, read back as a kernel would see it.
    auto *d_state = nvshmemx_efa_gda_get_device_state();
    // ABI 3: the queue sits inside the state (about 64 KiB with the fixed peer entries: on the heap).
    std::unique_ptr<nvshmemx_efa_gda_device_state_t> sp(new nvshmemx_efa_gda_device_state_t());
    cu.dtoh(sp.get(), (CUdeviceptr)d_state, sizeof *sp);
    const nvshmemx_efa_gda_device_state_t &s = *sp;
    const nvshmemx_efa_gda_qp_t &qp = s.qp;
    const auto rx = cu.read<nvshmemx_efa_gda_rx_cq_t>(s.rx_cq);
    nvshmemx_efa_gda_peer_t peers[2];
    cu.dtoh(peers, (CUdeviceptr)s.peers, sizeof peers);
    // The table: a header, then per region a row of 1 + n_pes entries (ours, then every PE's view).
    const auto table = cu.read<nvshmemx_efa_gda_regions_t>(s.regions);
    std::vector<nvshmemx_efa_gda_region_t> rows((size_t)table.count * (1 + table.n_pes));
    cu.dtoh(rows.data(), (CUdeviceptr)(s.regions + 1), rows.size() * sizeof rows[0]);
    std::vector<nvshmemx_efa_gda_region_t> local(table.count), remote(2 * table.count);
    for (uint32_t i = 0; i < table.count; i++) {
        local[i] = rows[i * (1 + table.n_pes)];
        for (uint32_t pe = 0; pe < 2; pe++) remote[pe * table.count + i] = rows[i * (1 + table.n_pes) + 1 + pe];
    }
    expect(s.my_pe == g_me && s.n_pes == 2 && qp.qp_num == peers[g_me].qpn && rx.qp_num == qp.qp_num && qp.wqe_size == 64 &&
               qp.sq_entries >= 64 && qp.cq_entries >= qp.sq_entries && table.count == 1 && local[0].base == heap &&
               local[0].valid && remote[(1 - g_me) * table.count].valid,
           "device state: own QP number from query_addr, SQ/CQ geometry from query_qp_wqs/query_cq, the region table",
           fmt("pe %d qp %u/%u/%u sq %u cq %u regions %u", s.my_pe, qp.qp_num, peers[g_me].qpn, rx.qp_num, qp.sq_entries,
               qp.cq_entries, table.count));

    if (pair.a) {
        // The GPU's first WQE: a write with immediate of 100000 bytes into PE 1's heap at 1 MiB.
        const nvshmemx_efa_gda_region_t L = local[0], R = remote[1 * table.count + 0];
        efa_gda_rdma_desc d{};
        d.op = EFA_IO_RDMA_WRITE;
        d.has_imm = 1;
        d.imm = 0xfeed0001;
        d.req_id = 0;
        d.dest_qpn = peers[1].qpn;
        d.ah = peers[1].ah;
        d.qkey = peers[1].qkey;
        d.local_addr = L.base + 4096;
        d.lkey = L.key;
        d.remote_addr = R.base + (1 << 20);
        d.rkey = R.key;
        d.length = 100000;
        union efa_gda_wqe_words w;
        efa_gda_build_rdma_wqe(&w, &d, efa_gda_sq_phase(0, qp.sq_log2));
        volatile uint64_t *slot = (volatile uint64_t *)qp.sq_buf;  // the host mapping (cuMemHostGetDevicePointer)
        for (int i = 0; i < 8; i++) slot[i] = w.q[i];
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *(volatile uint32_t *)qp.sq_db = 1;
        uint8_t e[64];
        const bool got = wait_cqe(cu, qp.cq_buf, 0, qp.cq_entry_size, e);
        efa_io_cdesc_common c;
        memcpy(&c, e, sizeof c);
        expect(got && c.status == 0 && c.req_id == 0 && c.qp_num == qp.qp_num,
               "a WQE in the SQ the host code mapped completes into its GPU TX CQ (status OK, this QP)",
               fmt("got %d status %u req %u qp %u", got, c.status, c.req_id, c.qp_num));
        put(pair, 1);
    } else {
        (void)get<int>(pair);
        uint8_t e[64];
        const bool got = wait_cqe(cu, rx.cq_buf, 0, rx.cq_entry_size, e);
        efa_io_rx_cdesc_ex c;
        memcpy(&c, e, sizeof c);
        expect(got && c.base.imm == 0xfeed0001 && c.base.src_qp_num == peers[0].qpn && c.base.ah == peers[0].ah &&
                   (c.base.length | (uint32_t)c.u.rdma_write.length_hi << 16) == 100000,
               "its immediate arrives in the GPU RX CQ with the sender's AH and QP as query_addr resolved them",
               fmt("got %d imm 0x%x src_qp %u ah %u", got, c.base.imm, c.base.src_qp_num, c.base.ah));
        std::vector<uint8_t> back(100000);
        cu.dtoh(back.data(), heap + (1 << 20), back.size());
        bool same = true;
        for (size_t i = 0; i < back.size() && same; i++) same = back[i] == pattern(0, 4096 + i);
        expect(same, "the 100000 bytes landed in PE 1's GPU heap, byte-exact");
    }
    sync(pair);
    nvshmemt_efa_gda_fini();
    expect(nvshmemx_efa_gda_is_active() == 0 && std::string(nvshmemx_efa_gda_status()) == "EFA GDA off: finalized",
           "fini closes everything (endpoint before CQs, MRs and AV before the domain)", nvshmemx_efa_gda_status());
    fi_freeinfo(nvshmem_info);
    return finish(pair);
}
