/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run. */
#ifndef NVSHMEM_EFA_TRANSPORT_EFA_GDA_H
#define NVSHMEM_EFA_TRANSPORT_EFA_GDA_H

/* Forward declarations only: libfabric.cpp includes this after NVSHMEM's and libfabric's own headers, and
 * this header must not pull either in a second way. */
struct nvshmem_transport;
struct fid_fabric;
struct fid_domain;
struct fi_info;

/* The run-time switch: GDA is attempted only when this is 1/y/yes/on/true. */
#define NVSHMEM_EFA_GDA_ENABLE_ENV "NVSHMEM_EFA_GDA_ENABLE"

int nvshmemt_efa_gda_enabled(void);

/* Called by the patched nvshmemt_libfabric_connect_endpoints once every endpoint is enabled and the
 * addresses are exchanged, only for the EFA provider and only when the switch is on. Returns 0 when GDA is
 * active; otherwise GDA stays off, nvshmemx_efa_gda_status() says why, and NVSHMEM's own endpoints are
 * untouched. */
int nvshmemt_efa_gda_init(struct nvshmem_transport *t, struct fid_fabric *fabric,
                          struct fid_domain *domain, struct fi_info *info);

/* Called by the patched nvshmemt_libfabric_finalize before any endpoint, CQ, AV, domain or fabric is
 * closed. Safe to call when init never ran or failed. */
void nvshmemt_efa_gda_fini(void);

/* Exported from the transport (version script pattern nvshmemx_efa_gda_*): a one-line account of the
 * GDA state, for applications and the nvshmem-efa probe to dlsym. */
extern "C" const char *nvshmemx_efa_gda_status(void);

#endif
