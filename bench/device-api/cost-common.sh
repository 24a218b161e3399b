# shellcheck shell=bash
# Shared by sass-off-path.sh and perftest-regs.sh (sourced): NVSHMEM's generated headers, a copy of the tree patched by
# the device API patcher, and the CUDA binary tools.
#   gen_headers NVSHMEM_SRC DIR   DIR/non_abi/nvshmem_build_options.h and nvshmem_version.h from their .in files,
#                                 every option off (no IBGDA), version 3.4.5 (as ptxas-cost.sh makes them)
#   hooked_tree NVSHMEM_SRC DIR   DIR: a copy of the tree with the device API patch applied (patch-tree.ts)
#   nvml_stub DIR                 DIR/nvml.h: a stand-in naming the four NVML types perftest/common/utils.h uses (NVML's
#                                 header is not on the machine)
#   need_tool NAME                the path of cuobjdump or nvdisasm: $CUOBJDUMP / $NVDISASM, else PATH, else CUDA's bin
# The CUDA 13.0 toolkit on the development machine has nvcc, ptxas and nvlink but no cuobjdump or nvdisasm. Debian's
# non-free nvidia-cuda-toolkit (12.4.131, trixie) has both, and they read sm_90 objects from nvcc 13.0; extracted from
# the .deb (apt-get download nvidia-cuda-toolkit; dpkg-deb -x), nothing installed.
COST_R=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
gen_headers() {
  mkdir -p "$2/non_abi"
  for h in nvshmem_build_options nvshmem_version; do
    sed -e 's/#cmakedefine \(\w*\).*/\/* #undef \1 *\//' -e 's/@NVSHMEM_VERSION_MAJOR@/3/;s/@NVSHMEM_VERSION_MINOR@/4/;s/@NVSHMEM_VERSION_PATCH@/5/' \
      -e 's/@[A-Za-z_]*@/0/g' "$1/src/include/non_abi/$h.h.in" > "$2/non_abi/$h.h"
  done
}
hooked_tree() {
  rm -rf "$2" && cp -r "$1" "$2"
  (cd "$COST_R" && npx tsx bench/device-api/patch-tree.ts "$2" > "$2.patch.log") ||
    { echo "the device API patcher refused $1:"; grep refused "$2.patch.log"; return 1; }
}
nvml_stub() {
  mkdir -p "$1"
  cat > "$1/nvml.h" <<'H'
/* Stand-in for NVML's header: only the types perftest/common/utils.h names. */
#ifndef NVML_STUB_H
#define NVML_STUB_H
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef enum nvmlGpuP2PCapsIndex_enum { NVML_P2P_CAPS_INDEX_READ = 0 } nvmlGpuP2PCapsIndex_t;
typedef enum nvmlGpuP2PStatus_enum { NVML_P2P_STATUS_OK = 0 } nvmlGpuP2PStatus_t;
#endif
H
}
need_tool() {
  local var=${1^^}
  local p=${!var:-}
  [ -n "$p" ] || p=$(command -v "$1" || true)
  [ -n "$p" ] || { [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/$1" ] && p=${CUDA_HOME:-/usr/local/cuda}/bin/$1; }
  [ -n "$p" ] || { echo "no $1: set $var, or put it on PATH (Debian non-free nvidia-cuda-toolkit has it)" >&2; return 1; }
  echo "$p"
}
