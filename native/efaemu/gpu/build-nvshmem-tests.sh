#!/usr/bin/env bash
# Builds NVSHMEM's own perftests and examples, unmodified, from an NVSHMEM source tree against an NVSHMEM install
# (selftest's device_api check, issue 23). Each project is configured standalone, as NVSHMEM documents it
# (NVSHMEM_PREFIX, find_package(NVSHMEM)), without MPI or OpenSHMEM: the programs then bootstrap with nvshmem_init()'s
# default PMI-1, which `nvshmem-efa launch` serves.
#
#   build-nvshmem-tests.sh SRC PREFIX OUT ARCH [TARGET...]
#
# SRC: the NVSHMEM source tree (perftest/, examples/, src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in).
# The two projects are copied to OUT/src first: the perftest project writes a configured copy of
# transfer_device.cuh into its own source directory, and the user's tree is never written to.
# TARGET: perftest targets (perf_device_shmem_put_bw ...) and example targets (put-block ...); default: all of both.
# device_api_order and its negative controls (device_api_order_<control>) are ours, not NVSHMEM's: built by
# build-device-api-order.sh into OUT/ours (the controls need NVSHMEM_BUILD, the NVSHMEM build directory).
# Programs land in OUT/perftest/... and OUT/examples/ (the cmake build dirs). Incremental: a second run rebuilds only
# what changed. CUDA_HOME (default /usr/local/cuda) names the toolkit; JOBS the parallel jobs (default: all cores).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: build-nvshmem-tests.sh SRC PREFIX OUT ARCH [TARGET...]" >&2; exit 2; }
SRC=$1 PREFIX=$2 OUT=$3 ARCH=$4
shift 4
CUDA=${CUDA_HOME:-/usr/local/cuda}
JOBS=${JOBS:-$(nproc)}
for need in "$SRC/perftest/CMakeLists.txt" "$SRC/examples/CMakeLists.txt" "$PREFIX/lib/cmake/nvshmem" "$CUDA/bin/nvcc"; do
  [ -e "$need" ] || { echo "build-nvshmem-tests.sh: $need is missing" >&2; exit 4; }
done
mkdir -p "$OUT/src/src/include/non_abi/device/pt-to-pt"
# cp -u keeps the times of what did not change, so the second build is incremental.
cp -ru "$SRC/perftest" "$SRC/examples" "$OUT/src/"
cp -u "$SRC/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$OUT/src/src/include/non_abi/device/pt-to-pt/"

perf=() ex=() ours=()
for t in "$@"; do
  case $t in perf_*) perf+=("$t") ;; device_api_order*) ours+=("$t") ;; *) ex+=("$t") ;; esac
done
# Both projects alias NVSHMEM's combined static library (add_library(nvshmem ALIAS nvshmem::nvshmem)) whether or not
# they link it, and nvshmem-efa builds it only with --nvshmem-static. Where the install has none, a stand-in interface
# target is defined right after project() (CMAKE_PROJECT_INCLUDE): the host and device libraries, which is what the
# programs link unless NVSHMEM_TEST_STATIC_LIB is on (it is not here).
ALIAS="$OUT/nvshmem-static-stand-in.cmake"
cat >"$ALIAS" <<'CMAKE'
if(NOT TARGET nvshmem::nvshmem AND NOT EXISTS "${NVSHMEM_PREFIX}/lib/libnvshmem.a")
  add_library(nvshmem::nvshmem INTERFACE IMPORTED)
  set_property(TARGET nvshmem::nvshmem PROPERTY INTERFACE_LINK_LIBRARIES nvshmem::nvshmem_host nvshmem::nvshmem_device)
endif()
CMAKE
configure() {  # configure NAME: OUT/NAME from OUT/src/NAME
  # A configure that failed leaves a CMakeCache.txt but no Makefile: configured again.
  [ -f "$OUT/$1/Makefile" ] && return 0
  NVSHMEM_MPI_SUPPORT=0 NVSHMEM_SHMEM_SUPPORT=0 cmake -S "$OUT/src/$1" -B "$OUT/$1" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PROJECT_INCLUDE="$ALIAS" \
    -DNVSHMEM_PREFIX="$PREFIX" -DNVSHMEM_MPI_SUPPORT=OFF -DNVSHMEM_SHMEM_SUPPORT=OFF -DNVSHMEM_BUILD_BITCODE_LIBRARY=OFF \
    -DCUDA_HOME="$CUDA" -DCMAKE_CUDA_COMPILER="$CUDA/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES="$ARCH"
}
build() {  # build NAME TARGET...: all of them when none is named
  local d=$1; shift
  if [ $# -gt 0 ]; then cmake --build "$OUT/$d" -j "$JOBS" --target "$@"; else cmake --build "$OUT/$d" -j "$JOBS"; fi
}
if [ $# -eq 0 ] || [ ${#perf[@]} -gt 0 ]; then configure perftest; build perftest "${perf[@]}"; fi
if [ $# -eq 0 ] || [ ${#ex[@]} -gt 0 ]; then configure examples; build examples "${ex[@]}"; fi
if [ ${#ours[@]} -gt 0 ]; then bash "$(dirname "$0")/build-device-api-order.sh" "$PREFIX" "$OUT" "$ARCH" "${ours[@]}"; fi
echo "built in $OUT"
