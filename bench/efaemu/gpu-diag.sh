#!/usr/bin/env bash
# One-GPU diagnosis run (cheaper machine): builds DeepEP from the carry with the tool's build-deepep recipe, sends the
# built module back through $OUT, and runs DeepEP's low-latency test as ONE process over efaemu (WORLD_SIZE=1) with
# the same environment as checks.sh, NVSHMEM INFO logging, Python's faulthandler and the interposer's crash report.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/efaemu-out}; mkdir -p "$OUT"
exec > >(tee "$OUT/diag.log") 2>&1
WD=/work/build/nv LF=/work/wt11/.cache/libfabric-2.3.0 E=/opt/efaemu R=/opt/efaemu/results
mkdir -p "$E" "$R"
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
tar xJf "$C/nv.tar.xz" -P; tar xJf "$C/lf.tar.xz" -P
tar xJf "$C/pre.tar.xz" -C "$E"; tar xJf "$C/bundle.tar.xz" -C "$E"; tar xJf "$C/deepep.tar.xz" -C "$E"
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
stamp "building DeepEP"
( cd "$E/DeepEP" && NVSHMEM_DIR=$WD/install/nvshmem TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) CUDA_HOME=$CUDA_HOME \
    NVCC_APPEND_FLAGS=-DNVSHMEM_EFA_SHIM_GDA timeout 400 python3 setup.py build_ext --inplace >"$R/deepep-build.log" 2>&1; echo "exit $?" >>"$R/deepep-build.log" )
tail -2 "$R/deepep-build.log"; stamp "built"
so=$(ls "$E/DeepEP"/deep_ep_cpp*.so); ls -la "$so"
xz -T0 -c "$so" >"$OUT/deep_ep_cpp.so.xz"; ls -la "$OUT/deep_ep_cpp.so.xz"
NS=$E/bundle/native/efaemu/scripts/sysfs-ns.sh
run1() {  # name extra-env...
  local name=$1; shift
  EFAEMU_SYSFS_NS='' "$NS" -- env CUDA_VISIBLE_DEVICES=0 FI_PROVIDER_PATH=+$E/efaemu/prov/libefa-fi.so FI_PROVIDER=efa \
    NVSHMEM_REMOTE_TRANSPORT=libfabric NVSHMEM_LIBFABRIC_PROVIDER=efa NVSHMEM_DISABLE_P2P=1 NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo \
    NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 LD_LIBRARY_PATH=$E/efaemu/softgdr:$LF/lib:$WD/install/nvshmem/lib \
    LD_PRELOAD=$E/efaemu/interpose/libefaemu-cuda-interpose.so PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 NVSHMEM_DEBUG=INFO \
    EFAEMU_STATS=$R/stats-$name PYTHONPATH=$E/DeepEP RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29700 + RANDOM % 200)) "$@" \
    timeout -k 5 ${LIMIT:-70} python3 "$E/DeepEP/tests/test_low_latency.py" --num-processes 1 --disable-nvlink ${ARGS:-} \
    >"$R/$name.log" 2>&1
  echo "$name: rc $?"; grep -E "efaemu-cuda-interpose|Fatal Python|Segmentation|File \"|Traceback|Error|bandwidth" "$R/$name.log" | head -40 | cut -c1-220
  mkdir -p "$R/stats-$name"
}
stamp "1 PE, GDA on"; run1 gda_on NVSHMEM_EFA_GDA_ENABLE=1 EFAEMU_REORDER=8
stamp "1 PE, GDA off"; ARGS="--num-experts 16 --num-tokens 32" run1 gda_off NVSHMEM_EFA_GDA_ENABLE=0
stamp "done"
tar czf "$OUT/diag-logs.tgz" -C "$E" results
