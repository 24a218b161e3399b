/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * This release carries the integration only: the switch, the hooks NVSHMEM calls, and the exported status.
 * The GDA data path itself is not implemented yet, and init says so at run time instead of pretending. */
#include "transport_efa_gda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char efa_gda_status[256] = "EFA GDA off: not requested (set " NVSHMEM_EFA_GDA_ENABLE_ENV "=1)";

int nvshmemt_efa_gda_enabled(void) {
    const char *v = getenv(NVSHMEM_EFA_GDA_ENABLE_ENV);
    if (v == NULL) return 0;
    return strcmp(v, "1") == 0 || strcasecmp(v, "y") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0;
}

int nvshmemt_efa_gda_init(struct nvshmem_transport *t, struct fid_fabric *fabric,
                          struct fid_domain *domain, struct fi_info *info) {
    (void)t;
    (void)fabric;
    (void)domain;
    (void)info;
    snprintf(efa_gda_status, sizeof(efa_gda_status),
             "EFA GDA not implemented in this nvshmem-efa release; NVSHMEM keeps its libfabric "
             "proxy path");
    fprintf(stderr, "NVSHMEM-EFA WARN: %s\n", efa_gda_status);
    return -1;
}

/* Nothing to release: init acquires no resource in this release. */
void nvshmemt_efa_gda_fini(void) {}

extern "C" const char *nvshmemx_efa_gda_status(void) { return efa_gda_status; }
