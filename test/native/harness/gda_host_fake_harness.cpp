// Runs the GDA host code (transport_efa_gda.cpp) end to end on a CPU: each PE is a process with the fake
// efa-direct provider (fake_fabric.cpp, linked in) and the fake CUDA driver (fake_libcuda.cpp, the
// libcuda.so.1 its dlopen finds); the processes' all-gathers meet in this program, which reports a PE left
// waiting in one (a hang) instead of hanging. Each PE prints what the host code did and published.
//
//   gda_host_fake_harness SCENARIO      (run with LD_LIBRARY_PATH at the fake libcuda.so.1)
// Scenarios: active, wide-wqe, mismatch, none, no-efa-pe1, av-fail-pe1, region-fail-pe1, cq-oversize, no-pcie.
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
    };
}

void print_table(const char *when) {
    const nvshmemx_efa_gda_device_state_t *s = nvshmemx_efa_gda_get_device_state();
    const nvshmemx_efa_gda_regions_t *t = s->regions;
    printf("table %s: count=%u n_pes=%u at=%p\n", when, t->count, t->n_pes, (const void *)t);
    for (uint32_t i = 0; i < t->count; i++) {
        const nvshmemx_efa_gda_region_t *row = (const nvshmemx_efa_gda_region_t *)(t + 1) + (size_t)i * (1 + t->n_pes);
        printf("  region %u: local valid=%u key=0x%x len=%llu", i, row[0].valid, row[0].key, (unsigned long long)row[0].length);
        for (uint32_t pe = 0; pe < t->n_pes; pe++) {
            const nvshmemx_efa_gda_region_t &r = row[1 + pe];
            printf(" | pe%u valid=%u key=0x%x len=%llu", pe, r.valid, r.key, (unsigned long long)r.length);
        }
        printf("\n");
    }
    for (int k = 0; k < NVSHMEMX_EFA_GDA_HOT_REGIONS; k++) {
        const nvshmemx_efa_gda_hot_local_t &h = s->hot[k];
        printf("  hot %d: present=%u len=%llu key=0x%x base_is_row=%d", k, h.present, (unsigned long long)h.length, h.lkey,
               t->count && h.base == ((const nvshmemx_efa_gda_region_t *)(t + 1))[0].base);
        for (uint32_t pe = 0; pe < t->n_pes; pe++)
            printf(" | pe%u present=%u key=0x%x base_set=%d", pe, s->fast[pe].hot[k].present, s->fast[pe].hot[k].rkey,
                   s->fast[pe].hot[k].base != 0);
        printf("\n");
    }
}

int run_pe(int pe, const std::map<std::string, std::string> &env) {
    unsetenv("NVSHMEM_EFA_GDA_ENABLE");
    for (auto &kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    setenv("FAKE_PE", std::to_string(pe).c_str(), 1);
    // As the patched connect_endpoints does: init only where enabled() says so.
    const int enabled = nvshmemt_efa_gda_enabled();
    printf("enabled()=%d\n", enabled);
    nvshmemt_efa_gda_bootstrap_t boot = {pe, kPes, allgather, nullptr};
    const int rc = enabled ? nvshmemt_efa_gda_init(nullptr, &boot) : 0;
    printf("init=%d active=%d gathers=%d\n", rc, nvshmemx_efa_gda_is_active(), g_gathers);
    printf("status: %s\n", nvshmemx_efa_gda_status());
    printf("hints: fabric=%s inject_size=%zu context2=%d mr_local=%d\n", fake_fabric.hint_fabric.c_str(),
           fake_fabric.hint_inject_size, (fake_fabric.hint_mode & FI_CONTEXT2) != 0, (fake_fabric.hint_mr_mode & FI_MR_LOCAL) != 0);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (nvshmemx_efa_gda_is_active()) {
        nvshmemx_efa_gda_device_state_t *s = nvshmemx_efa_gda_get_device_state();
        const nvshmemx_efa_gda_qp_t *q = &s->qp;
        printf("state: abi=%u my_pe=%d n_pes=%d imm_window=%u timeout_ns=%llu\n", s->abi_version, s->my_pe, s->n_pes,
               s->imm_window, (unsigned long long)s->credit_timeout_ns);
        printf("qp: qp_num=%u own_peer_qpn=%u sq=%ux%u max_batch=%u cq=%ux%u rx=%ux%u rx_qp_num=%u\n", q->qp_num,
               s->peers[pe].qpn, q->sq_entries, q->wqe_size, q->max_batch, q->cq_entries, q->cq_entry_size, s->rx_cq->cq_entries,
               s->rx_cq->cq_entry_size, s->rx_cq->qp_num);
        printf("slot_done: first=%d last=%d\n", (int)q->slot_done[0], (int)q->slot_done[q->sq_entries - 1]);
        printf("counters: reserved=%u rung=%u retired=%u fatal=%u cq_head=%u\n", q->sq_reserved, q->sq_rung, q->sq_retired,
               q->fatal, q->cq_head);
        const uint8_t *cq = q->cq_buf;
        bool zero = true;
        for (uint32_t i = 0; i < q->cq_entries * q->cq_entry_size; i++) zero &= cq[i] == 0;
        printf("tx cq zeroed=%d\n", zero);
        for (int p = 0; p < kPes; p++)
            printf("peer %d: ah=%u qpn=%u qkey=0x%x credits key=0x%x valid=%u base_set=%d fast=%d\n", p, s->peers[p].ah, s->peers[p].qpn,
                   s->peers[p].qkey, s->credits->peer_consumed[p].key, s->credits->peer_consumed[p].valid,
                   s->credits->peer_consumed[p].base != 0,
                   memcmp(&s->fast[p].addr, &s->peers[p], sizeof s->peers[p]) == 0);
        printf("fast past n_pes zero=%d\n", s->fast[kPes].addr.qpn == 0 && s->fast[NVSHMEMX_EFA_GDA_FAST_PES - 1].addr.qpn == 0);
        printf("fabric: av_inserts=%d enabled=%d cq_binds=%zu\n", fake_fabric.av_inserts, fake_fabric.enabled,
               fake_fabric.cq_binds.size());
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
