/*
 * Fixture written for nvshmem-efa tests: the shape of the multi-rail libfabric transport state (AWS's NVSHMEM
 * 3.5.7 branch devel-aws-2025-11-25, the layout NVSHMEM 3.6+ took up). Every per-domain object is a vector
 * entry: domain 0 is the host domain on the PE's first NIC, domains 1..N are one proxy domain per selected NIC.
 */
#ifndef MINI_LIBFABRIC_H
#define MINI_LIBFABRIC_H
#include <stdint.h>
#include <vector>
#include "rdma/fabric.h"
#include "rdma/fi_domain.h"
#include "rdma/fi_endpoint.h"

#define NVSHMEMT_LIBFABRIC_DOMAIN_LEN 32
#define NVSHMEMT_LIBFABRIC_EP_LEN 128
/* The memory handle has one slot per domain, which caps the NICs a PE can use. */
#define NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE 16
#define NVSHMEMT_LIBFABRIC_PROXY_EP_IDX 1

typedef enum {
    NVSHMEMT_LIBFABRIC_PROVIDER_VERBS = 0,
    NVSHMEMT_LIBFABRIC_PROVIDER_SLINGSHOT,
    NVSHMEMT_LIBFABRIC_PROVIDER_EFA
} nvshmemt_libfabric_provider;

typedef struct {
    char name[NVSHMEMT_LIBFABRIC_DOMAIN_LEN];
} nvshmemt_libfabric_domain_name_t;

typedef struct {
    char name[NVSHMEMT_LIBFABRIC_EP_LEN];
} nvshmemt_libfabric_ep_name_t;

typedef struct {
    struct fid_ep *endpoint;
    struct fid_cq *cq;
    struct fid_cntr *counter;
    int domain_index;
} nvshmemt_libfabric_endpoint_t;

typedef struct {
    struct fi_info *all_prov_info;
    std::vector<struct fi_info *> prov_infos;
    std::vector<struct fid_fabric *> fabrics;
    std::vector<struct fid_domain *> domains;
    std::vector<struct fid_av *> addresses;
    std::vector<nvshmemt_libfabric_endpoint_t *> eps;

    nvshmemt_libfabric_domain_name_t *domain_names;
    int num_domains;
    nvshmemt_libfabric_provider provider;

    int max_nic_per_pe;
    int num_selected_devs;
    int num_selected_domains;
    int cur_proxy_ep_index;
} nvshmemt_libfabric_state_t;

typedef struct {
    struct fid_mr *mr;
    uint64_t key;
    void *local_desc;
} nvshmemt_libfabric_mem_handle_ep_t;

typedef struct {
    void *buf;
    nvshmemt_libfabric_mem_handle_ep_t hdls[1 + NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE];
} nvshmemt_libfabric_mem_handle_t;

#endif
