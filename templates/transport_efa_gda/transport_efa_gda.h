/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run. */
#ifndef NVSHMEM_EFA_TRANSPORT_EFA_GDA_H
#define NVSHMEM_EFA_TRANSPORT_EFA_GDA_H

#include <stddef.h>

#include "nvshmemx_efa_gda.h"

/* Forward declaration only: libfabric.cpp includes this after libfabric's own headers. */
struct fi_info;

/* The run-time switch: GDA is attempted only when this is 1/y/yes/on/true on every PE. */
#define NVSHMEM_EFA_GDA_ENABLE_ENV "NVSHMEM_EFA_GDA_ENABLE"
/* Optional: at most this many rails per PE (1 .. NVSHMEMX_EFA_GDA_MAX_RAILS; default: every NIC NVSHMEM gives). */
#define NVSHMEM_EFA_GDA_RAILS_ENV "NVSHMEM_EFA_GDA_RAILS"
/* Optional: owned queues per rail (0 .. NVSHMEM_EFA_GDA_MAX_OWNED, default 0): each an efa-direct endpoint of
 * its own with a 2 MiB GPU CQ, for device code that keeps a queue per thread (efa_gda_own). Every PE runs as
 * many as the PE with the fewest. */
#define NVSHMEM_EFA_GDA_OWNED_QUEUES_ENV "NVSHMEM_EFA_GDA_OWNED_QUEUES"
#define NVSHMEM_EFA_GDA_MAX_OWNED 32
/* Optional: the bound, in whole milliseconds (1 .. 3600000, default 5000), on every GPU wait of the device code
 * (slot claim, SQ room, doorbell turn, quiet, owned-queue room, rx poll); written to the device state as
 * timeout_ns. A malformed value keeps GDA from starting, with the reason. */
#define NVSHMEM_EFA_GDA_TIMEOUT_MS_ENV "NVSHMEM_EFA_GDA_TIMEOUT_MS"
#define NVSHMEM_EFA_GDA_TIMEOUT_MS_DEFAULT 5000
#define NVSHMEM_EFA_GDA_TIMEOUT_MS_MAX 3600000

/* NVSHMEM's bootstrap, passed in by the patched connect_endpoints so this file needs no NVSHMEM header. */
typedef struct {
    int my_pe;
    int n_pes;
    int (*allgather)(const void *in, void *out, int bytes, void *ctx);
    void *ctx;
} nvshmemt_efa_gda_bootstrap_t;

/* Whether this PE takes part in GDA start-up. With GDA compiled in: always, because the switch is agreed
 * inside the collective start-up (a PE deciding alone would leave the others in an all-gather). Compiled
 * out: whether the switch asks for GDA (start-up then only explains why it cannot run). */
int nvshmemt_efa_gda_enabled(void);

/* Called by the patched nvshmemt_libfabric_connect_endpoints on every PE once NVSHMEM's endpoints are up,
 * only for the EFA provider. Collective: every PE calls it, and all PEs agree whether GDA is active and on how
 * many rails. rail_infos[0 .. n_rails) are NVSHMEM's fi_infos of the PE's NICs (multi-rail NVSHMEM 3.6+: one
 * per selected domain, without repeating the first NIC's second domain): GDA opens its own efa-direct fabric,
 * domain, endpoint, AV and GPU CQs on each of those NICs and never touches NVSHMEM's. The first all-gather
 * carries each PE's switch, its usable rails and their GDA addresses (a switch that differs between PEs turns
 * GDA off everywhere, with the reason); a second one after the AV inserts is the barrier that makes every
 * target know every initiator before RMA.
 *
 * The rail rule (every PE applies it to the same all-gathered facts): a NIC named twice, past
 * NVSHMEMX_EFA_GDA_MAX_RAILS or NVSHMEM_EFA_GDA_RAILS, or that cannot be opened is left out with the reason;
 * GDA runs on as many rails as the PE with the fewest usable ones has (rail k of every PE is its k-th usable
 * NIC), and is off everywhere when some PE has none. Every left-out rail is named with why in
 * nvshmemx_efa_gda_status() and on stderr. Returns 0 when GDA is active or no PE asked for it; otherwise -1,
 * and nvshmemx_efa_gda_status() says why. */
int nvshmemt_efa_gda_init_rails(const struct fi_info *const *rail_infos, int n_rails, const nvshmemt_efa_gda_bootstrap_t *boot);

/* One rail: nvshmemt_efa_gda_init_rails(&nvshmem_info, 1, boot), for NVSHMEM's single-rail libfabric
 * transport (3.3 .. 3.5), whose nvshmem_info is the one NIC it uses. */
int nvshmemt_efa_gda_init(const struct fi_info *nvshmem_info, const nvshmemt_efa_gda_bootstrap_t *boot);

/* 1 once init succeeded on every PE. */
int nvshmemt_efa_gda_active(void);

#ifdef __cplusplus
extern "C" {
#endif
/* Whether GDA signals may be used: 1 when GDA is active and the GPU of every PE orders GPUDirect RDMA writes
 * (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING >= CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER, the value
 * NVSHMEM's IBGDA needs before it skips its consistency step), so a kernel that sees a signal an RDMA write
 * placed also sees the payload an earlier write to it placed. 0 otherwise: send signals through NVSHMEM. The
 * answer is the same on every PE (agreed at start-up). why, when not NULL, gets a one-line reason (never NULL;
 * the status line when GDA is off), valid until finalize. */
int nvshmemx_efa_gda_signals_ordered(const char **why);
/* Whether an RDMA write GDA posts lands in the target buffer only once: 1 when GDA is active and every PE's every
 * rail was granted FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (fi_efa(7): "delivered to the target buffer only
 * once"), 0 otherwise (a late copy may land again: a consumed, zeroed signal could come back). Agreed at start-up,
 * the same on every PE; why as for nvshmemx_efa_gda_signals_ordered. */
int nvshmemx_efa_gda_writes_delivered_once(const char **why);
#ifdef __cplusplus
}
#endif

/* Called by the patched nvshmemt_libfabric_get_mem_handle after NVSHMEM registered a remotely accessible
 * region (a piece of the symmetric heap, at most 2 GiB each), which NVSHMEM does on every PE in the same
 * order. Registers it on every GDA rail's domain (GPU memory as FI_HMEM_CUDA, host memory as
 * FI_HMEM_SYSTEM), exchanges base address and each rail's rkey with all PEs (one all-gather) and publishes a
 * new region table, which grows with the heap. A region some PE could not register on a rail stays in the
 * table marked unreachable on that rail: the failure is printed to stderr and kept in the status, and device
 * operations on it on that rail fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE. NVSHMEM's own
 * registration is unaffected. */
void nvshmemt_efa_gda_register_region(void *buf, size_t length);

/* Called by the patched nvshmemt_libfabric_release_mem_handle. Local only. */
void nvshmemt_efa_gda_release_region(void *buf);

/* Called by the patched nvshmemt_libfabric_finalize before NVSHMEM closes any libfabric object. Safe to
 * call when init never ran or failed. */
void nvshmemt_efa_gda_fini(void);

#endif
