#!/usr/bin/env bash
# Issue 21 on a lent 2-GPU host without network or Node.js of its own: the tool builds NVSHMEM (and DeepEP against
# it) from pinned sources there, then native/efaemu/gpu/checks.sh runs the GDA and DeepEP checks through efaemu once
# per unkind mode and once with all. Run from the repository root, with the carry in .carry/ (ignored):
#   node.xz, bundle.tar.xz (scripts/bundle.mjs --standalone), nvshmem-v3.4.5.tar.gz, nvshmem-aws-357.tar.gz,
#   deepep-567632d.tar.gz, lf.tar.xz (libfabric v2.3.0 --disable-efa with fabtests, absolute paths), gdrcopy/include,
#   efa_io_defs.h.
#   PHASE=build   unpack; build 3.4.5 + DeepEP (NO_DEEPEP=1: without; with RAILS=1 also AWS's multi-rail 3.5.7 + DeepEP) with the tool,
#                 efaemu and the GPU test programs; everything under /tmp/u21 (kept while the machine stays warm)
#   PHASE=checks  MODE_RUNS (e.g. "place_order defer duplicate silent wqe128 all") x CHECKS against BUILD (v345|aws357)
# Output under $OUT: the tool's build logs and reports, checks.txt (one RESULT line per check and mode run), logs.tgz.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ROOT=$(pwd) C=$(pwd)/.carry W=/tmp/u21 OUT=${OUT:-/tmp/u21-out} PHASE=${PHASE:-build}
LF=/work/c21/libfabric-2.3.0
mkdir -p "$W" "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PY=$(command -v python3)
if [ "$PHASE" = build ]; then
  stamp "machine: $(hostname) $(nproc) cores"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  cd "$W" || exit 1
  xz -dc "$C/node.xz" >node && chmod +x node
  tar xJf "$C/bundle.tar.xz"
  for t in nvshmem-v3.4.5 deepep-567632d nvshmem-aws-357; do tar xzf "$C/$t.tar.gz"; done
  tar xJf "$C/lf.tar.xz" -P
  cp -r deepep-567632d deepep-357
  tool() {  # tool NAME NVSHMEM_SRC DEEPEP_SRC JOBS
    local dsrc=(--deepep-src "$W/$3")
    [ "${NO_DEEPEP:-0}" = 1 ] && dsrc=()  # the PE checks alone: NVSHMEM without DeepEP builds faster
    CI=true PYTHON=$PY ./node bundle/nvshmem-efa.mjs build --nvshmem-src "$W/$2" "${dsrc[@]}" --work-dir "$W/$1" \
      --libfabric-home "$LF" --gdrcopy-home "$C/gdrcopy" --efa-io-defs "$C/efa_io_defs.h" --cuda-arch 90 --jobs "$4" \
      >"$OUT/build-$1.log" 2>&1
    echo "tool build $1 exit $?" | tee -a "$OUT/build-$1.log"
    cp "$W/$1/report.md" "$OUT/report-$1.md" 2>/dev/null
  }
  n=$(nproc)
  if [ "${RAILS:-0}" = 1 ]; then
    tool v345 nvshmem-v3.4.5 deepep-567632d $(( n / 2 )) & a=$!
    tool aws357 nvshmem-aws-357 deepep-357 $(( n / 2 )) & b=$!
    wait $a $b
  else
    tool v345 nvshmem-v3.4.5 deepep-567632d "$n"
  fi
  stamp "tool builds done"
  cmake -S "$ROOT/native/efaemu" -B "$W/efaemu" -G Ninja -DLIBFABRIC_PREFIX="$LF" -DEFAEMU_TESTS=OFF >"$OUT/efaemu-build.log" 2>&1 &&
    cmake --build "$W/efaemu" >>"$OUT/efaemu-build.log" 2>&1 || echo "efaemu build FAILED" | tee -a "$OUT/efaemu-build.log"
  for b in v345 aws357; do
    [ -d "$W/$b/install/nvshmem" ] || continue
    JOBS=4 bash "$ROOT/bench/efaemu/build-gpu-programs.sh" "$W/$b/install/nvshmem" "$W/prog-$b" 90 2>&1 | tee -a "$OUT/programs.log"
  done
  stamp "build phase done"; grep -h "exit\|FAILED" "$OUT"/build-*.log "$OUT/programs.log"
  exit 0
fi

# PHASE=checks
B=${BUILD:-v345}
TABLE=$OUT/checks.txt
touch "$TABLE"
export EFAEMU_BUILD=$W/efaemu LIBFABRIC_HOME=$LF NVSHMEM_HOME=$W/$B/install/nvshmem PE_TEST=$W/prog-$B/pe_test \
  PATTERN_DIR=$W/prog-$B DEEPEP_DIR=$W/$B/sources/deepep EFAEMU_DUMP_AFTER_S=${DUMP_AFTER:-60}
for m in ${MODE_RUNS:-all}; do
  stamp "build $B, modes $m: ${CHECKS:?}"
  EFAEMU_MODES=$m RESULTS=$W/results/$B/$m CHECK_TIMEOUT=${CHECK_TIMEOUT:-120} bash "$ROOT/native/efaemu/gpu/checks.sh" $CHECKS 2>&1 |
    tee -a "$OUT/checks-$B.log" | grep -P '^RESULT\t' | cut -f2- | sed "s/^/[$B, modes $m] /" | tee -a "$TABLE"
done
stamp "checks done"
tar czf "$OUT/logs-$B-$(date +%s).tgz" -C "$W/results" "$B" 2>/dev/null
