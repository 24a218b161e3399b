/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * Host side of the EFA GPU-Direct-Async path, compiled into NVSHMEM's libfabric transport: start-up, the
 * agreements between PEs, finalize, and the entry points NVSHMEM's patched libfabric.cpp calls. The objects
 * start-up builds have a file each (efa_gda_internal.h lists them). A failure that turns GDA off does so on every
 * PE with a one-line reason and leaves NVSHMEM alone.
 *
 * Rails: NVSHMEM 3.6+ (multi-rail libfabric transport) gives a PE several NICs and calls
 * nvshmemt_efa_gda_init_rails with one fi_info per NIC; older NVSHMEM calls nvshmemt_efa_gda_init with one.
 * The rule every PE applies to the same all-gathered facts, so that all agree:
 *   - a PE opens GDA on each NIC it is given, in order, up to NVSHMEMX_EFA_GDA_MAX_RAILS (and
 *     NVSHMEM_EFA_GDA_RAILS, when set); a NIC named twice, or one that cannot be opened, is left out with the
 *     reason; the NICs that opened are that PE's usable rails, numbered in order;
 *   - GDA runs on n = the smallest number of usable rails of any PE, and rail k of every PE is its k-th
 *     usable NIC (any EFA NIC reaches any other); a PE's usable rails past n are left out, naming the PE that
 *     has fewer; with n = 0 (some PE has none) GDA is off on every PE;
 *   - every heap region is registered on every rail (efa_gda_region.cpp).
 * nvshmemx_efa_gda_status() names the rails GDA runs on and each rail left out with why; every left-out
 * rail is also printed to stderr.
 *
 * Start-up is collective and never hangs on a disagreement, and ends with every PE active or none. Three
 * all-gathers, each after the local steps that may fail before it:
 *   1. addresses: every PE takes part whatever its NVSHMEM_EFA_GDA_ENABLE says (the switch itself is agreed
 *      here), with its usable rails, their addresses and its GPU's GPUDirect RDMA write ordering;
 *   2. the AV barrier fi_efa(7) asks for (a target must know the initiator before RMA): "my inserts are done";
 *   3. the vote after finish_start (the device state and queues written to the GPU, the empty region table
 *      published): its result with the reason. Nothing can fail after it, so one PE's failure there turns GDA
 *      off on every PE with that PE's reason, never a half-active job whose active PEs would wait in the next
 *      region registration for a PE that left. The state's address reaches the application only after it.
 *
 * Signals: a GDA signal is correct only where the receiving GPU sees the payload an earlier RDMA write placed
 * before the signal a later one placed, which the GPU promises natively only from
 * CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER (NVSHMEM's IBGDA skips its consistency step only then). Every PE
 * agrees on the lowest ordering any PE's GPU reports; below OWNER (or unreadable) GDA stays on for puts while
 * nvshmemx_efa_gda_signals_ordered() says 0 with the reason, and the status line says so: the DeepEP shim then
 * sends its signals through NVSHMEM. */
#include "efa_gda_internal.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

namespace efa_gda {

bool env_requested() {
    const char *v = getenv(NVSHMEM_EFA_GDA_ENABLE_ENV);
    if (v == NULL) return false;
    return strcmp(v, "1") == 0 || strcasecmp(v, "y") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0 ||
           strcasecmp(v, "true") == 0;
}

}  // namespace efa_gda

using namespace efa_gda;

int nvshmemt_efa_gda_init(const struct fi_info *nvshmem_info, const nvshmemt_efa_gda_bootstrap_t *boot) {
    return nvshmemt_efa_gda_init_rails(&nvshmem_info, 1, boot);
}

#if !defined(FI_EFA_GDA_OPS)

/* Built against a libfabric without the GDA extension: every PE is built the same way and none exchanges
 * anything, so a PE that asks for GDA can say why not on its own without risking a hang. */
int nvshmemt_efa_gda_enabled(void) { return env_requested() ? 1 : 0; }
int nvshmemt_efa_gda_init_rails(const struct fi_info *const *, int, const nvshmemt_efa_gda_bootstrap_t *) {
    set_status("EFA GDA off: NVSHMEM was built against libfabric headers without FI_EFA_GDA_OPS "
               "(needs libfabric >= 2.3.0; rebuild with nvshmem-efa --libfabric-home pointing at one)");
    return -1;
}
void nvshmemt_efa_gda_register_region(void *, size_t) {}
void nvshmemt_efa_gda_release_region(void *) {}
void nvshmemt_efa_gda_fini(void) {}
extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) { return NULL; }

#else

/* Every PE runs the collective start-up, so that NVSHMEM_EFA_GDA_ENABLE can differ between PEs without
 * one PE waiting in an all-gather the others never enter. */
int nvshmemt_efa_gda_enabled(void) { return 1; }

namespace efa_gda {

Gda *g = nullptr;

namespace {

const char *const kRailsEnv = NVSHMEM_EFA_GDA_RAILS_ENV;
const char *const kOwnedEnv = NVSHMEM_EFA_GDA_OWNED_QUEUES_ENV;
const char *const kTimeoutEnv = NVSHMEM_EFA_GDA_TIMEOUT_MS_ENV;

void teardown(Gda &s) {
    for (Region &r : s.regions) close_mrs(r.mr);
    s.regions.clear();
    for (Rail &rl : s.offered) teardown_rail(s, rl);
    if (s.d_state) s.cu.memFree(s.d_state);
    s.d_state = 0;
    if (s.d_api) s.cu.memFree(s.d_api);
    s.d_api = 0;
    if (s.d_api_g) s.cu.memFree(s.d_api_g); /* after the regions: its registration is one of them */
    s.d_api_g = 0;
    for (CUdeviceptr t : s.tables) s.cu.memFree(t);
    s.tables.clear();
    if (s.stream) s.cu.streamDestroy(s.stream);
    s.stream = nullptr;
}

/* A count from the environment (NVSHMEM_EFA_GDA_RAILS, NVSHMEM_EFA_GDA_OWNED_QUEUES, NVSHMEM_EFA_GDA_TIMEOUT_MS):
 * `unset` when it is unset or empty, -1 when it is not a whole number in [lo, hi]. */
int env_count(const char *name, int unset, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return unset;
    char *end = nullptr;
    const long n = strtol(v, &end, 10);
    return end == v || *end || n < lo || n > hi ? -1 : (int)n;
}

/* The start-up vote (all-gather 3): whether this PE finished start-up, and if not why, so that every PE can give
 * the same reason. */
struct StartVote {
    int32_t ok;
    char why[300];
};

/* Every PE's GPU must order GPUDirect RDMA writes for GDA signals to be safe (see the top of this file): the
 * lowest ordering any PE reported decides, the same way on every PE. */
void agree_signals(const Gda &s, const std::vector<PeerAddress> &all) {
    int worst = 0;
    for (int pe = 1; pe < s.boot.n_pes; pe++)
        if (all[pe].gdr_ordering < all[worst].gdr_ordering) worst = pe;
    const int order = all[worst].gdr_ordering;
    g_signals_ordered = order >= kGdrOrderingOwner;
    if (g_signals_ordered)
        snprintf(g_signals_why, sizeof g_signals_why, "every PE's GPU orders GPUDirect RDMA writes (ordering %d, at least OWNER = %d)",
                 order, kGdrOrderingOwner);
    else if (order < 0)
        snprintf(g_signals_why, sizeof g_signals_why,
                 "PE %d could not read its GPU's GPUDirect RDMA write ordering (its log says why), so a GPU may see a "
                 "signal before the payload an earlier RDMA write placed: send signals through NVSHMEM",
                 worst);
    else
        snprintf(g_signals_why, sizeof g_signals_why,
                 "PE %d's GPU reports CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = %d, below OWNER = %d, so it may "
                 "see a signal before the payload an earlier RDMA write placed: send signals through NVSHMEM",
                 worst, order, kGdrOrderingOwner);
    if (s.gdr_ordering < 0 && !s.gdr_ordering_why.empty())
        fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d: %s; GDA signals are off\n", s.boot.my_pe, s.gdr_ordering_why.c_str());
}

/* Writes must land once for a zeroed single-writer signal to mean what it says (see ask_delivered_once in
 * efa_gda_rail.cpp): every PE's every rail must have the option, decided the same way on every PE. */
void agree_delivered_once(const Gda &s, const std::vector<PeerAddress> &all) {
    int worst = -1;
    for (int pe = 0; pe < s.boot.n_pes && worst < 0; pe++)
        if (!all[pe].delivered_once) worst = pe;
    g_delivered_once = worst < 0;
    if (g_delivered_once)
        snprintf(g_delivered_once_why, sizeof g_delivered_once_why,
                 "every PE's NICs deliver an RDMA write once (FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES)");
    else
        snprintf(g_delivered_once_why, sizeof g_delivered_once_why,
                 "PE %d's NIC does not promise to deliver an RDMA write once (FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES "
                 "refused%s), so a late copy could bring back a signal already consumed: send signals through NVSHMEM",
                 worst, worst == s.boot.my_pe ? "; this PE's log says why" : "");
    if (!all[s.boot.my_pe].delivered_once)
        for (size_t i : s.used)
            if (!s.offered[i].delivered_once_why.empty())
                fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d, rail %zu (%s): %s; GDA signals are off\n", s.boot.my_pe, i,
                        s.offered[i].name.c_str(), s.offered[i].delivered_once_why.c_str());
}

/* Everything the GPU needs, written to it: per rail the peer and credit tables, the QP number, the owned queues;
 * then the device state, whole, and the (empty) region table. Every step may fail; none is visible to another PE
 * or to the application (the state's address is handed out only once GDA is active). */
const char *finish_start(Gda &s, const std::vector<PeerAddress> &all, const std::vector<std::vector<nvshmemx_efa_gda_peer_t>> &peers,
                         uint64_t timeout_ns, char *why, size_t whylen) {
    const size_t n = (size_t)s.boot.n_pes;
    s.host_state.abi_version = NVSHMEMX_EFA_GDA_ABI_VERSION;
    s.host_state.my_pe = s.boot.my_pe;
    s.host_state.n_pes = s.boot.n_pes;
    s.host_state.n_rails = (uint32_t)s.n_rails();
    s.host_state.credit_timeout_ns = kCreditTimeoutNs;
    s.host_state.timeout_ns = timeout_ns;
    for (size_t k = 0; k < s.n_rails(); k++) {
        Rail &rl = s.rail(k);
        GDA_CU(s.cu.memAlloc(&rl.d_peers, n * sizeof peers[k][0]), "allocating the peer table");
        GDA_CU(upload(s, rl.d_peers, peers[k].data(), n * sizeof peers[k][0]), "writing the peer table");
        std::vector<nvshmemx_efa_gda_region_t> pc(n);
        for (size_t pe = 0; pe < n; pe++) pc[pe] = {all[pe].rail[k].credits_base, n * sizeof(uint64_t), all[pe].rail[k].credits_rkey, 1};
        GDA_CU(upload(s, rl.d_peer_consumed, pc.data(), n * sizeof pc[0]), "writing the peer credit table");
        /* This QP's number, as query_addr reports it for our own address on this rail: every CQE must carry it. */
        const uint32_t qpn = peers[k][s.boot.my_pe].qpn;
        rl.st.qp.qp_num = qpn;
        GDA_CU(upload(s, rl.d_rx + offsetof(nvshmemx_efa_gda_rx_cq_t, qp_num), &qpn, sizeof qpn), "writing the QP number");
        nvshmemx_efa_gda_rail_t &h = s.host_state.rail[k];
        h.qp = rl.st.qp;
        h.signal_src = rl.st.signal_src;
        h.signal_lkey = rl.st.signal_lkey;
        h.imm_window = rl.st.imm_window;
        h.rx_cq = rl.st.rx_cq;
        h.credits = rl.st.credits;
        h.peers = (nvshmemx_efa_gda_peer_t *)(uintptr_t)rl.d_peers;
        /* Peers at fixed offsets (the rest of the array stays zero: no hot region is reachable there). */
        for (size_t pe = 0; pe < n && pe < NVSHMEMX_EFA_GDA_FAST_PES; pe++) h.fast[pe].addr = peers[k][pe];
        if (!rl.owned.empty()) {
            std::vector<nvshmemx_efa_gda_qp_t> qs;
            for (const OwnedQueue &o : rl.owned) qs.push_back(o.qp);
            GDA_CU(s.cu.memAlloc(&rl.d_owned, qs.size() * sizeof qs[0]), "allocating the owned queues");
            GDA_CU(upload(s, rl.d_owned, qs.data(), qs.size() * sizeof qs[0]), "writing the owned queues");
            GDA_CU(s.cu.memAlloc(&rl.d_owner, qs.size() * sizeof(uint32_t)), "allocating the owned queues' owner words");
            GDA_CU(s.cu.memsetD8(rl.d_owner, 0, qs.size() * sizeof(uint32_t)), "clearing the owned queues' owner words");
            h.owned = (nvshmemx_efa_gda_qp_t *)(uintptr_t)rl.d_owned;
            h.owner = (uint32_t *)(uintptr_t)rl.d_owner;
            h.n_owned = (uint32_t)qs.size();
        }
    }
    GDA_CU(s.cu.memAlloc(&s.d_state, sizeof s.host_state), "allocating the device state");
    /* Nobody has the state's address yet: it is written whole, once. */
    GDA_CU(upload(s, s.d_state, &s.host_state, sizeof s.host_state), "writing the device state");
    const char *err = publish_regions(s);
    if (err) {
        snprintf(why, whylen, "publishing the (empty) region table failed (%s)", err);
        return why;
    }
    return nullptr;
}

int off_everywhere(const char *fmt, const char *detail) {
    set_status(fmt, detail);
    teardown(*g);
    return -1;
}

}  // namespace
}  // namespace efa_gda

int nvshmemt_efa_gda_init_rails(const struct fi_info *const *rail_infos, int n_rails, const nvshmemt_efa_gda_bootstrap_t *boot) {
    if (g) return g_active ? 0 : -1;
    g = new Gda();
    g->boot = *boot;
    char why[400] = "";
    PeerAddress me = {};
    me.requested = env_requested() ? 1 : 0;
    me.offered = n_rails > 0 ? n_rails : 0;
    const char *err = nullptr;
    /* How many rails may run GDA (all by default) and how many owned queues each rail opens (none by default). */
    const int allowed = env_count(kRailsEnv, kMaxRails, 1, kMaxRails);
    const int owned_asked = env_count(kOwnedEnv, 0, 0, kMaxOwned);
    /* The bound on every GPU wait. */
    const int timeout_ms = env_count(kTimeoutEnv, NVSHMEM_EFA_GDA_TIMEOUT_MS_DEFAULT, 1, NVSHMEM_EFA_GDA_TIMEOUT_MS_MAX);
    if (me.requested) {
        if (n_rails < 1 || !rail_infos) err = "the transport handed over no NIC";
        else if (allowed < 0) {
            snprintf(why, sizeof why, "%s=%s is not a number of rails in [1, %d]", kRailsEnv, getenv(kRailsEnv), kMaxRails);
            err = why;
        } else if (owned_asked < 0) {
            snprintf(why, sizeof why, "%s=%s is not a number of owned queues in [0, %d]", kOwnedEnv, getenv(kOwnedEnv), kMaxOwned);
            err = why;
        } else if (timeout_ms < 0) {
            snprintf(why, sizeof why, "%s=%s is not a whole number of milliseconds in [1, %d] (the bound on every GPU wait; unset: %d)",
                     kTimeoutEnv, getenv(kTimeoutEnv), NVSHMEM_EFA_GDA_TIMEOUT_MS_MAX, NVSHMEM_EFA_GDA_TIMEOUT_MS_DEFAULT);
            err = why;
        }
        if (!err) {
            g->offered.resize((size_t)n_rails);
            for (int i = 0; i < n_rails; i++) {
                Rail &rl = g->offered[(size_t)i];
                rl.name = nic_name(rail_infos[i], i);
                rl.nic_named = rail_infos[i] && rail_infos[i]->nic && rail_infos[i]->nic->device_attr &&
                               rail_infos[i]->nic->device_attr->name;
                for (int j = 0; j < i && rl.why.empty(); j++)
                    if (g->offered[(size_t)j].name == rl.name) rl.why = "the same NIC as rail " + std::to_string(j);
                if (!rl.why.empty()) continue;
                if ((int)g->used.size() == allowed) {
                    rl.why = allowed < kMaxRails ? std::string(kRailsEnv) + "=" + std::to_string(allowed) + " allows " +
                                                       std::to_string(allowed) + " rail" + (allowed == 1 ? "" : "s")
                                                 : "the device state holds at most " + std::to_string(kMaxRails) + " rails";
                    continue;
                }
                char rwhy[400] = "";
                const char *rerr = start_rail(*g, rl, rail_infos[i], &me.rail[g->used.size()], rwhy, sizeof rwhy);
                if (rerr) {
                    rl.why = rerr;
                    teardown_rail(*g, rl);
                    me.rail[g->used.size()] = RailAddress();
                    continue;
                }
                start_owned_queues(*g, rl, owned_asked, &me.rail[g->used.size()]);
                g->used.push_back(i);
            }
            if (g->used.empty()) {
                if (n_rails == 1) snprintf(why, sizeof why, "%s", g->offered[0].why.c_str());
                else snprintf(why, sizeof why, "no rail could start: %s", left_out(*g).c_str());
                err = why;
            }
        }
    }
    me.usable = me.requested && !err ? (int32_t)g->used.size() : 0;
    me.ok = me.usable > 0;
    me.gdr_ordering = g->gdr_ordering;
    me.delivered_once = !g->used.empty();
    for (size_t i : g->used) me.delivered_once = me.delivered_once && g->offered[i].delivered_once;
    /* Every PE reaches this all-gather, whatever its switch says or what happened locally. */
    std::vector<PeerAddress> all(boot->n_pes);
    if (boot->allgather(&me, all.data(), (int)sizeof me, boot->ctx) != 0)
        return off_everywhere("EFA GDA off: the bootstrap all-gather of GDA addresses failed%s", "");
    int on = -1, off = -1;
    for (int pe = 0; pe < boot->n_pes; pe++) (all[pe].requested ? on : off) = pe;
    if (on < 0) {
        set_status("EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1 on every PE)");
        teardown(*g);
        return 0;
    }
    if (off >= 0) {
        set_status("EFA GDA off on every PE: " NVSHMEM_EFA_GDA_ENABLE_ENV " differs between PEs (on for PE %d, off for PE %d); "
                   "set it the same on every PE",
                   on, off);
        teardown(*g);
        return -1;
    }
    if (err) return off_everywhere("EFA GDA off: %s", err);
    agree_signals(*g, all);
    agree_delivered_once(*g, all);
    /* The common rail count: the fewest usable rails of any PE. */
    int fewest = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        if (fewest < 0 || all[pe].usable < all[fewest].usable) fewest = pe;
    for (int pe = 0; pe < boot->n_pes; pe++) {
        if (!all[pe].ok) {
            if (all[pe].offered > 1)
                set_status("EFA GDA off: PE %d could not start GDA on any of its %d rails (its log says why)", pe, all[pe].offered);
            else
                set_status("EFA GDA off: PE %d could not start GDA (its log says why)", pe);
            teardown(*g);
            return -1;
        }
    }
    const size_t common = (size_t)all[fewest].usable;
    while (g->used.size() > common) {
        Rail &rl = g->offered[(size_t)g->used.back()];
        char rwhy[200];
        snprintf(rwhy, sizeof rwhy, "PE %d has only %zu usable rail%s (its log says why), and every PE runs GDA on as many rails",
                 fewest, common, common == 1 ? "" : "s");
        rl.why = rwhy;
        teardown_rail(*g, rl);
        g->used.pop_back();
    }
    /* The immediate window of each common rail: a sender keeps up to imm_window immediates unconsumed at each PE, so
     * the window must fit the smallest receiver's RX CQ, not the sender's own (a PE with a smaller FI_EFA_RX_SIZE
     * would be overrun: review 2 #11, review 3 #10). A PE whose provider takes immediates only into posted receives
     * publishes 0 entries: no PE sends immediates. */
    int no_unsolicited = -1;
    for (size_t k = 0; k < common; k++) {
        uint32_t least = all[0].rail[k].rx_entries;
        for (int pe = 0; pe < boot->n_pes; pe++) {
            least = all[pe].rail[k].rx_entries < least ? all[pe].rail[k].rx_entries : least;
            if (!all[pe].rail[k].rx_entries && no_unsolicited < 0) no_unsolicited = pe;
        }
        g->rail(k).st.imm_window = least / (uint32_t)boot->n_pes;
    }
    /* The common owned-queue count: the fewest any PE opened on any of the common rails (owned_asked >= 0 here: a
     * malformed value turned GDA off above). */
    uint32_t owned_common = (uint32_t)owned_asked;
    int owned_fewest = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        for (size_t k = 0; k < common; k++)
            if (all[pe].rail[k].owned < owned_common) owned_common = all[pe].rail[k].owned, owned_fewest = pe;
    std::string owned_note;
    if (owned_fewest >= 0) {
        owned_note = "; " + std::to_string(owned_asked) + " owned queue" + (owned_asked == 1 ? "" : "s") +
                     " per rail asked for, " + std::to_string(owned_common) + " on every PE: PE " + std::to_string(owned_fewest) +
                     " opened " + std::to_string(owned_common) + " (its log says why)";
        for (size_t k = 0; k < common; k++)
            if (!g->rail(k).owned_why.empty())
                fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d: fewer owned queues than %s=%d asked for: %s\n", boot->my_pe, kOwnedEnv,
                        owned_asked, g->rail(k).owned_why.c_str());
    }
    for (size_t k = 0; k < common; k++) {
        Rail &rl = g->rail(k);
        while (rl.owned.size() > owned_common) {
            close_owned(*g, rl.owned.back());
            rl.owned.pop_back();
        }
    }
    for (Rail &rl : g->offered)
        if (!rl.why.empty())
            fprintf(stderr, "nvshmem-efa: EFA GDA on PE %d: rail %d (%s) left out: %s\n", boot->my_pe, (int)(&rl - g->offered.data()),
                    rl.name.c_str(), rl.why.c_str());
    std::vector<std::vector<nvshmemx_efa_gda_peer_t>> peers(g->n_rails(), std::vector<nvshmemx_efa_gda_peer_t>(boot->n_pes));
    err = nullptr;
    for (size_t k = 0; k < g->n_rails() && !err; k++) err = insert_peers(*g, k, all, peers[k], why, sizeof why);
    /* The barrier fi_efa(7) asks for: no PE goes on (and no kernel posts RMA) before every PE inserted
     * every other on every rail; it also agrees on whether all inserts worked. */
    int32_t inserted = err == nullptr, ok_all = 1;
    std::vector<int32_t> every(boot->n_pes);
    if (boot->allgather(&inserted, every.data(), (int)sizeof inserted, boot->ctx) != 0)
        return off_everywhere("EFA GDA off: the bootstrap barrier after the AV inserts failed%s", "");
    if (err) return off_everywhere("EFA GDA off: %s", err);
    int bad = -1;
    for (int pe = 0; pe < boot->n_pes; pe++)
        if (!every[pe]) ok_all = 0, bad = pe;
    if (!ok_all) {
        set_status("EFA GDA off: PE %d could not insert every PE's GDA address (its log says why)", bad);
        teardown(*g);
        return -1;
    }
    err = finish_start(*g, all, peers, (uint64_t)timeout_ms * 1000000ull, why, sizeof why);
    /* The vote after the last step that can fail: active on every PE or on none, with the failing PE's reason. */
    StartVote vote = {};
    vote.ok = err == nullptr;
    if (err) snprintf(vote.why, sizeof vote.why, "%s", err);
    std::vector<StartVote> votes(boot->n_pes);
    if (boot->allgather(&vote, votes.data(), (int)sizeof vote, boot->ctx) != 0)
        return off_everywhere("EFA GDA off: the bootstrap all-gather that ends start-up failed%s", err ? (std::string(" (and ") + err + ")").c_str() : "");
    for (int pe = 0; pe < boot->n_pes; pe++) {
        if (votes[pe].ok) continue;
        votes[pe].why[sizeof votes[pe].why - 1] = 0;
        set_status("EFA GDA off on every PE: PE %d could not finish start-up: %s", pe, votes[pe].why);
        teardown(*g);
        return -1;
    }
    g_active = true;
    g_rails = (int)g->n_rails();
    std::string names, qps;
    for (size_t k = 0; k < g->n_rails(); k++) {
        names += (k ? ", " : "") + g->rail(k).name;
        qps += (k ? "/" : "") + std::to_string(peers[k][boot->my_pe].qpn);
    }
    const Rail &r0 = g->rail(0);
    const std::string out = left_out(*g);
    char rails[600];
    if (g->offered.size() == g->n_rails())
        snprintf(rails, sizeof rails, "on %zu rail%s (%s)", g->n_rails(), g->n_rails() == 1 ? "" : "s", names.c_str());
    else
        snprintf(rails, sizeof rails, "on %zu of %zu rails (%s); %s", g->n_rails(), g->offered.size(), names.c_str(), out.c_str());
    std::string owned;
    if (owned_common > 0 || owned_fewest >= 0)
        owned = ", " + std::to_string(owned_common) + " owned queue" + (owned_common == 1 ? "" : "s") + " per rail" + owned_note;
    std::string signals = !g_signals_ordered   ? std::string("GDA signals off: ") + g_signals_why
                          : !g_delivered_once ? std::string("GDA signals off: ") + g_delivered_once_why
                                              : "GDA signals on (every PE's GPU orders GPUDirect RDMA writes and every "
                                                "NIC delivers a write once)";
    /* Review 3, finding 5: puts and DeepEP's tokens stay on GDA without the promise. NVSHMEM's own path writes them
     * with the same NIC's RDMA writes (libfabric's fi_write), so moving them there would not remove the exposure;
     * said, not hidden (docs/ordering.md section 3). */
    if (!g_delivered_once)
        signals += "; puts stay on GDA: a late copy of one may land again in a reused buffer, as NVSHMEM's own RDMA "
                   "writes through that NIC may";
    char imms[200];
    if (no_unsolicited >= 0)
        snprintf(imms, sizeof imms, "immediates off: PE %d's provider would take them only into posted receives "
                 "(FI_EFA_USE_UNSOLICITED_WRITE_RECV off there)", no_unsolicited);
    else
        snprintf(imms, sizeof imms, "%u immediates in flight per sender", g->host_state.rail[0].imm_window);
    set_status("EFA GDA active %s: efa-direct, QP%s %s, SQ %u x %u B (max_batch %u), TX CQ %u x %u B, RX CQ %u x %u B "
               "(%s), CQ dma-buf %s, GPU waits bounded at %d ms (%s), %s, %d PEs%s",
               rails, g->n_rails() == 1 ? "" : "s", qps.c_str(), r0.sq_attr.num_entries, r0.sq_attr.entry_size, r0.sq_attr.max_batch,
               r0.tx.attr.num_entries, r0.tx.attr.entry_size, r0.rx.attr.num_entries, r0.rx.attr.entry_size,
               imms, r0.tx.pcie_mapping ? "PCIe-mapped" : "plain (no PCIe mapping type)", timeout_ms,
               kTimeoutEnv, signals.c_str(), boot->n_pes, owned.c_str());
    return 0;
}

void nvshmemt_efa_gda_fini(void) {
    if (!g) return;
    report_api_at_fini(*g);
    teardown(*g);
    if (g->cu.lib) dlclose(g->cu.lib);
    delete g;
    g = nullptr;
    if (g_active) set_status("EFA GDA off: finalized");
    g_active = false;
    g_rails = 0;
    g_signals_ordered = false;
    g_signals_why[0] = 0;
    g_delivered_once = false;
    g_delivered_once_why[0] = 0;
}

extern "C" nvshmemx_efa_gda_device_state_t *nvshmemx_efa_gda_get_device_state(void) {
    return g_active ? (nvshmemx_efa_gda_device_state_t *)(uintptr_t)g->d_state : NULL;
}

#endif
