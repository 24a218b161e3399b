#include <cuda.h>
#include <stdio.h>
int nvshmemi_host_init_count(void);
int main() {
    int v = 0;
    if (cuDriverGetVersion(&v) != CUDA_SUCCESS) v = -1;
    printf("mini nvshmem-info: driver %d, host %d\n", v, nvshmemi_host_init_count());
    return 0;
}
