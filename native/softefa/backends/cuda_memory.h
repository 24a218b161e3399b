// Software EFA backend for GPU buffers: data moves with cudaMemcpyAsync on the emulator's own stream, and a
// CQE is written body first, phase byte last, in stream order after the data it announces, which is the
// order the NIC's DMA engine gives.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../memory.h"

namespace softefa {

#define SOFTEFA_CUDA(call)                                                                             \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "softefa: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                    __LINE__);                                                                         \
            abort();                                                                                   \
        }                                                                                              \
    } while (0)

class CudaMemory final : public Memory {
public:
    explicit CudaMemory(int device) : device_(device) {
        SOFTEFA_CUDA(cudaSetDevice(device_));
        SOFTEFA_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        SOFTEFA_CUDA(cudaHostAlloc(&staging_, kStaging, cudaHostAllocDefault));
    }
    ~CudaMemory() override {
        cudaStreamSynchronize(stream_);
        cudaFreeHost(staging_);
        cudaStreamDestroy(stream_);
    }
    void copy(uint64_t dst, uint64_t src, uint64_t len) override {
        bind();
        SOFTEFA_CUDA(cudaMemcpyAsync(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), len,
                                     cudaMemcpyDefault, stream_));
    }
    void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) override {
        bind();
        if (used_ + size > kStaging) flush();
        uint8_t *s = staging_ + used_;
        memcpy(s, entry, size);
        used_ += (size + 63) & ~size_t(63);
        if (flags_offset > 0) SOFTEFA_CUDA(cudaMemcpyAsync(dst, s, flags_offset, cudaMemcpyHostToDevice, stream_));
        if (flags_offset + 1 < size)
            SOFTEFA_CUDA(cudaMemcpyAsync(dst + flags_offset + 1, s + flags_offset + 1, size - flags_offset - 1,
                                         cudaMemcpyHostToDevice, stream_));
        SOFTEFA_CUDA(cudaMemcpyAsync(dst + flags_offset, s + flags_offset, 1, cudaMemcpyHostToDevice, stream_));
    }
    void flush() override {
        bind();
        SOFTEFA_CUDA(cudaStreamSynchronize(stream_));
        used_ = 0;
    }
    // Reads a 32-bit counter the GPU owns (a CQ consumer index), after everything issued so far.
    uint32_t read_u32(const uint32_t *dev) {
        bind();
        uint32_t v = 0;
        SOFTEFA_CUDA(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, stream_));
        flush();
        return v;
    }

private:
    // The emulator runs on its own thread, which needs the device current once.
    void bind() {
        if (!bound_) {
            SOFTEFA_CUDA(cudaSetDevice(device_));
            bound_ = true;
        }
    }
    static constexpr size_t kStaging = 1 << 20;
    int device_;
    cudaStream_t stream_{};
    uint8_t *staging_ = nullptr;
    size_t used_ = 0;
    thread_local static bool bound_;
};

inline thread_local bool CudaMemory::bound_ = false;

}  // namespace softefa
