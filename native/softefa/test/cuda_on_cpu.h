// Lets the GDA device header (nvshmemx_efa_gda_device.cuh) compile as host C++ so its queue logic runs on
// CPU threads against the software EFA in CI: each thread is one warp of one lane, CUDA atomics map to GCC
// atomics, fences to sequentially consistent fences, and spin loops yield. Test-only.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#define __device__
#define __host__
#define __forceinline__ inline

// __trap() aborts, as a kernel trap ends the process; a test that wants to see a trap (and its message) sets
// cpu_trap_throws on its thread and catches CpuTrap instead. Every message the device code prints through
// EFA_GDA_REPORT goes into cpu_trap_report on that thread, and to stdout unless the thread expects the trap.
struct CpuTrap {};
static thread_local bool cpu_trap_throws = false;
static thread_local std::string cpu_trap_report;
inline void cpu_trap() {
    if (cpu_trap_throws) throw CpuTrap{};
    abort();
}
#define __trap() cpu_trap()
__attribute__((format(printf, 1, 2))) inline int cpu_report(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cpu_trap_report += line;
    if (!cpu_trap_throws) fputs(line, stdout);  // a trap the test expects is checked, not printed
    return n;
}
#define EFA_GDA_REPORT cpu_report
#define EFA_GDA_SPIN_PAUSE() std::this_thread::yield()
#define EFA_GDA_HOST_NOW_NS()                                                                                    \
    ((uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()) \
         .count())

struct CpuThreadIdx {
    unsigned x, y, z;
};
static thread_local CpuThreadIdx threadIdx = {0, 0, 0};
// One block of 32-thread warps: a thread that sets threadIdx.x = 32 * w is warp w (the rail policy's channel).
static thread_local CpuThreadIdx blockIdx = {0, 0, 0};
static const CpuThreadIdx blockDim = {32, 1, 1};

inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned val) {
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long val) {
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAnd(unsigned *p, unsigned v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// One lane per warp: lane 0 is the whole warp.
inline int __shfl_sync(unsigned, int v, int) { return v; }
inline unsigned __shfl_sync(unsigned, unsigned v, int) { return v; }
inline unsigned __ballot_sync(unsigned, int pred) { return pred ? 1u : 0u; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline uint64_t min(uint64_t a, uint64_t b) { return a < b ? a : b; }
