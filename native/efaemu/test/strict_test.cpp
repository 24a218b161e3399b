// efaemu's strictness modes against a correct and a deliberately broken client, two processes on the CPU:
// `efaemu_strict_test <scenario>`. Each PE is set up as the GDA host code does (gda_pe.h); the correct client is our
// GDA device code (nvshmemx_efa_gda_device.cuh as host C++), the broken one the same code with one rule ignored.
//
// Scenarios (lines "A|B: ok <check>" / "A|B: FAIL <check>: why"; a broken client's check says what the emulator
// must do to it, so on an emulator that lets it through the line FAILs):
//   batch-correct  16 WQEs (max_batch) written, held 3 ms, rung at once: they complete OK.
//   batch-broken   the same with max_batch ignored (32 WQEs held and rung at once): the QP errs, nothing lands.
//   keys-correct   lkey and rkey of every MR differ; a put and a get with the right keys complete OK.
//   lkey-as-rkey   the target published its lkeys as rkeys: REMOTE_ERROR_BAD_ADDRESS, nothing lands.
//   rkey-as-lkey   the initiator names its local buffer by its rkey: LOCAL_ERROR_INVALID_LKEY, nothing lands.
//   wide-correct   (EFAEMU_WQE_SIZE=128) query_qp_wqs reports 128-byte entries; puts at that stride land.
//   wide-broken    (EFAEMU_WQE_SIZE=128) WQEs written at a 64-byte stride: the QP errs.
//   silent         (with EFAEMU_FAIL_EVERY=4 EFAEMU_FAIL_PATH=gda, and EFAEMU_SILENT_AFTER_ERROR=1 or not) 8 puts, then
//                  a client that waits for all 8 completions without a bound (in silent mode it would hang: the
//                  check FAILs "would hang") and our device code's quiet, bounded by the device state's timeout_ns.
#include "gda_pe.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

using namespace th;

namespace {

// The device code's timeout error (nvshmemx_efa_gda.h: NVSHMEMX_EFA_GDA_ERR_TIMEOUT), spelled as a number so this
// file builds before and after the device code's bounded waits (helper "device", issue 21) land.
constexpr int kErrTimeout = 0x10b;

// Sets the device state's wait bound when the device code has one (timeout_ns, 0 = unbounded); false when not.
template <typename S>
auto set_timeout(S &s, uint64_t ns, int) -> decltype(s.timeout_ns = ns, true) {
    s.timeout_ns = ns;
    return true;
}
template <typename S>
bool set_timeout(S &, uint64_t, long) {
    return false;
}

// Runs fn on a thread and waits at most limit_ms for it. A wait that does not return is reported as a FAIL line
// saying it would hang, and the test ends there (the thread cannot be taken back): a hang must never hang CI.
void bounded(Pair &pair, const std::string &check, int limit_ms, const std::function<void()> &fn) {
    std::atomic<bool> done{false};
    std::thread t([&] {
        fn();
        done = true;
    });
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
    while (!done && std::chrono::steady_clock::now() < end) usleep(1000);
    if (!done) {
        fail(check, fmt("would hang: still waiting after %d ms", limit_ms));
        if (pair.a) kill(pair.child, SIGKILL);
        _exit(1);
    }
    t.join();
}

bool heap_untouched(Pe &p, uint64_t off, uint64_t len) {
    for (uint64_t i = 0; i < len; i++)
        if (p.heap[off + i] != pattern(p.me, off + i)) return false;
    return true;
}
bool landed(Pe &p, uint64_t off, uint64_t src_off, uint64_t len) {
    for (uint64_t i = 0; i < len; i++)
        if (p.heap[off + i] != pattern(0, src_off + i)) return false;
    return true;
}

constexpr uint64_t kDst = 6 * M;  // where A's writes go in PE 1's heap (region 1)
constexpr uint32_t kLen = 256;

// ---- max_batch ---------------------------------------------------------------------------------------------------

// n WQEs reserved with the device code's bookkeeping, written, held for 3 ms (the engine looks at the ring at least
// every 200 us, so it sees them all written past the doorbell), then rung with one doorbell value.
int batch(Pair &pair, bool broken) {
    Pe p;
    setup(pair, p);
    const uint32_t max_batch = p.sq.max_batch;
    const uint32_t n = broken ? 2 * max_batch : max_batch;
    if (pair.a) {
        if (broken) p.qp.max_batch = n;  // the bug: a client that ignores query_qp_wqs's max_batch
        efa_gda_reservation res;
        int e = efa_gda_reserve(&p.qp, n, &res);
        for (uint32_t i = 0; i < n && !e; i++) {
            efa_gda_piece pc{(uint64_t)p.heap + i * kLen, p.all[1].heap + kDst + i * kLen, kLen, p.local[0].key, p.all[1].rkey[1]};
            efa_gda_write_wqe(&p.qp, res.slot + i, efa_gda_desc(NVSHMEMX_EFA_GDA_OP_WRITE, p.peers[1], pc, false, 0));
        }
        __threadfence_system();
        usleep(3000);
        if (!e) e = efa_gda_ring(&p.qp, res.slot, n, res.rung_seen);
        int q = -1;
        bounded(pair, "quiet after the batch", 10000, [&] { q = efa_gda_quiet(&p.s); });
        if (broken)
            expect(e == 0 && q == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR,
                   fmt("a client that holds %u WQEs past the doorbell (max_batch %u) and rings them at once: the QP errs "
                       "(LOCAL_ERROR_QP_INTERNAL_ERROR)", n, max_batch),
                   fmt("post %d quiet %d", e, q));
        else
            expect(e == 0 && q == 0, fmt("%u WQEs (max_batch) held past the doorbell and rung at once complete OK", n),
                   fmt("post %d quiet %d", e, q));
        put(pair, n);
    } else {
        const uint32_t got = get<uint32_t>(pair);
        if (broken) expect(heap_untouched(p, kDst, (uint64_t)got * kLen), "none of the batch past max_batch landed");
        else {
            bool all = true;
            for (uint32_t i = 0; i < got; i++) all = all && landed(p, kDst + i * kLen, i * kLen, kLen);
            expect(all, "every WQE of the batch landed byte-exact");
        }
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- lkey / rkey -----------------------------------------------------------------------------------------------

enum class Keys { Correct, LkeyAsRkey, RkeyAsLkey };

int keys(Pair &pair, Keys mode) {
    Pe p;
    setup(pair, p);
    // Every PE's lkeys, so that a broken client can use them where rkeys belong.
    uint32_t mine[3], theirs[3];
    for (int i = 0; i < 3; i++) mine[i] = p.local[i].key;
    put(pair, mine);
    get(pair, theirs, sizeof theirs);
    if (pair.a) {
        bool differ = true;
        for (int i = 0; i < 3; i++) differ = differ && p.local[i].key != p.mine.rkey[i] && p.local[i].key < (1u << 24);
        if (mode == Keys::Correct)
            expect(differ, "every MR's lkey (get_mr_lkey, 24 bits) differs from its rkey (fi_mr_key)",
                   fmt("lkey 0x%x rkey 0x%x", p.local[0].key, p.mine.rkey[0]));
        if (mode == Keys::LkeyAsRkey) {
            // The bug: PE 1 published its lkeys (get_mr_lkey) where peers expect its rkeys (fi_mr_key).
            for (int i = 0; i < 3; i++) {
                p.entry(i, 1 + 1)->key = theirs[i];
                p.s.rail[0].fast[1].hot[i].rkey = theirs[i];
            }
        }
        if (mode == Keys::RkeyAsLkey) {
            // The bug: the initiator names its own buffer by fi_mr_key's rkey.
            for (int i = 0; i < 3; i++) {
                p.entry(i, 0)->key = p.mine.rkey[i];
                p.s.rail[0].hot[i].lkey = p.mine.rkey[i];
            }
        }
        const int e = efa_gda_put_nbi(&p.s, p.heap + kDst, p.heap, 4096, 1);
        int q = -1;
        bounded(pair, "quiet after the put", 10000, [&] { q = efa_gda_quiet(&p.s); });
        if (mode == Keys::Correct) {
            p.qp.error = 0;
            const int g = efa_gda_get_nbi(&p.s, p.heap + 10 * M, p.heap + 10 * M + 4096, 4096, 1);
            int q2 = -1;
            bounded(pair, "quiet after the get", 10000, [&] { q2 = efa_gda_quiet(&p.s); });
            bool got = true;
            for (uint64_t i = 0; i < 4096; i++) got = got && p.heap[10 * M + i] == pattern(1, 10 * M + 4096 + i);
            expect(e == 0 && q == 0 && g == 0 && q2 == 0 && got, "a put and a get with each key where it belongs complete OK",
                   fmt("put %d/%d get %d/%d data %d", e, q, g, q2, got));
        } else if (mode == Keys::LkeyAsRkey) {
            expect(e == 0 && q == EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS,
                   "a put naming the target's lkey as its rkey: REMOTE_ERROR_BAD_ADDRESS (the target checks rkeys)",
                   fmt("post %d quiet %d", e, q));
        } else {
            expect(e == 0 && q == EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY,
                   "a put naming its local buffer by its rkey: LOCAL_ERROR_INVALID_LKEY (the initiator checks lkeys)",
                   fmt("post %d quiet %d", e, q));
        }
        put(pair, 1);
    } else {
        (void)get<int>(pair);
        if (mode == Keys::Correct) expect(landed(p, kDst, 0, 4096), "the put landed byte-exact");
        else expect(heap_untouched(p, kDst, 4096), "the put with a swapped key left the target untouched");
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- 128-byte WQEs ---------------------------------------------------------------------------------------------

int wide(Pair &pair, bool broken) {
    Pe p;
    setup(pair, p);
    if (pair.a) {
        expect(p.sq.entry_size == 128 && p.qp.wqe_size == 128,
               "query_qp_wqs reports 128-byte SQ entries (EFAEMU_WQE_SIZE=128), which the device state takes as its stride",
               fmt("entry_size %u", p.sq.entry_size));
        if (broken) p.qp.wqe_size = 64;  // the bug: a client with the 64-byte stride built in
        int e = 0;
        for (uint32_t i = 0; i < 20; i++) e |= efa_gda_put_nbi(&p.s, p.heap + kDst + i * kLen, p.heap + i * kLen, kLen, 1);
        int q = -1;
        bounded(pair, "quiet after the puts", 10000, [&] { q = efa_gda_quiet(&p.s); });
        if (broken)
            // The NIC reads its slots at 128 bytes: a 64-byte WQE in a slot's tail, or a slot never written, is
            // rejected (QP_INTERNAL_ERROR). The request id of a never-written slot is whatever the ring holds, so
            // the device code may first meet a completion it cannot match (ERR_BAD_CQE): either way it stops.
            expect(e == 0 && (q == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR || q == NVSHMEMX_EFA_GDA_ERR_BAD_CQE),
                   "a client writing 64-byte-stride WQEs on a 128-byte device: the QP errs (QP_INTERNAL_ERROR, or a CQE "
                   "the device code cannot match)",
                   fmt("post %d quiet %d", e, q));
        else
            expect(e == 0 && q == 0, "20 puts at the 128-byte stride complete OK", fmt("post %d quiet %d", e, q));
        put(pair, 1);
    } else {
        (void)get<int>(pair);
        if (!broken) {
            bool all = true;
            for (uint32_t i = 0; i < 20; i++) all = all && landed(p, kDst + i * kLen, i * kLen, kLen);
            expect(all, "every put at the 128-byte stride landed byte-exact");
        }
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// ---- EFAEMU_SILENT_AFTER_ERROR -------------------------------------------------------------------------------------

// Counts the TX CQEs written so far, reading the ring by phase (entries 0..n-1 of a fresh CQ) without consuming it.
uint32_t cqes_written(Pe &p, uint32_t n) {
    uint32_t k = 0;
    while (k < n) {
        const volatile uint8_t *e = p.tx_attr.buffer + (size_t)k * p.tx_attr.entry_size;
        if (!(e[EFA_GDA_CQE_FLAGS_OFFSET] & 1)) break;
        k++;
    }
    return k;
}

int silent(Pair &pair) {
    const char *s = getenv("EFAEMU_SILENT_AFTER_ERROR");
    const bool silent_mode = s && !strcmp(s, "1");
    constexpr uint32_t kPuts = 8;
    constexpr uint64_t kBoundNs = 1000000000ull;
    Pe p;
    setup(pair, p);
    if (pair.a) {
        int e = 0;
        for (uint32_t i = 0; i < kPuts; i++) e |= efa_gda_put_nbi(&p.s, p.heap + kDst + i * 4096, p.heap + i * 4096, 4096, 1);
        expect(e == 0, "8 puts post");
        // The broken client: it waits for every completion, with no bound (here bounded at 3 s to report it).
        uint32_t seen = 0;
        const auto start = std::chrono::steady_clock::now();
        while ((seen = cqes_written(p, kPuts)) < kPuts && std::chrono::steady_clock::now() - start < std::chrono::seconds(3))
            usleep(1000);
        expect(seen == kPuts, "a client that waits for all 8 completions without a bound gets them",
               fmt("would hang: %u of %u CQEs after 3 s, no more coming", seen, kPuts));
        // Our device code: its waits end within the device state's bound.
        if (!set_timeout(p.s, kBoundNs, 0)) {
            fail("our device code's quiet ends within its bound (timeout_ns)",
                 "the device state has no timeout_ns: the device code's waits are unbounded (NVSHMEM_EFA_GDA_TIMEOUT_MS not there yet)");
        } else {
            int q = -1;
            const auto t0 = std::chrono::steady_clock::now();
            bounded(pair, "our device code's quiet ends within its bound (timeout_ns)", 10000, [&] { q = efa_gda_quiet(&p.s); });
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (silent_mode)
                expect(q == kErrTimeout && ms < 1000 + 2000,
                       "our device code's quiet ends within its bound (timeout_ns): NVSHMEMX_EFA_GDA_ERR_TIMEOUT",
                       fmt("quiet 0x%x after %.0f ms", q, ms));
            else
                expect(q == EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE && ms < 1000,
                       "our device code's quiet returns the injected failure (UNRESP_REMOTE) at once",
                       fmt("quiet 0x%x after %.0f ms", q, ms));
        }
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

}  // namespace

int main(int argc, char **argv) {
    const std::string s = argc > 1 ? argv[1] : "";
    Pair pair = fork_pair();
    if (s == "batch-correct") return batch(pair, false);
    if (s == "batch-broken") return batch(pair, true);
    if (s == "keys-correct") return keys(pair, Keys::Correct);
    if (s == "lkey-as-rkey") return keys(pair, Keys::LkeyAsRkey);
    if (s == "rkey-as-lkey") return keys(pair, Keys::RkeyAsLkey);
    if (s == "wide-correct") return wide(pair, false);
    if (s == "wide-broken") return wide(pair, true);
    if (s == "silent") return silent(pair);
    die("unknown scenario '" + s + "'");
}
