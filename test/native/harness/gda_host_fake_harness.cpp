// Runs the GDA host code (transport_efa_gda.cpp) end to end on a CPU: each PE is a process with the fake
// efa-direct provider (fake_fabric.cpp, linked in) and the fake CUDA driver (fake_libcuda.cpp, the
// libcuda.so.1 its dlopen finds); the processes' all-gathers meet in this program, which reports a PE left
// waiting in one (a hang) instead of hanging. Each PE prints what the host code did and published.
//
//   gda_host_fake_harness SCENARIO      (run with LD_LIBRARY_PATH at the fake libcuda.so.1)
// Scenarios: active, wide-wqe, mismatch, none, no-efa-pe1, av-fail-pe1, region-fail-pe1, cq-oversize, no-pcie,
// and with two NICs per PE (FAKE_RAILS: the domain names NVSHMEM hands over, one rail each): rails2,
// rail1-fails-pe1, rails-none-pe1, rails-dup, rails-env-pe0, rails-region-fail-pe1; owned queues: owned3,
// owned-rails2, owned-limit-pe1, owned-bad; finish-fail-pe1 (start-up fails on one PE after the last all-gather);
// gdr-unordered-pe1, gdr-unknown-pe0, gdr-all-devices (GPUDirect RDMA write ordering); rx-larger-pe1; wq-caps-64-pe1; sub-cq-pe1; unsolicited-off-pe1; timeout-250, timeout-bad,
// timeout-zero (NVSHMEM_EFA_GDA_TIMEOUT_MS).
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <map>
#include <string>
#include <vector>

#include "fake_fabric.h"
#include "transport_efa_gda.h"
#include "nvshmemx_efa_gda_api.h"

namespace {

const int kPes = 2;
int g_sock = -1, g_gathers = 0;

bool io(int fd, void *p, size_t n, bool write_) {
    char *c = (char *)p;
    while (n) {
        ssize_t r = write_ ? write(fd, c, n) : read(fd, c, n);
        if (r <= 0) return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

// The child's all-gather: send our bytes to the hub, get everyone's back.
int allgather(const void *in, void *out, int bytes, void *) {
    g_gathers++;
    uint32_t n = (uint32_t)bytes;
    if (!io(g_sock, &n, 4, true) || !io(g_sock, (void *)in, n, true)) return -1;
    return io(g_sock, out, (size_t)bytes * kPes, false) ? 0 : -1;
}

const char *const kTwo = "rdmap0s0-rdm,rdmap1s0-rdm";

std::map<std::string, std::vector<std::map<std::string, std::string>>> scenarios() {
    auto on = [](std::map<std::string, std::string> extra = {}) {
        extra["NVSHMEM_EFA_GDA_ENABLE"] = "1";
        return extra;
    };
    return {
        {"active", {on(), on()}},
        {"wide-wqe", {on({{"FAKE_WQE_SIZE", "128"}}), on({{"FAKE_WQE_SIZE", "128"}})}},
        {"mismatch", {on(), {}}},
        {"none", {{}, {}}},
        {"no-efa-pe1", {on(), on({{"FAKE_NO_EFA_DIRECT", "1"}})}},
        {"av-fail-pe1", {on(), on({{"FAKE_AV_FAIL", "1"}})}},
        // registration 1 is the credit counters, 2 the first heap region, 3 the second
        {"region-fail-pe1", {on(), on({{"FAKE_MR_FAIL_NTH", "3"}})}},
        {"cq-oversize", {on({{"FAKE_CQ_OVERSIZE", "1"}}), on()}},
        {"no-pcie", {on({{"FAKE_CUDA_NO_PCIE_MAPPING", "1"}}), on({{"FAKE_CUDA_NO_PCIE_MAPPING", "1"}})}},
        {"rails2", {on({{"FAKE_RAILS", kTwo}}), on({{"FAKE_RAILS", kTwo}})}},
        {"rail1-fails-pe1", {on({{"FAKE_RAILS", kTwo}}), on({{"FAKE_RAILS", kTwo}, {"FAKE_NO_EFA_DIRECT_DOMAIN", "rdmap1s0-rdm"}})}},
        {"rails-none-pe1", {on({{"FAKE_RAILS", kTwo}}), on({{"FAKE_RAILS", kTwo}, {"FAKE_NO_EFA_DIRECT", "1"}})}},
        {"rails-dup", {on({{"FAKE_RAILS", "rdmap0s0-rdm,rdmap0s0-rdm"}}), on({{"FAKE_RAILS", "rdmap0s0-rdm,rdmap0s0-rdm"}})}},
        {"rails-env-pe0", {on({{"FAKE_RAILS", kTwo}, {"NVSHMEM_EFA_GDA_RAILS", "1"}}), on({{"FAKE_RAILS", kTwo}})}},
        {"rails-env-bad", {on({{"FAKE_RAILS", kTwo}, {"NVSHMEM_EFA_GDA_RAILS", "two"}}), on({{"FAKE_RAILS", kTwo}})}},
        // registrations per PE: the credit blocks of rail 0 and rail 1, then each heap region on rail 0 and rail 1:
        // the 4th is the GPU heap region on rail 1
        // Owned queues (NVSHMEM_EFA_GDA_OWNED_QUEUES): 3 per rail on both PEs; PE 1's NIC takes only 3 endpoints per
        // domain (its own and 2 owned), so every PE runs 2; a malformed value turns GDA off.
        {"owned3", {on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "3"}}), on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "3"}})}},
        {"owned-rails2", {on({{"FAKE_RAILS", kTwo}, {"NVSHMEM_EFA_GDA_OWNED_QUEUES", "2"}}),
                          on({{"FAKE_RAILS", kTwo}, {"NVSHMEM_EFA_GDA_OWNED_QUEUES", "2"}})}},
        {"owned-limit-pe1", {on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "3"}}), on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "3"}, {"FAKE_EP_LIMIT", "3"}})}},
        {"owned-bad", {on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "99"}}), on({{"NVSHMEM_EFA_GDA_OWNED_QUEUES", "99"}})}},
        // Start-up fails on PE 1 only after the last all-gather of addresses: allocating the device state
        // (FAKE_FAIL_STATE_ALLOC: run_pe refuses allocations of its size). Every PE must end off, with one status.
        {"finish-fail-pe1", {on(), on({{"FAKE_FAIL_STATE_ALLOC", "1"}})}},
        // GPUDirect RDMA write ordering (FAKE_CUDA_GDR_ORDERING): PE 1's GPU below OWNER, or PE 0's unreadable:
        // GDA stays on, its signals off on every PE.
        {"gdr-unordered-pe1", {on({{"FAKE_API_SLOT", "1"}}), on({{"FAKE_CUDA_GDR_ORDERING", "0"}, {"FAKE_API_SLOT", "1"}})}},
        {"gdr-unknown-pe0", {on({{"FAKE_CUDA_GDR_ORDERING", "fail"}}), on()}},
        {"gdr-all-devices", {on({{"FAKE_CUDA_GDR_ORDERING", "200"}, {"FAKE_API_SLOT", "1"}}), on({{"FAKE_CUDA_GDR_ORDERING", "100"}, {"FAKE_API_SLOT", "1"}})}},
        // PE 1's RX CQ larger than PE 0's (FI_EFA_RX_SIZE): the immediate window is the smaller one's share on both.
        {"rx-larger-pe1", {on(), on({{"FAKE_RX_SIZE", "128"}})}},
        // A NIC that does not promise single delivery (FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES refused) on PE 1.
        {"once-refused-pe1", {on(), on({{"FAKE_DELIVERED_ONCE", "0"}})}},
        // PE 1's send queue reports 64-bit request ids (libfabric after 2.3.0: FI_EFA_WQ_CAPS_64_BIT_REQ_ID).
        {"wq-caps-64-pe1", {on(), on({{"FAKE_WQ_CAPS", "1"}})}},
        // PE 1's NIC is the first EFA device (0xefa0: CQs made of sub-CQs); PE 0's a later one (0xefa1).
        {"sub-cq-pe1", {on({{"FAKE_DEVICE_ID", "0xefa1"}}), on({{"FAKE_DEVICE_ID", "0xefa0"}})}},
        // PE 1's provider takes write-with-immediate only into posted receives: no PE sends immediates.
        {"unsolicited-off-pe1", {on({{"FI_EFA_USE_UNSOLICITED_WRITE_RECV", "1"}}), on({{"FI_EFA_USE_UNSOLICITED_WRITE_RECV", "off"}})}},
        // NVSHMEM_EFA_GDA_TIMEOUT_MS: a bound of 250 ms in the state; a malformed one keeps GDA from starting.
        {"timeout-250", {on({{"NVSHMEM_EFA_GDA_TIMEOUT_MS", "250"}}), on({{"NVSHMEM_EFA_GDA_TIMEOUT_MS", "250"}})}},
        {"timeout-bad", {on({{"NVSHMEM_EFA_GDA_TIMEOUT_MS", "5s"}}), on()}},
        {"timeout-zero", {on({{"NVSHMEM_EFA_GDA_TIMEOUT_MS", "0"}}), on({{"NVSHMEM_EFA_GDA_TIMEOUT_MS", "0"}})}},
        {"rails-region-fail-pe1", {on({{"FAKE_RAILS", kTwo}}), on({{"FAKE_RAILS", kTwo}, {"FAKE_MR_FAIL_NTH", "4"}})}},
    };
}

void print_table(const char *when) {
    const nvshmemx_efa_gda_device_state_t *s = nvshmemx_efa_gda_get_device_state();
    const nvshmemx_efa_gda_regions_t *t = s->regions;
    printf("table %s: count=%u n_pes=%u n_rails=%u at=%p\n", when, t->count, t->n_pes, t->n_rails, (const void *)t);
    for (uint32_t i = 0; i < t->count; i++)
        for (uint32_t k = 0; k < t->n_rails; k++) {
            const nvshmemx_efa_gda_region_t *row = (const nvshmemx_efa_gda_region_t *)(t + 1) + ((size_t)i * t->n_rails + k) * (1 + t->n_pes);
            printf("  region %u%s: local valid=%u key=0x%x len=%llu", i, k ? (" rail " + std::to_string(k)).c_str() : "", row[0].valid,
                   row[0].key, (unsigned long long)row[0].length);
            for (uint32_t pe = 0; pe < t->n_pes; pe++) {
                const nvshmemx_efa_gda_region_t &r = row[1 + pe];
                printf(" | pe%u valid=%u key=0x%x len=%llu", pe, r.valid, r.key, (unsigned long long)r.length);
            }
            printf("\n");
        }
    for (uint32_t k = 0; k < s->n_rails; k++)
        for (int slot = 0; slot < NVSHMEMX_EFA_GDA_HOT_REGIONS; slot++) {
            const nvshmemx_efa_gda_rail_t &rl = s->rail[k];
            const nvshmemx_efa_gda_hot_local_t &h = rl.hot[slot];
            printf("  hot %d%s: present=%u len=%llu key=0x%x base_is_row=%d", slot, k ? (" rail " + std::to_string(k)).c_str() : "",
                   h.present, (unsigned long long)h.length, h.lkey,
                   t->count && h.base == ((const nvshmemx_efa_gda_region_t *)(t + 1))[0].base);
            for (uint32_t pe = 0; pe < t->n_pes; pe++)
                printf(" | pe%u present=%u key=0x%x base_set=%d", pe, rl.fast[pe].hot[slot].present, rl.fast[pe].hot[slot].rkey,
                       rl.fast[pe].hot[slot].base != 0);
            printf("\n");
        }
}

int run_pe(int pe, const std::map<std::string, std::string> &env) {
    unsetenv("NVSHMEM_EFA_GDA_ENABLE");
    for (auto &kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    setenv("FAKE_PE", std::to_string(pe).c_str(), 1);
    if (getenv("FAKE_FAIL_STATE_ALLOC"))
        setenv("FAKE_CUDA_FAIL_ALLOC_BYTES", std::to_string(sizeof(nvshmemx_efa_gda_device_state_t)).c_str(), 1);
    // As the patched connect_endpoints does: init only where enabled() says so.
    const int enabled = nvshmemt_efa_gda_enabled();
    printf("enabled()=%d\n", enabled);
    nvshmemt_efa_gda_bootstrap_t boot = {pe, kPes, allgather, nullptr};
    // FAKE_RAILS: one of NVSHMEM's fi_infos per named domain, as the multi-rail transport hands them over;
    // otherwise the single-rail call with no info (the PE's one NIC).
    std::vector<struct fi_info *> infos;
    if (const char *names = getenv("FAKE_RAILS")) {
        std::string list = names;
        for (size_t at = 0; at <= list.size();) {
            const size_t comma = list.find(',', at);
            const std::string one = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            struct fi_info *i = fi_dupinfo(nullptr);
            i->domain_attr->name = strdup(one.c_str());
            infos.push_back(i);
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
    }
    int rc = 0;
    if (enabled && infos.empty()) rc = nvshmemt_efa_gda_init(nullptr, &boot);
    else if (enabled) rc = nvshmemt_efa_gda_init_rails(infos.data(), (int)infos.size(), &boot);
    printf("init=%d active=%d gathers=%d rails=%d\n", rc, nvshmemx_efa_gda_is_active(), g_gathers, nvshmemx_efa_gda_rails());
    printf("status: %s\n", nvshmemx_efa_gda_status());
    const char *why = nullptr;
    const int ordered = nvshmemx_efa_gda_signals_ordered(&why);
    printf("signals_ordered=%d why: %s\n", ordered, why ? why : "(null)");
    const char *once_why = nullptr;
    const int once = nvshmemx_efa_gda_writes_delivered_once(&once_why);
    printf("delivered_once=%d asked=%d why: %s\n", once, fake_fabric.delivered_once_asked, once_why ? once_why : "(null)");
    // FAKE_API_SLOT=1: the device API's slot, as NVSHMEM's host library asks for it after connecting.
    if (getenv("FAKE_API_SLOT") && nvshmemx_efa_gda_is_active()) {
        nvshmemx_efa_gda_api_slot_t slot;
        const int slot_rc = nvshmemx_efa_gda_get_api_slot(&slot);
        printf("api slot: rc=%d abi=%u on=%u flags=%u g_slots=%u\n", slot_rc, slot.abi, slot.on, slot.flags, slot.g_slots);
        // The fake's "GPU memory" is host memory: the unflushed bits after flushed_at[n_pes], the proxy's after them, cleared.
        if (slot.shared && slot.state) {
            const nvshmemx_efa_gda_api_shared_t *sh = slot.shared;
            const int words = (slot.state->n_pes + 31) / 32;
            unsigned set = 0;
            for (int i = 0; sh->unflushed && i < words; i++) set |= sh->unflushed[i];
            for (int i = 0; sh->proxy_unflushed && i < words; i++) set |= sh->proxy_unflushed[i];
            printf("api shared: unflushed=%s proxy_unflushed=%s words=%d set=%u\n",
                   !sh->unflushed ? "null" : sh->unflushed == sh->flushed_at + slot.state->n_pes ? "after flushed_at" : "elsewhere",
                   !sh->proxy_unflushed ? "null" : sh->proxy_unflushed == sh->unflushed + words ? "after unflushed" : "elsewhere", words, set);
        }
        printf("status with the device API: %s\n", nvshmemx_efa_gda_status());
    }
    printf("hints: fabric=%s inject_size=%zu context2=%d mr_local=%d\n", fake_fabric.hint_fabric.c_str(),
           fake_fabric.hint_inject_size, (fake_fabric.hint_mode & FI_CONTEXT2) != 0, (fake_fabric.hint_mr_mode & FI_MR_LOCAL) != 0);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (nvshmemx_efa_gda_is_active()) {
        nvshmemx_efa_gda_device_state_t *s = nvshmemx_efa_gda_get_device_state();
        printf("state: abi=%u my_pe=%d n_pes=%d n_rails=%u imm_window=%u credit_timeout_ns=%llu timeout_ns=%llu\n", s->abi_version,
               s->my_pe, s->n_pes, s->n_rails, s->rail[0].imm_window, (unsigned long long)s->credit_timeout_ns,
               (unsigned long long)s->timeout_ns);
        for (uint32_t k = 0; k < s->n_rails; k++) {
            const nvshmemx_efa_gda_rail_t &rl = s->rail[k];
            const nvshmemx_efa_gda_qp_t *q = &rl.qp;
            const std::string tag = k ? "rail " + std::to_string(k) + " " : "";
            printf("%sqp: qp_num=%u own_peer_qpn=%u sq=%ux%u max_batch=%u cq=%ux%u rx=%ux%u rx_qp_num=%u\n", tag.c_str(), q->qp_num,
                   rl.peers[pe].qpn, q->sq_entries, q->wqe_size, q->max_batch, q->cq_entries, q->cq_entry_size, rl.rx_cq->cq_entries,
                   rl.rx_cq->cq_entry_size, rl.rx_cq->qp_num);
            printf("%sslot_done: first=%d last=%d\n", tag.c_str(), (int)q->slot_done[0], (int)q->slot_done[q->sq_entries - 1]);
            // Each slot's peer (ABI 7): no PE (all ones) until a WQE is posted in it, apart from the slot marks.
            bool pe_unset = q->slot_pe != nullptr;
            for (uint32_t i = 0; pe_unset && i < q->sq_entries; i++) pe_unset = q->slot_pe[i] == 0xffff;
            printf("%sslot_pe: set=%d all_unset=%d after_slot_done=%d\n", tag.c_str(), q->slot_pe != nullptr, pe_unset,
                   (const void *)q->slot_pe >= (const void *)(q->slot_done + q->sq_entries));
            // Each PE's first failed completion (ABI 8): n_pes words right after the slot peers, zero (the fake
            // driver's memory is not).
            const uint32_t *pe_error = q->slot_pe ? (const uint32_t *)(q->slot_pe + q->sq_entries) : nullptr;
            bool errors_zero = pe_error != nullptr;
            for (int i = 0; errors_zero && i < s->n_pes; i++) errors_zero = pe_error[i] == 0;
            printf("%spe_error: zeroed=%d\n", tag.c_str(), errors_zero);
            // Signal scratch: one zeroed u64 per SQ slot, after the credit counters in their registered block (same lkey).
            bool sig_zero = rl.signal_src != nullptr;
            for (uint32_t i = 0; sig_zero && i < q->sq_entries; i++) sig_zero = rl.signal_src[i] == 0;
            printf("%ssignal scratch: set=%d entries_zeroed=%d lkey_is_credits=%d after_credit_locks=%d aligned64=%d\n", tag.c_str(),
                   rl.signal_src != nullptr, sig_zero, rl.signal_lkey == rl.credits->lkey,
                   (const uint8_t *)rl.signal_src >= (const uint8_t *)(rl.credits->lock + s->n_pes), ((uintptr_t)rl.signal_src & 63) == 0);
            printf("%scounters: reserved=%u rung=%u retired=%u fatal=%u cq_head=%u\n", tag.c_str(), q->sq_reserved, q->sq_rung,
                   q->sq_retired, q->fatal, q->cq_head);
            const uint8_t *cq = q->cq_buf;
            bool zero = true;
            for (uint32_t i = 0; i < q->cq_entries * q->cq_entry_size; i++) zero &= cq[i] == 0;
            printf("%stx cq zeroed=%d\n", tag.c_str(), zero);
            for (int p = 0; p < kPes; p++)
                printf("%speer %d: ah=%u qpn=%u qkey=0x%x credits key=0x%x valid=%u base_set=%d fast=%d\n", tag.c_str(), p, rl.peers[p].ah,
                       rl.peers[p].qpn, rl.peers[p].qkey, rl.credits->peer_consumed[p].key, rl.credits->peer_consumed[p].valid,
                       rl.credits->peer_consumed[p].base != 0, memcmp(&rl.fast[p].addr, &rl.peers[p], sizeof rl.peers[p]) == 0);
            printf("%sfast past n_pes zero=%d\n", tag.c_str(), rl.fast[kPes].addr.qpn == 0 && rl.fast[NVSHMEMX_EFA_GDA_FAST_PES - 1].addr.qpn == 0);
            printf("%sowned: n=%u", tag.c_str(), rl.n_owned);
            for (uint32_t o = 0; o < rl.n_owned; o++) {
                const nvshmemx_efa_gda_qp_t &oq = rl.owned[o];
                bool apart = oq.sq_buf != q->sq_buf && oq.sq_db != q->sq_db && oq.cq_buf != q->cq_buf && oq.slot_done != q->slot_done;
                for (uint32_t p = 0; p < o; p++)
                    apart &= rl.owned[p].sq_buf != oq.sq_buf && rl.owned[p].cq_buf != oq.cq_buf && rl.owned[p].slot_done != oq.slot_done;
                bool cq_zero = true;
                for (uint32_t i = 0; i < oq.cq_entries * oq.cq_entry_size; i++) cq_zero &= oq.cq_buf[i] == 0;
                printf(" | qp_num=%u sq=%ux%u cq=%ux%u slot_done=%d..%d counters=%u/%u/%u cq_zeroed=%d owner=%u apart=%d", oq.qp_num,
                       oq.sq_entries, oq.wqe_size, oq.cq_entries, oq.cq_entry_size, (int)oq.slot_done[0],
                       (int)oq.slot_done[oq.sq_entries - 1], oq.sq_reserved, oq.sq_retired, oq.cq_head, cq_zero, rl.owner[o], apart);
            }
            printf("\n");
        }
        if (s->n_rails > 1) {
            bool distinct = true;
            for (uint32_t a = 0; a < s->n_rails; a++)
                for (uint32_t b = a + 1; b < s->n_rails; b++)
                    distinct &= s->rail[a].qp.sq_buf != s->rail[b].qp.sq_buf && s->rail[a].qp.sq_db != s->rail[b].qp.sq_db &&
                                s->rail[a].qp.cq_buf != s->rail[b].qp.cq_buf && s->rail[a].rx_cq != s->rail[b].rx_cq &&
                                s->rail[a].credits != s->rail[b].credits && s->rail[a].signal_src != s->rail[b].signal_src &&
                                s->rail[a].qp.slot_done != s->rail[b].qp.slot_done;
            printf("rails apart: queues, doorbells, CQs, slot marks, credits, scratch distinct=%d\n", distinct);
        }
        printf("rails past n_rails zero=%d\n", s->n_rails == NVSHMEMX_EFA_GDA_MAX_RAILS ||
                                                    (s->rail[s->n_rails].qp.sq_buf == nullptr && s->rail[s->n_rails].fast[0].addr.qpn == 0));
        printf("getinfo domains:");
        for (auto &d : fake_fabric.getinfo_domains) printf(" %s", d.empty() ? "(none)" : d.c_str());
        printf("\n");
        printf("fabric: av_inserts=%d enabled=%d cq_binds=%zu\n", fake_fabric.av_inserts, fake_fabric.enabled,
               fake_fabric.cq_binds.size());
        printf("endpoints: opened=%d closed=%d\n", fake_fabric.endpoints, fake_fabric.endpoints_closed);
        for (auto &r : fake_fabric.cq_requests)
            printf("cq request: size=%zu dmabuf_length=%llu offset=%llu\n", r.size, (unsigned long long)r.length,
                   (unsigned long long)r.offset);
        print_table("at start");
        // Two heap regions: GPU memory (through the fake driver) and host memory.
        auto mem_alloc = (CUresult(*)(CUdeviceptr *, size_t))dlsym(cuda, "cuMemAlloc_v2");
        CUdeviceptr dev = 0;
        mem_alloc(&dev, 4 << 20);
        void *host = malloc(1 << 20);
        const int gathers_before = g_gathers;
        nvshmemt_efa_gda_register_region((void *)(uintptr_t)dev, 4 << 20);
        const nvshmemx_efa_gda_regions_t *first = s->regions;
        print_table("after the GPU region");
        nvshmemt_efa_gda_register_region(host, 1 << 20);
        print_table("after the host region");
        printf("first table unchanged after the second publish: count=%u\n", first->count);
        printf("registration gathers=%d\n", g_gathers - gathers_before);
        printf("mr ifaces:");
        for (int i : fake_fabric.mr_ifaces) printf(" %s", i == FI_HMEM_CUDA ? "cuda" : i == FI_HMEM_SYSTEM ? "system" : "other");
        printf("\n");
        printf("status after regions: %s\n", nvshmemx_efa_gda_status());
        nvshmemt_efa_gda_release_region((void *)(uintptr_t)dev);
        print_table("after releasing the GPU region");
        // A retired hot slot is never filled again: the next region takes a fresh one.
        void *third = malloc(1 << 20);
        nvshmemt_efa_gda_register_region(third, 1 << 20);
        print_table("after a third region");
    }
    if (cuda) {
        auto report = (const char *(*)())dlsym(cuda, "fake_cuda_report");
        if (report) printf("cuda:\n%s", report());
    }
    nvshmemt_efa_gda_fini();
    printf("endpoints after fini: opened=%d closed=%d\n", fake_fabric.endpoints, fake_fabric.endpoints_closed);
    printf("after fini: active=%d state=%p status: %s\n", nvshmemx_efa_gda_is_active(),
           (void *)nvshmemx_efa_gda_get_device_state(), nvshmemx_efa_gda_status());
    fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const auto all = scenarios();
    if (argc != 2 || !all.count(argv[1])) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    const auto &envs = all.at(argv[1]);
    int socks[kPes];
    pid_t pids[kPes];
    FILE *outs[kPes];
    for (int pe = 0; pe < kPes; pe++) {
        int sv[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        outs[pe] = tmpfile();
        fflush(stdout);
        pids[pe] = fork();
        if (pids[pe] == 0) {
            close(sv[0]);
            g_sock = sv[1];
            dup2(fileno(outs[pe]), 1);
            dup2(fileno(outs[pe]), 2);
            _exit(run_pe(pe, envs[pe]));
        }
        close(sv[1]);
        socks[pe] = sv[0];
    }
    // The hub: rounds of all-gathers. A PE that leaves while another waits in a round is a hang.
    int result = 0, round = 0;
    bool alive[kPes] = {true, true};
    std::vector<std::vector<char>> got(kPes);
    bool in_round[kPes] = {false, false};
    const time_t start = time(nullptr);
    for (;;) {
        int live = 0, waiting = 0;
        for (int pe = 0; pe < kPes; pe++) live += alive[pe], waiting += in_round[pe];
        if (waiting && waiting == live && live == kPes) {
            std::vector<char> joined;
            for (int pe = 0; pe < kPes; pe++) joined.insert(joined.end(), got[pe].begin(), got[pe].end());
            for (int pe = 0; pe < kPes; pe++) {
                io(socks[pe], joined.data(), joined.size(), true);
                in_round[pe] = false;
                got[pe].clear();
            }
            round++;
            continue;
        }
        if (waiting && live < kPes) {
            for (int pe = 0; pe < kPes; pe++)
                if (in_round[pe]) printf("HANG: PE %d waits in all-gather #%d, which another PE left without entering\n", pe, round + 1);
            result = 1;
            break;
        }
        if (!live) break;
        if (time(nullptr) - start > 20) {
            printf("HANG: no progress for 20 s in all-gather #%d\n", round + 1);
            result = 1;
            break;
        }
        struct pollfd fds[kPes];
        for (int pe = 0; pe < kPes; pe++) fds[pe] = {alive[pe] && !in_round[pe] ? socks[pe] : -1, POLLIN, 0};
        if (poll(fds, kPes, 200) <= 0) continue;
        for (int pe = 0; pe < kPes; pe++) {
            if (!(fds[pe].revents & (POLLIN | POLLHUP))) continue;
            uint32_t n;
            if (!io(socks[pe], &n, 4, false)) {
                alive[pe] = false;
                continue;
            }
            got[pe].resize(n);
            io(socks[pe], got[pe].data(), n, false);
            in_round[pe] = true;
        }
    }
    for (int pe = 0; pe < kPes; pe++) {
        if (result) kill(pids[pe], SIGKILL);
        int st;
        waitpid(pids[pe], &st, 0);
        printf("== PE %d (exit %d)\n", pe, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        rewind(outs[pe]);
        char line[1024];
        while (fgets(line, sizeof line, outs[pe])) printf("pe%d: %s", pe, line);
    }
    printf("all-gathers: %d\n", round);
    return result;
}
