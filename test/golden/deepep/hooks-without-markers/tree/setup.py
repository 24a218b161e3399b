# Fixture written for nvshmem-efa tests: the shape of DeepEP V1's setup.py around include_dirs.
import os

if __name__ == '__main__':
    nvshmem_dir = os.getenv('NVSHMEM_DIR', None)
    sources = ['csrc/deep_ep.cpp', 'csrc/kernels/runtime.cu']
    include_dirs = ['csrc/']
    # CUDA 13 moved libcu++ (cuda/std/...) under include/cccl: "cuda/std/tuple: No such file or directory"
    _nvshmem_efa_cccl = os.path.join(os.environ.get('CUDA_HOME', '/usr/local/cuda'), 'include', 'cccl')
    if os.path.isdir(_nvshmem_efa_cccl):
        include_dirs.append(_nvshmem_efa_cccl)
    library_dirs = []
    if nvshmem_dir:
        sources.extend(['csrc/kernels/internode.cu', 'csrc/kernels/internode_ll.cu'])
        include_dirs.extend([f'{nvshmem_dir}/include'])
