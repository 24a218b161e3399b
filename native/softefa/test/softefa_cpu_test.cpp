// CPU tests of the software EFA: a CPU writer builds WQEs with the same encoder the GPU uses
// (efa_gda_build_rdma_wqe) and rings the doorbell; the model must execute correct streams and flag every
// protocol violation. Prints "ok <name>" / "FAIL <name>: <why>" and exits non-zero on a failure.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

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
    uint32_t entries, max_batch;
    std::vector<uint8_t> sq, cq, rx_cq, src, dst;
    uint32_t db = 0, pc = 0, cq_head = 0, rx_head = 0;
    static constexpr uint32_t kLkey = 0x12345, kRkey = 0xabcde;

    Rig(uint32_t n = 16, uint32_t batch = 8, uint64_t max_rdma = 1 << 20)
        : entries(n), max_batch(batch), sq(n * 64), cq(n * 32), rx_cq(n * 32), src(1 << 22), dst(1 << 22) {
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
        c.rx_cq_entries = n;
        c.rx_cq_entry_size = 32;
        c.qpn = 7;
        c.ah = 3;
        c.qkey = 0x1111;
        c.max_rdma_size = max_rdma;
        dev.add_qp(c);
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
        uint8_t *slot = sq.data() + (pc & (entries - 1)) * 64;
        memcpy(slot, &w, 64);
        if (mutate) mutate(slot);
        pc++;
    }
    void ring() { db = pc; }
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

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
