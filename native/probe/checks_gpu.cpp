// GPU checks through the CUDA driver API, loaded with dlopen so the probe runs (and says so) without a driver.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstring>
#include <string>

#include "probe.h"

namespace probe {
namespace {

struct Driver {
    bool tried = false;
    void *lib = nullptr;
    std::string why;
    CUresult (*init)(unsigned) = nullptr;
    CUresult (*deviceGetCount)(int *) = nullptr;
    CUresult (*deviceGet)(CUdevice *, int) = nullptr;
    CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
    CUresult (*deviceGetPCIBusId)(char *, int, CUdevice) = nullptr;
    CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
    CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*memFree)(CUdeviceptr) = nullptr;
    CUresult (*memGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = nullptr;
    CUresult (*memHostRegister)(void *, size_t, unsigned) = nullptr;
    CUresult (*memHostUnregister)(void *) = nullptr;
    CUresult (*getErrorName)(CUresult, const char **) = nullptr;
    CUresult (*driverGetVersion)(int *) = nullptr;

    // Loads the driver and makes device 0's primary context current. False with `why` when it cannot.
    bool load() {
        if (tried) return lib != nullptr && why.empty();
        tried = true;
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            why = "libcuda.so.1 not loadable: no NVIDIA driver on this host (or not passed into the container)";
            return false;
        }
        struct {
            const char *n;
            void **p;
        } syms[] = {{"cuInit", (void **)&init}, {"cuDeviceGetCount", (void **)&deviceGetCount}, {"cuDeviceGet", (void **)&deviceGet},
                    {"cuDeviceGetName", (void **)&deviceGetName}, {"cuDeviceGetPCIBusId", (void **)&deviceGetPCIBusId},
                    {"cuDevicePrimaryCtxRetain", (void **)&primaryCtxRetain}, {"cuCtxSetCurrent", (void **)&ctxSetCurrent},
                    {"cuMemAlloc_v2", (void **)&memAlloc}, {"cuMemFree_v2", (void **)&memFree},
                    {"cuMemGetHandleForAddressRange", (void **)&memGetHandleForAddressRange},
                    {"cuMemHostRegister_v2", (void **)&memHostRegister}, {"cuMemHostUnregister", (void **)&memHostUnregister},
                    {"cuGetErrorName", (void **)&getErrorName}, {"cuDriverGetVersion", (void **)&driverGetVersion}};
        for (auto &s : syms)
            if (!(*s.p = dlsym(lib, s.n))) {
                why = std::string("the driver lacks ") + s.n + " (driver too old for dma-buf: needs >= 515)";
                return false;
            }
        CUresult r = init(0);
        int n = 0;
        if (r == CUDA_SUCCESS) r = deviceGetCount(&n);
        if (r != CUDA_SUCCESS || n == 0) {
            why = r != CUDA_SUCCESS ? std::string("cuInit: ") + name(r) : "cuInit succeeded but no GPU is visible";
            return false;
        }
        CUdevice d;
        CUcontext ctx;
        if ((r = deviceGet(&d, 0)) || (r = primaryCtxRetain(&ctx, d)) || (r = ctxSetCurrent(ctx))) {
            why = std::string("creating a context on GPU 0: ") + name(r);
            return false;
        }
        return true;
    }
    std::string name(CUresult r) const {
        const char *n = "CUDA error";
        if (getErrorName) getErrorName(r, &n);
        return n;
    }
};

Driver drv;

}  // namespace

std::string try_gpu_iomemory_map(void *p, size_t len) {
    if (!drv.load()) return drv.why;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
    const uintptr_t end = ((uintptr_t)p + len + page - 1) & ~(uintptr_t)(page - 1);
    CUresult r = drv.memHostRegister((void *)start, end - start, CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r != CUDA_SUCCESS) return "cuMemHostRegister(IOMEMORY|DEVICEMAP): " + drv.name(r);
    drv.memHostUnregister((void *)start);
    return "";
}

void gpu_checks(Context &c) {
    if (!drv.load()) {
        c.add("gpu-driver", "CUDA driver and GPUs", Status::Skip, drv.why);
        c.add("dmabuf-export", "GPU memory as dma-buf", Status::Skip, "no usable CUDA driver");
        c.add("gpu-mr", "GPU memory registered with EFA", Status::Skip, "no usable CUDA driver");
        c.add("iomemory-map", "NIC memory mapped for the GPU (IOMEMORY)", Status::Skip, "no usable CUDA driver");
        return;
    }
    c.have_driver = true;
    int n = 0, ver = 0;
    drv.deviceGetCount(&n);
    drv.driverGetVersion(&ver);
    std::string ev = "driver CUDA " + std::to_string(ver / 1000) + "." + std::to_string((ver % 1000) / 10) + ", " + std::to_string(n) + " GPU(s):";
    for (int i = 0; i < n; i++) {
        CUdevice d;
        char nm[128] = "", bus[32] = "";
        drv.deviceGet(&d, i);
        drv.deviceGetName(nm, sizeof nm, d);
        drv.deviceGetPCIBusId(bus, sizeof bus, d);
        ev += std::string(i ? ";" : "") + " " + nm + " " + bus;
    }
    c.add("gpu-driver", "CUDA driver and GPUs", Status::Pass, ev);

    // What libfabric needs to register GPU memory without a peer-memory module, and what the GDA CQ uses.
    CUdeviceptr buf = 0;
    const size_t len = 2 << 20;
    CUresult r = drv.memAlloc(&buf, len);
    int fd = -1;
    if (r == CUDA_SUCCESS) r = drv.memGetHandleForAddressRange(&fd, buf, len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r == CUDA_SUCCESS && fd >= 0) {
        c.add("dmabuf-export", "GPU memory as dma-buf", Status::Pass, "cuMemGetHandleForAddressRange(DMA_BUF_FD) on a 2 MiB cuMemAlloc buffer: fd " + std::to_string(fd));
        close(fd);
    } else {
        c.add("dmabuf-export", "GPU memory as dma-buf", Status::Fail, "dma-buf export failed: " + drv.name(r),
              "use the open NVIDIA kernel module (driver >= 515) on a kernel >= 5.12, or load nvidia_peermem");
    }
    // The same buffer registered with the EFA provider, as NVSHMEM registers its symmetric heap.
    if (c.efa_devices.empty() || !buf) {
        c.add("gpu-mr", "GPU memory registered with EFA", Status::Skip, c.efa_devices.empty() ? "no EFA device" : "no GPU buffer");
    } else {
        fi_info *hints = fi_allocinfo(), *info = nullptr;
        hints->fabric_attr->prov_name = strdup("efa");
        hints->ep_attr->type = FI_EP_RDM;
        hints->caps = FI_RMA | FI_HMEM;
        hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_HMEM;
        fid_fabric *fabric = nullptr;
        fid_domain *domain = nullptr;
        fid_mr *mr = nullptr;
        int rc = fi_getinfo(FI_VERSION(1, 18), nullptr, nullptr, 0, hints, &info);
        fi_freeinfo(hints);
        if (!rc) rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
        if (!rc) rc = fi_domain(fabric, info, &domain, nullptr);
        if (!rc) {
            CUdevice dev = 0;
            drv.deviceGet(&dev, 0);
            iovec iov = {(void *)buf, len};
            fi_mr_attr attr = {};
            attr.mr_iov = &iov;
            attr.iov_count = 1;
            attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
            attr.iface = FI_HMEM_CUDA;
            attr.device.cuda = dev;
            rc = fi_mr_regattr(domain, &attr, 0, &mr);
        }
        if (!rc) c.add("gpu-mr", "GPU memory registered with EFA", Status::Pass, "fi_mr_regattr(FI_HMEM_CUDA) of a 2 MiB GPU buffer on " + std::string(info->domain_attr->name));
        else c.add("gpu-mr", "GPU memory registered with EFA", Status::Fail, std::string("registering GPU memory with the efa provider: ") + fi_strerror(-rc),
                   "libfabric needs dma-buf (see above) or a peer-memory module to register GPU memory; FI_LOG_LEVEL=info shows why");
        if (mr) fi_close(&mr->fid);
        if (domain) fi_close(&domain->fid);
        if (fabric) fi_close(&fabric->fid);
        if (info) fi_freeinfo(info);
    }
    if (buf) drv.memFree(buf);

    // IOMEMORY registration is what maps the NIC's doorbell for the GPU; with EFA GDA the doorbell itself was
    // tried above. Without it, register an ordinary page the same way: the driver's answer tells whether the
    // flag is honoured at all (privilege, PeerMappingOverride), not whether a doorbell would map.
    bool gda_tried = false;
    for (auto &k : c.checks)
        if (k.id == "gda-ops" && k.status != Status::Skip) gda_tried = true;
    if (gda_tried) {
        c.add("iomemory-map", "NIC memory mapped for the GPU (IOMEMORY)", Status::Skip, "checked on the real SQ doorbell under EFA GDA");
    } else {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        const std::string res = try_gpu_iomemory_map(p, page);
        munmap(p, page);
        c.add("iomemory-map", "NIC memory mapped for the GPU (IOMEMORY)", Status::Skip,
              "no EFA SQ doorbell to map; IOMEMORY|DEVICEMAP registration of an ordinary page: " + (res.empty() ? std::string("accepted") : res));
    }
}

}  // namespace probe
