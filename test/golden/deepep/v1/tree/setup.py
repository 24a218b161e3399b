# Fixture written for nvshmem-efa tests: the shape of DeepEP V1's setup.py around include_dirs.
import os

if __name__ == '__main__':
    nvshmem_dir = os.getenv('NVSHMEM_DIR', None)
    sources = ['csrc/deep_ep.cpp', 'csrc/kernels/runtime.cu']
    include_dirs = ['csrc/']
    library_dirs = []
    if nvshmem_dir:
        sources.extend(['csrc/kernels/internode.cu', 'csrc/kernels/internode_ll.cu'])
        include_dirs.extend([f'{nvshmem_dir}/include'])
