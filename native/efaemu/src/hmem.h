// Where payload bytes live and how the engine moves them. Host memory is copied with memcpy. GPU memory is
// copied with CUDA on a private non-blocking stream, only ever from the engine thread: NVSHMEM forbids its
// provider to call CUDA (FI_OPT_CUDA_API_PERMITTED = false) from the threads it calls into, and the legacy
// default stream would serialise against kernels that spin on the very data the engine is delivering.
//
// libcuda.so.1 is opened with dlopen, so the provider builds and runs on hosts without CUDA (CI); there only
// host memory exists. A process touches only its own GPU memory: the wire stages payloads through host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace efaemu {

enum class MemKind : uint8_t { Host, Cuda };

struct MemRef {
    MemKind kind = MemKind::Host;
    int device = 0;  // CUDA device ordinal for MemKind::Cuda
};

namespace hmem {

// Loads libcuda.so.1 and initialises it once. False (with the reason) when CUDA is not usable here.
bool cuda_available(std::string *why = nullptr);
int cuda_device_count();

// Classifies an address the application gave without a registration (desc == NULL). Host when CUDA is absent.
// Safe from any thread: cuPointerGetAttribute needs no context and launches nothing.
MemRef classify(const void *addr);

// Engine thread only. Copy between host memory (h) and memory of kind m at address a. Returns false with *why.
bool copy_to_host(void *h, uint64_t a, const MemRef &m, size_t len, std::string *why);
bool copy_from_host(uint64_t a, const MemRef &m, const void *h, size_t len, std::string *why);
// Engine thread only. Queues a copy behind every earlier one on the device's private stream without waiting
// (host memory: copied at once); sync() waits for them. Used where order matters more than completion, as a
// CQE's body before its phase byte.
bool copy_from_host_async(uint64_t a, const MemRef &m, const void *h, size_t len, std::string *why);
bool sync(const MemRef &m, std::string *why);

// Engine thread only: releases the streams and contexts the engine retained.
void engine_thread_release();

// The calling thread is the engine (set once by the engine); copies assert it, so a provider bug that would
// call CUDA from an application thread fails loudly instead of silently breaking NVSHMEM's contract.
void mark_engine_thread();

}  // namespace hmem
}  // namespace efaemu
