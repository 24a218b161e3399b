#!/usr/bin/env bash
# Runs the issue-11 checks on a 2-GPU host from the carry made by prepare-carry.sh (run from the directory that
# holds it: `bash .carry-efaemu/run.sh`). Logs and tables go to $OUT (the device tool brings them back).
#   1. unpack: node, the standalone bundle, the NVSHMEM work dir, libfabric 2.3.0, efaemu + pe_test, DeepEP
#   2. DeepEP (patched by `nvshmem-efa patch`) builds in the background with the recipe of the tool's build-deepep
#      step (setup.py build_ext --inplace; NVSHMEM_DIR, TORCH_CUDA_ARCH_LIST, NVCC_APPEND_FLAGS=-DNVSHMEM_EFA_SHIM_GDA)
#   3. meanwhile `nvshmem-efa selftest` runs the checks that need no DeepEP, then the DeepEP ones
# NVLink multicast stays off everywhere (a rule of the GPU hosts).
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/efaemu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
WD=${WD:-/work/build/nv} LF=${LF:-/work/wt11/.cache/libfabric-2.3.0} E=/opt/efaemu R=/opt/efaemu/results
t0=$(date +%s)
DEADLINE=${DEADLINE:-540}  # the whole run stays inside the device tool's 10-minute command limit
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
trap 'tar czf "$OUT/logs.tgz" -C /opt/efaemu results 2>/dev/null' EXIT
stamp "machine: $(hostname) $(uname -r) $(nproc) cores"; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
nvcc --version | tail -1; g++ --version | head -1; nvidia-smi topo -m 2>&1 | head -4; ls /sys/class/infiniband 2>&1 | head -3
mkdir -p "$E" "$R"
tar xJf "$C/nv.tar.xz" -P; tar xJf "$C/lf.tar.xz" -P
tar xJf "$C/pre.tar.xz" -C "$E"; tar xJf "$C/bundle.tar.xz" -C "$E"; tar xJf "$C/deepep.tar.xz" -C "$E"
xz -dc "$C/node.xz" >"$E/node"; chmod +x "$E/node"
stamp "unpacked; node $("$E/node" --version)"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
if [ -f "$C/deep_ep_cpp.so.xz" ]; then  # built by an earlier run of this script on the same image
  ( xz -dc "$C/deep_ep_cpp.so.xz" >"$E/DeepEP/deep_ep_cpp.cpython-312-x86_64-linux-gnu.so"; echo "carried module" >"$R/deepep-build.log" ) &
else
( cd "$E/DeepEP" && NVSHMEM_DIR=$WD/install/nvshmem TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) CUDA_HOME=$CUDA_HOME \
    NVCC_APPEND_FLAGS=-DNVSHMEM_EFA_SHIM_GDA timeout ${DEEPEP_BUILD_LIMIT:-$(( $(left) - 220 ))} python3 setup.py build_ext --inplace >"$R/deepep-build.log" 2>&1
  echo "exit $?" >>"$R/deepep-build.log" ) &
fi
build=$!
SELF=("$E/node" "$E/bundle/nvshmem-efa.mjs" selftest --work-dir "$WD" --libfabric-home "$LF" --efaemu-build "$E/efaemu" --pe-test "$E/pe_test")
stamp "selftest, checks without DeepEP"
if [ "${CHECKS1-x}" != "" ]; then
  NVSHMEM_DEBUG=${NVSHMEM_DEBUG1:-INFO} timeout -k 5 "$(left)" "${SELF[@]}" --checks "${CHECKS1:-fi_info,fabtests,nvshmem_perf,gda_kernel,neg_wrong_provider,neg_fail_injection}" \
    --timeout 150 --results "$R/selftest-1" | tee "$OUT/selftest-1.txt"
fi
stamp "waiting for the DeepEP build"
wait $build; tail -3 "$R/deepep-build.log"; ls "$E/DeepEP"/deep_ep_cpp*.so 2>/dev/null
stamp "selftest, DeepEP checks"
timeout -k 5 "$(left)" "${SELF[@]}" --checks "${CHECKS2:-deepep_ll,deepep_counters,deepep_shrink,deepep_pressure}" --deepep-dir "$E/DeepEP" --timeout ${DEEPEP_TIMEOUT:-200} \
  --results "$R/selftest-2" | tee "$OUT/selftest-2.txt"
so=$(ls "$E/DeepEP"/deep_ep_cpp*.so 2>/dev/null) && [ ! -f "$C/deep_ep_cpp.so.xz" ] && xz -T0 -c "$so" >"$OUT/deep_ep_cpp.so.xz"
if [ -z "${NO_BISECT:-}" ] && ! grep -qP '^deepep_ll\s+PASS' "$OUT/selftest-2.txt" && [ -n "$so" ] && [ "$(left)" -gt 90 ]; then
  # Which piece makes DeepEP fail where pe_test passes: without the interposer (GDA off, which needs it), and with
  # NCCL kept off any network plugin. Each bounded to 30 s; small sizes.
  for v in "noprel:PRELOAD_UNDER_TEST=" "ncclsock:NCCL_NET=Socket NCCL_NET_PLUGIN=none"; do
    stamp "bisect ${v%%:*}"
    env ${v#*:} RESULTS=$R/bisect-${v%%:*} EFAEMU_BUILD=$E/efaemu LIBFABRIC_HOME=$LF NVSHMEM_HOME=$WD/install/nvshmem DEEPEP_DIR=$E/DeepEP \
      CHECK_TIMEOUT=30 DEEPEP_ARGS="--num-experts 8 --num-tokens 16 --hidden 2048 --num-topk 4" REORDER=0 \
      DEEPEP_GDA=0 bash "$E/bundle/native/efaemu/gpu/checks.sh" deepep_ll 2>&1 | tail -2
    grep -hE "efaemu-cuda-interpose|Fatal Python|File \"|bandwidth" "$R/bisect-${v%%:*}"/*.log 2>/dev/null | head -12 | cut -c1-200
  done
fi
stamp "done"
