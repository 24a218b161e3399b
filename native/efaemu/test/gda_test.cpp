// efa-direct and the GDA ops over efaemu, two processes on the CPU: `efaemu_gda_test <scenario>`.
//
// Each process sets up (gda_pe.h) what the GDA host code (templates/transport_efa_gda/transport_efa_gda.cpp)
// sets up: an efa-direct fabric/domain on the NIC, fi_open_ops(FI_EFA_GDA_OPS), an AV, a TX and an RX CQ from
// cq_open_ext, an endpoint, query_qp_wqs, every PE's address inserted and resolved with query_addr, heap and
// credit registrations with get_mr_lkey / fi_mr_key. Then the GDA device code itself
// (nvshmemx_efa_gda_device.cuh, compiled as host C++ with native/softefa/test/cuda_on_cpu.h: one thread is one
// one-lane warp) posts into the emulated SQ and polls the emulated CQs: put, put with immediate + rx_poll, get,
// quiet, warp batch, credits, errors. The CQ rings are host memory (ext_mem_dmabuf.buffer, which the real
// provider allows) except in `gpu-cq`, where they are the stand-in driver's "GPU memory" handed over as
// dma-buf fds, as the GPU runs do.
//
// Scenarios: ops, owned (owned queues: endpoints of their own), errors, fail-every, refuse-target, gpu-cq. Lines "A|B: ok <check>" / "A|B: FAIL <check>: why".
#include "gda_pe.h"

#include <dlfcn.h>
#include <signal.h>
#include <rdma/fi_ext_efa.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

using namespace th;

namespace {

void parallel(int n, const std::function<void(int)> &fn) {
    std::vector<std::thread> t;
    for (int i = 0; i < n; i++)
        t.emplace_back([&fn, i] {
            threadIdx.x = 0;
            fn(i);
        });
    for (auto &x : t) x.join();
}

std::string hex(uint64_t v) { return fmt("0x%llx", (unsigned long long)v); }

// ---- ops --------------------------------------------------------------------------------------------------------

struct Xfer {
    uint64_t local, sym, len;
    int kind;  // 0 put, 1 get, 2 put with immediate
};

// Ranges crossing the 5 MiB and 9 MiB region ends on either side and the 256 KiB max RDMA size; disjoint at the
// target and away from the get's source.
const std::vector<Xfer> kXfers = {{0, 5 * M - 100, 300, 0},          {1 * M, 7 * M + M / 2, 3 * M, 0},
                                  {5 * M - 7, 11 * M, 64, 0},         {9 * M - 2000, 4 * M, 4000, 1},
                                  {2 * M, 5 * M + 1000, 140000, 2},  {100, 4 * M + 8192, 1, 2}};
constexpr uint64_t kBatchBase = 11 * M + 65536;  // warp-batch and concurrent puts land here (region 2, apart)
constexpr int kPosters = 4, kPerPoster = 150;
constexpr int kCreditImms = 150;
constexpr uint64_t kLoopLen = 3 * M / 2;  // the put-quiet-look loop: 24 wire chunks of 64 KiB

// The put-quiet-look loop, the initiator's side: each round fills the 1.5 MiB source with the round's byte, puts
// it to one of two targets on PE 1 and waits (put_and_wait: 0 or an error), then PE 1 looks. Returns how many
// rounds failed or found the data missing when the wait returned; tells PE 1 it is over with -1.
int quiet_and_look(Pair &pair, Pe &p, int rounds, const std::function<int(uint8_t *dst, uint8_t *src)> &put_and_wait) {
    int late = 0;
    for (int it = 0; it < rounds; it++) {
        memset(p.heap + 9 * M + M / 2, (uint8_t)(it + 1), kLoopLen);
        if (put_and_wait(p.heap + 5 * M + (uint64_t)(it % 2) * kLoopLen, p.heap + 9 * M + M / 2)) late++;
        put(pair, it);
        late += get<int>(pair);
    }
    put(pair, -1);
    return late;
}
// PE 1's side: after each round, whether the round's bytes are all at the target.
void look_at_targets(Pair &pair, Pe &p) {
    for (int k; (k = get<int>(pair)) >= 0;) {
        const uint64_t off = 5 * M + (uint64_t)(k % 2) * kLoopLen;
        int bad_bytes = 0;
        for (uint64_t i = 0; i < kLoopLen; i += 509) bad_bytes += p.heap[off + i] != (uint8_t)(k + 1);
        bad_bytes += p.heap[off + kLoopLen - 1] != (uint8_t)(k + 1);
        put(pair, bad_bytes ? 1 : 0);
    }
}

int ops(Pair &pair) {
    Pe p;
    setup(pair, p);
    if (pair.a) {
        // Mixed transfers from one warp.
        int err = 0;
        uint32_t imms = 0;
        for (const Xfer &x : kXfers) {
            if (x.kind == 0) err |= efa_gda_put_nbi(&p.s, (void *)(p.heap + x.sym), p.heap + x.local, x.len, 1);
            else if (x.kind == 1) err |= efa_gda_get_nbi(&p.s, p.heap + x.local, p.heap + x.sym, x.len, 1);
            else err |= efa_gda_put_imm_nbi(&p.s, (void *)(p.heap + x.sym), p.heap + x.local, x.len, 1, 0xAB00 + imms++);
        }
        expect(err == 0, "puts, gets and puts with immediate across region ends post", hex((uint64_t)err));
        // Concurrent posters: half single puts, half warp-batch calls (one lane per warp on the CPU).
        std::atomic<int> perr{0};
        parallel(kPosters, [&](int t) {
            for (int i = 0; i < kPerPoster; i++) {
                const uint64_t off = kBatchBase + ((uint64_t)t * kPerPoster + i) * 64;
                const int e = t % 2 ? efa_gda_rma_nbi_warp_batch(&p.s, true, NVSHMEMX_EFA_GDA_OP_WRITE, p.heap + off,
                                                                 p.heap + off, 64, 1)
                                    : efa_gda_put_nbi(&p.s, p.heap + off, p.heap + off, 64, 1);
                if (e) perr++;
            }
        });
        expect(perr == 0, "4 warps post 600 puts concurrently (single and warp-batch)", fmt("%d errors", perr.load()));
        // Refused posts (found after the slot's reservation) fill their slots with a 0-byte RDMA read on this PE's own
        // QP; the quiet below covers them, and they move nothing.
        static uint8_t outside[64];
        const uint32_t before = p.qp.sq_reserved;
        const int e1 = efa_gda_put_nbi(&p.s, p.heap + kBatchBase, p.heap, 64, 7);
        const int e2 = efa_gda_put_nbi(&p.s, p.heap + kBatchBase, outside, 64, 1);
        expect(e1 == NVSHMEMX_EFA_GDA_ERR_BAD_PE && e2 == NVSHMEMX_EFA_GDA_ERR_NO_LOCAL_REGION && p.qp.sq_reserved == before + 2,
               "refused posts (a bad PE, a source outside every region) are reported and fill the slots they reserved",
               fmt("%d %d, %u slots", e1, e2, p.qp.sq_reserved - before));
        const int q = efa_gda_quiet(&p.s);
        expect(q == 0, "quiet returns no error", efa_gda_strerror(q));
        const nvshmemx_efa_gda_qp_t &qp = p.qp;
        expect(qp.sq_retired == qp.sq_reserved && qp.cq_head == qp.sq_reserved,
               "every WQE completed exactly once (retired prefix = reserved = CQEs consumed)",
               fmt("reserved %u retired %u cq_head %u", qp.sq_reserved, qp.sq_retired, qp.cq_head));
        uint64_t want_sum = 0;
        for (uint32_t s = 0; s < qp.sq_reserved; s++) want_sum += (uint16_t)s;
        expect(qp.req_id_sum == want_sum, "the CQEs carried every request id once", fmt("%llu vs %llu", (unsigned long long)qp.req_id_sum, (unsigned long long)want_sum));
        if (getenv("EFAEMU_DUMP_SIGNAL")) {  // the state dump's view of this queue pair, now that it is idle
            raise(SIGUSR1);
            std::string d;
            const std::string path = std::string(getenv("EFAEMU_STATS") ? getenv("EFAEMU_STATS") : ".") + "/efaemu-" +
                                     std::to_string(getpid()) + "-dump1.txt";
            for (uint64_t t0 = now_ms(); d.empty() && now_ms() - t0 < 5000; usleep(20000))
                if (FILE *f = fopen(path.c_str(), "r")) {
                    char buf[8192];
                    d.assign(buf, fread(buf, 1, sizeof buf, f));
                    fclose(f);
                }
            const std::string want = fmt("GDA queue pair qpn %u: doorbell %u (16-bit register), WQEs fetched %u", qp.qp_num,
                                         qp.sq_reserved & 0xffffu, qp.sq_reserved);
            const std::string done = fmt("in flight on the wire 0, finished and held by the completion scheduler 0, fetched "
                                         "and without CQE 0, CQEs written %u", qp.sq_reserved);
            expect(d.find(want) != std::string::npos && d.find(done) != std::string::npos,
                   "a state dump (SIGUSR1) shows the queue pair: doorbell, WQEs fetched, none pending, every CQE written",
                   want + " | " + d.substr(0, 1500));
        }
        bool got = true;
        for (uint64_t i = 0; i < 4000; i++) got = got && p.heap[9 * M - 2000 + i] == pattern(1, 4 * M + i);
        expect(got, "get across a local region end returned PE 1's bytes, byte-exact");
        put(pair, imms);
        // Credits: more immediates than the receiver's window, taken while they arrive.
        sync(pair);
        int cerr = 0;
        for (int i = 0; i < kCreditImms; i++)
            cerr |= efa_gda_put_imm_nbi(&p.s, p.heap + 11 * M + 4096 + i, p.heap + 11 * M + 4096 + i, 1, 1, 0xC000 + i);
        cerr |= efa_gda_quiet(&p.s);
        expect(cerr == 0, fmt("%d immediates, more than the window of %u, with credit refreshes", kCreditImms, p.s.rail[0].imm_window),
               efa_gda_strerror(cerr));
        expect(p.credits.refreshes > 0, "credits were refreshed with RDMA reads of the receiver's count",
               fmt("%llu refreshes", (unsigned long long)p.credits.refreshes));
        sync(pair);
        // The initiator's completion comes only after the target placed the data: after each quiet, B looks.
        const int late = quiet_and_look(pair, p, 40, [&](uint8_t *dst, uint8_t *src) {
            const int e = efa_gda_put_nbi(&p.s, dst, src, kLoopLen, 1);
            return e ? e : efa_gda_quiet(&p.s);
        });
        expect(late == 0, "40 x (1.5 MiB put, quiet): the data was at the target every time quiet returned",
               fmt("%d times not", late));
    } else {
        const uint32_t imms = get<uint32_t>(pair);
        bool puts = true;
        for (const Xfer &x : kXfers) {
            if (x.kind == 1) continue;
            for (uint64_t i = 0; i < x.len && puts; i++) puts = p.heap[x.sym + i] == pattern(0, x.local + i);
            if (!puts) fail("puts landed", fmt("mismatch in [%s, +%llu)", hex(x.sym).c_str(), (unsigned long long)x.len));
        }
        bool batch = true;
        for (uint64_t i = 0; i < (uint64_t)kPosters * kPerPoster * 64 && batch; i++)
            batch = p.heap[kBatchBase + i] == pattern(0, kBatchBase + i);
        bool untouched = true;
        for (uint64_t at : {5 * M - 101, 5 * M + 200, 11 * M + 64, 10 * M + M / 2, kBatchBase - 1,
                            kBatchBase + kPosters * kPerPoster * 64})
            untouched = untouched && p.heap[at] == pattern(1, at);
        expect(puts, "every put landed byte-exact, across region ends and max-RDMA-size pieces");
        expect(batch, "the 600 concurrent puts landed byte-exact");
        expect(untouched, "bytes next to the written ranges are untouched");
        std::set<uint32_t> seen;
        std::set<uint32_t> lens;
        uint32_t imm, bytes;
        int src = -1, bad = 0;
        const uint64_t end = now_ms() + 10000;
        while (seen.size() < imms && now_ms() < end) {
            const int rc = efa_gda_rx_poll(&p.s, &imm, &bytes, &src);
            if (rc < 0) {
                bad = rc;
                break;
            }
            if (rc == 1) {
                if (src != 0) bad = 1000 + src;
                seen.insert(imm);
                lens.insert(bytes);
            }
        }
        expect(bad == 0 && seen == std::set<uint32_t>{0xAB00, 0xAB01} && lens == std::set<uint32_t>{140000, 1},
               "both immediates arrived from PE 0 with their lengths (write with immediate -> RX CQE)",
               fmt("rc %d, %zu imms", bad, seen.size()));
        sync(pair);
        int taken = 0;
        const uint64_t end2 = now_ms() + 20000;
        while (taken < kCreditImms && now_ms() < end2) {
            const int rc = efa_gda_rx_poll(&p.s, &imm, &bytes, &src);
            if (rc < 0) break;
            if (rc == 1 && imm == 0xC000u + (uint32_t)taken) taken++;
            else if (rc == 1) break;  // out of order or foreign: report below
        }
        expect(taken == kCreditImms, fmt("%d immediates taken in order, no RX CQ overrun", kCreditImms),
               fmt("%d taken, rx error %u", taken, p.rxq.error));
        sync(pair);
        look_at_targets(pair, p);
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- owned queues ---------------------------------------------------------------------------------------------

constexpr int kOwners = 2, kOwnedPuts = 400;
constexpr uint64_t kOwnedBase = 11 * M;  // each owner's puts: 400 x 64 B apart from the other's

int owned(Pair &pair) {
    Pe p;
    open_pe(p, pair.a ? 0 : 1);
    open_owned(p, kOwners);
    put(pair, p.mine);
    p.all[p.me] = p.mine;
    p.all[1 - p.me] = get<Published>(pair);
    connect_pe(p);
    connect_owned(p);
    sync(pair);
    if (pair.a) {
        std::atomic<int> err{0};
        parallel(kOwners, [&](int t) {
            efa_gda_owned o;
            if (efa_gda_own(&p.s, 1, p.heap + kOwnedBase, p.heap + kOwnedBase, &o)) {
                err++;
                return;
            }
            for (int i = 0; i < kOwnedPuts; i++) {
                const uint64_t off = kOwnedBase + ((uint64_t)t * kOwnedPuts + i) * 64;
                if (efa_gda_put_nbi(o, p.heap + off, p.heap + off, 64)) err++;
            }
            // A get through the owned queue: PE 1's bytes into this PE's region 2, away from the puts' sources.
            if (efa_gda_get_nbi(o, p.heap + 10 * M + t * 4096, p.heap + 10 * M + t * 4096, 4096)) err++;
            if (efa_gda_quiet_owned(o)) err++;
            efa_gda_disown(&o);
        });
        expect(err == 0, "2 owners post 400 puts and a get each through their own queues, and quiet them", fmt("%d errors", err.load()));
        expect(efa_gda_quiet(&p.s) == 0 && p.qp.sq_reserved == 0, "nothing went the shared queue; quiet over every queue");
        bool exact = true;
        uint64_t want_sum = 0;
        for (uint32_t s = 0; s < kOwnedPuts + 1; s++) want_sum += (uint16_t)s;
        // Which counter is off, when one is: CI once failed here without saying (e88cbf0, under a load of 6-8 on 2 cores).
        std::string seen;
        for (const nvshmemx_efa_gda_qp_t &q : p.owned) {
            const bool ok = q.sq_reserved == kOwnedPuts + 1 && q.sq_retired == q.sq_reserved && q.cq_head == q.sq_reserved &&
                            q.req_id_sum == want_sum && q.error == 0 && q.qp_num != p.qp.qp_num;
            exact = exact && ok;
            seen += fmt("%sQP %u: reserved %llu retired %llu cq_head %llu req_id_sum %llu (want %llu) error %u", seen.empty() ? "" : "; ",
                        (unsigned)q.qp_num, (unsigned long long)q.sq_reserved, (unsigned long long)q.sq_retired,
                        (unsigned long long)q.cq_head, (unsigned long long)q.req_id_sum, (unsigned long long)want_sum, (unsigned)q.error);
        }
        expect(exact, "every owned queue: each slot completed once, with its own QP number on its CQEs", seen);
        bool got = true;
        for (uint64_t i = 0; i < 2 * 4096; i++) got = got && p.heap[10 * M + i] == pattern(1, 10 * M + i);
        expect(got, "the gets returned PE 1's bytes");
        put(pair, 1);
        // The put-quiet-look loop through an owned queue: B looks after each owned quiet.
        efa_gda_owned o;
        const int own = efa_gda_own(&p.s, 1, p.heap + 5 * M, p.heap + 9 * M + M / 2, &o);
        const int late = quiet_and_look(pair, p, 20, [&](uint8_t *dst, uint8_t *src) {
            const int e = own ? own : efa_gda_put_nbi(o, dst, src, kLoopLen);
            return e ? e : efa_gda_quiet_owned(o);
        });
        efa_gda_disown(&o);
        expect(late == 0, "20 x (1.5 MiB put, owner's quiet): the data was at the target every time the owner's quiet returned",
               fmt("%d times not", late));
    } else {
        get<int>(pair);
        bool puts = true;
        for (uint64_t i = 0; i < (uint64_t)kOwners * kOwnedPuts * 64 && puts; i++)
            puts = p.heap[kOwnedBase + i] == pattern(0, kOwnedBase + i);
        expect(puts, "the owned queues' puts landed byte-exact");
        look_at_targets(pair, p);
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- errors -----------------------------------------------------------------------------------------------------

// Writes one raw WQE (a driver bug the test injects) and rings the doorbell.
void raw_wqe(Pe &p, const efa_gda_rdma_desc &d, bool wrong_phase) {
    nvshmemx_efa_gda_qp_t *qp = &p.qp;
    efa_gda_reservation res;
    if (efa_gda_reserve(qp, 1, &res)) die("reserve");
    union efa_gda_wqe_words w;
    efa_gda_build_rdma_wqe(&w, &d, (uint8_t)(efa_gda_sq_phase(res.slot, qp->sq_log2) ^ (wrong_phase ? 1 : 0)));
    w.wqe.meta.req_id = (uint16_t)res.slot;
    volatile uint64_t *dst = (volatile uint64_t *)(qp->sq_buf + (size_t)(res.slot & (qp->sq_entries - 1)) * qp->wqe_size);
    for (int i = 0; i < 8; i++) dst[i] = w.q[i];
    efa_gda_ring(qp, res.slot, 1, res.rung_seen);
}

int errors(Pair &pair) {
    Pe p;
    setup(pair, p, true, /*insert_peer=*/!pair.a ? false : true);  // B has not inserted A
    if (pair.a) {
        int e = efa_gda_put_nbi(&p.s, p.heap + 1 * M, p.heap, 4096, 1);
        int q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER,
               "put to a target that has not inserted the initiator: REMOTE_ERROR_UNKNOWN_PEER (14) through quiet",
               fmt("post %d quiet %d", e, q));
        p.qp.error = 0;
        sync(pair);  // B inserts A now
        sync(pair);
        p.entry(0, 1 + 1)->key ^= 0x5a5a;  // a wrong rkey for PE 1's first region (table and hot slot)
        p.s.rail[0].fast[1].hot[0].rkey ^= 0x5a5a;
        e = efa_gda_put_nbi(&p.s, p.heap + 2 * M, p.heap, 4096, 1);
        q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS, "put with a wrong rkey: REMOTE_ERROR_BAD_ADDRESS (7)",
               fmt("post %d quiet %d", e, q));
        p.entry(0, 1 + 1)->key ^= 0x5a5a;
        p.s.rail[0].fast[1].hot[0].rkey ^= 0x5a5a;
        p.qp.error = 0;
        e = efa_gda_put_nbi(&p.s, p.heap + 6 * M - 16, p.heap + 6 * M, 4096, 1);
        q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == 0, "a put after the errors still works (errors do not break the QP)", fmt("post %d quiet %d", e, q));
        // A driver bug: a WQE written with the wrong phase. The NIC rejects it (QP_INTERNAL_ERROR), the QP goes to the
        // error state, and what follows completes FLUSHED, moving nothing.
        efa_gda_piece pc{(uint64_t)p.heap, p.all[1].heap + 3 * M, 64, p.local[0].key, p.all[1].rkey[0]};
        raw_wqe(p, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, p.peers[1], pc, false, 0), true);
        q = efa_gda_quiet(&p.s);
        expect(q == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR && p.qp.fatal == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR,
               "a WQE with the wrong phase: LOCAL_ERROR_QP_INTERNAL_ERROR (2), and the queue unusable (a local failure)",
               fmt("quiet %d fatal %u", q, p.qp.fatal));
        p.qp.error = p.qp.fatal = 0;  // to see what the NIC does with what follows
        e = efa_gda_put_nbi(&p.s, p.heap + 3 * M + 4096, p.heap, 4096, 1);
        q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == EFA_IO_COMP_STATUS_FLUSHED, "after it, the QP is in error: FLUSHED (1)", fmt("post %d quiet %d", e, q));
        put(pair, 1);
    } else {
        sync(pair);
        fi_addr_t fa;
        if (fi_av_insert(p.av, p.all[0].name, 1, &fa, 0, nullptr) != 1) die("fi_av_insert");
        sync(pair);
        (void)get<int>(pair);
        bool untouched = true;
        for (uint64_t off : {1 * M, 2 * M, 3 * M, 3 * M + 4096})
            for (uint64_t i = 0; i < 64; i++) untouched = untouched && p.heap[off + i] == pattern(1, off + i);
        expect(untouched, "failed and flushed WQEs left the target's memory untouched");
        bool landed = true;
        for (uint64_t i = 0; i < 4096; i++) landed = landed && p.heap[6 * M - 16 + i] == pattern(0, 6 * M + i);
        expect(landed, "the good put landed");
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- fail-every (EFAEMU_FAIL_EVERY=4 on A) ----------------------------------------------------------------------

int fail_every(Pair &pair) {
    Pe p;
    setup(pair, p);
    if (pair.a) {
        int e = 0;
        for (int i = 0; i < 8; i++) e |= efa_gda_put_nbi(&p.s, p.heap + 2 * M + i * 4096, p.heap + i * 4096, 4096, 1);
        const int q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE && p.qp.error_count == 2,
               "EFAEMU_FAIL_EVERY=4 fails WQEs 4 and 8 of 8: quiet reports UNRESP_REMOTE (13), 2 failed completions",
               fmt("post %d quiet %d failed %u", e, q, p.qp.error_count));
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- refuse-target (EFAEMU_FAIL_AS_TARGET=gda set by B alone) ----------------------------------------------------
// B refuses every GDA write and read sent to it, as a peer that stopped answering: A's puts and get to B fail with
// EFAEMU_FAIL_STATUS (13), moving nothing; B's own puts to A go through.

int refuse_target(Pair &pair) {
    if (!pair.a) setenv("EFAEMU_FAIL_AS_TARGET", "gda", 1);  // before B's provider reads its configuration
    Pe p;
    setup(pair, p);
    if (pair.a) {
        int e = 0;
        for (int i = 0; i < 4; i++) e |= efa_gda_put_nbi(&p.s, p.heap + 2 * M + i * 4096, p.heap + i * 4096, 4096, 1);
        e |= efa_gda_get_nbi(&p.s, p.heap + 5 * M, p.heap + 4 * M, 4096, 1);
        const int q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE && p.qp.error_count == 5,
               "EFAEMU_FAIL_AS_TARGET=gda on B: A's 4 puts and 1 get to B fail with UNRESP_REMOTE (13)",
               fmt("post %d quiet %d failed %u", e, q, p.qp.error_count));
        sync(pair);  // B's puts to A
        sync(pair);
        bool landed = true;
        for (uint64_t i = 0; i < 4096; i++) landed = landed && p.heap[7 * M + i] == pattern(1, 6 * M + i);
        expect(landed, "B's puts to A landed (B refuses as a target only)");
    } else {
        sync(pair);
        bool untouched = true;
        for (uint64_t off : {2 * M, 2 * M + 3 * 4096})
            for (uint64_t i = 0; i < 64; i++) untouched = untouched && p.heap[off + i] == pattern(1, off + i);
        expect(untouched, "A's refused puts left B's memory untouched");
        const int e = efa_gda_put_nbi(&p.s, p.heap + 7 * M, p.heap + 6 * M, 4096, 0);
        const int q = efa_gda_quiet(&p.s);
        expect(e == 0 && q == 0, "B's put to A completes", fmt("post %d quiet %d", e, q));
        sync(pair);
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- gpu-cq: CQs in (stand-in) GPU memory handed over as dma-buf fds; SQ pages registered IOMEMORY -------------

struct Cuda {
    void *h = nullptr;
    int (*memAlloc)(unsigned long long *, size_t);
    int (*memcpyDtoH)(void *, unsigned long long, size_t);
    int (*memcpyHtoD)(unsigned long long, const void *, size_t);
    int (*handle)(void *, unsigned long long, size_t, int, unsigned long long);
    int (*hostRegister)(void *, size_t, unsigned);
    void load() {
        // As the GDA host code: dlopen + dlsym on the handle (what the interposer watches).
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) die("no libcuda.so.1 (run with the stand-in driver on LD_LIBRARY_PATH)");
        memAlloc = (decltype(memAlloc))dlsym(h, "cuMemAlloc_v2");
        memcpyDtoH = (decltype(memcpyDtoH))dlsym(h, "cuMemcpyDtoH_v2");
        memcpyHtoD = (decltype(memcpyHtoD))dlsym(h, "cuMemcpyHtoD_v2");
        handle = (decltype(handle))dlsym(h, "cuMemGetHandleForAddressRange");
        hostRegister = (decltype(hostRegister))dlsym(h, "cuMemHostRegister_v2");
        if (!memAlloc || !memcpyDtoH || !memcpyHtoD || !handle || !hostRegister) die("driver entry points");
    }
};

struct fid_cq *gpu_cq(Pe &p, Cuda &cu, size_t entries, unsigned long long *dptr) {
    const size_t bytes = entries * 32;
    if (cu.memAlloc(dptr, bytes)) die("cuMemAlloc");
    std::vector<uint8_t> zero(bytes, 0);
    cu.memcpyHtoD(*dptr, zero.data(), bytes);
    int fd = -1;
    if (cu.handle(&fd, *dptr, bytes, 1 /* DMA_BUF_FD */, 0)) die("cuMemGetHandleForAddressRange");
    struct fi_cq_attr a = {};
    a.format = FI_CQ_FORMAT_DATA;
    a.wait_obj = FI_WAIT_NONE;
    a.size = entries;
    struct fi_efa_cq_init_attr init = {};
    init.flags = FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
    init.ext_mem_dmabuf.length = bytes;
    init.ext_mem_dmabuf.fd = (uint32_t)fd;
    struct fid_cq *cq = nullptr;
    check(p.ops->cq_open_ext(p.domain, &a, &init, &cq, nullptr), "cq_open_ext(dma-buf fd)");
    return cq;
}

// Polls a GPU CQ entry through the driver until its phase bit says new; returns the entry.
bool read_cqe(Cuda &cu, unsigned long long ring, uint32_t index, uint8_t out[32]) {
    const uint64_t end = now_ms() + 10000;
    while (now_ms() < end) {
        cu.memcpyDtoH(out, ring + (unsigned long long)index * 32, 32);
        if (out[offsetof(efa_io_cdesc_common, flags)] & EFA_IO_CDESC_COMMON_PHASE_MASK) return true;
        usleep(200);
    }
    return false;
}

int gpu_cq(Pair &pair) {
    const int me = pair.a ? 0 : 1;
    Cuda cu;
    cu.load();
    Pe p;
    p.me = me;
    open_domain(p);
    unsigned long long tx_ring = 0, rx_ring = 0;
    p.tx = gpu_cq(p, cu, p.info->tx_attr->size, &tx_ring);
    p.rx = gpu_cq(p, cu, 64, &rx_ring);
    expect(true, "cq_open_ext over dma-buf fds of GPU memory (address from the interposer)");
    check(p.ops->query_cq(p.tx, &p.tx_attr), "query_cq");
    expect((unsigned long long)p.tx_attr.buffer == tx_ring && p.tx_attr.entry_size == 32 &&
               p.tx_attr.num_entries == p.info->tx_attr->size,
           "query_cq reports the GPU ring, 32-byte entries, the requested depth",
           fmt("%p %u x %u", (void *)p.tx_attr.buffer, p.tx_attr.num_entries, p.tx_attr.entry_size));
    open_endpoint(p, p.tx, &p.ep, &p.sq, &p.rq, p.mine.name);
    // map_bar(): page-aligned IOMEMORY|DEVICEMAP registrations of the SQ ring and the doorbell page.
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    auto bar = [&](void *ptr, size_t len) {
        uintptr_t s = (uintptr_t)ptr & ~(uintptr_t)(page - 1), e = ((uintptr_t)ptr + len + page - 1) & ~(uintptr_t)(page - 1);
        return cu.hostRegister((void *)s, e - s, 0x04 | 0x02);
    };
    const int r1 = bar(p.sq.buffer, (size_t)p.sq.entry_size * p.sq.num_entries), r2 = bar(p.sq.doorbell, 4);
    expect(r1 == 0 && r2 == 0, "the SQ ring and doorbell pages pass cuMemHostRegister(IOMEMORY|DEVICEMAP) (emulator pages)",
           fmt("ring %d doorbell %d", r1, r2));
    std::vector<uint8_t> ordinary(2 * page);
    expect(bar(ordinary.data() + page - 8, 16) != 0, "an ordinary page is still refused IOMEMORY (the driver's rule)");
    p.heap = static_cast<uint8_t *>(aligned_alloc(4096, 1 * M));
    for (uint64_t i = 0; i < M; i++) p.heap[i] = pattern(me, i);
    check(fi_mr_reg(p.domain, p.heap, M, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &p.mr[0], nullptr), "reg");
    p.mine.heap = (uint64_t)p.heap;
    p.mine.rkey[0] = (uint32_t)fi_mr_key(p.mr[0]);
    put(pair, p.mine);
    p.all[1 - me] = get<Published>(pair);
    p.all[me] = p.mine;
    for (int pe = 0; pe < kPes; pe++) {
        fi_addr_t fa;
        if (fi_av_insert(p.av, p.all[pe].name, 1, &fa, 0, nullptr) != 1) die("fi_av_insert");
        check(p.ops->query_addr(p.ep, fa, &p.peers[pe].ah, &p.peers[pe].qpn, &p.peers[pe].qkey), "query_addr");
    }
    sync(pair);
    if (pair.a) {
        // One write with immediate, written into the SQ as the device code writes it.
        p.slot_done.assign(p.sq.num_entries, 0);
        p.qp.sq_buf = p.sq.buffer;
        p.qp.sq_db = p.sq.doorbell;
        p.qp.sq_entries = p.sq.num_entries;
        p.qp.sq_log2 = (uint32_t)__builtin_ctz(p.sq.num_entries);
        p.qp.max_batch = p.sq.max_batch;
        p.qp.wqe_size = p.sq.entry_size;
        const uint64_t lkey = p.ops->get_mr_lkey(p.mr[0]);
        efa_gda_piece pc{(uint64_t)p.heap + 4096, p.all[1].heap + 8192, 1000, (uint32_t)lkey, p.all[1].rkey[0]};
        efa_gda_rdma_desc d = efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, p.peers[1], pc, true, 0x1234abcd);
        d.req_id = 0;
        union efa_gda_wqe_words w;
        efa_gda_build_rdma_wqe(&w, &d, efa_gda_sq_phase(0, p.qp.sq_log2));
        volatile uint64_t *dst = (volatile uint64_t *)p.qp.sq_buf;
        for (int i = 0; i < 8; i++) dst[i] = w.q[i];
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *(volatile uint32_t *)p.qp.sq_db = 1;
        uint8_t e[32];
        const bool got = read_cqe(cu, tx_ring, 0, e);
        efa_io_cdesc_common c;
        memcpy(&c, e, sizeof c);
        expect(got && c.status == 0 && c.req_id == 0 && c.qp_num == p.peers[0].qpn &&
                   EFA_GDA_GET(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, c.flags) == EFA_IO_SEND_QUEUE,
               "TX CQE written into GPU memory: phase 1, status OK, req_id, this QP, send queue",
               fmt("got %d status %u req %u qp %u flags 0x%x", got, c.status, c.req_id, c.qp_num, c.flags));
        put(pair, 1);
    } else {
        (void)get<int>(pair);
        uint8_t e[32];
        const bool got = read_cqe(cu, rx_ring, 0, e);
        struct FakeStats {
            uint64_t async_copies, nonblocking_copies, default_stream_copies, app_thread_calls, device_bytes;
        } fs{};
        auto stats = (void (*)(FakeStats *))dlsym(cu.h, "fakecuda_get_stats");
        if (stats) stats(&fs);
        expect(stats && fs.nonblocking_copies > 0 && fs.default_stream_copies == 0 && fs.nonblocking_copies == fs.async_copies,
               "the engine wrote the GPU CQE with CUDA copies on its private non-blocking stream, none on the legacy stream",
               fmt("%llu async, %llu non-blocking, %llu default", (unsigned long long)fs.async_copies,
                   (unsigned long long)fs.nonblocking_copies, (unsigned long long)fs.default_stream_copies));
        efa_io_rx_cdesc_ex c;
        memcpy(&c, e, sizeof c);
        expect(got && c.base.common.status == 0 && c.base.imm == 0x1234abcd && c.base.length == 1000 &&
                   c.base.src_qp_num == p.peers[0].qpn && c.base.ah == p.peers[0].ah && c.base.common.qp_num == p.peers[1].qpn,
               "RX CQE of the write with immediate in GPU memory: imm, length, sender's QP and AH as query_addr gave them",
               fmt("got %d status %u imm 0x%x len %u src_qp %u ah %u", got, c.base.common.status, c.base.imm, c.base.length,
                   c.base.src_qp_num, c.base.ah));
        bool landed = true;
        for (uint64_t i = 0; i < 1000; i++) landed = landed && p.heap[8192 + i] == pattern(0, 4096 + i);
        expect(landed, "its data landed before the RX CQE");
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

}  // namespace

int main(int argc, char **argv) {
    const std::string s = argc > 1 ? argv[1] : "ops";
    Pair pair = fork_pair();
    if (s == "ops") return ops(pair);
    if (s == "errors") return errors(pair);
    if (s == "owned") return owned(pair);
    if (s == "fail-every") return fail_every(pair);
    if (s == "refuse-target") return refuse_target(pair);
    if (s == "gpu-cq") return gpu_cq(pair);
    die("unknown scenario " + s);
}
