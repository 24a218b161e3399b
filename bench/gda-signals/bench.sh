#!/usr/bin/env bash
# What GPU-initiated networking buys, in one run on one host with 2 GPUs (`nvshmem-efa bench` runs it; it also
# runs alone, without Node.js):
#   1. a put table, PE 0 -> PE 1, message sizes 256 B .. 64 MiB: EFA GDA put vs NVSHMEM's own put (its CPU proxy
#      on the libfabric transport), same process, same buffers (put_bw.cu);
#   2. DeepEP's low-latency dispatch and combine (tests/test_low_latency.py, unmodified, 2 x 1 GPU with
#      --disable-nvlink) with the shim's signals over GDA and through NVSHMEM's proxy (NVSHMEM_EFA_SHIM_SIGNALS),
#      from one build, and the ratio; plus what the emulated NIC counted during the timed iterations.
# Through efaemu (--fabric efaemu) the numbers measure our device path and the emulator, not EFA, and say so; on
# a host with 2 EFA NICs (--fabric efa) the same command gives the real numbers.
#
#   bench.sh [--fabric efaemu|efa] [--sizes LIST] [--bytes-per-size N] [--deepep-args "ARGS"] [--no-put] [--no-deepep]
#
# Inputs (environment, absolute paths):
#   NVSHMEM_HOME     the NVSHMEM install of `nvshmem-efa build` (include/nvshmem_efa, lib/)   required
#   PUT_BW           put_bw built against it (default: built here with nvcc into $RESULTS)
#   DEEPEP_DIR       DeepEP built in place by nvshmem-efa (deep_ep_cpp*.so, tests/); unset: part 2 is skipped
#   EFAEMU_BUILD, LIBFABRIC_HOME   efaemu and the libfabric it was built against (--fabric efaemu)
#   RESULTS          logs, efaemu statistics and gda-signals.md (default ./bench-gda-signals)
#   REORDER          efaemu completion reordering (EFAEMU_REORDER, default 8: out of order)
#   PART_TIMEOUT     seconds one pair of processes may take (default 300)
#   PYTHON           interpreter with torch (default python3); DEEPEP_LL: the rank driver (default deepep_ll.py here)
# Output: the report on stdout and in $RESULTS/gda-signals.md. Exit 0: every part that could run ran and its checks
# held (a part that cannot run says why); 1: a part failed; 2: usage; 4: a required input is missing.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
FABRIC=efaemu SIZES=256,1K,4K,16K,64K,256K,1M,4M,16M,64M PER_SIZE=$((64 << 20)) DEEPEP_ARGS="" DO_PUT=1 DO_DEEPEP=1
usage() { echo "usage: bench.sh [--fabric efaemu|efa] [--sizes LIST] [--bytes-per-size N] [--deepep-args \"ARGS\"] [--no-put] [--no-deepep]" >&2; exit 2; }
ARGS=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --fabric) [ $# -ge 2 ] || usage; FABRIC=$2; shift 2 ;;
    --sizes) [ $# -ge 2 ] || usage; SIZES=$2; shift 2 ;;
    --bytes-per-size) [ $# -ge 2 ] || usage; PER_SIZE=$2; shift 2 ;;
    --deepep-args) [ $# -ge 2 ] || usage; DEEPEP_ARGS=$2; shift 2 ;;
    --no-put) DO_PUT=0; shift ;;
    --no-deepep) DO_DEEPEP=0; shift ;;
    *) usage ;;
  esac
done
case $FABRIC in efaemu|efa) ;; *) echo "bench.sh: --fabric $FABRIC: expected efaemu or efa" >&2; exit 2 ;; esac

missing() { echo "bench.sh: $1" >&2; exit 4; }
[ -n "${NVSHMEM_HOME:-}" ] && [ -d "$NVSHMEM_HOME/lib" ] || missing "NVSHMEM_HOME (${NVSHMEM_HOME:-unset}) is not an NVSHMEM install: run nvshmem-efa build first"
if [ "$FABRIC" = efaemu ]; then
  [ -n "${EFAEMU_BUILD:-}" ] && [ -e "$EFAEMU_BUILD/prov/libefa-fi.so" ] || missing "--fabric efaemu needs EFAEMU_BUILD with prov/libefa-fi.so (${EFAEMU_BUILD:-unset})"
  [ -n "${LIBFABRIC_HOME:-}" ] && [ -d "$LIBFABRIC_HOME/lib" ] || missing "--fabric efaemu needs LIBFABRIC_HOME, the libfabric efaemu was built against (${LIBFABRIC_HOME:-unset})"
  # The emulated NIC's entries under /sys/class/infiniband live in a private mount namespace (efaemu's script).
  if [ -z "${EFAEMU_SYSFS_NS:-}" ]; then
    NS=${EFAEMU_SYSFS_NS_SCRIPT:-$REPO/native/efaemu/scripts/sysfs-ns.sh}
    [ -x "$NS" ] || missing "efaemu's namespace script $NS is missing (set EFAEMU_SYSFS_NS_SCRIPT)"
    exec "$NS" -- "$0" "${ARGS[@]}"
  fi
  LABEL="through efaemu: measures our device path and the emulator, not EFA"
else
  LABEL="over EFA"
fi

RESULTS=${RESULTS:-$PWD/bench-gda-signals}
mkdir -p "$RESULTS" || missing "cannot create RESULTS=$RESULTS"
T=${PART_TIMEOUT:-300}
PY=${PYTHON:-python3}
REPORT="$RESULTS/gda-signals.md"
FAILED=0
: >"$REPORT"
out() { printf '%s\n' "$*"; printf '%s\n' "$*" >>"$REPORT"; }
fail() { out "FAIL: $*"; FAILED=1; }

# PEs on the GPUs there are (issue 34): PE r on GPU r mod U, U = min(2, the host's GPUs). On a host with one GPU both
# PEs share it, time-sliced by the driver, each a host of its own (NVSHMEM and NCCL tell PEs on one GPU apart by host
# name only), and every figure is then the time-slicer's (a wait for the other PE can cost a timeslice, about 4.5 ms on
# an H200): the report says so before any number. PE_GPUS: the host's GPU count (default: nvidia-smi -L; 2 without it).
HOST_GPUS=${PE_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
[[ $HOST_GPUS =~ ^[1-9][0-9]*$ ]] || HOST_GPUS=2
USED_GPUS=$((HOST_GPUS < 2 ? HOST_GPUS : 2))
SHARED=$((USED_GPUS < 2 ? 1 : 0))

# The environment of PE $1 (word-split by the caller: paths without spaces). Over efaemu: the emulated provider,
# softgdr and the CUDA interposer, as efaemu's own checks (native/efaemu/gpu/checks.sh) set them; over EFA: the
# real provider, NIC to NIC (no shared-memory shortcut). Either way each process sees only its own GPU, so NVLink
# cannot carry anything, and NVLink multicast stays off.
pe_env() {
  local r=$1
  echo CUDA_VISIBLE_DEVICES=$((r % USED_GPUS)) NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    NVSHMEM_REMOTE_TRANSPORT=libfabric NVSHMEM_LIBFABRIC_PROVIDER=efa NVSHMEM_DISABLE_P2P=1 NVSHMEM_EFA_GDA_ENABLE=1 \
    NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 PYTHONUNBUFFERED=1 FI_PROVIDER=efa
  if [ "$FABRIC" = efaemu ]; then
    local prov=+$EFAEMU_BUILD/prov/libefa-fi.so
    grep -qE '#define FI_MAJOR_VERSION[[:space:]]+1$' "$LIBFABRIC_HOME/include/rdma/fabric.h" 2>/dev/null && prov=$EFAEMU_BUILD/prov
    # EAGER: the emulator's GPU copies are CUDA calls in the application's context, which a lazily loaded kernel's
    # first launch holds while another kernel waits on the network (native/efaemu/gpu/checks.sh says more).
    echo FI_PROVIDER_PATH=$prov EFAEMU_REORDER=${REORDER:-8} CUDA_MODULE_LOADING=EAGER \
      LD_LIBRARY_PATH=$EFAEMU_BUILD/softgdr:$LIBFABRIC_HOME/lib:$NVSHMEM_HOME/lib:${LD_LIBRARY_PATH:-}
  else
    echo FI_EFA_ENABLE_SHM_TRANSFER=0 LD_LIBRARY_PATH=$NVSHMEM_HOME/lib:${LD_LIBRARY_PATH:-}
  fi
}
# What every PE preloads: efaemu's CUDA interposer (over efaemu).
pe_preload() { [ "$FABRIC" = efaemu ] && echo "${PRELOAD_UNDER_TEST-$EFAEMU_BUILD/interpose/libefaemu-cuda-interpose.so}"; }

# run_pair NAME EXTRA_ENV PRELOAD -- CMD...: both ranks (@R@ in CMD is the rank), logs NAME.pe0.log / NAME.pe1.log,
# efaemu statistics in stats-NAME/. Once one rank fails the other gets PAIR_GRACE (15) s, then is killed: a failure
# ends the pair, it never hangs it. Sets RC0 RC1.
run_pair() {
  local name=$1 extra=$2 preload=$3; shift 4
  local st="$RESULTS/stats-$name" pids=() r
  rm -rf "$st"; mkdir -p "$st"
  for r in 0 1; do
    local argv=("${@//@R@/$r}") pre own=()
    # shellcheck disable=SC2046 # pe_preload prints paths, one word each
    pre=$(echo $(pe_preload) $preload | tr ' ' ':')
    # shellcheck disable=SC2016 # $1 and $@ belong to the inner sh
    [ "$SHARED" = 1 ] && own=(unshare --uts sh -c 'echo "$1" >/proc/sys/kernel/hostname && shift && exec "$@"' pe-host "$(uname -n)-pe$r")
    # shellcheck disable=SC2046
    env $(pe_env $r) ${pre:+LD_PRELOAD=$pre} EFAEMU_STATS="$st" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$MASTER_PORT $extra \
      timeout -k 10 "$T" "${own[@]}" "${argv[@]}" >"$RESULTS/$name.pe$r.log" 2>&1 &
    pids+=($!)
  done
  RC0=; RC1=
  while [ -z "$RC0" ] || [ -z "$RC1" ]; do
    for r in 0 1; do
      local v="RC$r"
      if [ -z "${!v}" ] && ! kill -0 "${pids[$r]}" 2>/dev/null; then wait "${pids[$r]}"; printf -v "$v" '%s' $?; fi
    done
    if { [ -n "$RC0" ] && [ "$RC0" != 0 ] && [ -z "$RC1" ]; } || { [ -n "$RC1" ] && [ "$RC1" != 0 ] && [ -z "$RC0" ]; }; then
      local other; other=$([ -z "$RC0" ] && echo 0 || echo 1)
      for _ in $(seq "${PAIR_GRACE:-15}"); do kill -0 "${pids[$other]}" 2>/dev/null || break; sleep 1; done
      # Killed only if still running after the grace: one that ended within it keeps its own exit status.
      if kill -0 "${pids[$other]}" 2>/dev/null; then
        pkill -KILL -P "${pids[$other]}" 2>/dev/null; kill -KILL "${pids[$other]}" 2>/dev/null
        wait "${pids[$other]}"; printf -v "RC$other" '%s' "killed($?)"
      else
        wait "${pids[$other]}"; printf -v "RC$other" '%s' "$?"
      fi
    fi
    sleep 0.2
  done
}
MASTER_PORT=${MASTER_PORT:-$((29700 + RANDOM % 200))}
tail_of() {  # the first failure lines of a pair's logs, "; "-prefixed, or nothing
  local t; t=$(grep -hE 'FAIL|Error|error|Traceback|trap|failed' "$RESULTS/$1.pe0.log" "$RESULTS/$1.pe1.log" 2>/dev/null | head -3 | cut -c1-200 | paste -sd';' -)
  [ -n "$t" ] && echo "; $t"
}

out "# nvshmem-efa bench: EFA GDA vs NVSHMEM's CPU proxy ($LABEL)"
out ""
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -2 | paste -sd, -)
out "$(date -u +%Y-%m-%dT%H:%M:%SZ); $(hostname); ${gpus:-GPUs unknown (no nvidia-smi)}"
out ""
if [ "$SHARED" = 1 ]; then
  out "**Both PEs share 1 GPU** (time-sliced, each a host of its own): every time and ratio below is the GPU time-slicer's, not the product's or EFA's. The paths ran and the data was checked; compare numbers only from a host with a GPU per PE."
  out ""
fi

# ---- 1. put table ------------------------------------------------------------------------------------------------
if [ "$DO_PUT" = 1 ]; then
  PUT=${PUT_BW:-}
  if [ -z "$PUT" ]; then
    PUT="$RESULTS/put_bw"
    NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
    [ -x "$NVCC" ] || missing "no nvcc to build put_bw (set NVCC or CUDA_HOME, or PUT_BW to a built one)"
    [ -f "$NVSHMEM_HOME/include/nvshmem_efa/nvshmemx_efa_gda_device.cuh" ] || missing "$NVSHMEM_HOME has no GDA device API (include/nvshmem_efa): the build's report says why"
    CCCL=$(dirname "$(dirname "$NVCC")")/include/cccl
    "$NVCC" -std=c++17 -O2 -rdc=true -arch=sm_${CUDA_ARCH:-90} -I"$NVSHMEM_HOME/include" ${CCCL:+-I$CCCL} "$HERE/put_bw.cu" -o "$PUT" \
      -L"$NVSHMEM_HOME/lib" -lnvshmem_host -lnvshmem_device -ldl -Xlinker -rpath -Xlinker "$NVSHMEM_HOME/lib" >"$RESULTS/put_bw.build.log" 2>&1 ||
      { out "FAIL: building put_bw failed ($RESULTS/put_bw.build.log: $(grep -m1 error "$RESULTS/put_bw.build.log" | cut -c1-160))"; exit 1; }
  fi
  rm -f "$RESULTS/uid-put" "$RESULTS/uid-put-api"
  # The proxy column is NVSHMEM's CPU proxy: in a build with the device API hooks the switch is off in this process.
  run_pair put "NVSHMEM_EFA_GDA_DEVICE_API=0" "" -- "$PUT" --rank @R@ --uid-file "$RESULTS/uid-put" --sizes "$SIZES" --bytes-per-size "$PER_SIZE" --modes gda,proxy
  PUT_RC="$RC0/$RC1" logs=("$RESULTS/put.pe0.log") checks=("$RESULTS/put.pe1.log") api_why=""
  # The device API column: NVSHMEM's own put again, in processes with the switch on (DEVICE_API=1: nvshmem-efa bench
  # found a build with the device API hooks; DEVICE_API_WHY says why not otherwise).
  if [ "${DEVICE_API:-0}" = 1 ]; then
    run_pair put_api "NVSHMEM_EFA_GDA_DEVICE_API=1 NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1" "" -- "$PUT" --rank @R@ --uid-file "$RESULTS/uid-put-api" --sizes "$SIZES" --bytes-per-size "$PER_SIZE" --modes api
    PUT_RC+=" $RC0/$RC1" logs+=("$RESULTS/put_api.pe0.log") checks+=("$RESULTS/put_api.pe1.log")
    grep -q 'NVSHMEM device API over GDA on' "$RESULTS/put_api.pe0.log" ||
      api_why="the device API was not on in its run ($(grep -h -m1 -o 'NVSHMEM device API over GDA [^;]*' "$RESULTS/put_api.pe0.log" || echo 'no status line at finalize'))"
  else
    api_why=${DEVICE_API_WHY:-the build has no device API hooks (built with --no-device-api: rebuild without it)}
  fi
  out "## Put, PE 0 -> PE 1, one warp posting, then quiet ($LABEL)"
  out ""
  out "GDA: efa_gda_put_nbi_warp + efa_gda_quiet (the GDA device header). device API: nvshmemx_putmem_nbi_warp + nvshmem_quiet"
  out "with NVSHMEM_EFA_GDA_DEVICE_API=1 (a build with the device API hooks routes them over GDA). proxy: the same calls with the switch at 0"
  out "(NVSHMEM's CPU proxy)."
  out ""
  out "| size | GDA GB/s | GDA us | device API GB/s | device API us | proxy GB/s | proxy us | GDA / proxy | device API / proxy |"
  out "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  while IFS= read -r line; do out "$line"; done < <(awk '
    function human(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
    function f(v, fmt) { return v == "" ? "-" : sprintf(fmt, v) }
    function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2fx", a / b) : "-" }
    $1 == "ROW" { gbps[$2, $3] = $6; us[$2, $3] = $5; if (!($2 in order)) { order[$2] = n; sz[n++] = $2 } }
    END {
      for (i = 0; i < n; i++) {
        s = sz[i]; g = gbps[s, "gda"]; a = gbps[s, "api"]; p = gbps[s, "proxy"]
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", human(s), f(g, "%.3f"), f(us[s, "gda"], "%.1f"), f(a, "%.3f"), f(us[s, "api"], "%.1f"),
          f(p, "%.3f"), f(us[s, "proxy"], "%.1f"), ratio(g, p), ratio(a, p)
      }
    }' "${logs[@]}")
  out ""
  skip=$(grep -h -m1 '^SKIP gda' "$RESULTS/put.pe0.log" | cut -c10-)
  [ -n "$skip" ] && { out "GDA column empty: GDA is not active ($skip)"; FAILED=1; }
  if [ -n "$api_why" ]; then
    out "device API column empty: $api_why"
    [ "${DEVICE_API:-0}" = 1 ] && FAILED=1
  fi
  bad=$(grep -h '^CHECK .* bad' "${checks[@]}" | head -3 | paste -sd';' -)
  rows=$(cat "${logs[@]}" | grep -c '^ROW')
  if [[ $PUT_RC != 0/0 && $PUT_RC != "0/0 0/0" ]] || [ -n "$bad" ] || [ "$rows" = 0 ]; then
    fail "put table: rc $PUT_RC, $rows rows, byte check: ${bad:-ok}$(tail_of put) (logs: $RESULTS/put*.pe*.log)"
  else
    out "Every put landed byte-exact at PE 1 ($(cat "${checks[@]}" | grep -c '^CHECK .* ok') checks)."
  fi
  out ""
else
  out "Put table: skipped (--no-put)."
  out ""
fi

# ---- 2. DeepEP low-latency, GDA signals vs proxy signals ---------------------------------------------------------
deepep_times() {  # deepep_times LOG: "dispatch combine both" in us, from test_low_latency.py's own lines (rank 0)
  local log=$1 d c both
  both=$(grep -m1 'Dispatch + combine bandwidth' "$log" | sed -nE 's/.*avg_t=([0-9.]+) us.*/\1/p')
  d=$(grep -m1 'Dispatch bandwidth:.*Combine bandwidth:' "$log" | sed -nE 's/.*Dispatch bandwidth: [0-9.]+ GB\/s, avg_t=([0-9.]+) us.*/\1/p')
  c=$(grep -m1 'Dispatch bandwidth:.*Combine bandwidth:' "$log" | sed -nE 's/.*Combine bandwidth: [0-9.]+ GB\/s, avg_t=([0-9.]+) us.*/\1/p')
  echo "${d:--} ${c:--} ${both:--}"
}
window_sum() {  # window_sum NAME FIELD [RANK]: that field summed over the timed windows (WINDOW lines) of both ranks, or one
  local logs=("$RESULTS/$1.pe0.log" "$RESULTS/$1.pe1.log")
  [ $# -ge 3 ] && logs=("$RESULTS/$1.pe$3.log")
  awk -v f="$2" '$1 == "WINDOW" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) s += kv[2] } } END { print s + 0 }' "${logs[@]}"
}
if [ "$DO_DEEPEP" = 0 ]; then
  out "DeepEP low-latency: skipped (--no-deepep)."
elif [ -z "${DEEPEP_DIR:-}" ] || ! ls "$DEEPEP_DIR"/deep_ep_cpp*.so >/dev/null 2>&1 || [ ! -f "$DEEPEP_DIR/tests/test_low_latency.py" ]; then
  out "DeepEP low-latency: skipped, no DeepEP built in place (DEEPEP_DIR=${DEEPEP_DIR:-unset}; nvshmem-efa build --deepep-ref 567632d builds one)."
else
  LL=${DEEPEP_LL:-$HERE/deepep_ll.py}
  out "## DeepEP low-latency dispatch and combine, signals over GDA vs through NVSHMEM's proxy ($LABEL)"
  out ""
  out "tests/test_low_latency.py --disable-nvlink ${DEEPEP_ARGS:-(defaults)}, 2 processes x 1 GPU, each run passing the test's own checks;"
  out "NVSHMEM_EFA_SHIM_SIGNALS selects the path at run time (one build). Timed windows: the test's bench() and bench_kineto() calls."
  out ""
  out "| signals | dispatch us | combine us | dispatch + combine us | NIC RDM (proxy) ops in timed windows | GDA write ops / bytes in timed windows |"
  out "|---|---:|---:|---:|---:|---:|"
  declare -A TIMES
  # Over efaemu, cuBLAS is loaded before the test (native/efaemu/gpu/warmup/sitecustomize.py says why: an
  # emulator-only deadlock between a library load and the NIC's CUDA copies).
  py_env="PYTHONPATH=$DEEPEP_DIR"
  [ "$FABRIC" = efaemu ] && py_env="EFAEMU_WARMUP_CUDA=1 PYTHONPATH=$REPO/native/efaemu/gpu/warmup:$DEEPEP_DIR"
  for mode in gda proxy; do
    # The build's libnvshmem_host is preloaded: torch's pip NVSHMEM would otherwise be the one DeepEP uses.
    # shellcheck disable=SC2086
    run_pair "deepep-$mode" "NVSHMEM_EFA_SHIM_SIGNALS=$mode $py_env" "$NVSHMEM_HOME/lib/libnvshmem_host.so.3" -- \
      "$PY" "$LL" "$DEEPEP_DIR" $DEEPEP_ARGS
    read -r d c both <<<"$(deepep_times "$RESULTS/deepep-$mode.pe0.log")"
    TIMES[$mode]="$d $c $both"
    windows=$(cat "$RESULTS/deepep-$mode.pe0.log" "$RESULTS/deepep-$mode.pe1.log" | grep -c '^WINDOW .* rdm_ops=')
    if [ "$windows" -gt 0 ]; then
      rdm=$(window_sum "deepep-$mode" rdm_ops); gops=$(window_sum "deepep-$mode" gda_write_ops); gb=$(window_sum "deepep-$mode" gda_write_bytes)
    else
      rdm="not measured"; gops="-"; gb="-"
      why=$(grep -h -m1 '^WINDOW unavailable' "$RESULTS/deepep-$mode.pe0.log" | cut -c20-)
      [ "$FABRIC" = efaemu ] && out "NIC counters for the $mode run: ${why:-no WINDOW lines}"
    fi
    out "| $mode | $d | $c | $both | $rdm | $gops / $gb |"
    shim=$(grep -h -m1 'nvshmem-efa shim:' "$RESULTS/deepep-$mode.pe0.log" "$RESULTS/deepep-$mode.pe1.log" | head -1)
    want=$([ $mode = gda ] && echo 'signals over GDA' || echo "signals through NVSHMEM's proxy")
    if [ "$RC0" != 0 ] || [ "$RC1" != 0 ] || grep -qE 'Traceback|AssertionError|EFA GDA .* failed' "$RESULTS/deepep-$mode.pe0.log" "$RESULTS/deepep-$mode.pe1.log"; then
      fail "DeepEP with $mode signals: rc $RC0/$RC1$(tail_of "deepep-$mode") (logs: $RESULTS/deepep-$mode.pe*.log)"
    elif [[ "$shim" != *"$want"* ]]; then
      fail "DeepEP with $mode signals: the shim did not report $want (it said: ${shim:-nothing}); GDA must be active for this comparison"
    elif [ "$both" = - ]; then
      fail "DeepEP with $mode signals: no timing line in $RESULTS/deepep-$mode.pe0.log"
    elif [ $mode = gda ] && [ "$rdm" != "not measured" ] && { [ "$rdm" != 0 ] || [ "$gb" = 0 ]; }; then
      fail "DeepEP with GDA signals: the NIC counted $rdm RDM (proxy) operations (rank 0: $(window_sum "deepep-$mode" rdm_ops 0), rank 1: $(window_sum "deepep-$mode" rdm_ops 1)) and $gb GDA write bytes in the timed windows (want 0 and > 0)"
    fi
  done
  out ""
  read -r gd gc gb_ <<<"${TIMES[gda]}"; read -r pd pc pb <<<"${TIMES[proxy]}"
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else printf "-" }'; }
  out "Ratio GDA signals / proxy signals (below 1: GDA is faster): dispatch $(ratio "$gd" "$pd"), combine $(ratio "$gc" "$pc"), dispatch + combine $(ratio "$gb_" "$pb")"
fi
out ""
[ "$FAILED" = 0 ] && out "Result: every part that ran passed ($LABEL)." || out "Result: FAILED (see above; logs in $RESULTS)."
exit $FAILED
