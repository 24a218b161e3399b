// efaemu's placement modes against clients that get EFA's ordering wrong and clients that get it right, two
// processes on host memory: `efaemu_place_test <scenario> <client>`. A mode counts only once it catches a broken
// client, so every scenario has one that it catches (and that passes without the mode) and one it must not fool.
//
//   order-rdm broken|correct      fi_write payload then flag; broken posts the flag without waiting for the
//                                 payload's completion (caught by EFAEMU_PLACE_ORDER)
//   order-gda broken|correct|imm  the same through the GDA device code (put, quiet); imm: a write with immediate
//                                 whose RX completion the target takes as "payload here" (right under every mode)
//   defer-rails broken|correct    EFAEMU_NICS=2: payload on NIC 0, waited for, then the flag on NIC 1 (broken: a
//                                 signal on another rail) or NIC 0 (caught by EFAEMU_PLACE_DEFER_US)
//   defer-cpu send|read           payload written and waited for, then a message the target's CPU receives before it
//                                 reads the payload (send: overtakes a deferred write); read: an RDMA read through the
//                                 payload's NIC first (a read does not pass that NIC's posted writes)
//   flush-gda quiet|flush         GDA payload, then an announcement the target's CPU takes: after a quiet alone (caught
//                                 by EFAEMU_PLACE_DEFER_US) or after efa_gda_quiet_flush (a read through each NIC)
//   dup broken|correct            a flag the target zeroes after use; broken takes any nonzero flag as new (caught
//                                 by EFAEMU_DUPLICATE), correct waits for the round number
//
// B, the target, checks the payload whenever the protocol says it is there and prints
// "B: result hazards <k> rounds <n>"; the caller compares k with and without the mode. Setup failures are FAIL lines.
#include "gda_pe.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "harness.h"

using namespace th;

namespace {

constexpr uint64_t kRemote = FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kLocal = FI_READ | FI_WRITE | FI_SEND | FI_RECV;
constexpr size_t kSlot = 256;  // one round's payload

struct Window {
    uint64_t addr, key;
};

// The target's memory: the flag (8 bytes at 0), then from byte 64 one payload slot per round (never reused, so a
// stale read is a wrong round).
size_t target_bytes(int rounds) { return 64 + (size_t)rounds * kSlot; }
volatile uint64_t *flag_of(std::vector<uint8_t> &mem) { return reinterpret_cast<volatile uint64_t *>(mem.data()); }
const uint8_t *slot_of(std::vector<uint8_t> &mem, int round) { return mem.data() + 64 + (size_t)round * kSlot; }
uint8_t mark(int round, size_t i) { return (uint8_t)(round * 7 + i + 1) | 1; }  // never 0: unwritten memory differs
bool payload_ok(const uint8_t *slot, int round) {
    for (size_t i = 0; i < kSlot; i++)
        if (slot[i] != mark(round, i)) return false;
    return true;
}
void fill_payload(uint8_t *p, int round) {
    for (size_t i = 0; i < kSlot; i++) p[i] = mark(round, i);
}

void report(int hazards, int rounds) { printf("%s: result hazards %d rounds %d\n", who, hazards, rounds); }

// B's side of every scenario that announces each round once: wait for round i's announcement (`arrived` returns ""
// or what went wrong, reported under `what`), check round i's payload at slot(i), let A go on (-1 stops it); then the
// result line.
template <typename Arrived, typename Slot>
void check_rounds(Pair &p, int rounds, const char *what, Arrived arrived, Slot slot) {
    int hazards = 0, i = 0;
    for (; i < rounds; i++) {
        const std::string why = arrived(i);
        if (!why.empty()) {
            fail(what, why);
            put(p, -1);
            break;
        }
        hazards += !payload_ok(slot(i), i);
        put(p, 1);
    }
    report(hazards, i);
}

// Polls *flag until pred holds or 5 s pass.
template <typename P>
bool poll(volatile uint64_t *flag, P pred) {
    const uint64_t end = now_ms() + 5000;
    while (!pred(*flag))
        if (now_ms() > end) return false;
    return true;
}

// ---- RDM ---------------------------------------------------------------------------------------------------------

// One NIC of both sides: endpoints that know each other and B's target memory registered on it.
struct Rail {
    Fab f;
    fi_addr_t peer = FI_ADDR_NOTAVAIL;
    struct fid_mr *mr = nullptr, *src_mr = nullptr;
    Window w{};  // B's memory as A reaches it on this rail
};

Rail connect_rail(Pair &p, int nic, void *mem, size_t len, void *src, size_t src_len) {
    Rail r;
    r.f = open_fab(FI_MSG | FI_RMA, FI_CQ_FORMAT_DATA, 0, nic);
    put(p, r.f.name.data(), 32);
    std::vector<uint8_t> other(32);
    get(p, other.data(), 32);
    r.peer = insert(r.f, other);
    r.mr = reg(r.f, mem, len, kLocal | kRemote);
    r.src_mr = reg(r.f, src, src_len, kLocal);
    put(p, Window{(uint64_t)(uintptr_t)mem, fi_mr_key(r.mr)});
    r.w = get<Window>(p);
    return r;
}

void close_rail(Rail &r) {
    fi_close(&r.mr->fid);
    fi_close(&r.src_mr->fid);
    close_fab(r.f);
}

void post_write(Rail &r, const void *buf, size_t len, uint64_t addr) {
    ssize_t ret;
    while ((ret = fi_write(r.f.ep, buf, len, fi_mr_desc(r.src_mr), r.peer, addr, r.w.key, nullptr)) == -FI_EAGAIN) {}
    if (ret) die(fmt("fi_write: %zd", ret));
}

// Waits for n successful completions on the rail's CQ.
void wait_done(Rail &r, int n) {
    for (int i = 0; i < n; i++) {
        struct fi_cq_data_entry e;
        struct fi_cq_err_entry err;
        ssize_t ret = wait_cq(r.f.cq, &e, &err, 10000);
        if (ret != 1) die(fmt("completion: %zd (prov_errno %d)", ret, ret == -FI_EAVAIL ? err.prov_errno : 0));
    }
}

uint64_t slot_addr(const Window &w, int round) { return w.addr + 64 + (uint64_t)round * kSlot; }

// order-rdm and defer-rails: A writes round i's payload, then the flag i + 1; B polls the flag and checks.
// flag_nic: the rail the flag goes on; wait_payload: the flag waits for the payload's completion.
int payload_flag(const std::string &client, bool two_nics) {
    const int rounds = 200;
    if (two_nics) setenv("EFAEMU_NICS", "2", 1);
    Pair p = fork_pair();
    std::vector<uint8_t> mem(target_bytes(rounds), 0), src(kSlot + 64, 0);
    volatile uint64_t *flag_word = flag_of(mem);
    Rail r0 = connect_rail(p, 0, mem.data(), mem.size(), src.data(), src.size());
    Rail r1;
    if (two_nics) r1 = connect_rail(p, 1, mem.data(), mem.size(), src.data(), src.size());
    const bool broken = client == "broken";
    Rail &flag_rail = two_nics && broken ? r1 : r0;
    const bool wait_payload = two_nics || !broken;
    sync(p);
    if (p.a) {
        uint64_t *flag = reinterpret_cast<uint64_t *>(src.data() + kSlot);
        for (int i = 0; i < rounds; i++) {
            fill_payload(src.data(), i);
            *flag = (uint64_t)i + 1;
            post_write(r0, src.data(), kSlot, slot_addr(r0.w, i));
            if (wait_payload) wait_done(r0, 1);
            post_write(flag_rail, flag, 8, flag_rail.w.addr);
            wait_done(flag_rail, 1);
            if (!wait_payload) wait_done(r0, 1);
            if (get<int>(p) < 0) break;
        }
    } else {
        check_rounds(
            p, rounds, "the flag arrives",
            [&](int i) {
                return poll(flag_word, [&](uint64_t v) { return v == (uint64_t)i + 1; })
                           ? std::string()
                           : fmt("round %d: flag %llu", i, (unsigned long long)*flag_word);
            },
            [&](int i) { return slot_of(mem, i); });
    }
    sync(p);
    if (two_nics) close_rail(r1);
    close_rail(r0);
    return finish(p);
}

// defer-cpu: the payload (waited for), then a message to B's CPU; read: an RDMA read on the payload's NIC first.
int defer_cpu(const std::string &client) {
    const int rounds = 200;
    Pair p = fork_pair();
    std::vector<uint8_t> mem(target_bytes(rounds), 0), src(kSlot + 64, 0);
    Rail r = connect_rail(p, 0, mem.data(), mem.size(), src.data(), src.size());
    sync(p);
    if (p.a) {
        for (int i = 0; i < rounds; i++) {
            fill_payload(src.data(), i);
            post_write(r, src.data(), kSlot, slot_addr(r.w, i));
            wait_done(r, 1);
            if (client == "read") {
                while (fi_read(r.f.ep, src.data() + kSlot, 8, fi_mr_desc(r.src_mr), r.peer, r.w.addr, r.w.key, nullptr) ==
                       -FI_EAGAIN) {}
                wait_done(r, 1);
            }
            int32_t round = i;
            while (fi_send(r.f.ep, &round, 4, nullptr, r.peer, nullptr) == -FI_EAGAIN) {}
            wait_done(r, 1);
            if (get<int>(p) < 0) break;
        }
    } else {
        check_rounds(
            p, rounds, "the message arrives",
            [&](int i) {
                int32_t got = -1;
                if (fi_recv(r.f.ep, &got, 4, nullptr, FI_ADDR_UNSPEC, nullptr)) die("fi_recv");
                struct fi_cq_data_entry e;
                struct fi_cq_err_entry err;
                return wait_cq(r.f.cq, &e, &err, 5000) == 1 && got == i ? std::string() : fmt("round %d: got %d", i, got);
            },
            [&](int i) { return slot_of(mem, i); });
    }
    sync(p);
    close_rail(r);
    return finish(p);
}

// dup: A writes the payload, waits, writes the flag (broken: 1, correct: the round), waits for B, then pauses longer
// than EFAEMU_DUPLICATE's bound before the next round, so a duplicate lands while B waits for a new flag.
int dup(const std::string &client) {
    const int rounds = 60;
    const bool broken = client == "broken";
    Pair p = fork_pair();
    std::vector<uint8_t> mem(target_bytes(rounds), 0), src(kSlot + 64, 0);
    volatile uint64_t *flag_word = flag_of(mem);
    Rail r = connect_rail(p, 0, mem.data(), mem.size(), src.data(), src.size());
    sync(p);
    if (p.a) {
        uint64_t *flag = reinterpret_cast<uint64_t *>(src.data() + kSlot);
        for (int i = 0; i < rounds; i++) {
            fill_payload(src.data(), i);
            post_write(r, src.data(), kSlot, slot_addr(r.w, i));
            wait_done(r, 1);
            *flag = broken ? 1 : (uint64_t)i + 1;
            post_write(r, flag, 8, r.w.addr);
            wait_done(r, 1);
            if (get<int>(p) < 0) break;
            usleep(3000);
        }
    } else {
        int hazards = 0, i = 0;
        while (i < rounds) {
            // broken: any nonzero flag is a new one (and is zeroed after use); correct: the round's own number.
            if (!poll(flag_word, [&](uint64_t v) { return broken ? v != 0 : v == (uint64_t)i + 1; })) {
                fail("the flag arrives", fmt("round %d: flag %llu", i, (unsigned long long)*flag_word));
                put(p, -1);
                break;
            }
            if (broken) *flag_word = 0;
            if (!payload_ok(slot_of(mem, i), i)) {
                hazards++;  // a flag nobody sent this round: keep waiting for the real one
                continue;
            }
            put(p, 1);
            i++;
        }
        report(hazards, i);
    }
    sync(p);
    close_rail(r);
    return finish(p);
}

// ---- GDA: the device code over efa-direct, each PE set up as the GDA host code does (gda_pe.h) -------------------

constexpr uint64_t kGdaFlag = 0, kGdaSrc = 4096, kGdaSlots = 8192;  // in the heap's first region, on both PEs

int order_gda(const std::string &client) {
    const int rounds = 200;
    Pair pair = fork_pair();
    Pe p;
    setup(pair, p);
    memset(p.heap, 0, kGdaSlots + (uint64_t)rounds * kSlot);  // the heap starts with a pattern; the flag must be 0
    sync(pair);
    if (pair.a) {
        threadIdx.x = 0;
        uint8_t *src = p.heap + kGdaSrc;
        uint64_t *flag = reinterpret_cast<uint64_t *>(p.heap + kGdaSrc + kSlot);
        for (int i = 0; i < rounds; i++) {
            fill_payload(src, i);
            *flag = (uint64_t)i + 1;
            void *dst = p.heap + kGdaSlots + (uint64_t)i * kSlot;
            int e;
            if (client == "imm") {
                e = efa_gda_put_imm_nbi(&p.s, dst, src, kSlot, 1, (uint32_t)i);
            } else {
                e = efa_gda_put_nbi(&p.s, dst, src, kSlot, 1);
                if (!e && client == "correct") e = efa_gda_quiet(&p.s);  // the payload is placed: the flag may go
                if (!e) e = efa_gda_put_nbi(&p.s, p.heap + kGdaFlag, flag, 8, 1);
            }
            if (!e) e = efa_gda_quiet(&p.s);
            if (e) die(fmt("round %d: %s", i, efa_gda_strerror(e)));
            if (get<int>(pair) < 0) break;
        }
    } else {
        volatile uint64_t *flag = reinterpret_cast<volatile uint64_t *>(p.heap + kGdaFlag);
        check_rounds(
            pair, rounds, "the signal arrives",
            [&](int i) {
                bool arrived;
                if (client == "imm") {
                    uint32_t imm = 0, bytes = 0;
                    int src = -1, rc = 0;
                    const uint64_t end = now_ms() + 5000;
                    while ((rc = efa_gda_rx_poll(&p.s, &imm, &bytes, &src)) == 0 && now_ms() < end) {}
                    arrived = rc == 1 && imm == (uint32_t)i;
                } else {
                    arrived = poll(flag, [&](uint64_t v) { return v == (uint64_t)i + 1; });
                }
                return arrived ? std::string() : fmt("round %d", i);
            },
            [&](int i) { return p.heap + kGdaSlots + (uint64_t)i * kSlot; });
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

// flush-gda: the payload through the GDA device code, then an announcement the target's CPU takes (the harness's
// pipe, as NVSHMEM's proxy applies an add with the target's CPU): quiet alone (the completion says only "queued
// towards the target's PCIe"; caught by EFAEMU_PLACE_DEFER_US) or efa_gda_quiet_flush (a read through the payload's
// NIC after the quiet: what the DeepEP shim does before anything NVSHMEM announces).
int flush_gda(const std::string &client) {
    const int rounds = 200;
    Pair pair = fork_pair();
    Pe p;
    setup(pair, p);
    memset(p.heap, 0, kGdaSlots + (uint64_t)rounds * kSlot);
    sync(pair);
    if (pair.a) {
        threadIdx.x = 0;
        uint8_t *src = p.heap + kGdaSrc;
        for (int i = 0; i < rounds; i++) {
            fill_payload(src, i);
            int e = efa_gda_put_nbi(&p.s, p.heap + kGdaSlots + (uint64_t)i * kSlot, src, kSlot, 1);
            if (!e) e = client == "flush" ? efa_gda_quiet_flush(&p.s, 1) : efa_gda_quiet(&p.s);
            if (e) die(fmt("round %d: %s", i, efa_gda_strerror(e)));
            put(pair, i);  // the announcement, by this PE's CPU to the target's CPU
            if (get<int>(pair) < 0) break;
        }
    } else {
        check_rounds(
            pair, rounds, "the announcement arrives",
            [&](int i) { return get<int>(pair) == i ? std::string() : fmt("round %d", i); },
            [&](int i) { return p.heap + kGdaSlots + (uint64_t)i * kSlot; });
    }
    sync(pair);
    close_pe(p);
    return finish(pair);
}

}  // namespace

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    const std::string s = argc > 1 ? argv[1] : "", c = argc > 2 ? argv[2] : "";
    const bool two = c == "broken" || c == "correct";
    if (s == "order-rdm" && two) return payload_flag(c, false);
    if (s == "defer-rails" && two) return payload_flag(c, true);
    if (s == "order-gda" && (two || c == "imm")) return order_gda(c);
    if (s == "defer-cpu" && (c == "send" || c == "read")) return defer_cpu(c);
    if (s == "dup" && two) return dup(c);
    if (s == "flush-gda" && (c == "quiet" || c == "flush")) return flush_gda(c);
    fprintf(stderr,
            "usage: efaemu_place_test order-rdm|defer-rails|dup broken|correct, order-gda broken|correct|imm, "
            "defer-cpu send|read, flush-gda quiet|flush\n");
    return 2;
}
