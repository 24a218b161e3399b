/* Fixture written for nvshmem-efa tests: the shape of NVSHMEM 3.4's libfabric transport state. */
#ifndef MINI_LIBFABRIC_H
#define MINI_LIBFABRIC_H
#include <stdint.h>
#include <memory>
#include <vector>
#include "rdma/fabric.h"
#include "rdma/fi_domain.h"
#include "rdma/fi_endpoint.h"

#define NVSHMEMT_LIBFABRIC_DEFAULT_NUM_EPS 2
#define NVSHMEMT_LIBFABRIC_EP_LEN 128

typedef enum {
    NVSHMEMT_LIBFABRIC_PROVIDER_VERBS = 0,
    NVSHMEMT_LIBFABRIC_PROVIDER_SLINGSHOT,
    NVSHMEMT_LIBFABRIC_PROVIDER_EFA
} nvshmemt_libfabric_provider;

typedef struct {
    struct fid_ep *endpoint;
    struct fid_cq *cq;
    struct fid_cntr *counter;
} nvshmemt_libfabric_endpoint_t;

typedef struct {
    char name[NVSHMEMT_LIBFABRIC_EP_LEN];
} nvshmemt_libfabric_ep_name_t;

typedef struct {
    struct fi_info *prov_info;
    std::vector<struct fid_fabric *> fabrics;
    std::vector<struct fid_domain *> domains;
    struct fid_av *addresses[NVSHMEMT_LIBFABRIC_DEFAULT_NUM_EPS];
    std::vector<std::unique_ptr<nvshmemt_libfabric_endpoint_t> > eps;
    nvshmemt_libfabric_provider provider;
    void *recv_buf;
} nvshmemt_libfabric_state_t;
typedef struct {
    struct fid_mr *mr;
    uint64_t key;
    void *local_desc;
} nvshmemt_libfabric_mem_handle_ep_t;

typedef struct {
    nvshmemt_libfabric_mem_handle_ep_t hdls[NVSHMEMT_LIBFABRIC_DEFAULT_NUM_EPS];
    void *buf;
} nvshmemt_libfabric_mem_handle_t;

#endif
