// Host checks from sysfs, procfs and /dev: everything here reads files under Context::root, so tests can
// run them against a fake tree.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <string>

#include "probe.h"

namespace probe {
namespace {

// EFA interfaces each instance type has (AWS documentation; p5/p5e 32x100G, p5en 16x200G, p6-b200 8x400G).
const std::map<std::string, int> kExpectedEfa = {
    {"p4d.24xlarge", 4}, {"p4de.24xlarge", 4}, {"p5.48xlarge", 32}, {"p5e.48xlarge", 32},
    {"p5en.48xlarge", 16}, {"p6-b200.48xlarge", 8}, {"p6-b300.48xlarge", 16},
};

std::string join(const std::vector<std::string> &v, const char *sep = ", ") {
    std::string o;
    for (size_t i = 0; i < v.size(); i++) o += (i ? sep : "") + v[i];
    return o;
}

int version_cmp(const std::string &a, const std::string &b) {
    unsigned x[3] = {0, 0, 0}, y[3] = {0, 0, 0};
    sscanf(a.c_str(), "%u.%u.%u", &x[0], &x[1], &x[2]);
    sscanf(b.c_str(), "%u.%u.%u", &y[0], &y[1], &y[2]);
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

// Number of leading path components two sysfs device paths share: the deeper, the closer on PCIe.
size_t shared_depth(const std::string &a, const std::string &b) {
    size_t depth = 0, i = 0;
    while (i < a.size() && i < b.size()) {
        size_t ja = a.find('/', i + 1), jb = b.find('/', i + 1);
        if (ja == std::string::npos) ja = a.size();
        if (jb == std::string::npos) jb = b.size();
        if (a.compare(i, ja - i, b, i, jb - i) != 0) break;
        depth++;
        i = ja;
    }
    return depth;
}

std::string numa_of(const std::string &dev_path) {
    std::string n;
    return read_file(dev_path + "/numa_node", &n) ? trim(n) : std::string("?");
}

}  // namespace

void host_checks(Context &c) {
    // Instance type: the DMI product name on EC2.
    std::string product;
    int expected = -1;
    if (read_file(c.path("/sys/devices/virtual/dmi/id/product_name"), &product)) {
        product = trim(product);
        auto it = kExpectedEfa.find(product);
        if (it != kExpectedEfa.end()) {
            expected = it->second;
            c.add("instance-type", "Instance type", Status::Pass, product + ": " + std::to_string(expected) + " EFA interfaces expected");
        } else {
            c.add("instance-type", "Instance type", Status::Skip, product.empty() ? "no DMI product name" : product + ": no EFA count known for it");
        }
    } else {
        c.add("instance-type", "Instance type", Status::Skip, "no DMI product name (not EC2, or a container without /sys/devices/virtual/dmi)");
    }

    // EFA devices.
    for (auto &d : list_dir(c.path("/sys/class/infiniband")))
        if (d.rfind("rdmap", 0) == 0) c.efa_devices.push_back(d);
    const int n = (int)c.efa_devices.size();
    if (n == 0) {
        c.add("efa-devices", "EFA devices", Status::Fail, "no rdmap* device in /sys/class/infiniband: no EFA device on this host",
              "EFA interfaces must be attached when the instance is launched (they cannot be added later); in a container, pass /sys and the devices through");
    } else if (expected > 0 && n != expected) {
        c.add("efa-devices", "EFA devices", Status::Warn, std::to_string(n) + " of " + std::to_string(expected) + " expected: " + join(c.efa_devices),
              "launch the instance with all its EFA interfaces (on p5en, devices may appear late: rerun the probe)");
    } else {
        c.add("efa-devices", "EFA devices", Status::Pass, std::to_string(n) + ": " + join(c.efa_devices));
    }

    // User-space access: uverbs nodes in this (possibly containerised) view of /dev.
    std::vector<std::string> uverbs;
    for (auto &d : list_dir(c.path("/dev/infiniband")))
        if (d.rfind("uverbs", 0) == 0) uverbs.push_back(d);
    if (n == 0) c.add("uverbs", "/dev/infiniband/uverbs*", Status::Skip, "no EFA device");
    else if (uverbs.empty())
        c.add("uverbs", "/dev/infiniband/uverbs*", Status::Fail, "EFA devices exist but no /dev/infiniband/uverbs* is visible",
              "run the container with --device=/dev/infiniband/uverbsN for each EFA device (or the EFA device plugin on Kubernetes)");
    else c.add("uverbs", "/dev/infiniband/uverbs*", Status::Pass, std::to_string(uverbs.size()) + " visible");

    // efa kernel module (>= 3.3.0 for completion counters used by GPU-initiated paths).
    std::string efa_ver;
    if (read_file(c.path("/sys/module/efa/version"), &efa_ver)) {
        efa_ver = trim(efa_ver);
        if (version_cmp(efa_ver, "3.3.0") < 0)
            c.add("efa-module", "efa kernel module", Status::Warn, "efa " + efa_ver + " (< 3.3.0: no hardware completion counters)",
                  "install the EFA installer >= 1.50.0 for efa.ko >= 3.3.0");
        else c.add("efa-module", "efa kernel module", Status::Pass, "efa " + efa_ver);
    } else {
        c.add("efa-module", "efa kernel module", n ? Status::Fail : Status::Skip, "/sys/module/efa/version not found",
              n ? "install the EFA driver (aws-efa-installer)" : "");
    }

    // GDRCopy's kernel module, where EFA devices are: NVSHMEM's EFA provider needs GDRCopy, and gdrdrv < 2.4 has no
    // GET_INFO_V2 ioctl for the libgdrapi 2.5 the build makes. The same rule as `doctor` (src/commands/doctor.ts).
    const bool gdr_dev = access(c.path("/dev/gdrdrv").c_str(), F_OK) == 0;
    {
        const char *fix = "install and load GDRCopy's kernel module, gdrdrv >= 2.4: from the EFA installer or AMI that provides it, "
                          "or the gdrdrv-dkms package (gdrcopy-kmod on RPM systems), or from a GDRCopy checkout: make driver, then "
                          "sudo ./insmod.sh (loads gdrdrv.ko and creates /dev/gdrdrv); in a container, pass /dev/gdrdrv through";
        std::string gv;
        const bool have_ver = read_file(c.path("/sys/module/gdrdrv/version"), &gv);
        gv = trim(gv);
        if (!n) c.add("gdrdrv", "GDRCopy's kernel module (gdrdrv)", Status::Skip, "no EFA device: NVSHMEM's EFA provider does not run here");
        else if (!gdr_dev)
            c.add("gdrdrv", "GDRCopy's kernel module (gdrdrv)", Status::Fail,
                  have_ver ? "gdrdrv " + gv + " is loaded, but /dev/gdrdrv is missing" : std::string("no /dev/gdrdrv: gdrdrv is not loaded"), fix);
        else if (!have_ver || gv.empty() || !isdigit((unsigned char)gv[0]))
            c.add("gdrdrv", "GDRCopy's kernel module (gdrdrv)", Status::Warn, "/dev/gdrdrv present, but no version to compare in /sys/module/gdrdrv/version",
                  std::string("check the loaded module's version (modinfo gdrdrv); if it is older than 2.4, ") + fix);
        else if (version_cmp(gv, "2.4") < 0)
            c.add("gdrdrv", "GDRCopy's kernel module (gdrdrv)", Status::Fail, "gdrdrv " + gv + " is older than 2.4", fix);
        else c.add("gdrdrv", "GDRCopy's kernel module (gdrdrv)", Status::Pass, "gdrdrv " + gv + ", /dev/gdrdrv");
    }

    // GDRCopy's user library: NVSHMEM dlopens libgdrapi.so.2 (the build's run-time LD_LIBRARY_PATH names a built one).
    void *gdr = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_LOCAL);
    if (gdr) dlclose(gdr);
    if (gdr_dev && gdr) c.add("gdrcopy", "GDRCopy", Status::Pass, "/dev/gdrdrv and libgdrapi.so.2 present");
    else
        c.add("gdrcopy", "GDRCopy", Status::Warn,
              std::string(gdr_dev ? "/dev/gdrdrv present" : "no /dev/gdrdrv") + ", " + (gdr ? "libgdrapi.so.2 loads" : "libgdrapi.so.2 not loadable"),
              "install GDRCopy (gdrdrv module + libgdrapi) and create /dev/gdrdrv; NVSHMEM refuses the EFA provider without it");

    // GPU memory registration path: dma-buf (kernel >= 6.1, rdma-core >= 44) or a peer-memory module.
    std::vector<std::string> peermem;
    for (const char *m : {"nvidia_peermem", "efa_nv_peermem"})
        if (access(c.path(std::string("/sys/module/") + m).c_str(), F_OK) == 0) peermem.push_back(m);
    c.add("peer-memory", "GPU memory registration path", Status::Pass,
          peermem.empty() ? "no peer-memory module loaded: registration must use dma-buf (see the dma-buf check)"
                          : "peer-memory module(s) loaded: " + join(peermem) + " (dma-buf is used where available)");

    // PeerMappingOverride: needed to map the NIC's SQ doorbell for the GPU (GDA).
    std::string dwords;
    bool have = read_file(c.path("/sys/module/nvidia/parameters/NVreg_RegistryDwords"), &dwords);
    if (!have) {
        std::string params;
        if (read_file(c.path("/proc/driver/nvidia/params"), &params)) {
            size_t p = params.find("RegistryDwords:");
            if (p != std::string::npos) {
                dwords = params.substr(p, params.find('\n', p) - p);
                have = true;
            }
        }
    }
    if (!have) c.add("peer-mapping-override", "NVIDIA PeerMappingOverride", Status::Skip, "NVIDIA driver parameters not readable (no driver loaded?)");
    else if (dwords.find("PeerMappingOverride=1") != std::string::npos)
        c.add("peer-mapping-override", "NVIDIA PeerMappingOverride", Status::Pass, "RegistryDwords: " + trim(dwords));
    else
        c.add("peer-mapping-override", "NVIDIA PeerMappingOverride", Status::Warn, "RegistryDwords without PeerMappingOverride=1: " + trim(dwords),
              "for EFA GDA: options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\" in /etc/modprobe.d, then reload the driver");

    // Locked memory: libfabric pins buffers.
    rlimit rl{};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    if (rl.rlim_cur == RLIM_INFINITY) c.add("memlock", "ulimit -l", Status::Pass, "unlimited");
    else
        c.add("memlock", "ulimit -l", Status::Warn, std::to_string(rl.rlim_cur / 1024) + " KiB",
              "ulimit -l unlimited (docker: --ulimit memlock=-1:-1); otherwise libfabric fails with -12 posting receive buffers");

    std::string meminfo;
    if (read_file(c.path("/proc/meminfo"), &meminfo)) {
        size_t p = meminfo.find("HugePages_Total:");
        std::string total = p == std::string::npos ? "?" : trim(meminfo.substr(p + 16, meminfo.find('\n', p) - p - 16));
        c.add("hugepages", "Huge pages", Status::Pass, "HugePages_Total " + total + " (the EFA provider falls back to normal pages; FI_EFA_USE_HUGE_PAGE=0 avoids fork ENOMEM)");
    } else {
        c.add("hugepages", "Huge pages", Status::Skip, "/proc/meminfo not readable");
    }

    // Topology: NVIDIA GPUs (PCI vendor 0x10de, display/3D class) and each one's nearest EFA device by PCIe path.
    std::vector<std::pair<std::string, std::string>> gpus;  // bus id, sysfs path
    for (auto &dev : list_dir(c.path("/sys/bus/pci/devices"))) {
        std::string vendor, cls;
        const std::string base = c.path("/sys/bus/pci/devices/") + dev;
        if (!read_file(base + "/vendor", &vendor) || trim(vendor) != "0x10de") continue;
        if (!read_file(base + "/class", &cls) || trim(cls).rfind("0x03", 0) != 0) continue;
        gpus.push_back({dev, real_path(base)});
    }
    std::vector<std::pair<std::string, std::string>> nics;
    for (auto &d : c.efa_devices) nics.push_back({d, real_path(c.path("/sys/class/infiniband/") + d + "/device")});
    if (gpus.empty()) {
        c.add("topology", "GPU to EFA topology", Status::Skip, "no NVIDIA GPU in /sys/bus/pci/devices");
    } else {
        std::string ev;
        bool cross_numa = false;
        for (auto &g : gpus) {
            std::string best = "-", best_numa = "?";
            size_t depth = 0;
            for (auto &nic : nics) {
                size_t d = shared_depth(g.second, nic.second);
                if (d > depth) {
                    depth = d;
                    best = nic.first;
                    best_numa = numa_of(nic.second);
                }
            }
            const std::string g_numa = numa_of(g.second);
            if (!nics.empty() && best_numa != g_numa) cross_numa = true;
            c.topology.push_back({g.first, g_numa, nics.empty() ? "" : best, nics.empty() ? "?" : best_numa});
            ev += (ev.empty() ? "" : "; ") + g.first + " (NUMA " + g_numa + ") -> " + (nics.empty() ? "no EFA" : best + " (NUMA " + best_numa + ")");
        }
        c.add("topology", "GPU to EFA topology", nics.empty() ? Status::Skip : cross_numa ? Status::Warn : Status::Pass, ev,
              cross_numa ? "a GPU's nearest EFA device is on another NUMA node: check NVSHMEM_ENABLE_NIC_PE_MAPPING / NVSHMEM_NETDEVS_POLICY" : "");
    }
}

}  // namespace probe
