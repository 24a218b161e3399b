/* What ptxas does with a call in a function, in a few lines (issue 23, the device API hook's shapes). Not built by
 * anything: compile and read the SASS by hand,
 *   nvcc -rdc=true -arch=sm_90 -maxrregcount=32 -Xptxas -v -c ptxas-probe.cu -o probe.o
 *   cuobjdump -xelf all probe.o && nvdisasm -c probe.1.sm_90.cubin
 * - fA (the hook first in the body) saves every callee-saved register the body uses at the entry, before the slot's
 *   branch: no shrink-wrapping. fB (__builtin_expect) compiles to the same SASS.
 * - fC and fE: `return f(args)` is a CALL, then the restore of R20:R21, then RET: no tail call.
 * - K2 (the hook inline in the caller): the slot's load and branch in the kernel. ptxas unswitches the loop, so the
 *   check runs once before one of two copies of it. K2 uses 26 registers of its own against K1's 24 (nvcc 13.0): the
 *   caller shape can change a kernel's allocation (in NVSHMEM's 15 pt-to-pt perftest kernels it did not). */
struct slot_t { int pad; int on; };
extern __constant__ slot_t slot;
__device__ __noinline__ void gda(void *p, int v, int pe);
__device__ int *g_ptr;

#define BODY                                                                                                      \
    unsigned long long acc[12];                                                                                   \
    for (int i = 0; i < 12; i++) acc[i] = atomicAdd((unsigned long long *)g_ptr + i * pe, (unsigned long long)v); \
    for (int i = 0; i < 12; i++) ((unsigned long long *)p)[i * v] = acc[i] * acc[(i + 3) % 12];

__device__ __noinline__ void heavy(void *p, int v, int pe) { BODY }
__device__ __noinline__ void fA(void *p, int v, int pe) {
    if (slot.on) return gda(p, v, pe);
    BODY
}
__device__ __noinline__ void fB(void *p, int v, int pe) {
    if (__builtin_expect(slot.on, 0)) return gda(p, v, pe);
    BODY
}
__device__ __noinline__ void fC(void *p, int v, int pe) {
    if (slot.on) return gda(p, v, pe);
    return heavy(p, v, pe);
}
__device__ __noinline__ void fE(void *p, int v, int pe) { return heavy(p, v + 1, pe); }

__device__ __forceinline__ void hooked(void *p, int v, int pe) {
    if (slot.on) gda(p, v, pe);
    else heavy(p, v, pe);
}
__global__ void K1(int *p, int n, int pe) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) { heavy(p + i, i * 3, pe); p[i + n] += i; }
}
__global__ void K2(int *p, int n, int pe) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) { hooked(p + i, i * 3, pe); p[i + n] += i; }
}
