#!/usr/bin/env bash
# The issue-11 checks on a 2-GPU host without Node.js, from the carry made by prepare-carry.sh, through
# native/efaemu/gpu/checks.sh directly (run from the directory that holds the carry: `bash .carry-efaemu/checks-run.sh`).
# Logs, efaemu statistics and state dumps go to $OUT (the device tool brings them back).
#   1. unpack: the NVSHMEM work dir, libfabric 2.3.0, efaemu + pe_test, DeepEP (patched by `nvshmem-efa patch`), checks.sh
#   2. DeepEP builds in the background with the recipe of the tool's build-deepep step, unless the carry holds a module
#      built against this very NVSHMEM install (deep_ep_cpp.so.xz with deep_ep_cpp.nvshmem = the install's hash)
#   3. meanwhile the PE checks: nvshmem_perf, gda_kernel, lazy_loading (pe_test); then, when the carry holds a DeepEP
#      module of an earlier build (deep_ep_cpp.diag.so.xz; NVSHMEM's own path only, so GDA off), DeepEP's low-latency
#      test under lazy module loading, small sizes, efaemu state dumps every 8 s: the hang of run 3, made to explain
#      itself (DIAG_LAZY=0 skips it)
#   4. the DeepEP checks in order, each bounded by what is left of DEADLINE; what does not fit is reported as not run
# Issue 21: MODE_RUNS (default "all") runs PE_CHECKS and DEEPEP_CHECKS once per entry under EFAEMU_MODES=<entry>
# (all, none, a mode, or a comma list: checks.sh --modes), each into results/<entry>/, so "place_order defer duplicate
# silent wqe128 all" is the acceptance's one run per mode and one with all (split it over several 10-minute calls).
# PE_CHECKS may name ll_pattern, normal_mode, neg_no_quiet, neg_signal_other_rail, neg_ignore_error, silent_bound
# (deepep_pattern comes prebuilt in the carry: patterns/); DEEPEP_CHECKS deepep_silent_bound.
# Knobs: DEADLINE (s, default 290), PE_CHECKS, DEEPEP_CHECKS, DEEPEP_ARGS (sizes for the DeepEP checks; default: the
# test's own), DUMP_AFTER (efaemu state dumps every N s in every run, default 45), DIAG_LAZY (default 1).
# NVLink multicast stays off everywhere (a rule of the GPU hosts).
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/efaemu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
WD=${WD:-/work/build/nv} LF=${LF:-/work/wt11/.cache/libfabric-2.3.0} E=/opt/efaemu R=/opt/efaemu/results
t0=$(date +%s)
DEADLINE=${DEADLINE:-290}
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
TABLE=$OUT/checks.txt
: >"$TABLE"
finish() {
  tar czf "$OUT/logs.tgz" -C /opt/efaemu results 2>/dev/null
  stamp "done"; cat "$TABLE"
}
trap finish EXIT
stamp "machine: $(hostname) $(uname -r) $(nproc) cores"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
mkdir -p "$E" "$R"
tar xJf "$C/nv.tar.xz" -P; tar xJf "$C/lf.tar.xz" -P
tar xJf "$C/pre.tar.xz" -C "$E"; tar xJf "$C/deepep.tar.xz" -C "$E"; tar xJf "$C/g.tar.xz" -C "$E"
stamp "unpacked"
NVHASH=$(cat "$WD/install/nvshmem/lib/libnvshmem_host.so.3" "$WD/install/nvshmem/lib/libnvshmem_device.a" "$WD"/install/nvshmem/include/nvshmem_efa/* | sha256sum | cut -c1-16)
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
SO=$E/DeepEP/deep_ep_cpp.cpython-312-x86_64-linux-gnu.so
if [ "${DIAG_LAZY:-1}" = 1 ] && [ -f "$C/deep_ep_cpp.diag.so.xz" ]; then
  cp -r "$E/DeepEP" "$E/DeepEP-diag" && xz -dc "$C/deep_ep_cpp.diag.so.xz" >"$E/DeepEP-diag/$(basename "$SO")"
fi
if [ -f "$C/deep_ep_cpp.so.xz" ] && [ "$(cat "$C/deep_ep_cpp.nvshmem" 2>/dev/null)" = "$NVHASH" ]; then
  ( xz -dc "$C/deep_ep_cpp.so.xz" >"$SO"; echo "carried module (NVSHMEM $NVHASH)" >"$R/deepep-build.log" ) &
else
  ( cd "$E/DeepEP" && NVSHMEM_DIR=$WD/install/nvshmem TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) CUDA_HOME=$CUDA_HOME \
      NVCC_APPEND_FLAGS=-DNVSHMEM_EFA_SHIM_GDA timeout "${DEEPEP_BUILD_TIMEOUT:-200}" python3 setup.py build_ext --inplace >"$R/deepep-build.log" 2>&1
    echo "exit $?" >>"$R/deepep-build.log" ) &
fi
build=$!
export EFAEMU_BUILD=$E/efaemu LIBFABRIC_HOME=$LF NVSHMEM_HOME=$WD/install/nvshmem PE_TEST=$E/pe_test DEEPEP_DIR=$E/DeepEP PATTERN_DIR=$E/patterns
export EFAEMU_DUMP_AFTER_S=${DUMP_AFTER:-45}
CK=$E/g/gpu/checks.sh
checks() {  # checks RESULTS_DIR TIMEOUT CHECK...: RESULT lines into the table, once per MODE_RUNS entry
  local dir=$1 t=$2 m; shift 2
  for m in ${MODE_RUNS:-all}; do
    EFAEMU_MODES=$m RESULTS=$dir/$m CHECK_TIMEOUT=$t bash "$CK" "$@" 2>&1 | tee -a "$R/checks.log" | grep -P '^RESULT\t' | cut -f2- |
      sed "s/\t/ [modes $m]\t/" | tee -a "$TABLE"
  done
}
stamp "PE checks (DeepEP builds meanwhile)"
checks "$R/pe" 60 ${PE_CHECKS:-nvshmem_perf gda_kernel lazy_loading}
if [ -d "$E/DeepEP-diag" ]; then
  stamp "DeepEP under lazy module loading (earlier module, GDA off, small sizes, state dumps every 8 s), 40 s"
  RESULTS=$R/lazy CHECK_TIMEOUT=40 CUDA_MODULE_LOADING_UNDER_TEST=LAZY EFAEMU_DUMP_AFTER_S=8 DEEPEP_GDA=0 DEEPEP_DIR=$E/DeepEP-diag \
    DEEPEP_ARGS="--num-experts 16 --num-tokens 32 --hidden 2048 --num-topk 4" bash "$CK" deepep_ll 2>&1 | tee -a "$R/checks.log" |
    grep -P '^RESULT\t' | cut -f2- | sed 's/^deepep_ll/deepep_ll under LAZY loading (diagnosis: GDA off, small sizes)/' | tee -a "$TABLE"
fi
stamp "waiting for the DeepEP build"
wait $build; tail -2 "$R/deepep-build.log"
if [ -f "$SO" ]; then
  [ -f "$C/deep_ep_cpp.so.xz" ] && [ "$(cat "$C/deep_ep_cpp.nvshmem" 2>/dev/null)" = "$NVHASH" ] || {
    xz -T0 -c "$SO" >"$OUT/deep_ep_cpp.so.xz"; echo "$NVHASH" >"$OUT/deep_ep_cpp.nvshmem"; }
  # Reordering on the GDA path (device-posted WQEs complete out of order, softefa's random order, window 8); NVSHMEM's
  # own proxy path in order (REORDER=0): its fences would otherwise wait out every held completion (1 ms each).
  export REORDER=0 EFAEMU_GDA_ORDER=${EFAEMU_GDA_ORDER:-random:7:8}
  for c in ${DEEPEP_CHECKS:-deepep_ll deepep_counters deepep_pressure deepep_shrink}; do
    l=$(left)
    case $c in deepep_pressure) need=50 cap=60;; deepep_shrink) need=60 cap=150;; *) need=60 cap=240;; esac
    if [ "$l" -lt "$need" ]; then printf '%s\tnot run\tout of device time (%s s left of the run'"'"'s %s)\n' "$c" "$l" "$DEADLINE" | tee -a "$TABLE"; continue; fi
    t=$(( l - 15 < cap ? l - 15 : cap ))
    stamp "$c (bounded to ${t}s)"
    PRESSURE_SECONDS=$t checks "$R/deepep" "$t" "$c"
  done
else
  printf 'deepep_*\tnot run\tthe DeepEP build failed (deepep-build.log)\n' | tee -a "$TABLE"
fi
