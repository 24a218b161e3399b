#!/usr/bin/env bash
# Does the device API patch compile on an NVSHMEM release other than the ones the GPU runs used (issue 23, part 2:
# "whatever of 3.2.5/3.3.x shares the shape")? No GPU: the patcher's own fixes (patch-tree.ts) on a copy of the tree,
# then each file they change compiled against that tree's own headers, as NVSHMEM's CMake compiles it:
#   transfer_device.cuh.in as the device library's transfer_device.cu (-rdc, sm_90, --maxrregcount=32: the caller
#     hooks' entries instantiated for every type and scope; ptxas must report them), init_device.cu (the slot);
#   init.cu and transport.cpp, the host side (the slot's fill, copy, clear and its state map), with nvshmem_host's
#     include directories (src/CMakeLists.txt) and NVML's header from NVML_INCLUDE (a directory with nvml.h, e.g. from
#     Debian non-free's libnvidia-ml-dev, unpacked: apt-get download libnvidia-ml-dev; dpkg-deb -x), else a stand-in
#     nvml.h that names the types NVSHMEM 3.4.5 and older use (3.5's init.cu needs the real header).
#   bash bench/device-api/layout-compile.sh NVSHMEM_SRC [OUT_DIR]
# Prints one line per file and a closing "compiles: yes|no"; exit 1 on a refusal or a compile error.
set -uo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}
# shellcheck source=bench/device-api/cost-common.sh
source "$(dirname "$0")/cost-common.sh"
mkdir -p "$O"
gen_headers "$N" "$O/gen"
hooked_tree "$N" "$O/tree" || exit 1
echo "patcher: $(grep -c $'^applied\t' "$O/tree.patch.log") fixes applied, $(grep -c $'^refused\t' "$O/tree.patch.log") refused"
if [ -n "${NVML_INCLUDE:-}" ]; then mkdir -p "$O/nvml" && cp "$NVML_INCLUDE/nvml.h" "$O/nvml/"; else nvml_stub "$O/nvml"; fi
T=$O/tree
dev=(-I "$O/gen" -I "$T/src/include" -I "$COST_R/test/efa_abi")
host=(-I "$O/gen" -I "$T/src/include" -I "$T/src/include/host/env" -I "$T/src/device/coll" -I "$T/src/host/coll"
  -I "$T/src/host/stream/coll" -I "$T/src/host/topo" -I "$O/nvml" -I "${CUDA_HOME:-/usr/local/cuda}/include")
ok=yes
compile() { # NAME LOG COMMAND...
  local name=$1 log=$2; shift 2
  if "$@" >"$log" 2>&1; then echo "ok    $name"; else ok=no; echo "FAIL  $name"; grep -m5 -E 'error' "$log"; fi
}
cp "$T/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/transfer_device.cu"
compile "transfer_device (device library, entries)" "$O/transfer_device.log" \
  nvcc -std=c++17 -rdc=true -arch=sm_90 -maxrregcount=32 -Xptxas -v -c "$O/transfer_device.cu" -o "$O/transfer_device.o" "${dev[@]}"
entries=$(grep -E '^ptxas info +: Function properties for ' "$O/transfer_device.log" 2>/dev/null | grep -c 'nvshmemi_efa_gda_api_')
echo "      ptxas compiled $entries functions of the GDA entries (nvshmemi_efa_gda_api_*)"
[ "$entries" -gt 0 ] || ok=no
compile "init_device.cu (the slot)" "$O/init_device.log" \
  nvcc -std=c++17 -rdc=true -arch=sm_90 -c "$T/src/device/init/init_device.cu" -o "$O/init_device.o" "${dev[@]}"
compile "host/init/init.cu" "$O/init.log" nvcc -std=c++17 -c "$T/src/host/init/init.cu" -o "$O/init.o" "${host[@]}"
compile "host/transport/transport.cpp" "$O/transport.log" g++ -std=c++17 -c "$T/src/host/transport/transport.cpp" -o "$O/transport.o" "${host[@]}"
[ -f "$O/transport.o" ] && echo "      transport.o defines the host slot: $(nm "$O/transport.o" | grep -c ' [BD] nvshmemi_efa_gda_api_h$')"
echo "compiles: $ok"
[ "$ok" = yes ]
