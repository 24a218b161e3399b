/* Test-only stand-in for templates/transport_efa_gda/transport_efa_gda.h: the host API the patched
 * libfabric.cpp calls, including nvshmemt_efa_gda_init_rails, whose definition lives with the GDA transport.
 * multi_rail_hooks.cpp defines these to record what the hooks did. */
#ifndef NVSHMEM_EFA_TRANSPORT_EFA_GDA_H
#define NVSHMEM_EFA_TRANSPORT_EFA_GDA_H
#include <stddef.h>

struct fi_info;

typedef struct {
    int my_pe;
    int n_pes;
    int (*allgather)(const void *in, void *out, int bytes, void *ctx);
    void *ctx;
} nvshmemt_efa_gda_bootstrap_t;

int nvshmemt_efa_gda_enabled(void);
int nvshmemt_efa_gda_init(const struct fi_info *nvshmem_info, const nvshmemt_efa_gda_bootstrap_t *boot);
int nvshmemt_efa_gda_init_rails(const struct fi_info *const *rail_infos, int n_rails, const nvshmemt_efa_gda_bootstrap_t *boot);
int nvshmemt_efa_gda_active(void);
void nvshmemt_efa_gda_register_region(void *buf, size_t length);
void nvshmemt_efa_gda_release_region(void *buf);
void nvshmemt_efa_gda_fini(void);
const char *nvshmemx_efa_gda_status(void);

#endif
