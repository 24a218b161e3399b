/*
 * Runs the hooks nvshmem-efa put into the multi-rail fixture (test/golden/nvshmem/multi-rail, patched) against a
 * fake libfabric and a recording GDA API, and prints what they did, one line per event: which rails
 * init_rails got and in which order, whether registration hooks ran after NVSHMEM's own work on every domain,
 * and whether fini ran before NVSHMEM freed or closed anything. Written for nvshmem-efa's tests.
 */
#include <stdio.h>
#include <string.h>
#include <string>
#include <vector>

#include "libfabric.cpp"

namespace {
int regattr_calls, mr_closes, closes, freeinfos;
int fail_enable_at = -1, endpoints_made;
int init_rails_result;

/* ---- the GDA API, recording ---- */
int allgather_adapter_check(const nvshmemt_efa_gda_bootstrap_t *boot) {
    int in = 41 + boot->my_pe, out = 0;
    return boot->allgather(&in, &out, sizeof in, boot->ctx) == 0 && out == in;
}
}  // namespace

int nvshmemt_efa_gda_enabled(void) { return 1; }
int nvshmemt_efa_gda_init(const struct fi_info *, const nvshmemt_efa_gda_bootstrap_t *) {
    printf("  nvshmemt_efa_gda_init (single-rail API)\n");
    return 0;
}
int nvshmemt_efa_gda_init_rails(const struct fi_info *const *rails, int n, const nvshmemt_efa_gda_bootstrap_t *boot) {
    printf("  init_rails n=%d:", n);
    for (int i = 0; i < n; i++) printf(" %s", rails[i]->nic->device_attr->name);
    printf("; pe %d of %d, all-gather adapter %s\n", boot->my_pe, boot->n_pes, allgather_adapter_check(boot) ? "ok" : "BROKEN");
    return init_rails_result;
}
int nvshmemt_efa_gda_active(void) { return 1; }
void nvshmemt_efa_gda_register_region(void *, size_t length) {
    printf("  register_region %zu bytes after %d fi_mr_regattr\n", length, regattr_calls);
}
void nvshmemt_efa_gda_release_region(void *) { printf("  release_region after %d MR closes\n", mr_closes); }
void nvshmemt_efa_gda_fini(void) { printf("  fini after %d fi_freeinfo, %d fi_close\n", freeinfos, closes); }
const char *nvshmemx_efa_gda_status(void) { return "EFA GDA is off (stub)"; }
int nvshmemt_common_ok(void) { return 1; }

/* ---- a fake libfabric: every object succeeds, closes are counted ---- */
namespace {
struct fi_ops obj_ops, mr_ops, ep_ops;
struct fi_ops_fabric fabric_ops;
struct fi_ops_domain domain_ops;
struct fi_ops_mr domain_mr_ops;
struct fi_ops_av av_ops;
struct fi_ops_cm ep_cm;

int obj_close(struct fid *) { return ++closes, 0; }
int mr_close(struct fid *) { return ++closes, ++mr_closes, 0; }
int ep_bind(struct fid *, struct fid *, uint64_t) { return 0; }
int ep_control(struct fid *, int command, void *) {
    return command == FI_ENABLE && endpoints_made - 1 == fail_enable_at ? -FI_EIO : 0;
}
int ep_getname(fid_t, void *addr, size_t *len) {
    snprintf((char *)addr, *len, "ep%d", endpoints_made);
    *len = 16;
    return 0;
}
int av_insert(struct fid_av *, const void *, size_t count, fi_addr_t *, uint64_t, void *) { return (int)count; }
int av_open(struct fid_domain *, struct fi_av_attr *, struct fid_av **av, void *) {
    *av = new fid_av();
    (*av)->fid.ops = &obj_ops;
    (*av)->ops = &av_ops;
    return 0;
}
int endpoint(struct fid_domain *, struct fi_info *, struct fid_ep **ep, void *) {
    *ep = new fid_ep();
    (*ep)->fid.ops = &ep_ops;
    (*ep)->cm = &ep_cm;
    endpoints_made++;
    return 0;
}
int mr_regattr(struct fid *, const struct fi_mr_attr *, uint64_t, struct fid_mr **mr) {
    *mr = new fid_mr();
    (*mr)->fid.ops = &mr_ops;
    (*mr)->key = (uint64_t)++regattr_calls;
    return 0;
}
int domain(struct fid_fabric *, struct fi_info *, struct fid_domain **dom, void *) {
    *dom = new fid_domain();
    (*dom)->fid.ops = &obj_ops;
    (*dom)->ops = &domain_ops;
    (*dom)->mr = &domain_mr_ops;
    return 0;
}

void setup_ops() {
    obj_ops.close = obj_close;
    mr_ops.close = mr_close;
    ep_ops.close = obj_close;
    ep_ops.bind = ep_bind;
    ep_ops.control = ep_control;
    ep_cm.getname = ep_getname;
    av_ops.insert = av_insert;
    domain_ops.av_open = av_open;
    domain_ops.endpoint = endpoint;
    domain_mr_ops.regattr = mr_regattr;
    fabric_ops.domain = domain;
}
}  // namespace

extern "C" int fi_fabric(struct fi_fabric_attr *, struct fid_fabric **fabric, void *) {
    *fabric = new fid_fabric();
    (*fabric)->fid.ops = &obj_ops;
    (*fabric)->ops = &fabric_ops;
    return 0;
}
extern "C" void fi_freeinfo(struct fi_info *) { freeinfos++; }
extern "C" const char *fi_strerror(int) { return "fake error"; }

/* ---- three NICs, a one-PE bootstrap, and the scenarios ---- */
namespace {
const char *const NIC_NAMES[] = {"nic0", "nic1", "nic2"};
struct fi_device_attr dev_attr[3];
struct fid_nic nics[3];
struct fi_fabric_attr fab_attr[3];
struct fi_info infos[3];
nvshmemt_libfabric_domain_name_t domain_names[3];

int boot_allgather(const void *in, void *out, int bytes, struct bootstrap_handle *) {
    memcpy(out, in, bytes);
    return 0;
}
bootstrap_handle_t boot = {boot_allgather};

nvshmem_transport_t new_transport(int max_nic_per_pe) {
    nvshmem_transport_t t = (nvshmem_transport_t)calloc(1, sizeof(*t));
    t->boot_handle = &boot;
    t->my_pe = 0;
    t->n_pes = 1;
    nvshmemt_libfabric_state_t *state = new nvshmemt_libfabric_state_t();
    state->all_prov_info = &infos[0];
    state->domain_names = domain_names;
    state->num_domains = 3;
    state->provider = NVSHMEMT_LIBFABRIC_PROVIDER_EFA;
    state->max_nic_per_pe = max_nic_per_pe;
    t->state = state;
    regattr_calls = mr_closes = closes = freeinfos = endpoints_made = 0;
    return t;
}
}  // namespace

int main() {
    setup_ops();
    for (int i = 0; i < 3; i++) {
        dev_attr[i].name = (char *)NIC_NAMES[i];
        nics[i].device_attr = &dev_attr[i];
        infos[i].nic = &nics[i];
        infos[i].fabric_attr = &fab_attr[i];
        infos[i].next = i < 2 ? &infos[i + 1] : NULL;
        strcpy(domain_names[i].name, NIC_NAMES[i]);
    }
    int selected[] = {2, 0};

    printf("connect, NICs 2 and 0 selected:\n");
    nvshmem_transport_t t = new_transport(16);
    int status = nvshmemt_libfabric_connect_endpoints(t, selected, 2, NULL, 0);
    nvshmemt_libfabric_state_t *state = (nvshmemt_libfabric_state_t *)t->state;
    printf("  status %d, %zu domains\n", status, state->domains.size());

    printf("get_mem_handle, remote:\n");
    nvshmem_mem_handle_t mh;
    static char heap[4096];
    status = nvshmemt_libfabric_get_mem_handle(&mh, heap, sizeof heap, t, false);
    printf("  status %d\n", status);
    printf("get_mem_handle, local only:\n");
    nvshmem_mem_handle_t local;
    status = nvshmemt_libfabric_get_mem_handle(&local, heap, sizeof heap, t, true);
    printf("  status %d\n", status);
    printf("release_mem_handle:\n");
    mr_closes = closes = 0;
    status = nvshmemt_libfabric_release_mem_handle(&mh, t);
    printf("  status %d\n", status);
    printf("finalize:\n");
    closes = 0;
    status = nvshmemt_libfabric_finalize(t);
    printf("  status %d, %d fi_freeinfo, %d fi_close\n", status, freeinfos, closes);

    printf("connect, NVSHMEM_LIBFABRIC_MAX_NIC_PER_PE=1:\n");
    t = new_transport(1);
    status = nvshmemt_libfabric_connect_endpoints(t, selected, 2, NULL, 0);
    printf("  status %d\n", status);

    printf("connect, GDA start-up fails:\n");
    t = new_transport(16);
    init_rails_result = -1;
    status = nvshmemt_libfabric_connect_endpoints(t, selected, 2, NULL, 0);
    printf("  status %d\n", status);
    init_rails_result = 0;

    printf("connect, the third endpoint fails to enable:\n");
    t = new_transport(16);
    fail_enable_at = 2;
    status = nvshmemt_libfabric_connect_endpoints(t, selected, 2, NULL, 0);
    printf("  status %d\n", status);
    fflush(stdout);
    return 0;
}
