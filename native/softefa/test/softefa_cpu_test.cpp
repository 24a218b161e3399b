// CPU tests of the software EFA: a CPU writer builds WQEs with the same encoder the GPU uses
// (efa_gda_build_rdma_wqe) and rings the doorbell; the model must execute correct streams, flag every
// protocol violation, complete out of order in each reorder mode, and report RX CQ overruns, unknown peers
// and QP errors. Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/host_memory.h"
#include "nvshmemx_efa_gda_wqe.h"
#include "softefa.h"

using namespace softefa;

static int failures = 0;
#define CHECK(cond, msg)                                       \
    do {                                                       \
        if (!(cond)) throw std::string(msg) + " [" #cond "]"; \
    } while (0)

struct Rig {
    HostMemory mem;
    Device dev{mem};
    uint32_t entries, max_batch, wqe_size;
    std::vector<uint8_t> sq, cq, rx_cq, src, dst;
    uint32_t db = 0, pc = 0, cq_head = 0, rx_head = 0, rx_consumed = 0;
    static constexpr uint32_t kLkey = 0x12345, kRkey = 0xabcde;

    Rig(uint32_t n = 16, uint32_t batch = 8, uint64_t max_rdma = 1 << 20, const char *reorder = "inorder",
        uint32_t wqe = 64, uint32_t rx_entries = 0)
        : entries(n), max_batch(batch), wqe_size(wqe), sq(n * wqe), cq(n * 32), rx_cq((rx_entries ? rx_entries : n) * 32),
          src(1 << 22), dst(1 << 22) {
        for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 7 + 3);
        memset(dst.data(), 0xA5, dst.size());
        dev.add_region({kLkey, (uint64_t)src.data(), src.size(), true, false});
        dev.add_region({kRkey, (uint64_t)dst.data(), dst.size(), false, true});
        QpConfig c{};
        c.sq = sq.data();
        c.db = &db;
        c.sq_entries = n;
        c.max_batch = batch;
        c.cq = cq.data();
        c.cq_entries = n;
        c.cq_entry_size = 32;
        c.rx_cq = rx_cq.data();
        c.rx_cq_entries = rx_entries ? rx_entries : n;
        c.rx_cq_entry_size = 32;
        c.qpn = 7;
        c.ah = 3;
        c.qkey = 0x1111;
        c.max_rdma_size = max_rdma;
        c.wqe_size = wqe;
        c.rx_consumed = [this] { return rx_consumed; };
        dev.add_qp(c);
        // The QP writes to itself: as with NVSHMEM, which inserts every PE (itself included), it is in its AV.
        dev.av_insert(0, 3, 7);
        Reorder r;
        std::string why;
        if (!parse_reorder(reorder, &r, &why)) throw why;
        dev.set_reorder(r);
    }
    efa_gda_rdma_desc write(uint64_t soff, uint64_t doff, uint32_t len) {
        efa_gda_rdma_desc d{};
        d.op = EFA_IO_RDMA_WRITE;
        d.dest_qpn = 7;
        d.ah = 3;
        d.qkey = 0x1111;
        d.local_addr = (uint64_t)src.data() + soff;
        d.lkey = kLkey;
        d.remote_addr = (uint64_t)dst.data() + doff;
        d.rkey = kRkey;
        d.length = len;
        return d;
    }
    // Writes a WQE at the next slot, optionally corrupting it first.
    void put(efa_gda_rdma_desc d, const std::function<void(uint8_t *)> &mutate = nullptr) {
        union efa_gda_wqe_words w;
        d.req_id = (uint16_t)pc;
        efa_gda_build_rdma_wqe(&w, &d, efa_gda_sq_phase(pc, __builtin_ctz(entries)));
        uint8_t *slot = sq.data() + (pc & (entries - 1)) * wqe_size;
        memset(slot, 0, wqe_size);
        memcpy(slot, &w, 64);
        if (mutate) mutate(slot);
        pc++;
    }
    // The doorbell takes the 16-bit producer counter, as rdma-core writes it.
    void ring() { db = pc & 0xffff; }
    // Consumes TX CQEs in CQ order, whatever their request ids: (req_id, status).
    std::vector<std::pair<int, int>> reap_any() {
        std::vector<std::pair<int, int>> got;
        for (;;) {
            const uint8_t *e = cq.data() + (cq_head & (entries - 1)) * 32;
            if ((e[EFA_GDA_CQE_FLAGS_OFFSET] & 1) != efa_gda_cq_expected_phase(cq_head, __builtin_ctz(entries))) break;
            uint16_t req;
            memcpy(&req, e, 2);
            got.push_back({req, e[EFA_GDA_CQE_STATUS_OFFSET]});
            cq_head++;
        }
        return got;
    }
    // Consumes TX CQEs; returns their statuses.
    std::vector<int> reap() {
        std::vector<int> st;
        for (;;) {
            const uint8_t *e = cq.data() + (cq_head & (entries - 1)) * 32;
            if ((e[EFA_GDA_CQE_FLAGS_OFFSET] & 1) != efa_gda_cq_expected_phase(cq_head, __builtin_ctz(entries))) break;
            uint16_t req;
            memcpy(&req, e, 2);
            if (req != (uint16_t)cq_head) throw std::string("CQE req_id ") + std::to_string(req) + " at head " + std::to_string(cq_head);
            st.push_back(e[EFA_GDA_CQE_STATUS_OFFSET]);
            cq_head++;
        }
        return st;
    }
    bool violated(const char *needle) {
        for (auto &v : dev.violations())
            if (v.what.find(needle) != std::string::npos) return true;
        return false;
    }
    std::string all_violations() {
        std::string s;
        for (auto &v : dev.violations()) s += v.what + "; ";
        return s;
    }
};

static void test(const char *name, const std::function<void()> &fn) {
    try {
        fn();
        printf("ok %s\n", name);
    } catch (const std::string &e) {
        printf("FAIL %s: %s\n", name, e.c_str());
        failures++;
    } catch (const std::exception &e) {
        printf("FAIL %s: %s\n", name, e.what());
        failures++;
    }
}

static void expect_rejected(const char *name, const std::function<void(uint8_t *)> &mutate, const char *needle) {
    test(name, [&] {
        Rig r;
        r.put(r.write(0, 0, 64), mutate);
        r.ring();
        r.dev.poll_once();
        CHECK(r.violated(needle), "expected a violation mentioning '" + std::string(needle) + "', got: " + r.all_violations());
        auto st = r.reap();
        CHECK(st.size() == 1 && st[0] == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR, "malformed WQE must complete with an error");
        CHECK(r.dst[0] == 0xA5, "a rejected WQE must not move data");
    });
}

int main() {
    test("a correct stream of writes over 12 ring wraps moves every byte and completes in phase", [] {
        Rig r(16, 8);
        uint64_t doff = 0;
        std::vector<std::pair<uint64_t, uint32_t>> done;
        for (int round = 0; round < 24; round++) {
            for (int i = 0; i < 8; i++) {
                const uint32_t len = 1 + (uint32_t)((round * 131 + i * 977) % 5000);
                const uint64_t soff = (uint64_t)(round * 7919 + i * 104729) % (r.src.size() - len);
                r.put(r.write(soff, doff, len));
                done.push_back({soff, len});
                doff += len;
            }
            r.ring();
            CHECK(r.dev.poll_once() == 8, "8 WQEs served per doorbell");
            auto st = r.reap();
            CHECK(st.size() == 8, "8 completions per doorbell");
            for (int s : st) CHECK(s == 0, "status OK");
        }
        uint64_t off = 0;
        for (auto &d : done) {
            CHECK(memcmp(r.dst.data() + off, r.src.data() + d.first, d.second) == 0, "destination bytes");
            off += d.second;
        }
        CHECK(r.dst[off] == 0xA5, "no byte written past the last write");
        CHECK(r.dev.violations().empty(), "no violation: " + r.all_violations());
        CHECK(r.dev.stats().wqes == 192 && r.pc / 16 >= 12, "192 WQEs, 12 wraps");
    });

    test("RDMA read copies remote into local", [] {
        Rig r;
        r.dev.add_region({0x777, (uint64_t)r.dst.data(), r.dst.size(), true, true});
        efa_gda_rdma_desc d = r.write(0, 0, 100);
        d.op = EFA_IO_RDMA_READ;
        d.local_addr = (uint64_t)r.dst.data();
        d.lkey = 0x777;
        d.remote_addr = (uint64_t)r.src.data() + 50;
        d.rkey = Rig::kLkey;
        r.dev.add_region({Rig::kLkey, (uint64_t)r.src.data(), r.src.size(), true, false});
        r.put(d);
        r.ring();
        r.dev.poll_once();
        auto st = r.reap();
        CHECK(st.size() == 1 && st[0] == 0, "read completes OK");
        CHECK(memcmp(r.dst.data(), r.src.data() + 50, 100) == 0, "read data");
    });

    test("write with immediate completes at the target with imm and a 32-bit length", [] {
        Rig r(16, 8, 1 << 22);
        efa_gda_rdma_desc d = r.write(0, 0, 70000);
        d.has_imm = 1;
        d.imm = 0xC0FFEE;
        r.put(d);
        r.ring();
        r.dev.poll_once();
        const uint8_t *e = r.rx_cq.data();
        efa_io_rx_cdesc_ex c;
        memcpy(&c, e, sizeof c);
        CHECK((c.base.common.flags & 1) == 1, "RX CQE phase 1 on the first pass");
        CHECK(EFA_GDA_GET(EFA_IO_CDESC_COMMON_UNSOLICITED_MASK, c.base.common.flags), "unsolicited bit");
        CHECK(EFA_GDA_GET(EFA_IO_CDESC_COMMON_HAS_IMM_MASK, c.base.common.flags), "has_imm bit");
        CHECK(c.base.imm == 0xC0FFEE, "immediate");
        CHECK(c.base.ah == 3 && c.base.src_qp_num == 7, "sender's address handle and QP in the RX CQE");
        CHECK(c.base.common.qp_num == 7 && EFA_GDA_GET(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, c.base.common.flags) == EFA_IO_RECV_QUEUE,
              "RX CQE names the receiving QP and the receive queue");
        CHECK((c.base.length | ((uint32_t)c.u.rdma_write.length_hi << 16)) == 70000, "length with length_hi");
        CHECK(memcmp(r.dst.data(), r.src.data(), 70000) == 0, "data");
    });

    expect_rejected("meta_desc clear is rejected", [](uint8_t *w) { w[2] &= 0x7f; }, "meta_desc");
    expect_rejected("wrong phase is rejected", [](uint8_t *w) { w[3] ^= 1; }, "phase");
    expect_rejected("meta_extension set is rejected", [](uint8_t *w) { w[2] |= 0x40; }, "meta_extension");
    expect_rejected("inline_msg on RDMA is rejected", [](uint8_t *w) { w[2] |= 0x20; }, "inline_msg");
    expect_rejected("ctrl2 reserved bit 1 is rejected", [](uint8_t *w) { w[3] |= 0x2; }, "reserved ctrl2");
    expect_rejected("ctrl2 reserved bit 7 is rejected", [](uint8_t *w) { w[3] |= 0x80; }, "reserved ctrl2");
    expect_rejected("first clear is rejected", [](uint8_t *w) { w[3] &= ~0x4; }, "first/last");
    expect_rejected("last clear is rejected", [](uint8_t *w) { w[3] &= ~0x8; }, "first/last");
    expect_rejected("comp_req clear is rejected", [](uint8_t *w) { w[3] &= ~0x10; }, "comp_req");
    expect_rejected("SEND op is rejected", [](uint8_t *w) { w[2] = (uint8_t)((w[2] & 0xf0) | EFA_IO_SEND); }, "op_type 0");
    expect_rejected("has_imm on read is rejected", [](uint8_t *w) { w[2] = (uint8_t)((w[2] & 0xf0) | EFA_IO_RDMA_READ | 0x10); }, "has_imm on an RDMA read");
    expect_rejected("immediate without has_imm is rejected", [](uint8_t *w) { w[8] = 1; }, "immediate_data");
    expect_rejected("byte count in meta.length is rejected", [](uint8_t *w) { w[6] = 64; w[7] = 0; }, "counts descriptors");
    expect_rejected("reserved meta byte is rejected", [](uint8_t *w) { w[20] = 1; }, "reserved meta byte 20");
    expect_rejected("lkey above 24 bits is rejected", [](uint8_t *w) { w[48 + 7] = 0x01; }, "bits above 23");
    expect_rejected("local/remote length mismatch is rejected", [](uint8_t *w) { w[48] ^= 1; }, "differs from local length");

    test("a doorbell going backwards is a violation", [] {
        Rig r;
        r.put(r.write(0, 0, 8));
        r.put(r.write(0, 8, 8));
        r.ring();
        r.dev.poll_once();
        r.db = 1;
        r.dev.poll_once();
        CHECK(r.violated("went backwards"), r.all_violations());
    });

    test("a doorbell covering more than max_batch new WQEs is a violation", [] {
        Rig r(16, 4);
        for (int i = 0; i < 5; i++) r.put(r.write(0, i * 8, 8));
        r.ring();
        r.dev.poll_once();
        CHECK(r.violated("more than max_batch 4"), r.all_violations());
    });

    test("a doorbell covering an unwritten slot is a violation", [] {
        Rig r(16, 8);
        r.put(r.write(0, 0, 8));
        r.db = 2;  // slot 1 never written
        r.dev.poll_once();
        CHECK(r.violated("slot 1: meta_desc"), r.all_violations());
    });

    test("a slot overwritten before its completion is a violation", [] {
        Rig r(8, 16);
        for (int i = 0; i < 9; i++) r.put(r.write(0, i * 8, 8));  // slot 8 lands on slot 0
        r.ring();
        r.dev.poll_once();
        CHECK(r.violated("reused before its completion"), r.all_violations());
        CHECK(r.violated("slot 0: phase"), r.all_violations());
    });

    test("more than max_batch WQEs staged past the doorbell is a violation", [] {
        Rig r(16, 2);
        r.put(r.write(0, 0, 8));
        r.ring();
        for (int i = 0; i < 3; i++) r.put(r.write(0, 8 + i * 8, 8));  // written, not rung
        r.dev.poll_once();
        CHECK(r.violated("written past doorbell 1"), r.all_violations());
    });

    // Breaking max_batch is a failure, not only a report: the QP errs as for a malformed WQE.
    test("a max_batch rule broken puts the QP in error: the first WQE fails QP_INTERNAL_ERROR, the rest FLUSHED, nothing moves", [] {
        Rig jump(16, 4);
        for (int i = 0; i < 5; i++) jump.put(jump.write(0, i * 8, 8));
        jump.ring();
        jump.dev.poll_once();
        const std::vector<int> want = {EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR, EFA_IO_COMP_STATUS_FLUSHED,
                                       EFA_IO_COMP_STATUS_FLUSHED, EFA_IO_COMP_STATUS_FLUSHED, EFA_IO_COMP_STATUS_FLUSHED};
        CHECK(jump.reap() == want && jump.dst[0] == 0xA5, "one doorbell over max_batch: " + jump.all_violations());
        Rig staged(16, 2);
        staged.put(staged.write(0, 0, 8));
        staged.ring();
        for (int i = 0; i < 3; i++) staged.put(staged.write(0, 8 + i * 8, 8));  // written, not rung
        staged.dev.poll_once();
        staged.ring();  // the client rings after all: the first WQE it covers carries the error
        staged.dev.poll_once();
        const std::vector<int> want2 = {0, EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR, EFA_IO_COMP_STATUS_FLUSHED,
                                        EFA_IO_COMP_STATUS_FLUSHED};
        CHECK(staged.reap() == want2 && staged.dst[8] == 0xA5, "staged past max_batch: " + staged.all_violations());
        CHECK(staged.dev.qp_in_error(0) && jump.dev.qp_in_error(0), "both QPs in the error state");
    });

    test("NIC errors complete with the EFA status and move no data", [] {
        Rig r(16, 8, 4096);
        efa_gda_rdma_desc bad_lkey = r.write(0, 0, 8);
        bad_lkey.lkey = 0x999;
        efa_gda_rdma_desc oversize = r.write(0, 0, 8192);
        efa_gda_rdma_desc bad_rkey = r.write(0, r.dst.size() - 4, 8);
        efa_gda_rdma_desc bad_ah = r.write(0, 0, 8);
        bad_ah.ah = 9;
        efa_gda_rdma_desc bad_qpn = r.write(0, 0, 8);
        bad_qpn.dest_qpn = 8;
        efa_gda_rdma_desc bad_qkey = r.write(0, 0, 8);
        bad_qkey.qkey = 5;
        for (auto &d : {bad_lkey, oversize, bad_rkey, bad_ah, bad_qpn, bad_qkey}) r.put(d);
        r.ring();
        r.dev.poll_once();
        auto st = r.reap();
        const std::vector<int> want = {EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY, EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH,
                                       EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS, EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH,
                                       EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN, EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE};
        CHECK(st == want, "statuses");
        CHECK(r.dst[0] == 0xA5 && r.dst[r.dst.size() - 1] == 0xA5, "no data moved");
        CHECK(r.dev.violations().empty(), "errors are NIC statuses, not protocol violations: " + r.all_violations());
    });

    test("the encoder writes the fields at the upstream positions", [] {
        efa_gda_rdma_desc d{};
        d.op = EFA_IO_RDMA_WRITE;
        d.has_imm = 1;
        d.imm = 0x01020304;
        d.req_id = 0xBEEF;
        d.dest_qpn = 0x1234;
        d.ah = 0x5678;
        d.qkey = 0x9abcdef0;
        d.local_addr = 0x1122334455667788ull;
        d.lkey = 0xFF00ABCD;  // only 24 bits survive
        d.remote_addr = 0x99aabbccddeeff00ull;
        d.rkey = 0x13579bdf;
        d.length = 4096;
        union efa_gda_wqe_words w;
        efa_gda_build_rdma_wqe(&w, &d, 1);
        const uint8_t *b = reinterpret_cast<const uint8_t *>(&w);
        CHECK(b[0] == 0xEF && b[1] == 0xBE, "req_id @0");
        CHECK(b[2] == (0x80 | 0x10 | 2), "ctrl1 = meta_desc | has_imm | RDMA_WRITE");
        CHECK(b[3] == (0x1 | 0x4 | 0x8 | 0x10), "ctrl2 = phase | first | last | comp_req");
        CHECK(b[4] == 0x34 && b[5] == 0x12, "dest_qp_num @4");
        CHECK(b[6] == 1 && b[7] == 0, "length = 1 descriptor @6");
        CHECK(b[8] == 0x04 && b[11] == 0x01, "immediate @8");
        CHECK(b[12] == 0x78 && b[13] == 0x56, "ah @12");
        CHECK(b[16] == 0xf0 && b[19] == 0x9a, "qkey @16");
        uint32_t v;
        memcpy(&v, b + 32, 4);
        CHECK(v == 4096, "remote length @32");
        memcpy(&v, b + 36, 4);
        CHECK(v == 0x13579bdf, "rkey @36");
        memcpy(&v, b + 40, 4);
        CHECK(v == 0xddeeff00, "remote addr lo @40");
        memcpy(&v, b + 44, 4);
        CHECK(v == 0x99aabbcc, "remote addr hi @44");
        memcpy(&v, b + 48, 4);
        CHECK(v == 4096, "local length @48");
        memcpy(&v, b + 52, 4);
        CHECK(v == 0x00ABCD, "lkey masked to 24 bits @52");
        memcpy(&v, b + 56, 4);
        CHECK(v == 0x55667788, "local addr lo @56");
        memcpy(&v, b + 60, 4);
        CHECK(v == 0x11223344, "local addr hi @60");
        CHECK(efa_gda_sq_phase(15, 4) == 0 && efa_gda_sq_phase(16, 4) == 1 && efa_gda_sq_phase(32, 4) == 0, "SQ phase");
        CHECK(efa_gda_cq_expected_phase(0, 4) == 1 && efa_gda_cq_expected_phase(16, 4) == 0, "CQ phase");
    });


    test("reorder specs parse, and malformed ones are refused", [] {
        Reorder r;
        std::string why;
        CHECK(parse_reorder("large:64K:8", &r, &why) && r.mode == Reorder::Large && r.large_bytes == 65536 && r.after == 8, "large");
        CHECK(parse_reorder("random:42:4", &r, &why) && r.mode == Reorder::Random && r.seed == 42 && r.window == 4, "random");
        CHECK(parse_reorder("random:7", &r, &why) && r.window == 16, "random default window");
        CHECK(parse_reorder("reverse", &r, &why) && r.mode == Reorder::Reverse, "reverse");
        CHECK(parse_reorder("inorder", &r, &why) && r.mode == Reorder::InOrder, "inorder");
        CHECK(to_string(r) == "inorder", "to_string");
        CHECK(parse_reorder("pace:20000", &r, &why) && r.mode == Reorder::Pace && r.pace_us == 20000 && to_string(r) == "pace:20000", "pace");
        for (const char *bad : {"", "large:64K", "large:x:1", "random", "sideways", "reverse:1", "pace", "pace:0"})
            CHECK(!parse_reorder(bad, &r, &why) && why.find("not one of") != std::string::npos, std::string("refused: ") + bad);
    });

    test("large:B:N holds a large write until N later WQEs completed; its data is placed only with its completion", [] {
        Rig r(16, 8, 1 << 20, "large:4096:2");
        r.put(r.write(0, 0, 100000));   // slot 0: large
        r.put(r.write(200000, 200000, 64));  // slot 1
        r.ring();
        r.dev.poll_once();
        auto got = r.reap_any();
        CHECK(got.size() == 1 && got[0].first == 1, "only the small write completed");
        CHECK(r.dst[0] == 0xA5 && r.dst[99999] == 0xA5, "the held write has not placed its data");
        CHECK(memcmp(r.dst.data() + 200000, r.src.data() + 200000, 64) == 0, "the small write's data is placed");
        r.put(r.write(300000, 300000, 64));  // slot 2: the second later WQE releases slot 0 after it
        r.put(r.write(400000, 400000, 64));  // slot 3
        r.ring();
        r.dev.poll_once();
        got = r.reap_any();
        CHECK((got == std::vector<std::pair<int, int>>{{2, 0}, {0, 0}, {3, 0}}), "order: slot 2, then the large slot 0, then 3");
        CHECK(memcmp(r.dst.data(), r.src.data(), 100000) == 0, "the large write's data is placed with its completion");
        CHECK(r.dev.stats().reordered >= 2, "completions overtaking the held one are counted");
        CHECK(r.dev.violations().empty(), r.all_violations());
    });

    test("a held WQE completes at drain() (the NIC completes eventually)", [] {
        Rig r(16, 8, 1 << 20, "large:4096:100");
        r.put(r.write(0, 0, 8192));
        r.ring();
        CHECK(r.dev.poll_once() == 0 && r.reap_any().empty() && r.dst[0] == 0xA5, "held");
        CHECK(r.dev.drain() == 1, "drained");
        auto got = r.reap_any();
        CHECK(got.size() == 1 && got[0].second == 0 && memcmp(r.dst.data(), r.src.data(), 8192) == 0, "completed with its data");
    });

    test("reverse completes each poll's WQEs last first", [] {
        Rig r(16, 8, 1 << 20, "reverse");
        for (int i = 0; i < 4; i++) r.put(r.write(i * 100, i * 100, 50));
        r.ring();
        r.dev.poll_once();
        CHECK((r.reap_any() == std::vector<std::pair<int, int>>{{3, 0}, {2, 0}, {1, 0}, {0, 0}}), "reverse order");
    });

    test("random:SEED:W is a seeded permutation, the same for the same seed", [] {
        auto order = [](const char *spec) {
            Rig r(64, 64, 1 << 20, spec);
            for (int i = 0; i < 32; i++) r.put(r.write(i * 100, i * 100, 50));
            r.ring();
            r.dev.poll_once();
            r.dev.drain();
            std::vector<int> ids;
            for (auto &g : r.reap_any()) ids.push_back(g.first);
            return ids;
        };
        const std::vector<int> a = order("random:1:8"), b = order("random:1:8"), c = order("random:2:8");
        std::vector<int> sorted = a;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int> all(32);
        for (int i = 0; i < 32; i++) all[i] = i;
        CHECK(sorted == all, "every WQE completes exactly once");
        CHECK(a == b, "same seed, same order");
        CHECK(a != c, "another seed, another order");
        CHECK(a != all, "not in doorbell order");
    });

    test("a slot reused while its previous WQE is held is a violation (reordering on)", [] {
        Rig r(8, 8, 1 << 20, "large:4096:100");
        r.put(r.write(0, 0, 8192));  // slot 0, held
        r.ring();
        r.dev.poll_once();
        for (int i = 0; i < 8; i++) {  // slots 1..8: slot 8 is ring position 0 again
            r.put(r.write(0, 10000 + i * 8, 8));
            if (i == 6) {
                r.ring();
                r.dev.poll_once();
            }
        }
        r.ring();
        r.dev.poll_once();
        CHECK(r.violated("slot 8 (ring position 0) reused before its completion"), r.all_violations());
    });

    test("doorbell: 16-bit producer counter wraps cleanly; a value above 16 bits is a violation", [] {
        Rig r(16, 8);
        for (uint32_t n = 0; n < 70000; n += 8) {
            for (int i = 0; i < 8; i++) r.put(r.write(0, (n % 4096) * 8 + i * 8, 8));
            r.ring();
            r.dev.poll_once();
            auto st = r.reap_any();
            CHECK(st.size() == 8, "8 completions per doorbell at " + std::to_string(n));
        }
        CHECK(r.pc > 65536 && r.dev.violations().empty(), "past 2^16 WQEs without violation: " + r.all_violations());
        r.put(r.write(0, 0, 8));
        r.db = r.pc;  // the full 32-bit counter, as efa-dp-direct writes it
        r.dev.poll_once();
        CHECK(r.violated("has bits above 15 set"), r.all_violations());
    });

    test("128-byte WQEs: the same RDMA WQE with a zero tail executes; a non-zero tail is rejected", [] {
        Rig r(16, 8, 1 << 20, "inorder", 128);
        size_t done = 0;
        for (int i = 0; i < 20; i++) {
            r.put(r.write(i * 64, i * 64, 64));
            r.ring();
            r.dev.poll_once();
            done += r.reap_any().size();
        }
        CHECK(done == 20 && memcmp(r.dst.data(), r.src.data(), 20 * 64) == 0, "20 writes through a 128-byte ring");
        CHECK(r.dev.violations().empty(), r.all_violations());
        r.put(r.write(0, 0, 64), [](uint8_t *w) { w[100] = 1; });
        r.ring();
        r.dev.poll_once();
        CHECK(r.violated("byte 100 of a 128-byte RDMA WQE is not zero"), r.all_violations());
    });

    test("RX CQ overrun: a receiver that does not drain is reported, one that drains is not", [] {
        Rig r(16, 8, 1 << 20, "inorder", 64, 4);
        for (int i = 0; i < 6; i++) {
            efa_gda_rdma_desc d = r.write(i * 8, i * 8, 8);
            d.has_imm = 1;
            d.imm = (uint32_t)i;
            r.put(d);
        }
        r.ring();
        r.dev.poll_once();
        CHECK(r.dev.stats().rx_overruns == 2, "2 of 6 immediates overran a 4-entry RX CQ nobody drained");
        CHECK(r.violated("RX CQ overrun"), r.all_violations());
        Rig ok(16, 8, 1 << 20, "inorder", 64, 4);
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < 4; i++) {
                efa_gda_rdma_desc d = ok.write(i * 8, i * 8, 8);
                d.has_imm = 1;
                ok.put(d);
            }
            ok.ring();
            ok.dev.poll_once();
            ok.rx_consumed += 4;  // the receiver takes them
        }
        CHECK(ok.dev.stats().rx_overruns == 0 && ok.dev.violations().empty(), ok.all_violations());
    });

    test("UNKNOWN_PEER: RDMA to a target that has not inserted the initiator fails and moves nothing", [] {
        Rig r;
        r.dev.av_remove(0, 3, 7);
        r.put(r.write(0, 0, 64));
        r.ring();
        r.dev.poll_once();
        auto got = r.reap_any();
        CHECK(got.size() == 1 && got[0].second == EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER, "status UNKNOWN_PEER");
        CHECK(r.dst[0] == 0xA5 && r.dev.stats().unknown_peer == 1, "no data moved");
        r.dev.av_insert(0, 3, 7);
        r.put(r.write(0, 0, 64));
        r.ring();
        r.dev.poll_once();
        got = r.reap_any();
        CHECK(got.size() == 1 && got[0].second == 0 && r.dst[0] == r.src[0], "after the insert the same write succeeds");
    });

    test("QP error: held and later WQEs complete FLUSHED and move nothing", [] {
        Rig r(16, 8, 1 << 20, "large:4096:100");
        r.put(r.write(0, 0, 8192));  // held
        r.ring();
        r.dev.poll_once();
        r.dev.set_qp_error(0);
        r.put(r.write(10000, 10000, 64));
        r.ring();
        r.dev.poll_once();
        r.dev.drain();
        auto got = r.reap_any();
        CHECK(got.size() == 2 && got[0].second == EFA_IO_COMP_STATUS_FLUSHED && got[1].second == EFA_IO_COMP_STATUS_FLUSHED,
              "both completions FLUSHED");
        CHECK(r.dst[0] == 0xA5 && r.dst[10000] == 0xA5 && r.dev.stats().flushed == 2, "no data moved");
        CHECK(r.dev.qp_in_error(0), "the QP stays in error");
    });

    test("a malformed WQE puts the QP in error: the WQEs after it are flushed", [] {
        Rig r;
        r.put(r.write(0, 0, 64), [](uint8_t *w) { w[3] &= ~0x10; });  // comp_req clear
        r.put(r.write(100, 100, 64));
        r.ring();
        r.dev.poll_once();
        auto got = r.reap_any();
        CHECK(got.size() == 2 && got[0].second == EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR &&
                  got[1].second == EFA_IO_COMP_STATUS_FLUSHED,
              "internal error, then flushed");
        CHECK(r.dst[100] == 0xA5, "the flushed write moved nothing");
    });

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
