// Software EFA backend for host buffers (CPU tests and CPU drivers of the device code): plain memmove, and a
// CQE written body first, phase byte last, each behind a release fence.
#pragma once

#include <atomic>
#include <cstring>

#include "../memory.h"

namespace softefa {

class HostMemory final : public Memory {
public:
    void copy(uint64_t dst, uint64_t src, uint64_t len) override {
        std::atomic_thread_fence(std::memory_order_acquire);
        memmove(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), len);
        std::atomic_thread_fence(std::memory_order_release);
    }
    void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) override {
        std::atomic_thread_fence(std::memory_order_release);
        for (size_t i = 0; i < size; i++)
            if (i != flags_offset) reinterpret_cast<volatile uint8_t *>(dst)[i] = entry[i];
        std::atomic_thread_fence(std::memory_order_release);
        reinterpret_cast<std::atomic<uint8_t> *>(dst + flags_offset)->store(entry[flags_offset], std::memory_order_release);
    }
    void flush() override { std::atomic_thread_fence(std::memory_order_seq_cst); }
};

}  // namespace softefa
