/*
 * Fixture written for nvshmem-efa tests. It reproduces the shapes of the multi-rail libfabric.cpp (AWS's NVSHMEM
 * 3.5.7 branch) that the patcher anchors on: the PE's NICs become prov_infos entries (the first one twice: host
 * domain, then its proxy domain), one fabric/domain/AV/endpoint per entry, a connect_endpoints that returns early
 * when already connected and has one label out:, registration and release looping over every domain, and a
 * finalize that frees the fi_info list before closing the per-domain objects.
 */
#include "libfabric.h"
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "non_abi/nvshmemx_error.h"
#include "rdma/fabric.h"
#include "rdma/fi_cm.h"
#include "rdma/fi_domain.h"
#include "rdma/fi_endpoint.h"
#include "rdma/fi_errno.h"
#include "internal/host_transport/transport.h"
#include "transport_common.h"
#include "efa_gda/transport_efa_gda.h"

#ifdef NVSHMEM_USE_GDRCOPY
static bool use_gdrcopy = false;
#endif

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* Proxy operations go round robin over the proxy domains 1..num_selected_domains-1, one per NIC. */
static inline nvshmemt_libfabric_endpoint_t *nvshmemt_libfabric_next_proxy_ep(nvshmemt_libfabric_state_t *state) {
    nvshmemt_libfabric_endpoint_t *ep = state->eps[state->cur_proxy_ep_index];
    state->cur_proxy_ep_index = state->cur_proxy_ep_index + 1 < state->num_selected_domains ? state->cur_proxy_ep_index + 1 : 1;
    return ep;
}

static int nvshmemt_libfabric_connect_endpoints(nvshmem_transport_t t, int *selected_dev_ids,
                                                int num_selected_devs, int *out_qp_indices,
                                                int num_qps) {
    nvshmemt_libfabric_state_t *state = (nvshmemt_libfabric_state_t *)t->state;
    nvshmemt_libfabric_ep_name_t *all_ep_names = NULL;
    nvshmemt_libfabric_ep_name_t *local_ep_names = NULL;
    struct fi_info *current_info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *address;
    struct fi_av_attr av_attr;
    size_t ep_namelen = NVSHMEMT_LIBFABRIC_EP_LEN;
    int status = 0;
    int total_num_eps;
    (void)out_qp_indices;
    (void)num_qps;
    state->num_selected_devs = MIN(num_selected_devs, state->max_nic_per_pe);

    if (state->eps.size()) {
        NVSHMEMI_ERROR_PRINT("PE has previously called connect_endpoints()\n");
        return NVSHMEMX_ERROR_INTERNAL;
    }
    if (state->num_selected_devs > NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE) state->num_selected_devs = NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE;
    state->num_selected_domains = state->num_selected_devs + 1;
    state->cur_proxy_ep_index = 1;

    memset(&av_attr, 0, sizeof(av_attr));
    av_attr.type = FI_AV_TABLE;
    av_attr.count = state->num_selected_domains * t->n_pes;

    for (int dev_idx = 0; dev_idx < state->num_selected_devs; dev_idx++) {
        for (current_info = state->all_prov_info; current_info != NULL; current_info = current_info->next) {
            if (!strncmp(current_info->nic->device_attr->name, state->domain_names[selected_dev_ids[dev_idx]].name,
                         NVSHMEMT_LIBFABRIC_DOMAIN_LEN))
                break;
        }
        NVSHMEMI_NULL_ERROR_JMP(current_info, status, NVSHMEMX_ERROR_INTERNAL, out, "Unable to find fabric for device %d.\n", dev_idx);

        /* The first NIC carries two domains: the host domain and its proxy domain. */
        if (state->prov_infos.size() == 0) state->prov_infos.push_back(current_info);

        state->prov_infos.push_back(current_info);
    }

    local_ep_names = (nvshmemt_libfabric_ep_name_t *)calloc(state->num_selected_domains, sizeof(nvshmemt_libfabric_ep_name_t));
    NVSHMEMI_NULL_ERROR_JMP(local_ep_names, status, NVSHMEMX_ERROR_OUT_OF_MEMORY, out, "Unable to allocate names.");
    total_num_eps = t->n_pes * state->num_selected_domains;
    all_ep_names = (nvshmemt_libfabric_ep_name_t *)calloc(total_num_eps, sizeof(nvshmemt_libfabric_ep_name_t));
    NVSHMEMI_NULL_ERROR_JMP(all_ep_names, status, NVSHMEMX_ERROR_OUT_OF_MEMORY, out, "Unable to allocate names.");

    for (size_t i = 0; i < state->prov_infos.size(); i++) {
        status = fi_fabric(state->prov_infos[i]->fabric_attr, &fabric, NULL);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Failed to allocate fabric\n");
        state->fabrics.push_back(fabric);

        status = fi_domain(fabric, state->prov_infos[i], &domain, NULL);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Failed to allocate domain\n");
        state->domains.push_back(domain);

        status = fi_av_open(domain, &av_attr, &address, NULL);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Failed to allocate address vector\n");
        state->addresses.push_back(address);

        state->eps.push_back((nvshmemt_libfabric_endpoint_t *)calloc(1, sizeof(nvshmemt_libfabric_endpoint_t)));
        NVSHMEMI_NULL_ERROR_JMP(state->eps[i], status, NVSHMEMX_ERROR_OUT_OF_MEMORY, out, "Unable to allocate an endpoint.");
        state->eps[i]->domain_index = i;

        status = fi_endpoint(domain, state->prov_infos[i], &state->eps[i]->endpoint, NULL);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Unable to allocate endpoint\n");

        status = fi_ep_bind(state->eps[i]->endpoint, &state->addresses[i]->fid, 0);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Unable to bind the address vector\n");

        status = fi_enable(state->eps[i]->endpoint);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Unable to enable endpoint: %d: %s\n", status,
                              fi_strerror(status * -1));

        status = fi_getname(&state->eps[i]->endpoint->fid, local_ep_names[i].name, &ep_namelen);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Unable to get name\n");
    }

    status = t->boot_handle->allgather(local_ep_names, all_ep_names,
                                       state->num_selected_domains * sizeof(nvshmemt_libfabric_ep_name_t), t->boot_handle);
    NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Failed to gather endpoint names.\n");

    for (int i = 0; i < state->num_selected_domains; i++) {
        for (int j = 0; j < total_num_eps; j++) {
            status = fi_av_insert(state->addresses[i], &all_ep_names[j], 1, NULL, 0, NULL);
            if (status < 1) {
                NVSHMEMI_ERROR_PRINT("Unable to insert ep names in address vector\n");
                status = NVSHMEMX_ERROR_INTERNAL;
                goto out;
            }
            status = NVSHMEMX_SUCCESS;
        }
    }

    /* EFA GDA uses endpoints of its own, one per rail; if it fails on any PE it stays off everywhere and these
     * endpoints are untouched. prov_infos[0] is the host domain, on the same NIC as prov_infos[1]; prov_infos[1..]
     * are the proxy domains, one per selected NIC in NVSHMEM's order: those are the rails. The all-gather adapter
     * keeps the GDA sources free of NVSHMEM headers. */
    if (status == 0 && state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA && nvshmemt_efa_gda_enabled()) {
        nvshmemt_efa_gda_bootstrap_t efa_gda_boot;
        efa_gda_boot.my_pe = t->my_pe;
        efa_gda_boot.n_pes = t->n_pes;
        efa_gda_boot.allgather = [](const void *in, void *out, int bytes, void *ctx) -> int {
            bootstrap_handle_t *h = (bootstrap_handle_t *)ctx;
            return h->allgather(in, out, bytes, h);
        };
        efa_gda_boot.ctx = t->boot_handle;
        const int efa_gda_rails = (int)state->prov_infos.size() - 1;
        if (nvshmemt_efa_gda_init_rails(efa_gda_rails > 0 ? state->prov_infos.data() + 1 : NULL, efa_gda_rails,
                                        &efa_gda_boot) != 0) {
            NVSHMEMI_WARN_PRINT("%s; using the libfabric proxy path\n", nvshmemx_efa_gda_status());
        }
    }
out:
    if (status != 0) {
        for (size_t i = 0; i < state->eps.size(); i++) {
            if (state->eps[i] && state->eps[i]->endpoint) fi_close(&state->eps[i]->endpoint->fid);
            free(state->eps[i]);
            state->eps[i] = NULL;
        }
    }

    free(local_ep_names);
    free(all_ep_names);
    return status;
}

static int nvshmemt_libfabric_finalize(nvshmem_transport_t transport) {
    nvshmemt_libfabric_state_t *state;
    int status;

    assert(transport);
    state = (nvshmemt_libfabric_state_t *)transport->state;

    if (transport->device_pci_paths) {
        for (int i = 0; i < transport->n_devices; i++) free(transport->device_pci_paths[i]);
        free(transport->device_pci_paths);
    }

    nvshmemt_efa_gda_fini();
    /* prov_infos point into this list: nothing else to free for them. */
    if (state->all_prov_info) fi_freeinfo(state->all_prov_info);

    for (size_t i = 0; i < state->eps.size(); i++) {
        if (state->eps[i]->endpoint) {
            status = fi_close(&state->eps[i]->endpoint->fid);
            if (status) NVSHMEMI_WARN_PRINT("Unable to close fabric endpoint: %d\n", status);
        }
        free(state->eps[i]);
    }

    for (size_t i = 0; i < state->addresses.size(); i++) {
        status = fi_close(&state->addresses[i]->fid);
        if (status) NVSHMEMI_WARN_PRINT("Unable to close fabric address vector: %d\n", status);
    }

    for (size_t i = 0; i < state->domains.size(); i++) {
        status = fi_close(&state->domains[i]->fid);
        if (status) NVSHMEMI_WARN_PRINT("Unable to close fabric domain: %d\n", status);
    }

    for (size_t i = 0; i < state->fabrics.size(); i++) {
        status = fi_close(&state->fabrics[i]->fid);
        if (status) NVSHMEMI_WARN_PRINT("Unable to close fabric: %d\n", status);
    }

    delete state;
    free(transport);
    return 0;
}

static int nvshmemt_libfabric_release_mem_handle(nvshmem_mem_handle_t *mem_handle, nvshmem_transport_t t) {
    nvshmemt_libfabric_state_t *libfabric_state = (nvshmemt_libfabric_state_t *)t->state;
    nvshmemt_libfabric_mem_handle_t *fabric_handle;
    int status = 0;

    assert(mem_handle != NULL);
    fabric_handle = (nvshmemt_libfabric_mem_handle_t *)mem_handle;
    if (libfabric_state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA) {
#ifdef NVSHMEM_USE_GDRCOPY
        status = use_gdrcopy ? 0 : 0;
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "gdr_unmap failed\n");
#endif
    }

    for (size_t i = 0; i < libfabric_state->domains.size(); i++) {
        int status = fi_close(&fabric_handle->hdls[i].mr->fid);
        if (status) NVSHMEMI_WARN_PRINT("Error releasing mem handle idx %zu (%d)\n", i, status);
    }

    if (nvshmemt_efa_gda_active()) nvshmemt_efa_gda_release_region(fabric_handle->buf);
out:
    return status;
}

static int nvshmemt_libfabric_get_mem_handle(nvshmem_mem_handle_t *mem_handle, void *buf, size_t length,
                                             nvshmem_transport_t t, bool local_only) {
    nvshmemt_libfabric_mem_handle_t *fabric_handle;
    nvshmemt_libfabric_state_t *libfabric_state = (nvshmemt_libfabric_state_t *)t->state;
    struct fi_mr_attr mr_attr;
    struct iovec mr_iovec;
    int status;

    assert(mem_handle != NULL);
    fabric_handle = (nvshmemt_libfabric_mem_handle_t *)mem_handle;
    fabric_handle->buf = buf;

    memset(&mr_attr, 0, sizeof(struct fi_mr_attr));
    mr_iovec.iov_base = buf;
    mr_iovec.iov_len = length;
    mr_attr.mr_iov = &mr_iovec;
    mr_attr.iov_count = 1;
    mr_attr.access = FI_READ | FI_WRITE;
    if (!local_only) mr_attr.access |= FI_REMOTE_READ | FI_REMOTE_WRITE;

    for (size_t i = 0; i < libfabric_state->domains.size(); i++) {
        struct fid_mr *mr;
        status = fi_mr_regattr(libfabric_state->domains[i], &mr_attr, 0, &mr);
        NVSHMEMI_NZ_ERROR_JMP(status, NVSHMEMX_ERROR_INTERNAL, out, "Error registering memory region: %s\n",
                              fi_strerror(status * -1));

        fabric_handle->hdls[i].mr = mr;
        fabric_handle->hdls[i].key = fi_mr_key(mr);
        fabric_handle->hdls[i].local_desc = fi_mr_desc(mr);
    }

    if (!local_only && libfabric_state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA) {
#ifdef NVSHMEM_USE_GDRCOPY
        if (!use_gdrcopy) {
            NVSHMEMI_ERROR_PRINT("GDRCopy is off: the EFA provider cannot run staged atomics\n");
            status = NVSHMEMX_ERROR_INTERNAL;
            goto out;
        }
#endif
    }

    if (status == 0 && !local_only && nvshmemt_efa_gda_active()) nvshmemt_efa_gda_register_region(buf, length);
out:
    if (status) fabric_handle->buf = NULL;
    return status;
}

extern "C" int nvshmemt_init(nvshmem_transport_t *t, void *table, int api_version) {
    (void)table;
    (void)api_version;
    if (!t || !*t) return NVSHMEMX_ERROR_INTERNAL;
    nvshmemt_libfabric_state_t *state = (nvshmemt_libfabric_state_t *)(*t)->state;
    if (state && state->eps.size() > 1 && !nvshmemt_libfabric_next_proxy_ep(state)) return NVSHMEMX_ERROR_INTERNAL;
    /* Reference all four so they are compiled and linked, as in the real transport's host ops table. */
    static int (*const connect)(nvshmem_transport_t, int *, int, int *, int) = nvshmemt_libfabric_connect_endpoints;
    static int (*const finalize)(nvshmem_transport_t) = nvshmemt_libfabric_finalize;
    static int (*const get_mh)(nvshmem_mem_handle_t *, void *, size_t, nvshmem_transport_t, bool) =
        nvshmemt_libfabric_get_mem_handle;
    static int (*const release_mh)(nvshmem_mem_handle_t *, nvshmem_transport_t) = nvshmemt_libfabric_release_mem_handle;
    return (connect && finalize && get_mh && release_mh && nvshmemt_common_ok()) ? 0 : NVSHMEMX_ERROR_INTERNAL;
}
