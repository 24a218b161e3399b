/* Test-only stand-in for libfabric's <rdma/fi_ext_efa.h> (v2.3.0 GDA ABI), written for nvshmem-efa from
 * docs/research/efa_gda.md §1.3-1.4. It lets CI compile the GDA host code against a libfabric that predates
 * GDA (Debian's 1.17). Never installed; test/efa_abi/abi_check.sh compares it with the real header. */
#ifndef _FI_EXT_EFA_H_
#define _FI_EXT_EFA_H_

#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#define FI_EFA_DOMAIN_OPS "efa domain ops"
#define FI_EFA_GDA_OPS "efa gda ops"

enum {
    FI_EFA_CQ_INIT_FLAGS_EXT_MEM_DMABUF = 1 << 0,
};

struct fi_efa_wq_attr {
    uint8_t *buffer;
    uint32_t entry_size;
    uint32_t num_entries;
    uint32_t *doorbell;
    uint32_t max_batch;
};

struct fi_efa_cq_attr {
    uint8_t *buffer;
    uint32_t entry_size;
    uint32_t num_entries;
};

struct fi_efa_cq_init_attr {
    uint64_t flags;
    struct {
        uint8_t *buffer;
        uint64_t length;
        uint64_t offset;
        uint32_t fd;
    } ext_mem_dmabuf;
};

struct fi_efa_ops_gda {
    int (*query_addr)(struct fid_ep *ep_fid, fi_addr_t addr, uint16_t *ahn, uint16_t *remote_qpn, uint32_t *remote_qkey);
    int (*query_qp_wqs)(struct fid_ep *ep_fid, struct fi_efa_wq_attr *sq_attr, struct fi_efa_wq_attr *rq_attr);
    int (*query_cq)(struct fid_cq *cq_fid, struct fi_efa_cq_attr *cq_attr);
    int (*cq_open_ext)(struct fid_domain *domain_fid, struct fi_cq_attr *attr, struct fi_efa_cq_init_attr *efa_cq_init_attr,
                       struct fid_cq **cq_fid, void *context);
    uint64_t (*get_mr_lkey)(struct fid_mr *mr);
};

#endif
