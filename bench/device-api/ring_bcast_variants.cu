// Diagnosis of NVSHMEM's ring-bcast example hanging over efaemu (issue 23): the same one-thread broadcast along a ring
// (PE 0 puts its data to PE 1, fences, sets PE 1's flag with signal_op; PE 1 waits for the flag), launched three ways,
// chosen by the program's name:
//   ring_bcast_plain       kernel<<<1, 1, 0, stream>>> on a created stream
//   ring_bcast_coop        nvshmemx_collective_launch (a cooperative launch on NVSHMEM's own stream), as the example
//   ring_bcast_coopdirect  cudaLaunchCooperativeKernel on a created non-blocking stream, without NVSHMEM
// and with "pageable" in the name, the host then waits as the example does: a cudaMemcpyAsync of the data into
// pageable host memory on the stream (the first runs, 2026-11-27, passed all three launches with a
// cudaStreamSynchronize there while the example hung).
// Each PE picks its GPU by node rank modulo the visible GPUs. Prints "PE<r> ok ..." or "PE<r> FAIL ...", exit 1 on a
// data error. Run through selftest's device_api check with DEVICE_API_TABLE_EXTRA rows (bench/device-api/gpu-run.sh).
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

__global__ void ring(int *data, int n, uint64_t *flag) {
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    if (me == 0) *flag = 1;
    nvshmem_signal_wait_until(flag, NVSHMEM_CMP_NE, 0);
    if (me == npes - 1) return;
    nvshmem_int_put(data, data, n, (me + 1) % npes);
    nvshmem_fence();
    nvshmemx_signal_op(flag, 1, NVSHMEM_SIGNAL_SET, (me + 1) % npes);
    *flag = 0;
}

int main(int, char **argv) {
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *how = strstr(base, "coopdirect") ? "coopdirect" : strstr(base, "coop") ? "coop" : "plain";
    nvshmem_init();
    const int me = nvshmem_my_pe();
    int count = 1;
    cudaGetDeviceCount(&count);
    cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % count);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, strcmp(how, "plain") ? cudaStreamNonBlocking : cudaStreamDefault);
    const int n = 32;
    int *data = (int *)nvshmem_malloc(n * sizeof(int));
    uint64_t *flag = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
    int host[n];
    for (int i = 0; i < n; i++) host[i] = me == 0 ? i : -1;
    cudaMemcpy(data, host, sizeof host, cudaMemcpyHostToDevice);
    nvshmemx_barrier_all_on_stream(st);
    cudaStreamSynchronize(st);
    fprintf(stderr, "PE%d launching (%s)\n", me, how);
    void *args[] = {&data, (void *)&n, &flag};
    cudaError_t e = cudaSuccess;
    if (!strcmp(how, "plain")) ring<<<1, 1, 0, st>>>(data, n, flag);
    else if (!strcmp(how, "coop")) e = nvshmemx_collective_launch((const void *)ring, 1, 1, args, 0, st) ? cudaErrorLaunchFailure : cudaSuccess;
    else e = cudaLaunchCooperativeKernel((const void *)ring, 1, 1, args, 0, st);
    if (e != cudaSuccess) {
        printf("PE%d FAIL launch (%s): %s\n", me, how, cudaGetErrorString(e));
        return 1;
    }
    const bool pageable = strstr(base, "pageable") != nullptr;
    if (pageable) e = cudaMemcpyAsync(host, data, sizeof host, cudaMemcpyDeviceToHost, st);  // pageable: waits for the kernel
    else e = cudaStreamSynchronize(st);
    fprintf(stderr, "PE%d kernel done (%s%s): %s\n", me, how, pageable ? ", pageable wait" : "", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    nvshmemx_barrier_all_on_stream(st);
    cudaMemcpyAsync(host, data, sizeof host, cudaMemcpyDeviceToHost, st);
    cudaStreamSynchronize(st);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += host[i] != i;
    if (bad) printf("PE%d FAIL ring broadcast (%s): %d of %d words wrong\n", me, how, bad, n);
    else printf("PE%d ok ring broadcast (%s)\n", me, how);
    nvshmem_free(data);
    nvshmem_free(flag);
    nvshmem_finalize();
    return bad ? 1 : 0;
}
