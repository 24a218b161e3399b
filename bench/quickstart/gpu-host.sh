# Sourced by the scripts that run the tool on a lent GPU host (bench/quickstart/quickstart-gpu.sh,
# bench/device-api/gpu-run.sh), from the repository root, after setting W (their scratch dir) and OUT, PHASE defaults.
# The host has no network and no Node.js: node, the standalone bundle and the pinned sources come from .carry/ (C)
# and .carry/qs (Q) through the tool's documented mirror variables (NVSHMEM_EFA_<PKG>_URL, NVSHMEM_EFA_FABRIC_LOCK).
# bench/carry/make-carry.sh makes .carry/ (ignored) on the machine that starts the call.
# NVLink multicast stays off (a rule of the GPU hosts).
# shellcheck shell=bash
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# shellcheck disable=SC2034 # C: read by the scripts that source this
C=$(pwd)/.carry Q=$(pwd)/.carry/qs
mkdir -p "$W" "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PYTHON=$(command -v python3)
export CI=true PYTHON
nvshmem-efa() { "$W/node" "$W/bundle/nvshmem-efa.mjs" "$@"; }
export NVSHMEM_EFA_FABRIC_LOCK=$Q/fabric-lock.json \
  NVSHMEM_EFA_LIBFABRIC_URL=file://$Q/libfabric-2.3.0.tar.bz2 \
  NVSHMEM_EFA_FABTESTS_URL=file://$Q/fabtests-2.3.0.tar.bz2 \
  NVSHMEM_EFA_RDMA_CORE_URL=file://$Q/rdma-core-60.1.tar.gz \
  NVSHMEM_EFA_GDRCOPY_URL=file://$Q/gdrcopy-2.5.1.tar.gz
# The pip NVSHMEM stays: the hosts' torch (2.11+cu130) requires nvidia-nvshmem-cu13 and links its libnvshmem_host.so.3,
# so removing it breaks `import torch` (and with it the DeepEP build, exit 4). The tool's DeepEP checks preload the
# build's library instead (src/core/pip-nvshmem.ts); scripts that need it first set LD_LIBRARY_PATH.

# device_api_build WD [ARG...]: node and the standalone bundle into $W, the carried NVSHMEM 3.4.5 source, then
# nvshmem-efa build ARG... into WD, with the device API hooks unless ARG has --no-device-api (bench/device-api/gpu-run.sh,
# bench/pplx/gpu-run.sh). Prints the report's GDA lines; on failure the log's tail, and exits 1.
device_api_build() {
  local wd=$1 b0 rc
  shift
  cd "$W" || exit 1
  [ -x node ] || { xz -dc "$C/node.xz" >node && chmod +x node; }
  rm -rf bundle && tar xJf "$C/bundle.tar.xz"
  [ -d src/nvshmem-v3.4.5 ] || { mkdir -p src && tar xzf "$C/nvshmem-v3.4.5.tar.gz" -C src; }
  stamp "build $* into $wd"
  b0=$(date +%s)
  nvshmem-efa build --nvshmem-src "$W/src/nvshmem-v3.4.5" "$@" --efa-io-defs "$C/efa_io_defs.h" --work-dir "$wd" >"$OUT/build.log" 2>&1
  rc=$?; echo "build exit $rc in $(($(date +%s) - b0)) s" | tee -a "$OUT/build.log"
  cp "$wd/report.md" "$OUT/report.md" 2>/dev/null
  grep -E 'NVSHMEM device API over GDA|EFA GDA:|deepep-gda-path' "$wd/report.md" | cut -c1-400
  [ "$rc" = 0 ] || { tail -40 "$OUT/build.log"; mkdir -p "$OUT/logs"; cp "$wd"/logs/*nvshmem* "$OUT/logs/" 2>/dev/null; exit 1; }
}
