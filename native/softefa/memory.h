// Where the software EFA's DMA goes. The queue model never touches payload or CQ memory directly: every
// data placement and every CQE goes through a Memory, so the same model drives host buffers (CPU tests,
// backends/host_memory.h), GPU buffers (backends/cuda_memory.h) or another process's memory (an emulator
// that ships the bytes over its own wire).
#pragma once

#include <cstddef>
#include <cstdint>

namespace softefa {

class Memory {
public:
    virtual ~Memory() = default;
    // Copies len bytes between device-visible addresses (both may be GPU memory).
    virtual void copy(uint64_t dst, uint64_t src, uint64_t len) = 0;
    // Writes a completion entry so that its byte at flags_offset (holding the phase bit) becomes visible
    // only after the rest of the entry and after every copy issued before it: the order a NIC's DMA gives.
    virtual void write_cqe(uint8_t *dst, const uint8_t *entry, size_t size, size_t flags_offset) = 0;
    // Waits for everything issued so far.
    virtual void flush() = 0;
};

}  // namespace softefa
