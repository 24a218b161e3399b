#!/usr/bin/env bash
# DeepEP on our IBGDA-less NVSHMEM, on a 2-GPU machine without network access:
#   bench/deepep-gpu-proof.sh build CARRY_DIR OUT_DIR   # phase 1: tool build (NVSHMEM + patched DeepEP) and
#                                                       #          upstream DeepEP against pip NVSHMEM, in parallel
#   bench/deepep-gpu-proof.sh test  CARRY_DIR OUT_DIR   # phase 2: intranode + low-latency tests, and the ratio
#   bench/deepep-gpu-proof.sh ref   CARRY_DIR OUT_DIR   # a new user's run: build --deepep-ref 567632d, fetched
#                                                       # from CARRY_DIR/deepep.bundle (no network there)
# CARRY_DIR holds: node.xz, nvshmem-efa-standalone.tar.gz (scripts/bundle.mjs --standalone), the NVSHMEM and
# DeepEP source tarballs, libfabric-2.3.0.tar.gz, efa_io_defs.h, and cmake-3.25.tar.xz (used if cmake is missing).
# The ratio printed is ours / upstream of the low-latency "Dispatch + combine" avg_t, rank 0, one run each.
set -u
phase=$1 C=$(cd "$2" && pwd) OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/nvshmem-efa-gpu
mkdir -p "$W" "$OUT"
cd "$W" || exit 1
export PATH=$W:$PATH
if [ "$phase" = build ] || [ "$phase" = ref ]; then
  xz -dc "$C/node.xz" > node && chmod +x node
  for t in nvshmem-efa-standalone nvshmem-v3.4.5 deepep-567632d libfabric-2.3.0; do tar xzf "$C/$t.tar.gz"; done
  tar xJf "$C/cmake-3.25.tar.xz"
fi
# The carried cmake and ninja come after the machine's own (torch's extension build wants ninja too).
export PATH=$PATH:$W/cmk/bin LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$W/cmk/lib
# libfabric's own dependencies (rdma-core), for the linker and the loader.
export LD_LIBRARY_PATH=$W/lfcarry/lib:${LD_LIBRARY_PATH:-}
PY=$(command -v python3 || command -v python)
{ nvidia-smi -L; $PY -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; $PY -m pip list 2>/dev/null | grep -i -E 'nvshmem|torch'; cmake --version | head -1; nproc; } >> "$OUT/env.log" 2>&1

if [ "$phase" = ref ]; then
  NVSHMEM_EFA_DEEPEP_URL="$C/deepep.bundle" CI=true PYTHON=$PY ./node sa/nvshmem-efa.mjs build --nvshmem-src "$W/v345" \
      --deepep-ref 567632d --work-dir "$W/ref" --libfabric-home "$W/lfcarry" --efa-io-defs "$C/efa_io_defs.h" --jobs 16 > "$OUT/ref-build.log" 2>&1
  echo "ref build exit $?" | tee -a "$OUT/ref-build.log"
  cp "$W/ref/report.md" "$OUT/ref-report.md"
  tail -30 "$OUT/ref-build.log"
  exit 0
fi

if [ "$phase" = build ]; then
  cp -r 567632d upstream
  ( cd upstream && NVCC_APPEND_FLAGS="-I/usr/local/cuda/include/cccl" CPATH=/usr/local/cuda/include/cccl TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 \
      $PY setup.py build_ext --inplace > "$OUT/upstream-build.log" 2>&1; echo "upstream build exit $?" >> "$OUT/upstream-build.log" ) &
  up=$!
  CI=true PYTHON=$PY ./node sa/nvshmem-efa.mjs build --nvshmem-src "$W/v345" --deepep-src "$W/567632d" --work-dir "$W/work" \
      --libfabric-home "$W/lfcarry" --efa-io-defs "$C/efa_io_defs.h" --jobs 16 > "$OUT/tool-build.log" 2>&1
  echo "tool build exit $?" >> "$OUT/tool-build.log"
  wait $up
  cp "$W/work/report.md" "$W/work/report.json" "$OUT/" 2>/dev/null
  tail -3 "$OUT/upstream-build.log"; tail -25 "$OUT/tool-build.log"
  exit 0
fi

# phase test
ours=$W/work/sources/deepep
run_test() { # name dir script args...
  local name=$1 dir=$2; shift 2
  ( cd "$dir" && PYTHONPATH=$dir timeout 240 $PY "$@" ) > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name exit $rc" | tee -a "$OUT/summary.log"
  grep -E "Dispatch \+ combine bandwidth|passed|Error|error" "$OUT/$name.log" | head -6
  return $rc
}
run_test ours-intranode "$ours" tests/test_intranode.py --num-processes 2
# Low-latency timing: upstream and ours alternating, three runs each, the median of rank 0's avg_t (one outlier
# iteration moves an average) and min_t: bench/deepep-nvlink-ratio.sh, with the work dir's NVSHMEM.
bash "$HERE/deepep-nvlink-ratio.sh" "$ours" "$W/upstream" "$W/work/install/nvshmem" "$OUT" "$W/lfcarry"
