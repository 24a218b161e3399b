# Loaded into pplx-kernels' CMake by bench/pplx/gpu-run.sh as CMAKE_PROJECT_INCLUDE (right after its project()),
# so pplx-kernels' own files stay unmodified.
#
# pplx-kernels links nvshmem::nvshmem, NVSHMEM 3.4's combined static library (libnvshmem.a), and
# nvshmem::nvshmem_bootstrap_uid. nvshmem-efa build leaves libnvshmem.a out unless --nvshmem-static, and a process
# that also loads libnvshmem_host.so.3 (torch does; checks.sh preloads the build's) would then hold two NVSHMEM host
# libraries. So nvshmem::nvshmem here is what DeepEP links: the build's host library (shared, the one copy in the
# process) and its device library (static, the device link resolves NVSHMEM's device functions, the device API's
# hooks among them, from it).
find_package(NVSHMEM REQUIRED)
if(NOT TARGET nvshmem::nvshmem)
  add_library(nvshmem::nvshmem INTERFACE IMPORTED)
  set_target_properties(nvshmem::nvshmem PROPERTIES INTERFACE_LINK_LIBRARIES "nvshmem::nvshmem_host;nvshmem::nvshmem_device")
  message(STATUS "nvshmem::nvshmem = nvshmem::nvshmem_host + nvshmem::nvshmem_device (${NVSHMEM_LIB_DIR})")
endif()
# CUDA 13 keeps CCCL (cuda/std/...) under include/cccl, which nvcc adds by itself and g++ does not. NVSHMEM's headers
# include it; pplx-kernels' C++ files include them with only NVSHMEM_INCLUDE_DIR (they link nvshmem::nvshmem, which
# would carry CCCL::CCCL, only as INTERFACE).
foreach(_d IN LISTS CUDAToolkit_INCLUDE_DIRS)
  if(EXISTS "${_d}/cccl/cuda/std/tuple")
    include_directories(SYSTEM "${_d}/cccl")
    message(STATUS "CCCL include for C++ sources: ${_d}/cccl")
    break()
  endif()
endforeach()
