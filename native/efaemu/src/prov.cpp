// The provider entry point: libfabric dlopens libefa-fi.so and calls fi_prov_ini(). The provider is named
// "efa" so that applications asking for the efa provider (NVSHMEM_LIBFABRIC_PROVIDER=efa, FI_PROVIDER=efa,
// fi_info -p efa) get the emulator; the README explains how a DL provider wins over a built-in one.
#include <stdlib.h>
#include <unistd.h>

#include <mutex>
#include <random>

#include "config.h"
#include "efaemu.h"
#include "dump.h"
#include "stats.h"

namespace efaemu {

namespace {

int prov_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info) {
    return getinfo(version, node, service, flags, hints, info);
}

int prov_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
    return fabric_open(attr, fabric, context);
}

void prov_cleanup() {
    dump::stop();
    Engine::instance().shutdown();
    write_stats_at_exit();
}

// At exit, before libfabric's own teardown: stop the engine (an application may exit with endpoints open)
// and write the statistics.
void at_exit() {
    dump::stop();
    Engine::instance().shutdown();
    write_stats_at_exit();
}

}  // namespace

struct fi_provider g_prov = {
    kApiVersion,  // version: equal to a built-in efa of the same libfabric, so the first registered (ours) wins
    kApiVersion,  // fi_version
    {},           // context, owned by libfabric
    "efa",
    prov_getinfo,
    prov_fabric,
    prov_cleanup,
};

uint32_t process_nonce() {
    static uint32_t nonce = [] {
        std::random_device rd;
        return rd() | 1u;
    }();
    return nonce;
}

int fid_no_bind(struct fid *, struct fid *, uint64_t) { return -FI_ENOSYS; }
int fid_no_control(struct fid *, int, void *) { return -FI_ENOSYS; }
int fid_no_ops_open(struct fid *, const char *, uint64_t, void **, void *) { return -FI_ENOSYS; }

}  // namespace efaemu

// The statistics at this moment, for tools that bracket a window of an application's run (bench/gda-signals/
// deepep_ll.py finds this library in /proc/self/maps and calls it through ctypes): writes
// <EFAEMU_STATS>/efaemu-<pid>.<label>.json atomically. Returns 0, or -EINVAL (label not one file-name component),
// -ENOENT (EFAEMU_STATS not set), or the -errno of the write.
extern "C" __attribute__((visibility("default"))) int efaemu_stats_snapshot(const char *label) {
    return efaemu::stats_snapshot(label);
}

extern "C" __attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void) {
    static std::once_flag once;
    std::call_once(once, [] { atexit(efaemu::at_exit); });
    return &efaemu::g_prov;
}
