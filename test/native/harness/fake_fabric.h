// What the GDA host code asked of the fake efa-direct provider (fake_fabric.cpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

struct FakeCqRequest {
    size_t size;          // fi_cq_attr.size
    uint64_t length;      // ext_mem_dmabuf.length
    uint64_t offset;      // ext_mem_dmabuf.offset
};

struct FakeFabricLog {
    size_t hint_inject_size = 0;
    std::string hint_fabric;
    uint64_t hint_mode = 0, hint_mr_mode = 0;
    int av_inserts = 0;
    int delivered_once_asked = 0;  // fi_setopt(FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES) calls
    int endpoints = 0, endpoints_closed = 0;
    bool enabled = false;
    std::vector<uint64_t> cq_binds;  // flags of each CQ bound to the endpoint
    std::vector<int> mr_ifaces;      // fi_hmem_iface of each registration
    std::vector<FakeCqRequest> cq_requests;
    std::vector<std::string> getinfo_domains;  // the domain name each successful fi_getinfo asked for
};

extern FakeFabricLog fake_fabric;
