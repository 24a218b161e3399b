// The emulated NIC's endpoint address: the same 32-byte shape as the real EFA provider's (a 16-byte GID, a
// 16-bit QP number, a 32-bit qkey, padding to 32 bytes), so code that sizes or prints EFA addresses sees what
// it would see on a real NIC.
//
// The GID is made unique per (process, NIC): fe80:0000:0000:00<nic>:<pid>:<nonce>. A real NIC has one GID per
// device and many QPs; here every process is its own "device instance", because QP numbers cannot be allocated
// across processes without a coordinator. The wire uses the GID to find the peer's inbox.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace efaemu {

struct EpAddr {
    uint8_t gid[16];
    uint16_t qpn;
    uint16_t pad;
    uint32_t qkey;
    uint64_t reserved;  // zero; keeps the real provider's 32-byte length (its struct ends in a pointer)
};
static_assert(sizeof(EpAddr) == 32, "EFA endpoint addresses are 32 bytes");

constexpr size_t kAddrLen = sizeof(EpAddr);

inline void make_gid(uint8_t gid[16], int nic, uint32_t pid, uint32_t nonce) {
    memset(gid, 0, 16);
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[7] = (uint8_t)nic;
    memcpy(gid + 8, &pid, 4);
    memcpy(gid + 12, &nonce, 4);
}

inline bool gid_is_ours(const uint8_t gid[16]) {
    static const uint8_t zero[5] = {0, 0, 0, 0, 0};
    return gid[0] == 0xfe && gid[1] == 0x80 && memcmp(gid + 2, zero, 5) == 0;
}
inline int gid_nic(const uint8_t gid[16]) { return gid[7]; }
inline uint32_t gid_pid(const uint8_t gid[16]) {
    uint32_t p;
    memcpy(&p, gid + 8, 4);
    return p;
}

inline std::string gid_hex(const uint8_t gid[16]) {
    char buf[33];
    for (int i = 0; i < 16; i++) snprintf(buf + 2 * i, 3, "%02x", gid[i]);
    return std::string(buf, 32);
}

// The POSIX shared-memory name of the inbox that serves this GID (one per process and NIC).
inline std::string inbox_name(const uint8_t gid[16]) { return "/efaemu-" + gid_hex(gid); }

// "efaemu0:pid1234": how a peer is named in the statistics (the process behind a GID, on its NIC).
inline std::string peer_key(const uint8_t gid[16]) {
    return "efaemu" + std::to_string(gid_nic(gid)) + ":pid" + std::to_string(gid_pid(gid));
}

// Printed form (fi_av_straddr): the GID as an IPv6 address, then QPN and qkey, like the real provider's.
inline std::string addr_str(const EpAddr &a) {
    char buf[96];
    int n = 0;
    for (int i = 0; i < 16; i += 2) n += snprintf(buf + n, sizeof buf - n, "%s%x", i ? ":" : "", (a.gid[i] << 8) | a.gid[i + 1]);
    snprintf(buf + n, sizeof buf - n, " qpn:%u qkey:0x%x", a.qpn, a.qkey);
    return buf;
}

// Identity of one endpoint incarnation: a re-created EP with the same QPN gets a new qkey.
inline bool same_ep(const EpAddr &a, const EpAddr &b) {
    return memcmp(a.gid, b.gid, 16) == 0 && a.qpn == b.qpn && a.qkey == b.qkey;
}

}  // namespace efaemu
