// From the one-GPU study (shared/docs/research/one_gpu_selftest.md, experiment 1), with the launch kind and shared
// memory added (issue 34: why two spinning grids that fill the GPU are not time-sliced). bench/one-gpu/gpu-run.sh runs it.
// mpg_probe.cu: can two processes whose kernels spin-wait on each other share one GPU?
// Each process's kernel stores a counter into mapped host shared memory (as a kernel rings an emulated doorbell);
// a CPU thread of the peer copies it into the peer's own GPU memory with cudaMemcpyAsync on a private non-blocking
// stream (as efaemu's engine places data); the peer's kernel spin-waits for it. Ping-pong ITERS times.
//   mpg_probe ROLE(0|1) SHM_NAME ITERS [full|BLOCKS] [STALL_S] [coop|plain] [SMEM_KB]
// full: a grid filling the GPU (SMs x occupancy), the rest of the grid spinning as DeepEP's warps do. coop (default):
// cudaLaunchCooperativeKernel, as DeepEP launches; plain: <<<>>>. SMEM_KB: dynamic shared memory per block (DeepEP's
// combine takes ~115 KB: one block per SM).
// RESULT line: round trips done, stalled (no progress for STALL_S), us per round trip, SMs seen, clock64 GHz
// (cycles per globaltimer ns: well under the SM clock means clock64 stops while the context is switched out),
// and whether a dma-buf fd can be exported for device memory (cuMemGetHandleForAddressRange, what GDA's CQ uses).
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

struct Shm { volatile unsigned long long out[2]; std::atomic<int> ready[2]; std::atomic<int> done[2]; };
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(3); } } while (0)

__device__ unsigned long long gtime() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// res: [0] round trips, [1] stalled, [2] ns, [3] clock64 cycles
__global__ void pingpong(int role, int iters, volatile unsigned long long *out, volatile unsigned long long *in,
                         volatile int *stop, unsigned long long stall_ns, unsigned long long *res) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long t0 = gtime(), k;
    long long c0 = clock64();
    int stalled = 0;
    for (k = 1; k <= (unsigned long long)iters; k++) {
      if (role == 0) { *out = k; __threadfence_system(); }
      unsigned long long tk = gtime();
      while (*in < k) if (gtime() - tk > stall_ns) { stalled = 1; break; }
      if (stalled) break;
      if (role == 1) { *out = k; __threadfence_system(); }
    }
    res[0] = k - 1; res[1] = stalled; res[2] = gtime() - t0; res[3] = clock64() - c0;
    __threadfence();
    *stop = 1;
  } else {
    while (!*stop) {}
  }
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mpg_probe ROLE(0|1) SHM_NAME ITERS [full|BLOCKS] [STALL_S]\n"); return 2; }
  int role = atoi(argv[1]), iters = atoi(argv[3]);
  const bool coop = argc <= 6 || strcmp(argv[6], "plain") != 0;
  const int smem = argc > 7 ? atoi(argv[7]) * 1024 : 0;
  const char *name = argv[2], *grid = argc > 4 ? argv[4] : "full";
  unsigned long long stall_ns = (unsigned long long)((argc > 5 ? atof(argv[5]) : 20.0) * 1e9);
  int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) { perror("shm"); return 3; }
  Shm *shm = (Shm *)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  int sms = 0, ctx_sms = -1, dmabuf_attr = 0, dmabuf_fd = -1;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUexecAffinityParam aff;
  if (cuCtxGetExecAffinity(&aff, CU_EXEC_AFFINITY_TYPE_SM_COUNT) == CUDA_SUCCESS) ctx_sms = (int)aff.param.smCount.val;
  CUdevice dev;
  cuDeviceGet(&dev, 0);
  cuDeviceGetAttribute(&dmabuf_attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
  void *buf;
  CK(cudaMalloc(&buf, 2 << 20));
  CUresult dr = cuMemGetHandleForAddressRange(&dmabuf_fd, (CUdeviceptr)buf, 2 << 20, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (dmabuf_fd >= 0) close(dmabuf_fd);

  unsigned long long *d_in, *d_res, *h_stage, *d_out;
  int *d_stop;
  CK(cudaMalloc(&d_in, 8)); CK(cudaMalloc(&d_res, 32)); CK(cudaMalloc(&d_stop, 4));
  CK(cudaMemset(d_in, 0, 8)); CK(cudaMemset(d_res, 0, 32)); CK(cudaMemset(d_stop, 0, 4));
  CK(cudaHostAlloc(&h_stage, 8, cudaHostAllocDefault));
  CK(cudaHostRegister((void *)shm, 4096, cudaHostRegisterMapped));
  CK(cudaHostGetDevicePointer((void **)&d_out, (void *)&shm->out[role], 0));
  CK(cudaDeviceSynchronize());

  std::atomic<bool> quit{false};
  std::thread relay([&] {  // the peer's counter into this process's GPU memory, as efaemu's engine does
    CK(cudaSetDevice(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long last = 0;
    while (!quit.load()) {
      unsigned long long v = shm->out[1 - role];
      if (v == last) continue;
      *h_stage = v;
      CK(cudaMemcpyAsync(d_in, h_stage, 8, cudaMemcpyHostToDevice, s));
      CK(cudaStreamSynchronize(s));
      last = v;
    }
  });

  int threads = 256, occ = 0;
  if (smem > 48 * 1024) CK(cudaFuncSetAttribute(pingpong, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, pingpong, threads, smem));
  int blocks = strcmp(grid, "full") == 0 ? sms * occ : atoi(grid);
  shm->ready[role] = 1;
  auto w0 = std::chrono::steady_clock::now();
  while (!shm->ready[1 - role]) {
    if (std::chrono::steady_clock::now() - w0 > std::chrono::seconds(60)) { fprintf(stderr, "peer never came\n"); return 3; }
  }
  cudaStream_t ks;
  CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
  void *args[] = {&role, &iters, &d_out, &d_in, &d_stop, &stall_ns, &d_res};
  if (coop) CK(cudaLaunchCooperativeKernel((void *)pingpong, blocks, threads, args, smem, ks));
  else CK(cudaLaunchKernel((void *)pingpong, blocks, threads, args, smem, ks));
  CK(cudaStreamSynchronize(ks));
  quit = true;
  relay.join();
  unsigned long long res[4];
  CK(cudaMemcpy(res, d_res, sizeof res, cudaMemcpyDeviceToHost));
  printf("RESULT role %d %s blocks %d smem %d KB (SMs %d, per SM %d, context SMs %d) round_trips %llu/%d stalled %llu us_per_round_trip %.1f "
         "clock64_GHz %.3f dmabuf_attr %d dmabuf_export %s\n",
         role, coop ? "coop" : "plain", blocks, smem / 1024, sms, occ, ctx_sms, res[0], iters, res[1], res[0] ? res[2] / 1e3 / res[0] : 0.0,
         res[2] ? (double)res[3] / res[2] : 0.0, dmabuf_attr, dr == CUDA_SUCCESS ? "ok" : "failed");
  shm->done[role] = 1;
  if (role == 0) {
    auto d0 = std::chrono::steady_clock::now();
    while (!shm->done[1] && std::chrono::steady_clock::now() - d0 < std::chrono::seconds(30)) usleep(1000);
    shm_unlink(name);
  }
  return (res[0] == (unsigned long long)iters && !res[1]) ? 0 : 1;
}
