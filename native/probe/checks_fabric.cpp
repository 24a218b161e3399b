// libfabric checks: version, the EFA provider's fabrics (efa vs efa-direct) and capabilities, and whether
// the GDA ops exist and an efa-direct endpoint hands out its send queue (the GDA path of nvshmem-efa).
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#if defined(__has_include)
#if __has_include(<rdma/fi_ext_efa.h>)
#include <rdma/fi_ext_efa.h>
#endif
#endif

#include <link.h>

#include <cstring>
#include <set>
#include <string>

#include "probe.h"

namespace probe {
namespace {

std::string version_string(uint32_t v) { return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v)); }

fi_info *efa_hints(bool direct) {
    fi_info *h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup("efa");
    h->ep_attr->type = FI_EP_RDM;
    if (direct) {
        h->fabric_attr->name = strdup("efa-direct");
        h->caps = FI_MSG | FI_RMA | FI_HMEM;
        h->mode = FI_CONTEXT | FI_CONTEXT2;
        h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_HMEM;
    }
    return h;
}

// The loaded object whose file name is libfabric.so*, by its real path (libfabric.so.1 -> libfabric.so.1.26.0).
int find_libfabric(dl_phdr_info *info, size_t, void *out) {
    const char *name = info->dlpi_name;
    const char *base = name ? strrchr(name, '/') : nullptr;
    if (!base || strncmp(base + 1, "libfabric.so", 12) != 0) return 0;
    *static_cast<std::string *>(out) = real_path(name);
    return 1;
}

}  // namespace

void fabric_checks(Context &c) {
    const uint32_t v = fi_version();
    c.libfabric_version = version_string(v);
    dl_iterate_phdr(find_libfabric, &c.libfabric_path);
    c.add("libfabric", "libfabric", Status::Pass,
          "runtime " + version_string(v) + (c.libfabric_path.empty() ? "" : " loaded from " + c.libfabric_path) + ", headers " +
              std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION));

    fi_info *hints = efa_hints(false), *info = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 18), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc || !info) {
        const bool none = c.efa_devices.empty();
        c.add("efa-provider", "libfabric EFA provider", none ? Status::Skip : Status::Fail,
              std::string("fi_getinfo(prov=efa): ") + fi_strerror(-rc) + (none ? " (no EFA device)" : ""),
              none ? "" : "use the libfabric of the EFA installer (/opt/amazon/efa), built with the efa provider");
#ifndef FI_EFA_GDA_OPS
        c.add("gda-ops", "EFA GDA (efa-direct, FI_EFA_GDA_OPS)", Status::Skip,
              "skip: libfabric < 2.3 (the probe was built against headers without FI_EFA_GDA_OPS)");
#else
        c.add("gda-ops", "EFA GDA (efa-direct, FI_EFA_GDA_OPS)", Status::Skip, "no EFA provider");
#endif
        return;
    }
    std::set<std::string> fabrics, domains;
    bool rma = false, hmem = false;
    size_t max_msg = 0, inject = 0;
    std::string mr_mode;
    for (fi_info *i = info; i; i = i->next) {
        fabrics.insert(i->fabric_attr->name);
        domains.insert(i->domain_attr->name);
        rma |= (i->caps & FI_RMA) != 0;
        hmem |= (i->caps & FI_HMEM) != 0;
        if (std::string(i->fabric_attr->name) == "efa-direct") {
            max_msg = i->ep_attr->max_msg_size;
            inject = i->tx_attr->inject_size;
            const int m = i->domain_attr->mr_mode;
            mr_mode = std::string(m & FI_MR_LOCAL ? "LOCAL " : "") + (m & FI_MR_VIRT_ADDR ? "VIRT_ADDR " : "") + (m & FI_MR_ALLOCATED ? "ALLOCATED " : "") +
                      (m & FI_MR_PROV_KEY ? "PROV_KEY " : "") + (m & FI_MR_HMEM ? "HMEM" : "");
        }
    }
    fi_freeinfo(info);
    std::string fl;
    for (auto &f : fabrics) fl += (fl.empty() ? "" : ", ") + f;
    const bool direct = fabrics.count("efa-direct") > 0;
    c.add("efa-provider", "libfabric EFA provider", direct && rma && hmem ? Status::Pass : Status::Warn,
          std::to_string(domains.size()) + " domain(s); fabrics: " + fl + "; FI_RMA " + (rma ? "yes" : "no (device lacks RDMA read+write)") +
              ", FI_HMEM " + (hmem ? "yes" : "no") +
              (max_msg ? "; efa-direct max_msg_size " + std::to_string(max_msg) + ", inject_size " + std::to_string(inject) + ", mr_mode " + trim(mr_mode) : ""),
          direct ? "" : "no efa-direct fabric: NVSHMEM 3.5+ and GDA need libfabric >= 2.1 (GDA: >= 2.3.0)");

#ifndef FI_EFA_GDA_OPS
    c.add("gda-ops", "EFA GDA (efa-direct, FI_EFA_GDA_OPS)", Status::Skip,
          "skip: libfabric < 2.3 (the probe was built against headers without FI_EFA_GDA_OPS)",
          "rebuild the probe against libfabric >= 2.3.0 (nvshmem-efa probe --libfabric-home DIR)");
#else
    if (!direct) {
        c.add("gda-ops", "EFA GDA (efa-direct, FI_EFA_GDA_OPS)", Status::Skip, "no efa-direct fabric");
        return;
    }
    fi_info *dh = efa_hints(true), *di = nullptr;
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;
    fid_av *av = nullptr;
    fid_cq *cq = nullptr;
    fid_ep *ep = nullptr;
    fi_efa_ops_gda *ops = nullptr;
    std::string ev, fix;
    Status st = Status::Fail;
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, dh, &di);
    fi_freeinfo(dh);
    fi_av_attr av_attr = {};
    av_attr.type = FI_AV_TABLE;
    fi_cq_attr cq_attr = {};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = FI_WAIT_NONE;
    if (rc) ev = std::string("fi_getinfo(efa-direct): ") + fi_strerror(-rc);
    else if ((rc = fi_fabric(di->fabric_attr, &fabric, nullptr)) || (rc = fi_domain(fabric, di, &domain, nullptr)))
        ev = std::string("opening the efa-direct domain: ") + fi_strerror(-rc);
    else if ((rc = fi_open_ops(&domain->fid, FI_EFA_GDA_OPS, 0, (void **)&ops, nullptr)))
        ev = std::string("fi_open_ops(FI_EFA_GDA_OPS): ") + fi_strerror(-rc), fix = "libfabric >= 2.3.0 on an efa-direct domain";
    else if ((rc = fi_av_open(domain, &av_attr, &av, nullptr)) || (rc = fi_cq_open(domain, &cq_attr, &cq, nullptr)) ||
             (rc = fi_endpoint(domain, di, &ep, nullptr)) || (rc = fi_ep_bind(ep, &av->fid, 0)) ||
             (rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) || (rc = fi_enable(ep)))
        ev = std::string("creating an efa-direct endpoint: ") + fi_strerror(-rc);
    else {
        fi_efa_wq_attr sq = {}, rq = {};
        uint8_t pad[128] = {};  // newer libfabric appends fields to fi_efa_wq_attr
        (void)pad;
        fi_efa_cq_attr ca = {};
        if ((rc = ops->query_qp_wqs(ep, &sq, &rq)))
            ev = std::string("query_qp_wqs: ") + fi_strerror(-rc), fix = "rdma-core >= 59 under libfabric (efadv_query_qp_wqs)";
        else if ((rc = ops->query_cq(cq, &ca)))
            ev = std::string("query_cq: ") + fi_strerror(-rc);
        else {
            ev = "SQ " + std::to_string(sq.num_entries) + " x " + std::to_string(sq.entry_size) + " B, max_batch " +
                 std::to_string(sq.max_batch) + "; CQ " + std::to_string(ca.num_entries) + " x " + std::to_string(ca.entry_size) + " B";
            const std::string map = try_gpu_iomemory_map(sq.doorbell, sizeof(uint32_t));
            if (map.empty()) {
                st = Status::Pass;
                ev += "; SQ doorbell page mapped for the GPU (IOMEMORY|DEVICEMAP)";
            } else {
                ev += "; mapping the SQ doorbell page for the GPU failed: " + map;
                fix = "NVreg_RegistryDwords=\"PeerMappingOverride=1;\" for the nvidia module, and run privileged (CAP_SYS_ADMIN) for IOMEMORY registration";
            }
        }
    }
    if (ep) fi_close(&ep->fid);
    if (cq) fi_close(&cq->fid);
    if (av) fi_close(&av->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (di) fi_freeinfo(di);
    c.add("gda-ops", "EFA GDA (efa-direct, FI_EFA_GDA_OPS)", st, ev, fix);
#endif
}

}  // namespace probe
