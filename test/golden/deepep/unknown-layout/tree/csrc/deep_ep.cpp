// Fixture written for nvshmem-efa tests: a tree without csrc/kernels/configs.cuh or csrc/kernels/legacy/.
int fixture_main() { return 0; }
