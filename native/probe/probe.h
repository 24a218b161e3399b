// nvshmem-efa-probe: shared types. A check has a status, the evidence it saw and the fix to try.
#pragma once

#include <string>
#include <vector>

namespace probe {

enum class Status { Pass, Warn, Fail, Skip };
const char *status_name(Status s);

struct Check {
    std::string id;
    std::string title;
    Status status;
    std::string evidence;
    std::string fix;  // empty when there is nothing to do
};

// A GPU (PCI bus id, in PCI order: CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID) and its nearest EFA device.
struct GpuNic {
    std::string gpu, gpu_numa, nic, nic_numa;  // nic "" when the host has no EFA device; numa "?" when unknown
};

struct Context {
    std::string root;  // prefix for /sys, /proc and /dev (tests point it at a fake tree)
    std::vector<Check> checks;
    // Found by earlier checks, used by later ones.
    std::vector<std::string> efa_devices;  // rdmap* names
    bool have_driver = false;
    std::vector<GpuNic> topology;  // for launchers: which NIC and NUMA node each GPU's process belongs to
    // The libfabric this process loaded (fi_version() and the shared object's real path): which one ran, wherever
    // the build found its headers (issue 39). Empty path: no libfabric.so among the loaded objects (a static link).
    std::string libfabric_version, libfabric_path;
    void add(std::string id, std::string title, Status s, std::string evidence, std::string fix = "") {
        checks.push_back({std::move(id), std::move(title), s, std::move(evidence), std::move(fix)});
    }
    std::string path(const std::string &p) const { return root + p; }
};

void host_checks(Context &c);    // instance, EFA devices, modules, driver keys, limits, topology
void fabric_checks(Context &c);  // libfabric, efa/efa-direct, GDA ops
void gpu_checks(Context &c);     // CUDA driver, dma-buf export, IOMEMORY mapping

// Maps [p, p+len) (whole pages) for the GPU with cuMemHostRegister(IOMEMORY|DEVICEMAP), then unmaps it.
// Returns "" on success, else what failed and why. Loads the CUDA driver on first use.
std::string try_gpu_iomemory_map(void *p, size_t len);

// Small file helpers (relative to nothing: callers pass c.path(...)).
bool read_file(const std::string &path, std::string *out);
std::string trim(std::string s);
std::vector<std::string> list_dir(const std::string &path);
std::string real_path(const std::string &path);

}  // namespace probe
