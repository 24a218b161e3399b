#!/usr/bin/env bash
# The GPU checks of issue 11 over efaemu on one host with one GPU or more (test-only; PEs are placed on the GPUs there
# are, see Placement below). `nvshmem-efa selftest` runs it; it also runs alone:
#
#   checks.sh CHECK...            run the named checks (all: every check, in order)
#   checks.sh --list              the checks, one a line
#   checks.sh --modes             the unkind efaemu modes (issue 21): name<TAB>environment<TAB>what it models
#   checks.sh --modes-env LIST    the environment words of LIST (all, none, or a comma list of mode names)
#   checks.sh --placement N       where a run of N PEs goes on this host (PE_GPUS, PES_PER_GPU)
#
# EFAEMU_MODES (all, none = default, or a comma list of --modes' names) turns those modes on for the checks that
# take them: gda_kernel, gda_rails, deepep_ll, deepep_rails, deepep_counters, deepep_pressure, ll_pattern, and
# normal_mode (which always adds defer). The negative controls and the bound checks set their own modes. Each
# mode's value can be changed: PLACE_ORDER, PLACE_DEFER_US, DUPLICATE.
#
# Every process sees only its own GPU (CUDA_VISIBLE_DEVICES), so NVLink cannot carry anything; NVLink
# multicast stays off (NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1, a rule of
# the GPU hosts). Everything runs inside scripts/sysfs-ns.sh (NIC entries in a private mount namespace), with
# softgdr (libgdrapi.so.2) and the CUDA interposer preloaded, FI_PROVIDER_PATH=+libefa-fi.so, FI_PROVIDER=efa,
# NVSHMEM_REMOTE_TRANSPORT=libfabric, NVSHMEM_LIBFABRIC_PROVIDER=efa.
#
# Inputs (environment, absolute paths):
#   EFAEMU_BUILD    efaemu built against LIBFABRIC_HOME (prov/libefa-fi.so, interpose/, softgdr/)
#   LIBFABRIC_HOME  libfabric >= 2.3.0 (lib/, bin/fi_info, bin/fi_rdm_pingpong, bin/fi_rma_bw)
#   NVSHMEM_HOME    the NVSHMEM install of the build under test
#   PE_TEST         gpu/pe_test.cu built against NVSHMEM_HOME (with the GDA device API)
#   PATTERN_DIR     gpu/deepep_pattern.cu built against NVSHMEM_HOME: deepep_pattern, and the negative controls
#                   deepep_pattern_no_quiet, deepep_pattern_other_rail (bench/efaemu/build-gpu-programs.sh)
#   GDA_TIMEOUT_MS  NVSHMEM_EFA_GDA_TIMEOUT_MS of the bound checks (default 3000)
#   DEEPEP_DIR      DeepEP built in place by nvshmem-efa (deep_ep_cpp*.so, tests/); optional
#   DEEPEP_ARGS     arguments to DeepEP's tests (default: small sizes when a mode is on, else DeepEP's own; see deepep_pair)
#   NVSHMEM_TESTS   NVSHMEM's own perftests and examples built against NVSHMEM_HOME (build-nvshmem-tests.sh's OUT)
#   NVSHMEM_EFA_LAUNCH  the command that starts `nvshmem-efa launch` (node and the tool's script), for device_api
#   RESULTS         where logs and efaemu statistics go
#   CHECK_TIMEOUT   seconds a pair of processes may take (default 240); PRESSURE_SECONDS bounds --pressure-test
#   PYTHON          interpreter with torch (default python3)
#   PE_GPUS, PES_PER_GPU  the host's GPU count and PEs per GPU (auto or N): where each run's PEs go (Placement, below)
#   NO_MPS_DIR      the empty CUDA_MPS_PIPE_DIRECTORY every PE gets (no PE becomes a client of a running MPS daemon)
#   On a shared GPU: SHARED_GDA_TIMEOUT_MS (60000), SHARED_DEFER_US (2000-20000), PATTERN_ROUNDS (10),
#                   DEEPEP_BENCH_ITERS (3), DEVICE_API_SHARED_ALL (0: programs in DEVICE_API_SHARED_OMIT left out); see their uses
#   PEER_EXIT_GRACE_S (60), PEER_FAIL_GRACE_S (15), KILL_WAIT_S (10): how long a rank may run on after a peer ended
#                   well, and after one failed, and outlive SIGKILL
# Output: one line per check, "RESULT<TAB>check<TAB>pass|fail|skip<TAB>evidence", and logs in $RESULTS.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CHECKS=(fi_info fabtests nvshmem_perf gda_kernel gda_rails deepep_ll deepep_ll_4pes deepep_rails deepep_counters deepep_shrink deepep_pressure
  ll_pattern normal_mode neg_fail_injection neg_wrong_provider neg_no_quiet neg_signal_other_rail neg_ignore_error gda_pe_errors
  silent_bound deepep_silent_bound device_api neg_device_api)

# The unkind modes of efaemu (native/efaemu/README.md says what each models; issue 21). The defaults keep a DeepEP run
# inside a check's bound: a window of 16 held writes, 20-400 us between the completion and the bytes, 1% of writes
# placed again within 200 us.
MODE_NAMES=(place_order defer duplicate silent wqe128)
mode_env() {
  case $1 in
    place_order) echo "EFAEMU_PLACE_ORDER=${PLACE_ORDER:-random:7:16}" ;;
    defer) echo "EFAEMU_PLACE_DEFER_US=${PLACE_DEFER_US:-20-400}" ;;
    duplicate) echo "EFAEMU_DUPLICATE=${DUPLICATE:-0.01:200}" ;;
    silent) echo "EFAEMU_SILENT_AFTER_ERROR=1" ;;
    wqe128) echo "EFAEMU_WQE_SIZE=128" ;;
    *) return 1 ;;
  esac
}
mode_models() {
  case $1 in
    place_order) echo "writes of one initiator to one target placed in a random order within a window (SRD is unordered)" ;;
    defer) echo "the completion comes when the target NIC has the data; the bytes land later, FIFO per target NIC" ;;
    duplicate) echo "a write's bytes placed once more after its completion (delivered-once is not promised)" ;;
    silent) echo "after a QP error the queue completes nothing more until destroyed" ;;
    wqe128) echo "an efa-direct device with 128-byte WQEs" ;;
  esac
}
# modes_env LIST: the environment words of LIST (all, none or empty, or a comma list); exit 2 naming a bad mode.
modes_env() {
  local list=$1 m words=()
  [ "$list" = all ] && list=$(IFS=,; echo "${MODE_NAMES[*]}")
  [ "$list" = none ] && list=
  for m in ${list//,/ }; do
    if ! mode_env "$m" >/dev/null; then
      echo "checks.sh: EFAEMU_MODES: unknown mode '$m'; use all, none, or a comma list of: $(IFS=,; echo "${MODE_NAMES[*]}" | sed 's/,/, /g')" >&2
      exit 2
    fi
    words+=("$(mode_env "$m")")
  done
  echo "${words[*]}"
}

# The programs of the device_api check (check_device_api, below), and how each is run.
# name|kind|args: kind rma (pure RMA), value (p and g: GDA, or the proxy where the device API says why), sig (signals),
# mixed (atomics or collectives: proxy and GDA), sync (barriers and signal_op: the proxy by design), ex (examples; they pick their GPU by
# node rank, cudaSetDevice(mype_node), so each of their ranks runs as a host of its own, PE_OWN_HOST in --pe-exec,
# seeing only its GPU), exrace (an example that reads what a peer put with no synchronization in between:
# put-block validates right after its own kernel, with no barrier after the peer's blocking put, whose completion
# OpenSHMEM does not make visible at the target, and the peer may not even have started; 2x H200 through efaemu showed
# its data error with the placement modes off too. It runs like the others and must finish on the device API's path;
# its data check is reported, not judged, and the line says why).
DEVICE_API_TABLE=(
  "shmem_put_bw|rma|-b 8 -e 256K -n 10 -w 2 -c 2 -t 256 -s all"
  "shmem_put_latency|rma|-b 8 -e 64K -n 10 -w 2 -s all"
  "shmem_get_bw|rma|-b 8 -e 256K -n 10 -w 2 -c 2 -t 256 -s all"
  "shmem_get_latency|rma|-b 8 -e 64K -n 10 -w 2 -s all"
  "shmem_p_latency|value|-e 64 -n 5 -w 1"
  "shmem_g_latency|value|-e 1K -n 5 -w 1"
  "shmem_put_ping_pong_latency|sig|-e 64K -n 20 -w 2"
  "shmem_p_ping_pong_latency|value|-e 64 -n 20 -w 2"
  "shmem_put_signal_ping_pong_latency|sig|-e 64K -n 20 -w 2"
  "shmem_signal_ping_pong_latency|sync|-n 20 -w 2"
  "shmem_put_atomic_ping_pong_latency|mixed|-e 64K -n 20 -w 2"
  "barrier_latency|sync|-n 20 -w 2"
  "alltoall_latency|mixed|-b 8 -e 64K -n 5 -w 1"
  "bcast_latency|mixed|-b 8 -e 64K -n 5 -w 1"
  "fcollect_latency|mixed|-b 8 -e 64K -n 5 -w 1"
  "put-block|exrace|"
  "ring-bcast|ex|"
  "ring-reduce|ex|-b 8388608 -e 16777216 -m 65536 -n 2 -w 1"
  "dev-guide-ring|ex|"
  "on-stream|ex|"
  "thread-group|ex|"
  "collective-launch|ex|"
  "device_api_order|order|100"
  "device_api_order@4|order|100 barrier barrier_lone"
  "device_api_order+rails|order|100 fence signal xwarp_p xwarp_signal proxy_fence_gda"
)
# NAME@N: the program on N PEs. NAME+rails: on 2 emulated NICs per PE (PE_RAILS=2 in --pe-exec: each PE a host of its own
# with efaemu0 and efaemu1 at its GPU), where GDA must say "on 2 rails" at finalize on every PE: the cross-warp fence
# tests (review 3, finding 1) and a proxy put, fence, GDA flag (finding 7) are only tests with a second NIC. It needs a
# multi-rail NVSHMEM (a single-rail transport gives GDA one NIC per PE): DEVICE_API_RAILS=0 (selftest passes it for a
# single-rail build) leaves these rows out, saying so; default 1.
# Sizes: ring-reduce's defaults move 10 GB (32 to 512 MiB, 5 times: 91 s on one H200 with both PEs on it). Its 32
# blocks each reduce SIZE/32 bytes in chunks of -m bytes (default 256 KiB), and a block with less than a chunk does
# nothing: 1 MiB left every block idle and the check failed (1x H200). 8 and 16 MiB in 64 KiB chunks give each block
# 4 and 8 chunks to pipeline. shmem_p_* put one element per p, so up to 64 B is 16 p's a message.
# Not run on a shared GPU (a PE's GPU shared with another PE), each with why; DEVICE_API_SHARED_ALL=1 runs them there.
declare -A DEVICE_API_SHARED_OMIT=(
  [shmem_put_atomic_ping_pong_latency]="its 550 round trips per size, 4 B to 1 MiB, are fixed in NVSHMEM's source and each costs GPU timeslices there (142 s on one H200); shmem_put_ping_pong_latency and the collectives cover a put then an atomic"
)
# Not in the table: NVSHMEM's user-buffer example. It maps a user buffer into the symmetric heap, which NVSHMEM 3.4.5's
# libfabric transport refuses ("mmap symmetric buf ... not supported with libfabric currently. Please use
# nvshmem_malloc", libfabric.cpp), with or without GDA (4x H200 through efaemu, bench/results/device-api-gpu.md).
# neg_device_api's negative controls: device_api_order linked against a device library with one ordering rule of the
# device API broken (build-device-api-order.sh), each with the test of device_api_order that must catch it and, where
# not 2, its PEs: quiet_no_flush (a quiet that leaves PEs unflushed) shows only where the barrier's data goes to a PE
# that is not a barrier neighbour of its sender, which takes 4 PEs (review 3, finding 2), and only with one writer
# (barrier_lone): 1x H200, the barrier test where every PE writes did not catch it at any window, since each barrier
# signaller's own flush before its proxy signal lands the receiving NIC's earlier writes, the lone writer's too.
# warp_rail (the rail of the calling warp, as before review 3's finding 1) and no_proxy_flush (fence and quiet without
# the flush of the PEs the proxy wrote to: finding 7) show only with 2 NICs per PE (a fourth field, rails: PE_RAILS=2),
# caught by the cross-warp test xwarp_p and by proxy_fence_gda; with DEVICE_API_RAILS=0 they are not run, and say so.
NEG_DEVICE_API_CONTROLS=(fence_no_gda_quiet:fence signal_no_wait:signal no_flush_before_proxy:atomic quiet_no_flush:barrier_lone:4
  warp_rail:xwarp_p:2:rails no_proxy_flush:proxy_fence_gda:2:rails)

if [ "${1:-}" = --list ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi
# --device-api-targets: the CMake targets of NVSHMEM's perftests and examples device_api runs (build-nvshmem-tests.sh).
# Whether DEVICE_API_PROGRAMS (all, the default, or a comma list) names program $1.
device_api_wanted() { [ "${DEVICE_API_PROGRAMS:-all}" = all ] || [[ ",$DEVICE_API_PROGRAMS," == *",$1,"* ]]; }
if [ "${1:-}" = --device-api-targets ]; then
  for row in "${DEVICE_API_TABLE[@]}"; do
    IFS='|' read -r name kind _ <<<"$row"
    device_api_wanted "$name" || continue
    case $kind in ex* | order) echo "${name%%[@+]*}" ;; *) echo "perf_device_$name" ;; esac
  done | awk '!seen[$0]++'
  exit 0
fi
# --neg-device-api-targets: the programs neg_device_api runs (the unbroken one and one per control).
if [ "${1:-}" = --neg-device-api-targets ]; then
  echo device_api_order
  for c in "${NEG_DEVICE_API_CONTROLS[@]}"; do echo "device_api_order_${c%%:*}"; done
  exit 0
fi
# DEVICE_API_TABLE_EXTRA: more rows (NAME|KIND|ARGS, separated by ';'), for diagnosis: programs put under NVSHMEM_TESTS
# by hand (bench/device-api/gpu-run.sh PHASE=diag), never built by --device-api-targets.
if [ -n "${DEVICE_API_TABLE_EXTRA:-}" ]; then IFS=';' read -r -a extra_rows <<<"$DEVICE_API_TABLE_EXTRA"; DEVICE_API_TABLE+=("${extra_rows[@]}"); fi
if [ "${1:-}" = --modes ]; then for m in "${MODE_NAMES[@]}"; do printf '%s\t%s\t%s\n' "$m" "$(mode_env "$m")" "$(mode_models "$m")"; done; exit 0; fi
if [ "${1:-}" = --modes-env ]; then modes_env "${2:-}"; exit 0; fi
# ---- Placement (issue 34): which GPU each PE of a run uses -------------------------------------------------------
# A run of N PEs puts PE r on GPU r mod U, U being the GPUs it uses: with PES_PER_GPU=auto (the default) as many as
# the host has, up to N (one PE per GPU where there are enough); with PES_PER_GPU=K, ceil(N/K). A run with more PEs
# than the GPUs it uses is shared: its PEs are time-sliced on their GPU by the driver (no MPS: docs/efaemu-selftest.md
# says why), and each PE is a host of its own (a UTS namespace named <host>-pe<R>). NVSHMEM tells PEs on one GPU apart
# by host name only: with one name it would detect an MPG run, whose limited mode exits in NVSHMEM's collectives, and
# NCCL refuses two ranks of one host on one GPU. Alone on its "node", a PE gets the emulated NIC(s) at its GPU, as it
# would on an EFA host. `checks.sh --placement N` prints what a run of N PEs gets here.
# PE_GPUS: the host's GPU count (selftest passes what it counted); default: NS_DEVICES' words, else the NVIDIA
# display/3D functions in PCI order (what CUDA_DEVICE_ORDER=PCI_BUS_ID numbers 0, 1, ...).
nvidia_pci_dirs() {
  local d
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor" 2>/dev/null)" = "0x10de" ] || continue
    case "$(cat "$d/class" 2>/dev/null)" in 0x03*) echo "$d" ;; esac
  done
}
host_gpus() {
  if [ -n "${PE_GPUS:-}" ]; then echo "$PE_GPUS"
  elif [ -n "${NS_DEVICES:-}" ]; then set -- $NS_DEVICES; echo $#
  else nvidia_pci_dirs | wc -l; fi
}
# The PCI directory of GPU $1: the $1-th word of NS_DEVICES when set (tests on hosts without GPUs), else the $1-th
# NVIDIA display/3D function in PCI order.
gpu_pci_dir() {
  local want=$1 i=0 d
  # shellcheck disable=SC2086 # NS_DEVICES is words
  for d in ${NS_DEVICES:-$(nvidia_pci_dirs)}; do [ "$i" = "$want" ] && { echo "$d"; return; }; i=$((i + 1)); done
  return 1
}
# place N: PLACE_PES, PLACE_GPUS and PLACE_SHARED (exported: --pe-exec reads them) for a run of N PEs; false with
# PLACE_WHY when the run cannot be placed here.
place() {
  local n=$1 g k=${PES_PER_GPU:-auto}
  g=$(host_gpus)
  PLACE_PES=$n PLACE_WHY=
  if ! [[ $k == auto || $k =~ ^[1-9][0-9]*$ ]]; then PLACE_WHY="PES_PER_GPU=$k: expected auto or a positive integer"; return 1; fi
  if [ "$g" -lt 1 ]; then PLACE_WHY="no GPU on this host (nor NS_DEVICES)"; return 1; fi
  if [ "$k" = auto ]; then PLACE_GPUS=$((n < g ? n : g)); else PLACE_GPUS=$(((n + k - 1) / k)); fi
  if [ "$PLACE_GPUS" -gt "$g" ]; then PLACE_WHY="$n PEs at $k per GPU need $PLACE_GPUS GPUs; this host has $g (--pes-per-gpu auto shares the GPUs there are)"; return 1; fi
  PLACE_SHARED=$((n > PLACE_GPUS ? 1 : 0))
  export PLACE_PES PLACE_GPUS PLACE_SHARED
}
gpu_of() { echo $(($1 % ${PLACE_GPUS:-1})); }
# What the evidence says of the placement: "2 PEs, 1 per GPU" or "6 PEs on 1 GPU (time-sliced, each PE a host of its own)".
placement_note() {
  if [ "${PLACE_SHARED:-0}" = 1 ]; then echo "$PLACE_PES PEs on $PLACE_GPUS GPU$([ "$PLACE_GPUS" = 1 ] || echo s) (time-sliced, each PE a host of its own)"
  else echo "$PLACE_PES PEs, 1 per GPU"; fi
}
# not_mpg NAME: true unless the run was shared and a PE's pe_test said NVSHMEM saw an MPG run (several PEs of one host
# on one GPU) rather than a PE alone on its host; MPG_WHY says which.
not_mpg() {
  MPG_WHY=
  [ "${PLACE_SHARED:-0}" = 1 ] || return 0
  local seen
  # shellcheck disable=SC2046 # pe_logs prints paths without spaces
  seen=$(grep -h -o 'RESULT init_status [a-z_]*' $(pe_logs "$1") 2>/dev/null | awk '{print $NF}')
  MPG_WHY="NVSHMEM's init status on the shared GPU: $(sort <<<"$seen" | uniq -c | awk 'NF == 2 {print $2" x"$1}' | paste -sd, -); "
  [ "$(grep -c '^initialized$' <<<"$seen")" = "$PLACE_PES" ]
}
# shared_bound: on a shared GPU, NVSHMEM_EFA_GDA_TIMEOUT_MS=SHARED_GDA_TIMEOUT_MS (60000) for the checks whose GPU waits
# are not what they test. efaemu moves every byte and CQE with CUDA copies in the owning process's context, and on a
# time-sliced GPU each copy can wait for that context's timeslice: 1x H200, gda_kernel under modes all, 2 PEs on the GPU,
# the 513 writes of a credit refresh retired at about 13 ms each (CUDA copies mean 1.45 ms, max 4.4 ms) and the 5 s
# default bound expired with none lost (bench/results/one-gpu-selftest.md). The emulator's speed, not the product's.
shared_bound() { [ "${PLACE_SHARED:-0}" = 1 ] && echo "NVSHMEM_EFA_GDA_TIMEOUT_MS=${SHARED_GDA_TIMEOUT_MS:-60000}"; }
# wide_modes_env LIST [ROUND_US]: the environment words of LIST with the placement deferred as wide_defer_us says: a
# negative control's second try on a shared GPU (neg_control says why).
wide_modes_env() { PLACE_DEFER_US=$(wide_defer_us "${2:-0}") modes_env "$1"; }
# wide_defer_us [ROUND_US]: a timeslice and more (SHARED_DEFER_US, default 2000-20000 us), or half a round to two rounds
# of the control's test where its rounds take longer than that (efaemu's limit: 10 s). A write deferred for less than
# the synchronization it races lands in time whether or not the client waited for it: 1x H200, 4 PEs, device_api_order's
# barrier took about 100 ms a round and quiet_no_flush went uncaught at 2000-20000 us.
wide_defer_us() {
  local w=${SHARED_DEFER_US:-2000-20000} r=${1:-0}
  [ "$r" -le 5000000 ] || r=5000000
  if [ $((2 * r)) -gt "${w#*-}" ]; then echo "$((r / 2))-$((2 * r))"; else echo "$w"; fi
}
# round_us RUN TEST: the microseconds a round of device_api_order's TEST took in run RUN (from a rank's "ok TEST: N
# rounds ..., S s"), 0 when no rank said.
round_us() {
  grep -h -m1 -E "ok $2: [0-9]+ rounds .*, [0-9.]+ s$" "$RESULTS/$1"/rank*.log 2>/dev/null | head -1 |
    sed -E 's/.*ok [a-z_]+: ([0-9]+) rounds.*, ([0-9.]+) s$/\1 \2/' | awk 'NF == 2 && $1 > 0 { printf "%d", $2 * 1e6 / $1; f = 1 } END { if (!f) print 0 }'
}
# placed CHECK N: place N PEs, or report CHECK as skipped with why.
placed() { place "$2" || { result "$1" skip "$PLACE_WHY"; return 1; }; }
# own_host_argv R: OWN_HOST becomes the words that run a command as a host of its own named <host>-pe<R>: in a shared
# run, or with PE_OWN_HOST set (NVSHMEM's examples, which pick their GPU by node rank); else nothing.
own_host_argv() {
  OWN_HOST=()
  # shellcheck disable=SC2016 # $1 and $@ belong to the inner sh
  if [ "${PLACE_SHARED:-0}" = 1 ] || [ -n "${PE_OWN_HOST:-}" ]; then
    OWN_HOST=(unshare --uts sh -c 'echo "$1" >/proc/sys/kernel/hostname && shift && exec "$@"' pe-host "$(uname -n)-pe$1")
  fi
}
# MPS: every PE is started with CUDA_MPS_PIPE_DIRECTORY naming an empty directory of this run, so a daemon another user
# or job left running never makes the PEs its clients behind the checks' back (under MPS two spinning grids that need
# more SMs than the GPU has deadlock instead of being time-sliced); selftest reports such a daemon.
NO_MPS_DIR=${NO_MPS_DIR:-${TMPDIR:-/tmp}/nvshmem-efa-no-mps}

if [ "${1:-}" = --placement ]; then  # --placement N: what a run of N PEs gets on this host
  place "${2:-2}" || { echo "unplaceable: $PLACE_WHY"; exit 1; }
  echo "pes=$PLACE_PES gpus=$PLACE_GPUS shared=$PLACE_SHARED"
  for ((r = 0; r < PLACE_PES; r++)); do echo "pe$r gpu$(gpu_of $r)"; done
  exit 0
fi

# Validated before anything starts: a typo in EFAEMU_MODES is an error, never a run without the modes.
MODES_ENV=$(modes_env "${EFAEMU_MODES:-none}") || exit 2
MODES_LABEL=${EFAEMU_MODES:-none}
[ $# -gt 0 ] || { echo "usage: checks.sh CHECK...|all|--list" >&2; exit 2; }

if [ -z "${EFAEMU_SYSFS_NS:-}" ]; then
  NS=${EFAEMU_SYSFS_NS_SCRIPT:-$HERE/../scripts/sysfs-ns.sh}
  # NS_DEVICES: PCI directories for the NIC entries (default: the GPUs); tests on a host without GPUs name one.
  ns_args=()
  for d in ${NS_DEVICES:-}; do ns_args+=(--device "$d"); done
  exec "$NS" "${ns_args[@]}" -- "$0" "$@"
fi

: "${RESULTS:?RESULTS must name a directory}"
mkdir -p "$RESULTS"
T=${CHECK_TIMEOUT:-240}
PY=${PYTHON:-python3}

result() { printf 'RESULT\t%s\t%s\t%s\n' "$1" "$2" "$3"; }
# The end of a mode-taking check's evidence: which modes it ran under.
modes_note() { [ -n "$MODES_ENV" ] && echo "; efaemu modes $MODES_LABEL: $MODES_ENV"; }
# The run's modes without the placement ones (place_order, defer, duplicate): for a check of a path that does not claim
# to survive them.
unplaced_modes_env() { local w out=(); for w in $MODES_ENV; do case $w in EFAEMU_PLACE_ORDER=* | EFAEMU_PLACE_DEFER_US=* | EFAEMU_DUPLICATE=*) ;; *) out+=("$w") ;; esac; done; echo "${out[*]}"; }
need() {  # need CHECK VAR...: skip the check when an input is missing
  local c=$1; shift
  for v in "$@"; do
    if [ -z "${!v:-}" ] || [ ! -e "${!v}" ]; then result "$c" skip "$v is not set or missing (${!v:-unset})"; return 1; fi
  done
}

# libfabric 2.x takes the provider library itself as a preferred provider (+path); 1.x only directories.
if grep -qE '#define FI_MAJOR_VERSION[[:space:]]+1$' "${LIBFABRIC_HOME:-/nonexistent}/include/rdma/fabric.h" 2>/dev/null; then
  PROV_PATH=${EFAEMU_BUILD:-}/prov
else
  PROV_PATH=+${EFAEMU_BUILD:-}/prov/libefa-fi.so
fi

# The environment of PE $1 (its GPU), on top of the caller's.
# CUDA_MODULE_LOADING=EAGER: efaemu's engine and softgdr move GPU memory with CUDA calls from their own threads. Under
# lazy loading (CUDA's default since 12.2, and torch sets it) the first launch of a kernel may synchronize the context;
# launched while another kernel spins on the network (DeepEP's test launches its check kernels while the combine kernel
# waits for flags), it waits for that kernel, and the emulator's copies wait behind it: the flags never land. A deadlock
# of the emulation, not of the product: on a NIC with a real GDRCopy nothing on the host calls CUDA there (pe_test's
# `lazy` mode shows it; CUDA_MODULE_LOADING_UNDER_TEST=LAZY brings it back).
pe_env() {
  local r=$1
  # Word-split by the caller (env $(pe_env R)): the paths must not contain spaces.
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  echo CUDA_VISIBLE_DEVICES=$(gpu_of "$r") CUDA_MPS_PIPE_DIRECTORY=$NO_MPS_DIR NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING_UNDER_TEST:-EAGER} \
    FI_PROVIDER_PATH=$PROV_PATH FI_PROVIDER=${FI_PROVIDER_UNDER_TEST:-efa} \
    NVSHMEM_REMOTE_TRANSPORT=libfabric NVSHMEM_LIBFABRIC_PROVIDER=efa NVSHMEM_DISABLE_P2P=1 \
    NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
    LD_LIBRARY_PATH=$EFAEMU_BUILD/softgdr:$LIBFABRIC_HOME/lib:${NVSHMEM_HOME:-/nonexistent}/lib:${LD_LIBRARY_PATH:-} \
    LD_PRELOAD=${PRELOAD_UNDER_TEST-$EFAEMU_BUILD/interpose/libefaemu-cuda-interpose.so} PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
}

# checks.sh --pe-exec CMD...: one rank of a job `nvshmem-efa launch` started (device_api): the PE's environment of
# PMI_RANK, then CMD. Inside the namespace already (EFAEMU_SYSFS_NS is inherited).
if [ "${1:-}" = --pe-exec ]; then
  shift
  r=${PMI_RANK:?--pe-exec runs under nvshmem-efa launch}
  # PE_OWN_HOST=1: the PE runs in a UTS namespace of its own, named <host>-pe<R>. NVSHMEM tells nodes apart by host
  # name only, so each PE is then a node of its own, as PEs on separate EFA hosts are: its node rank is 0 and the one
  # GPU it sees is the one it picks. NVSHMEM's examples pick their GPU by node rank (cudaSetDevice(mype_node)), and
  # ring-reduce creates its events before that call: with both GPUs visible, PE 1 recorded an event of GPU 0 on a
  # stream of GPU 1 ("invalid resource handle", 2x H200 through efaemu, bench/results/device-api-gpu.md).
  # In a shared run (run_launch exports the placement) every PE is such a host.
  # PE_RAILS=2: the PE in a sysfs namespace of its own with 2 emulated NICs at its GPU and a host name of its own (the
  # 2-rail checks' setup, two_nics_per_pe), so NVSHMEM gives it both NICs.
  if [ "${PE_RAILS:-1}" = 2 ]; then
    g=$(gpu_pci_dir "$(gpu_of "$r")") || { echo "checks.sh --pe-exec: no PCI directory for GPU $(gpu_of "$r") (PE_RAILS=2)" >&2; exit 2; }
    # shellcheck disable=SC2046 # pe_env prints VAR=value words for env
    exec env -u EFAEMU_SYSFS_NS "${EFAEMU_SYSFS_NS_SCRIPT:-$HERE/../scripts/sysfs-ns.sh}" --hostname "efaemu-node$r" --device "$g" --device "$g" -- \
      env $(pe_env "$r") EFAEMU_NICS=2 CUDA_DEVICE_ORDER=PCI_BUS_ID "$@"
  elif [ "${PE_RAILS:-1}" != 1 ]; then
    echo "checks.sh --pe-exec: PE_RAILS=$PE_RAILS: expected 1 or 2" >&2; exit 2
  fi
  own_host_argv "$r"
  # shellcheck disable=SC2046 # pe_env prints VAR=value words for env
  exec "${OWN_HOST[@]}" env $(pe_env "$r") "$@"
fi

# run_n NAME EXTRA_ENV -- CMD...: the PLACE_PES ranks of the last `place` (2 without one), each on its GPU and, in a
# shared run, a host of its own (RANK, the GPU, --rank are substituted for @R@; @NS@ becomes the words of NS_PE<R>, a
# rank's own namespace arguments, which then name its host), logs NAME.pe<R>.log, statistics in stats-NAME/. Once one
# rank fails, the others get 15 s before they are stopped: a failure ends the run, it never hangs it. Sets RCS (one exit
# status per rank), RC0 and RC1 (the first two), ELAPSED.
# RANK_ENV[R]: more environment words for rank R alone (a check sets and clears it: gda_pe_errors' refusing PE).
RANK_ENV=()
run_n() {
  local name=$1 extra=$2; shift 3
  local n=${PLACE_PES:-2} st="$RESULTS/stats-$name" start r a now failed_at='' ended_at='' left
  [ -n "${PLACE_PES:-}" ] || place 2 || true
  rm -rf "$st"; mkdir -p "$st" "$NO_MPS_DIR"
  start=$(date +%s)
  RUN_PIDS=() RCS=()
  for ((r = 0; r < n; r++)); do
    local argv=("${@//@R@/$r}") ns_var="NS_PE$r" expanded=() own=1
    # @NS@: the rank's own sysfs-ns.sh arguments (NS_PE<R>), word-split into separate arguments; they name its host.
    for a in "${argv[@]}"; do
      # shellcheck disable=SC2206
      if [ "$a" = @NS@ ]; then expanded+=(${!ns_var:-}); own=0; else expanded+=("$a"); fi
    done
    OWN_HOST=(); [ "$own" = 1 ] && own_host_argv "$r"
    # EFAEMU_DUMP_SIGNAL: stop_rank asks a rank it is about to kill for efaemu's state dump (every thread's backtrace).
    # shellcheck disable=SC2046 # pe_env and EXTRA_ENV are words
    env $(pe_env "$r") EFAEMU_STATS="$st" EFAEMU_DUMP_SIGNAL=1 RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29517} $extra ${RANK_ENV[$r]:-} \
      timeout -k 10 "$T" "${OWN_HOST[@]}" "${expanded[@]}" >"$RESULTS/$name.pe$r.log" 2>&1 &
    RUN_PIDS+=($!) RCS+=("")
  done
  left=$n
  while [ "$left" -gt 0 ]; do
    for ((r = 0; r < n; r++)); do
      [ -z "${RCS[$r]}" ] || continue
      if ! kill -0 "${RUN_PIDS[$r]}" 2>/dev/null; then wait "${RUN_PIDS[$r]}"; RCS[$r]=$?; left=$((left - 1)); fi
    done
    now=$(date +%s)
    if [ -z "$failed_at" ]; then
      for ((r = 0; r < n; r++)); do [ -n "${RCS[$r]}" ] && [ "${RCS[$r]}" != 0 ] && failed_at=$now; done
    fi
    # A rank still running PEER_EXIT_GRACE_S (60 s) after another ended well waits for a peer that is gone (every
    # program here ends in a collective: a barrier, finalize): a hang, stopped and counted as a failure.
    if [ -z "$failed_at" ] && [ -z "$ended_at" ]; then
      for ((r = 0; r < n; r++)); do [ "${RCS[$r]}" = 0 ] && ended_at=$now; done
    fi
    if [ -z "$failed_at" ] && [ -n "$ended_at" ] && [ "$left" -gt 0 ] && [ $((now - ended_at)) -ge "${PEER_EXIT_GRACE_S:-60}" ]; then
      echo "checks.sh: $name: $left PE(s) still running ${PEER_EXIT_GRACE_S:-60} s after another ended with 0: stopped as hung" >&2
      failed_at=$((now - ${PEER_FAIL_GRACE_S:-15}))
    fi
    # Stopped: the others PEER_FAIL_GRACE_S (15 s) after a failure; every rank once timeout's TERM and KILL are past
    # (timeout itself waits for a rank that outlives SIGKILL).
    if { [ -n "$failed_at" ] && [ $((now - failed_at)) -ge "${PEER_FAIL_GRACE_S:-15}" ]; } || [ $((now - start)) -ge $((T + 20)) ]; then
      for ((r = 0; r < n; r++)); do [ -n "${RCS[$r]}" ] || { stop_rank "$r" "$st"; left=$((left - 1)); }; done
    fi
    [ "$left" -gt 0 ] && sleep 0.5
  done
  RC0=${RCS[0]} RC1=${RCS[1]:-}
  ELAPSED=$(($(date +%s) - start))
}
# The exit statuses of the last run, "0/0/1/killed(137)".
rcs() { local IFS=/; echo "${RCS[*]}"; }
# Whether every rank of the last run exited 0.
all_ok() { local rc; for rc in "${RCS[@]}"; do [ "$rc" = 0 ] || return 1; done; }
# The logs of run NAME's ranks.
pe_logs() { local r; for ((r = 0; r < ${PLACE_PES:-2}; r++)); do echo "$RESULTS/$1.pe$r.log"; done; }
# The process tree under PID (PID first).
tree_pids() { local c; echo "$1"; for c in $(pgrep -P "$1" 2>/dev/null); do tree_pids "$c"; done; }
# stop_rank R STATS: a rank still running when the run must end. Its processes that loaded efaemu are asked for a state
# dump (SIGUSR1: every thread's backtrace into STATS), then the tree is killed. A process that outlives SIGKILL for
# KILL_WAIT_S (10 s) waits in the kernel, in practice the GPU driver holding it for a GPU kernel it has not stopped: the
# rank's status becomes "unkillable(pid P state S wchan W)", a STUCK line names it, and the run ends without it (a wait
# for it would never return).
# proc_snapshot FILE PID...: each thread's name, state, wait channel and kernel stack (where readable): where a process
# that will not end waits, kept beside the run's statistics.
proc_snapshot() {
  local f=$1 p t; shift
  for p in "$@"; do
    for t in /proc/"$p"/task/*; do
      [ -d "$t" ] || continue
      printf 'pid %s tid %s %s state %s wchan %s\n' "$p" "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(awk '/^State:/ {print $2}' "$t/status" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
      sed 's/^/    /' "$t/stack" 2>/dev/null | head -12
    done
  done >>"$f" 2>/dev/null
}
stop_rank() {
  local r=$1 pid=${RUN_PIDS[$1]} p all i state
  all=$(tree_pids "$pid")
  for p in $all; do grep -q libefa-fi "/proc/$p/maps" 2>/dev/null && kill -USR1 "$p" 2>/dev/null; done
  sleep 1
  proc_snapshot "$2/stopped-pe$r.txt" $all
  # shellcheck disable=SC2086
  kill -KILL $all 2>/dev/null
  for ((i = 0; i < ${KILL_WAIT_S:-10} * 2; i++)); do
    for p in $all; do kill -0 "$p" 2>/dev/null && [ "$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)" != Z ] && break; p=; done
    [ -z "$p" ] && break
    sleep 0.5
  done
  if [ -z "$p" ]; then wait "$pid"; RCS[$r]="killed($?)"; return; fi
  state=$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)
  RCS[$r]="unkillable(pid $p state ${state:-?} wchan $(cat "/proc/$p/wchan" 2>/dev/null || echo ?))"
  printf 'STUCK\t%s\n' "PE $r of $(basename "$2" | sed 's/^stats-//'): ${RCS[$r]}"
  echo "checks.sh: PE $r (pid $p, $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100 | sed 's/ *$//')) outlived SIGKILL for ${KILL_WAIT_S:-10} s, state ${state:-?}: the GPU driver holds it; it may keep its GPU busy for the checks after this one" >&2
}

# Sums of fields over the statistics files of a run (jq-free: python).
estat() {  # estat NAME PATH...: one total per PATH, on one line
  "$PY" - "$RESULTS/stats-$1" "${@:2}" <<'EOF'
import glob, json, re, sys
# At-exit files only (efaemu-<pid>.json), not snapshots (efaemu-<pid>.<label>.json).
docs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + '/efaemu-*.json') if re.search(r'/efaemu-\d+\.json$', f)]
def total(path):
    n = 0
    for d in docs:
        for k in path.split('.'):
            d = d.get(k, 0) if isinstance(d, dict) else 0
        n += d if isinstance(d, int) else 0
    return n
print(' '.join(str(total(p)) for p in sys.argv[2:]))
EOF
}
nfiles() { find "$RESULTS/stats-$1" -maxdepth 1 -regex '.*/efaemu-[0-9]*\.json' 2>/dev/null | wc -l; }

check_fi_info() {
  need fi_info LIBFABRIC_HOME EFAEMU_BUILD || return
  # shellcheck disable=SC2046 # pe_env prints VAR=value words for env
  env $(pe_env 0) "$LIBFABRIC_HOME/bin/fi_info" -p efa >"$RESULTS/fi_info.log" 2>&1
  local fabs; fabs=$(grep -A1 'fabric:' "$RESULTS/fi_info.log" | awk '/fabric:/{f=$2} /domain:/{print f" "$2}' | paste -sd, -)
  if grep -q 'fabric: efa-direct' "$RESULTS/fi_info.log" && grep -q 'fabric: efa$' "$RESULTS/fi_info.log" &&
     [ "$(grep -m1 'fabric:' "$RESULTS/fi_info.log" | awk '{print $2}')" = efa-direct ]; then
    result fi_info pass "fi_info -p efa: $fabs (efa-direct first)"
  else
    result fi_info fail "fi_info -p efa printed: ${fabs:-nothing} (see fi_info.log)"
  fi
}

check_fabtests() {
  need fabtests LIBFABRIC_HOME EFAEMU_BUILD || return
  local ok=1 ev="" port=$((20000 + RANDOM % 20000))
  for t in "fi_rdm_pingpong -p efa -v" "fi_rma_bw -p efa -v -o write" "fi_rma_bw -p efa -v -o read" "fi_rma_bw -p efa -v -o writedata"; do
    port=$((port + 1))
    local log; log="$RESULTS/fabtests.$(echo "$t" | tr ' ' '_' | tr -d -).log"
    # shellcheck disable=SC2086
    # shellcheck disable=SC2046 # pe_env prints VAR=value words for env
    ( env $(pe_env 0) timeout 120 "$LIBFABRIC_HOME/bin/"$t -E=$port & sleep 1
      env $(pe_env 1) timeout 120 "$LIBFABRIC_HOME/bin/"$t -E=$port 127.0.0.1; c=$?; wait $!; echo "rc client=$c server=$?" ) >"$log" 2>&1
    if grep -q 'rc client=0 server=0' "$log"; then
      ev+="${t%% -p*}$([ "${t##*-o }" != "$t" ] && echo " ${t##*-o }"): 1m $(awk '/^1m /{print $(NF-2)" MB/s "$(NF-1)" us"}' "$log" | tail -1); "
    else ok=0; ev+="$t FAILED ($(tail -1 "$log")); "; fi
  done
  result fabtests "$([ "$ok" = 1 ] && echo pass || echo fail)" "${ev%; } (server and client processes over efaemu, -v: data verified)"
}

check_nvshmem_perf() {
  need nvshmem_perf PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed nvshmem_perf 2 || return
  rm -f "$RESULTS/uid-perf"
  run_n nvshmem_perf "NVSHMEM_EFA_GDA_ENABLE=0" -- "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-perf" perf
  local logs="$RESULTS/nvshmem_perf.pe0.log $RESULTS/nvshmem_perf.pe1.log"
  local bw lat fails
  bw=$(grep -h 'RESULT put_bw' $logs | sed -E 's/.*bytes=([0-9]+).*GB\/s=([0-9.]+).*/\1 B: \2 GB\/s/' | paste -sd, -)
  lat=$(grep -h 'RESULT atomic_latency' $logs | sed -E 's/.*op=([a-z_]+).*us=([0-9.]+).*/\1 \2 us/' | paste -sd, -)
  fails=$(grep -h ' FAIL ' $logs | head -3 | paste -sd';' -)
  local wr; wr=$(estat nvshmem_perf paths.rdm.write.gpu_bytes)
  # not_mpg first: MPG_WHY is then this run's for the evidence either way.
  if not_mpg nvshmem_perf && [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && [ -z "$fails" ] && grep -q 'ok put of 4194304 bytes from PE 0 landed byte-exact' $logs; then
    result nvshmem_perf pass "GDA off; put bandwidth $bw; atomic latency $lat; byte-exact at the target; RDM GPU write bytes $wr; ${ELAPSED}s; $(placement_note)"
  else
    result nvshmem_perf fail "rc $RC0/$RC1 ${fails:-} ${MPG_WHY:-}(nvshmem_perf.pe*.log)"
  fi
}

# GDA_OWNED (default 8): owned queues per rail the transport opens (NVSHMEM_EFA_GDA_OWNED_QUEUES) and pe_test checks,
# 8 warps each putting through one; 0 leaves them out (an NVSHMEM built before ABI 6).
check_gda_kernel() {
  need gda_kernel PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed gda_kernel 2 || return
  rm -f "$RESULTS/uid-gda"
  local owned=${GDA_OWNED:-8}
  run_n gda_kernel "NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_OWNED_QUEUES=$owned EFAEMU_REORDER=${REORDER:-8} $(shared_bound) $MODES_ENV" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-gda" --owned "$owned" gda
  local logs="$RESULTS/gda_kernel.pe0.log $RESULTS/gda_kernel.pe1.log"
  local active fails ooo gb
  active=$(cat $logs | grep -c 'ok nvshmemx_efa_gda_status() says active')
  fails=$(grep -h ' FAIL ' $logs | head -3 | paste -sd';' -)
  ooo=$(estat gda_kernel faults.gda_cqe_out_of_order); gb=$(estat gda_kernel paths.gda.write.bytes)
  # not_mpg first: MPG_WHY is then this run's for the evidence either way.
  if not_mpg gda_kernel && [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && [ "$active" = 2 ] && [ -z "$fails" ] && [ "$ooo" -gt 0 ]; then
    result gda_kernel pass "status active on both PEs ($(grep -h -m1 'gda_status' "$RESULTS/gda_kernel.pe0.log" | cut -c1-90)...); put, put-imm + rx_poll, get, quiet, warp batch byte-exact; $owned owned queues per rail (WQEs per owned queue $(grep -h -m1 'RESULT gda_owned_wqes' "$RESULTS/gda_kernel.pe0.log" | awk '{print $NF}')); $gb GDA bytes written; $ooo CQEs out of order (EFAEMU_REORDER=${REORDER:-8}); ${ELAPSED}s; $(placement_note)$([ "${PLACE_SHARED:-0}" = 1 ] && echo ", NVSHMEM init status initialized on each (no MPG run), GPU waits bounded at ${SHARED_GDA_TIMEOUT_MS:-60000} ms (the emulator's copies wait for timeslices)")$(modes_note)"
  else
    result gda_kernel fail "rc $RC0/$RC1, active on $active PE(s), out-of-order CQEs $ooo; ${fails:-} ${MPG_WHY:-}(gda_kernel.pe*.log)$(modes_note)"
  fi
}


# GDA on every rail: the gda_kernel test with 2 emulated NICs per GPU and 2 rails per PE. Each PE runs in a mount
# and UTS namespace of its own (sysfs-ns.sh nested): efaemu0 and efaemu1 both at its GPU, and a host name of its
# own, because NVSHMEM divides a node's NICs among the PEs with one host name (n_devices / PEs on the node) and
# then gives each PE the nearest ones: alone on its "node", a PE gets both NICs of its GPU. CUDA_DEVICE_ORDER=
# PCI_BUS_ID makes CUDA_VISIBLE_DEVICES=R the GPU the NICs were put at (pe_test checks it). Passes when GDA runs on
# 2 rails on both PEs, the kernel test is byte-exact with every rail's completions exact under reordering, and
# efaemu's per-NIC statistics show GDA bytes on both NICs.
# two_nics_per_pe CHECK: sets NS_PE0/NS_PE1 (run_n's @NS@) for the setup above, or reports CHECK as skipped.
# The command then runs under "${RAILS_WRAP[@]}" with $RAILS_ENV.
RAILS_ENV="NVSHMEM_EFA_GDA_ENABLE=1 EFAEMU_NICS=2 CUDA_DEVICE_ORDER=PCI_BUS_ID"
RAILS_WRAP=(env -u EFAEMU_SYSFS_NS "${EFAEMU_SYSFS_NS_SCRIPT:-$HERE/../scripts/sysfs-ns.sh}" @NS@ --)
two_nics_per_pe() {
  local r g
  for ((r = 0; r < ${PLACE_PES:-2}; r++)); do
    g=$(gpu_pci_dir "$(gpu_of "$r")") || { result "$1" skip "no PCI directory for GPU $(gpu_of "$r") (NS_DEVICES names fewer than PE_GPUS)"; return 1; }
    # shellcheck disable=SC2034  # read by run_n through ${!ns_var}
    printf -v "NS_PE$r" '%s' "--hostname efaemu-node$r --device $g --device $g"
  done
}

check_gda_rails() {
  need gda_rails PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed gda_rails 2 || return
  two_nics_per_pe gda_rails || return
  rm -f "$RESULTS/uid-rails"
  run_n gda_rails "$RAILS_ENV EFAEMU_REORDER=${REORDER:-8} $(shared_bound) $MODES_ENV" -- \
    "${RAILS_WRAP[@]}" "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-rails" --rails 2 gda
  local logs="$RESULTS/gda_rails.pe0.log $RESULTS/gda_rails.pe1.log"
  local on2 rails fails ooo n0 n1 wqes
  # shellcheck disable=SC2086
  on2=$(grep -h 'ok GDA runs on 2 rails' $logs | wc -l)
  # shellcheck disable=SC2086
  rails=$(grep -h 'RESULT gda_rails ' $logs | awk '{print $NF}' | paste -sd/ -)
  # shellcheck disable=SC2086
  fails=$(grep -h ' FAIL ' $logs | head -3 | cut -c1-200 | paste -sd';' -)
  ooo=$(estat gda_rails faults.gda_cqe_out_of_order)
  n0=$(estat gda_rails per_nic.efaemu0.gda.write.bytes); n1=$(estat gda_rails per_nic.efaemu1.gda.write.bytes)
  wqes=$(grep -h 'RESULT gda_rail_wqes' "$RESULTS/gda_rails.pe0.log" | awk '{print $NF}')
  if [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && [ "$on2" = 2 ] && [ -z "$fails" ] && [ "$ooo" -gt 0 ] && [ "$n0" -gt 0 ] && [ "$n1" -gt 0 ]; then
    result gda_rails pass "GDA active on 2 rails on both PEs ($(grep -h -m1 'gda_status' "$RESULTS/gda_rails.pe0.log" | sed 's/.*gda_status //' | cut -c1-70)...); put, put-imm + rx_poll, get, quiet, warp batch byte-exact; WQEs per rail on PE 0 ${wqes:-?}; GDA bytes written per NIC: efaemu0 $n0, efaemu1 $n1; $ooo CQEs out of order (EFAEMU_REORDER=${REORDER:-8}); ${ELAPSED}s$(modes_note)"
  elif [ -n "$rails" ] && ! echo "$rails" | grep -q 2 && grep -qh 'gda_status EFA GDA active on 1 rail (' $logs; then
    result gda_rails skip "NVSHMEM handed GDA one NIC per PE (rails $rails): a single-rail libfabric transport (NVSHMEM 3.3 .. 3.5) always does; gda_rails needs the multi-rail build (3.6+); with it, NVSHMEM_DEBUG=INFO shows which NICs it chose"
  else
    result gda_rails fail "rc $RC0/$RC1, rails $rails, 2 rails on $on2 PE(s), GDA bytes per NIC efaemu0 $n0 efaemu1 $n1 (both must carry traffic), out-of-order CQEs $ooo; ${fails:-} (gda_rails.pe*.log)$(modes_note)"
  fi
}

# DeepEP's low-latency test as two 1-GPU "nodes" (its tests/utils.py reads WORLD_SIZE/RANK as nodes).
# torch loads its pip nvidia-nvshmem (libnvshmem_host.so.3) before DeepEP's module, and the loader then reuses it
# for DeepEP (same soname): the NVSHMEM under test would never run. The build's libnvshmem_host is preloaded so
# torch and DeepEP share it (the build report warns about a pip NVSHMEM; the fix for jobs is to uninstall it).
# deepep_pair NAME EXTRA_ENV TEST_ARGS...: DeepEP's low-latency test on both ranks; the DEEPEP_WRAP array (e.g.
# RAILS_WRAP) goes before the interpreter.
DEEPEP_WRAP=()
# DeepEP's test sizes. With an unkind mode on, its defaults (128 tokens, hidden 7168, 288 experts) outlast the bound:
# under `duplicate` the shim sends every signal through NVSHMEM's proxy after a flush read, and each read waits for
# efaemu's deferred placement: 0.69 s per dispatch + combine on 2x H200, and deepep_ll was still running at 240 s
# (bench/results/quickstart-gpu.md, call 5). So with a mode on the DeepEP checks take small sizes (the same code
# paths and signals, fewer experts) unless DEEPEP_ARGS is set (empty: DeepEP's defaults); the evidence names them.
SMALL_DEEPEP_ARGS="--num-experts 16 --num-tokens 32 --hidden 2048 --num-topk 4"
# A shared run takes them too: its PEs are time-sliced, and every cross-PE wait costs up to a timeslice (a DeepEP
# dispatch + combine took 170-178 ms at the small sizes on one H200 under modes all, against 78.6 ms on 2 GPUs:
# bench/results/one-gpu-selftest.md); DeepEP's defaults would outlast the bounds.
# deepep_args: DeepEP's sizes for the run placed last.
deepep_args() {
  if [ -n "${DEEPEP_ARGS+set}" ]; then echo "$DEEPEP_ARGS"
  elif [ -n "$MODES_ENV" ] || [ "${PLACE_SHARED:-0}" = 1 ]; then echo "$SMALL_DEEPEP_ARGS"; fi
}
# deepep_bench_iters: DeepEP's benchmark iterations for the run placed last (warmup/sitecustomize.py cuts them): on a
# shared GPU DEEPEP_BENCH_ITERS (default 3), where DeepEP's 220 timed dispatch + combine pairs per test_main time the
# time-slicer and took most of each check; elsewhere DEEPEP_BENCH_ITERS if set, else DeepEP's own (nothing printed).
deepep_bench_iters() {
  if [ -n "${DEEPEP_BENCH_ITERS:-}" ]; then echo "$DEEPEP_BENCH_ITERS"
  elif [ "${PLACE_SHARED:-0}" = 1 ]; then echo 3; fi
}
deepep_bench_note() {
  local b; b=$(deepep_bench_iters)
  [ -z "$b" ] || echo "; DeepEP's benchmarks cut to $b iterations (DEEPEP_BENCH_ITERS$([ "${PLACE_SHARED:-0}" = 1 ] && echo ': a shared GPU times its time-slicer'))"
}
deepep_args_note() { local a; a=$(deepep_args); echo "; DeepEP args: ${a:-none (its defaults)}$(deepep_bench_note)"; }
# Every DeepEP run asks NVSHMEM's device API for its status line at finalize (NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1: a
# build with the device API hooks prints it on each PE, another prints nothing): the evidence of a DeepEP built without the
# shim's own GDA path (build --deepep-gda device-api), whose remote operations NVSHMEM's device API carries.
deepep_pair() {
  local name=$1 extra=$2; shift 2
  local pre="${PRELOAD_UNDER_TEST-$EFAEMU_BUILD/interpose/libefaemu-cuda-interpose.so}"
  # warmup/sitecustomize.py loads cuBLAS before the test: see its comment (an emulator-only deadlock). It also keeps
  # what DeepEP prints while bench_kineto profiles (DEEPEP_KINETO_OUTPUT=1): a trap message or a receive timeout there
  # went to /dev/null (1x H200, deepep_silent_bound).
  MASTER_PORT=$((29600 + RANDOM % 300)) run_n "$name" "$extra NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1 EFAEMU_WARMUP_CUDA=${WARMUP_CUDA:-1} DEEPEP_BENCH_ITERS=$(deepep_bench_iters) DEEPEP_KINETO_OUTPUT=1 PYTHONPATH=$HERE/warmup:$DEEPEP_DIR LD_PRELOAD=${pre:+$pre:}$NVSHMEM_HOME/lib/libnvshmem_host.so.3" -- \
    "${DEEPEP_WRAP[@]}" "$PY" "$DEEPEP_DIR/tests/test_low_latency.py" --num-processes 1 --disable-nvlink "$@"
}
# deepep_path NAME: which GDA path carried DeepEP's remote operations in run NAME, from what the run printed: shim (the
# shim's own path, active: PE 0's start-up line), device-api (DeepEP built without it, and NVSHMEM's device API on
# over GDA on both PEs at finalize), else none. efaemu's GDA counters cannot tell the two apart: in a build with the device API hooks
# even a shim whose own path is off sends its puts through NVSHMEM, which the device API carries over GDA.
# DEEPEP_GDA_PATH (shim or device-api: the build's --deepep-gda, which selftest passes) makes any other path a failure.
deepep_path() {
  local on
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  on=$(cat $(pe_logs "$1") 2>/dev/null | grep -c 'at finalize: EFA GDA active.*NVSHMEM device API over GDA on')
  if grep -q 'nvshmem-efa shim: EFA GDA active' "$RESULTS/$1.pe0.log"; then echo shim
  elif grep -q 'nvshmem-efa shim: built without the' "$RESULTS/$1.pe0.log" && [ "$on" = "${PLACE_PES:-2}" ]; then echo device-api
  else echo none; fi
}
# deepep_path_ok NAME PATH: PATH is a GDA path and the one DEEPEP_GDA_PATH asks for, if it asks.
deepep_path_ok() { [ "$2" != none ] && [ "${DEEPEP_GDA_PATH:-$2}" = "$2" ]; }
# deepep_path_note NAME PATH: the evidence of the path: the shim's line, or the device API's own proxy counts summed
# over both PEs (DeepEP's count and flag are atomic adds for NVSHMEM: proxy by design; a put outside GDA's regions too).
deepep_path_note() {
  case $2 in
    shim) echo "the shim's own GDA path (PE 0: $(grep -h -m1 -o 'EFA GDA active on [0-9]* rails*' "$RESULTS/$1.pe0.log"))" ;;
    device-api)
      local counts
      # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
      counts=$(cat $(pe_logs "$1") | grep -o -E '(outside GDA regions|atomics and signal adds) [0-9]+' |
        awk '/outside/ {o += $NF} /atomics/ {a += $NF} END {printf "%d puts outside GDA regions, %d atomics and signal adds", o, a}')
      echo "NVSHMEM's device API (DeepEP built without the shim's GDA path; on over GDA on both PEs; through its proxy: $counts)" ;;
    *) echo "no GDA path: $(grep -h -m1 'nvshmem-efa shim:' "$RESULTS/$1.pe0.log" | cut -c1-160)${DEEPEP_GDA_PATH:+ (DEEPEP_GDA_PATH=$DEEPEP_GDA_PATH)}" ;;
  esac
}
FAILURE_RE='Traceback|AssertionError|RuntimeError|CUDA error|EFA GDA .* failed|illegal|Aborted|core dumped'
# shellcheck disable=SC2046 # pe_logs prints paths without spaces
deepep_ok() { all_ok && ! grep -qE "$FAILURE_RE" $(pe_logs "$1"); }
# shellcheck disable=SC2046
deepep_tail() { grep -hE "$FAILURE_RE|Error|failed|FAIL" $(pe_logs "$1") | head -3 | cut -c1-200 | paste -sd';' -; }

check_deepep_ll() { deepep_ll_run deepep_ll 2; }
# deepep_ll_4pes: the same with 4 PEs (issue 34: extra PEs are cheap on a shared GPU): every rank sends to 3 others.
check_deepep_ll_4pes() { deepep_ll_run deepep_ll_4pes 4; }
# deepep_ll_run NAME N: DeepEP's low-latency test on N PEs.
deepep_ll_run() {
  local name=$1
  need "$name" DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD || return
  placed "$name" "$2" || return
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  deepep_pair "$name" "NVSHMEM_EFA_GDA_ENABLE=${DEEPEP_GDA:-1} EFAEMU_REORDER=${REORDER:-8} $MODES_ENV" $(deepep_args)
  local gda rdm_gpu ooo bw sig rdm_ops rdm_sends rdm_writes path
  read -r gda rdm_gpu ooo sig rdm_sends rdm_writes < <(estat "$name" paths.gda.write.bytes paths.rdm.write.gpu_bytes faults.gda_cqe_out_of_order \
    paths.gda.write.small_ops paths.rdm.send.ops paths.rdm.write.ops)
  rdm_ops=$((rdm_sends + rdm_writes))
  bw=$(grep -h -m1 'Dispatch + combine bandwidth' "$RESULTS/$name.pe0.log" | cut -c1-80)
  path=$(deepep_path "$name")
  if deepep_ok "$name" && [ "$gda" -gt 0 ] && [ "$rdm_gpu" = 0 ] && [ "$(nfiles "$name")" -ge "$PLACE_PES" ] && deepep_path_ok "$name" "$path"; then
    result "$name" pass "test_low_latency.py --disable-nvlink, $PLACE_PES x 1 GPU ($(placement_note)): passed over $(deepep_path_note "$name" "$path"); GDA carried $gda bytes ($sig signal-sized writes among them), GPU-sourced RDM write bytes $rdm_gpu, RDM sends+writes over the whole run $rdm_ops; $ooo CQEs out of order; ${ELAPSED}s; $bw$(deepep_args_note)$(modes_note)"
  else
    result "$name" fail "rc $(rcs); path: $(deepep_path_note "$name" "$path"); GDA bytes $gda, GPU-sourced RDM write bytes $rdm_gpu, stats files $(nfiles "$name"); $(deepep_tail "$name")$(deepep_args_note)$(modes_note)"
  fi
}

# DeepEP's low-latency test on the multi-rail build (issue 13): the gda_rails setup (2 emulated NICs at each PE's GPU,
# a host name of its own per PE) with the deepep_ll run. Passes when the test passes, the shim says GDA is active on
# 2 rails on both PEs, GDA carried the payload with 0 GPU-sourced RDM write bytes, and both NICs carried GDA bytes.
check_deepep_rails() {
  need deepep_rails DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed deepep_rails 2 || return
  two_nics_per_pe deepep_rails || return
  DEEPEP_WRAP=("${RAILS_WRAP[@]}")
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  deepep_pair deepep_rails "$RAILS_ENV EFAEMU_REORDER=${REORDER:-8} $MODES_ENV" $(deepep_args)
  DEEPEP_WRAP=()
  # The shim says which path it takes on PE 0 only, the device API on each PE at finalize; that every PE used both
  # rails is read from each process's own statistics (per_nic: the local NIC that carried each write).
  local gda rdm_gpu n0 n1 said both path
  read -r gda rdm_gpu n0 n1 < <(estat deepep_rails paths.gda.write.bytes paths.rdm.write.gpu_bytes per_nic.efaemu0.gda.write.bytes \
    per_nic.efaemu1.gda.write.bytes)
  path=$(deepep_path deepep_rails)
  case $path in
    shim) said=$(grep -c 'nvshmem-efa shim: EFA GDA active on 2 rails' "$RESULTS/deepep_rails.pe0.log") ;;
    device-api) said=$(cat "$RESULTS/deepep_rails.pe0.log" "$RESULTS/deepep_rails.pe1.log" | grep -c 'at finalize: EFA GDA active on 2 rails'); [ "$said" = 2 ] || said=0 ;;
    *) said=0 ;;
  esac
  deepep_path_ok deepep_rails "$path" || said=0
  both=$("$PY" - "$RESULTS/stats-deepep_rails" <<'PYEOF'
import glob, json, re, sys
files = [f for f in glob.glob(sys.argv[1] + '/efaemu-*.json') if re.search(r'/efaemu-\d+\.json$', f)]
nic = lambda d, n: d.get('per_nic', {}).get(n, {}).get('gda', {}).get('write', {}).get('bytes', 0)
print(sum(1 for f in files if all(nic(json.load(open(f)), n) > 0 for n in ('efaemu0', 'efaemu1'))))
PYEOF
)
  if deepep_ok deepep_rails && [ "$said" -ge 1 ] && [ "$both" = 2 ] && [ "$gda" -gt 0 ] && [ "$rdm_gpu" = 0 ]; then
    result deepep_rails pass "test_low_latency.py --disable-nvlink on 2 rails per PE: passed over $(deepep_path_note deepep_rails "$path"), GDA active on 2 rails; both PEs wrote over both NICs (GDA bytes efaemu0 $n0, efaemu1 $n1); GPU-sourced RDM write bytes 0; ${ELAPSED}s$(deepep_args_note)$(modes_note)"
  else
    result deepep_rails fail "rc $RC0/$RC1; path: $(deepep_path_note deepep_rails "$path"), said GDA on 2 rails: $said; PEs that wrote over both NICs: $both of 2; GDA bytes $gda (efaemu0 $n0, efaemu1 $n1), GPU-sourced RDM write bytes $rdm_gpu; $(deepep_tail deepep_rails)$(deepep_args_note)$(modes_note)"
  fi
}

check_deepep_counters() {  # the same test with GDA off: the RDM path must carry the same payload bytes
  need deepep_counters DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD || return
  placed deepep_counters 2 || return
  [ -d "$RESULTS/stats-deepep_ll" ] || { result deepep_counters skip "needs deepep_ll first"; return; }
  # GDA off is NVSHMEM's own proxy path, which does not keep a put ahead of its signal on a NIC that completes before it
  # places (defer) or places out of order or twice: 1x H200, 2 PEs time-sliced, modes all, DeepEP's dispatch check
  # failed (recv_x_amin != the expected count) after 147 writes placed out of order, 180 deferred, 2 duplicated
  # (bench/results/one-gpu-selftest.md; on 2 GPUs the window was never hit). That is what the GDA path fixes, and what
  # this check counts is bytes per path: it takes the run's other modes only.
  local counters_env
  counters_env=$(unplaced_modes_env)
  counters_note() { echo "; GDA off under ${counters_env:-no efaemu mode}$([ "$counters_env" != "$MODES_ENV" ] && echo " (not the placement modes: NVSHMEM's own proxy path does not survive them)")"; }
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  deepep_pair deepep_counters "NVSHMEM_EFA_GDA_ENABLE=0 EFAEMU_REORDER=${REORDER:-8} $counters_env" $(deepep_args)
  # Payload = writes of more than 8 bytes: with GDA on the shim's signals (and credit returns) are GDA writes of
  # 4 or 8 bytes, with GDA off they are NVSHMEM atomics (sends), so only the token payload is comparable. A DeepEP
  # built without the shim's GDA path (--deepep-gda device-api) sends its signals as atomics (sends) both ways.
  local on on_small off off_small gda_off
  read -r on on_small < <(estat deepep_ll paths.gda.write.bytes paths.gda.write.small_bytes)
  read -r off off_small gda_off < <(estat deepep_counters paths.rdm.write.gpu_bytes paths.rdm.write.small_gpu_bytes paths.gda.write.ops)
  local on_payload=$((on - on_small)) off_payload=$((off - off_small))
  if deepep_ok deepep_counters && [ "$on_payload" -gt 0 ] && [ "$on_payload" = "$off_payload" ] && [ "$gda_off" = 0 ]; then
    result deepep_counters pass "GDA off: passed; the RDM path carried $off_payload GPU-sourced payload bytes = the $on_payload the GDA path carried with GDA on (plus $on_small signal-sized bytes there); 0 GDA ops$(deepep_args_note)$(counters_note)"
  else
    result deepep_counters fail "rc $RC0/$RC1; GDA-on GDA payload bytes $on_payload (+$on_small small) vs GDA-off RDM GPU payload bytes $off_payload (+$off_small small), GDA ops with GDA off $gda_off; $(deepep_tail deepep_counters)$(deepep_args_note)$(counters_note)"
  fi
}

check_deepep_shrink() {
  need deepep_shrink DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD || return
  # test_low_latency.py --shrink-test fails rank 1 at dispatch, rank 3 at combine and rank 5 at clean, and after each
  # stage asserts that the ranks masked equal that set so far ({1}, then {1, 3}, ...): it needs 6 ranks (with 2 the
  # combine stage expects rank 3 in a 2-entry mask, on any transport), and experts that divide among them. The ranks
  # left wait out their receive bound once per failed rank before they mask it: the shim's bound
  # (NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS, SHRINK_RECV_MS, default 10 s) instead of DeepEP's 100 s.
  # Rank 1 also refuses every GDA write and read sent to it (EFAEMU_FAIL_AS_TARGET=gda in its environment alone), as a
  # peer that stopped answering, and the shim runs with NVSHMEM_EFA_SHIM_PEER_ERRORS=mask: the others' failed
  # completions to rank 1 must mask it (review 3, finding 6), not trap and end the job. Only with SHRINK_REFUSE=1:
  # on one H200 (2026-12-03, bench/results/rails-one-gpu.md) a rank refusing from the start fails NVSHMEM's own device
  # API path first (the flush before a proxy signal to rank 1 traps: "EFA GDA quiet and flush before a proxy
  # operation ... failed"), which the shim's mask does not cover, so the default run is the shrink test alone.
  placed deepep_shrink 6 || return
  local ms=${SHRINK_RECV_MS:-10000} gda rdm_gpu masked refused shim_masked refuse=${SHRINK_REFUSE:-0}
  local bound=$((${DEEPEP_START_S:-60} + 3 * ms / 1000 + ${SHRINK_TEST_S:-120}))
  [ "$refuse" = 1 ] && RANK_ENV=([1]="EFAEMU_FAIL_AS_TARGET=gda")
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  CHECK_TIMEOUT=$bound T=$bound deepep_pair deepep_shrink "NVSHMEM_EFA_GDA_ENABLE=1 EFAEMU_REORDER=${REORDER:-8} NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS=$ms NVSHMEM_EFA_SHIM_PEER_ERRORS=mask" \
    --shrink-test $(deepep_args) --num-experts "${SHRINK_EXPERTS:-24}"
  RANK_ENV=()
  read -r gda rdm_gpu refused < <(estat deepep_shrink paths.gda.write.bytes paths.rdm.write.gpu_bytes faults.refused)
  # shellcheck disable=SC2046
  masked=$(grep -h -o 'Rank [0-9]* failed when first calling [a-z]*' $(pe_logs deepep_shrink) | sort -u | sed 's/ failed when first calling / at /' | paste -sd, -)
  # shellcheck disable=SC2046
  shim_masked=$(cat $(pe_logs deepep_shrink) 2>/dev/null | grep -c 'masked after its GDA failure')
  local refusal="rank 1 refusing GDA (EFAEMU_FAIL_AS_TARGET=gda, $refused refused), the shim's peer errors mask ($shim_masked masks said)"
  [ "$refuse" = 1 ] || refusal="no rank refusing (SHRINK_REFUSE=0)"
  if deepep_ok deepep_shrink && [ "$gda" -gt 0 ] && [ "$rdm_gpu" = 0 ] && { [ "$refuse" != 1 ] || [ "$refused" -gt 0 ]; }; then
    result deepep_shrink pass "--shrink-test passed on $(placement_note): failed ${masked:-?}, masked by the others; $refusal; GDA bytes $gda, GPU-sourced RDM write bytes 0; receive bound ${ms} ms; ${ELAPSED}s$(deepep_args_note) --num-experts ${SHRINK_EXPERTS:-24}"
  else
    result deepep_shrink fail "rc $(rcs) on $(placement_note) (bound ${bound}s); failed ${masked:-none}; $refusal; GDA bytes $gda, GPU-sourced RDM write bytes $rdm_gpu; $(deepep_tail deepep_shrink)$(deepep_args_note) --num-experts ${SHRINK_EXPERTS:-24}"
  fi
}

check_deepep_pressure() {  # endless by design: bounded in time; passes when repeats of a seed matched its hash
  need deepep_pressure DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD || return
  placed deepep_pressure 2 || return
  # 90 s: start-up (torch, NVSHMEM) takes about 20 s, and with signals through the proxy (duplicate, all) a seed's
  # reference and first repeat need most of a minute on a 2x H200 host (60 s gave 2 test_main runs under duplicate).
  # On a shared GPU deepep_pair cuts DeepEP's benchmarks: 9 test_main runs in 90 s on one H200 (4 in 150 s with them,
  # bench/results/one-gpu-selftest.md), so 60 s there; 90 s elsewhere.
  local bound=${PRESSURE_SECONDS:-$([ "${PLACE_SHARED:-0}" = 1 ] && echo 60 || echo 90)}
  CHECK_TIMEOUT=$bound T=$bound deepep_pair deepep_pressure "NVSHMEM_EFA_GDA_ENABLE=1 EFAEMU_REORDER=${REORDER:-8} $MODES_ENV" --pressure-test \
    ${PRESSURE_ARGS:---num-tokens 32 --hidden 2048 --num-topk 4 --num-experts 8}
  local log="$RESULTS/deepep_pressure.pe0.log" runs seeds
  runs=$(grep -c 'Dispatch + combine bandwidth' "$log"); seeds=$(grep -c 'Testing with seed' "$log")
  # test_main runs once, then per seed once for the reference hash and 20 times against it.
  if ! grep -qE "$FAILURE_RE" "$RESULTS/deepep_pressure.pe0.log" "$RESULTS/deepep_pressure.pe1.log" && [ "$runs" -ge 3 ] && [ "$seeds" -ge 1 ]; then
    result deepep_pressure pass "--pressure-test bounded to ${bound}s: $runs test_main runs, $((runs - 1 - seeds)) repeats matched their seed's reference hash, $seeds seed(s) started, no error; stopped by the bound (rc $RC0/$RC1)$(deepep_bench_note)$(modes_note)"
  else
    result deepep_pressure fail "$runs test_main runs, $seeds seeds in ${bound}s; rc $RC0/$RC1; $(deepep_tail deepep_pressure)$(deepep_bench_note)$(modes_note)"
  fi
}

# Not an issue-11 check (not in CHECKS; run it by name): why every PE loads its kernels eagerly. pe_test's `lazy` mode
# under lazy loading (efaemu state dumps every 5 s in stats-lazy_loading_lazy/) and under EAGER; passes when PE 1's
# atomic add reached PE 0's spinning kernel under EAGER, and reports what lazy loading did.
check_lazy_loading() {
  need lazy_loading PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed lazy_loading 2 || return
  local lazy eager lrc
  rm -f "$RESULTS/uid-lazy" "$RESULTS/uid-eager"
  CUDA_MODULE_LOADING_UNDER_TEST=LAZY CHECK_TIMEOUT=60 T=60 run_n lazy_loading_lazy "NVSHMEM_EFA_GDA_ENABLE=0 EFAEMU_DUMP_AFTER_S=5" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-lazy" lazy
  lrc="$RC0/$RC1"
  lazy=$(grep -h 'RESULT lazy_launch_seconds' "$RESULTS/lazy_loading_lazy.pe0.log" | sed 's/.*RESULT //')
  CHECK_TIMEOUT=60 T=60 run_n lazy_loading "NVSHMEM_EFA_GDA_ENABLE=0" -- "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-eager" lazy
  eager=$(grep -h 'RESULT lazy_launch_seconds' "$RESULTS/lazy_loading.pe0.log" | sed 's/.*RESULT //')
  if [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && echo "$eager" | grep -q 'flag_seen 1'; then
    result lazy_loading pass "EAGER: ${eager}; LAZY (rc $lrc): ${lazy:-no result} (efaemu dumps in stats-lazy_loading_lazy/)"
  else
    result lazy_loading fail "EAGER: rc $RC0/$RC1 ${eager:-no result}; LAZY (rc $lrc): ${lazy:-no result}"
  fi
}

check_neg_fail_injection() {  # an injected NIC failure must fail the test loudly and never hang it
  need neg_fail_injection PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed neg_fail_injection 2 || return
  rm -f "$RESULTS/uid-fail"
  CHECK_TIMEOUT=120 T=120 run_n neg_fail_injection "NVSHMEM_EFA_GDA_ENABLE=1 EFAEMU_FAIL_EVERY=${FAIL_EVERY:-97} EFAEMU_FAIL_PATH=gda" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-fail" gda
  local failed loud
  failed=$(estat neg_fail_injection faults.failed)
  loud=$(grep -h ' FAIL ' "$RESULTS"/neg_fail_injection.pe*.log | head -2 | cut -c1-140 | paste -sd';' -)
  if [ "$RC0" != 0 ] && [ -n "$loud" ] && [ "$ELAPSED" -lt 110 ]; then
    result neg_fail_injection pass "EFAEMU_FAIL_EVERY=${FAIL_EVERY:-97} on the GDA path: the test failed loudly in ${ELAPSED}s (rc $RC0/$RC1, the waiting peer stopped by the harness): $loud"
  else
    result neg_fail_injection fail "rc $RC0/$RC1 after ${ELAPSED}s, injected $failed; failure lines: ${loud:-none}"
  fi
}

check_neg_wrong_provider() {
  need neg_wrong_provider PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed neg_wrong_provider 2 || return
  rm -f "$RESULTS/uid-wrong"
  FI_PROVIDER_UNDER_TEST=${WRONG_PROVIDER:-efa_wrong} CHECK_TIMEOUT=90 T=90 run_n neg_wrong_provider "" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-wrong" init
  local why
  why=$(grep -h -m1 -E 'No providers matched fi_getinfo|init failed for remote transport|aborting' "$RESULTS"/neg_wrong_provider.pe*.log | head -1 | cut -c1-160)
  if [ "$RC0" != 0 ] && [ "$RC1" != 0 ] && [ "$ELAPSED" -lt 85 ]; then
    result neg_wrong_provider pass "FI_PROVIDER=${WRONG_PROVIDER:-efa_wrong}: NVSHMEM init failed on both PEs in ${ELAPSED}s (rc $RC0/$RC1); NVSHMEM said: ${why:-(nothing matched)}"
  else
    result neg_wrong_provider fail "FI_PROVIDER=${WRONG_PROVIDER:-efa_wrong}: rc $RC0/$RC1 after ${ELAPSED}s; ${why:-}"
  fi
}

# ---- issue 21: the shim's protocols under the modes, negative controls, bounded waits ----------------------------
# pattern_pair NAME EXTRA_ENV PROGRAM MODE [ARGS...]: deepep_pattern (PATTERN_DIR/PROGRAM) on both PEs, GDA on; the
# "${PATTERN_WRAP[@]}" array (RAILS_WRAP for 2 rails) goes before it.
PATTERN_WRAP=()
# On a shared GPU the rounds are PATTERN_ROUNDS (default 10; deepep_pattern's own: 200 ll, 400 normal, which its
# defaults keep elsewhere): every write efaemu places there is CUDA copies that wait for their context's timeslice.
# 1x H200, neg_no_quiet under place_order,defer: 200 rounds of 4 experts x 64 tokens were still running after 100 s
# (5 s on 2 GPUs); 20 rounds took 53 s in ll_pattern and 70 s + 83 s in neg_no_quiet's two runs, about 10 ms a write.
pattern_rounds() {
  if [ -n "${PATTERN_ROUNDS:-}" ]; then echo "--rounds $PATTERN_ROUNDS"
  elif [ "${PLACE_SHARED:-0}" = 1 ]; then echo "--rounds 10"; fi
}
# The GDA waits of the pattern programs are bounded as gda_kernel's on a shared GPU (shared_bound): with the default
# 5 s, neg_no_quiet's run without modes failed on one H200 with its last 51 writes not retired in 5 s, and nothing lost.
pattern_pair() {
  local name=$1 extra=$2 prog=$3; shift 3
  rm -f "$RESULTS/uid-$name"
  # shellcheck disable=SC2046 # pattern_rounds prints words
  run_n "$name" "NVSHMEM_EFA_GDA_ENABLE=1 $(shared_bound) $extra" -- "${PATTERN_WRAP[@]}" "$PATTERN_DIR/$prog" --rank @R@ --uid-file "$RESULTS/uid-$name" \
    --wait-s "${PATTERN_WAIT_S:-20}" $(pattern_rounds) "$@"
}
pattern_ok() { [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && ! grep -qh ' FAIL ' "$RESULTS/$1.pe0.log" "$RESULTS/$1.pe1.log"; }
pattern_why() { grep -h ' FAIL \|nvshmem-efa: EFA GDA' "$RESULTS/$1.pe0.log" "$RESULTS/$1.pe1.log" | head -2 | cut -c1-220 | paste -sd';' -; }
# pattern_data_error NAME: the first line of run NAME where a PE found wrong bytes ("N bytes wrong", N > 0), which is
# what catches a negative control. A run that failed otherwise is not a catch: 1x H200, neg_no_quiet's broken build
# failed with error completions on PE 0 (0xd, its peer gone) as well as PE 1's data error, and only the latter counts.
# The count comes after the check's description ("FAIL ll_pattern: 10 rounds x ... arrived: 1862756 bytes wrong"):
# run 4 on 1x H200 had it caught in every try and judged "not caught" by a pattern that wanted the count first.
pattern_data_error() {
  # shellcheck disable=SC2046 # pe_logs prints paths without spaces
  grep -h -m1 -E ' FAIL [a-z_]+: (.*[^0-9])?[1-9][0-9]* bytes wrong' $(pe_logs "$1") 2>/dev/null | head -1 | cut -c1-220
}
signals_path() { grep -h -m1 -o 'low-latency signals [^;]*' "$RESULTS/$1.pe0.log" "$RESULTS/$1.pe1.log" 2>/dev/null | head -1 | cut -c1-120; }

check_ll_pattern() {  # the product's shim under the run's modes: every token there when its count arrives
  need ll_pattern PATTERN_DIR NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed ll_pattern 2 || return
  pattern_pair ll_pattern "$MODES_ENV" deepep_pattern ll
  if pattern_ok ll_pattern && grep -q 'shim_build product' "$RESULTS/ll_pattern.pe0.log"; then
    result ll_pattern pass "$(grep -h -m1 'ok ll_pattern' "$RESULTS/ll_pattern.pe1.log" | sed 's/.*ok //'); $(signals_path ll_pattern); ${ELAPSED}s$(modes_note)"
  else
    result ll_pattern fail "rc $RC0/$RC1; $(pattern_why ll_pattern)$(modes_note)"
  fi
}

check_normal_mode() {  # DeepEP normal mode: GDA chunks, then the tail by NVSHMEM's proxy atomic, under deferred placement
  need normal_mode PATTERN_DIR NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed normal_mode 2 || return
  local env=$MODES_ENV label=$MODES_LABEL
  case " $env " in *EFAEMU_PLACE_DEFER_US=*) ;; *) env="$env $(mode_env defer)"; label="defer${MODES_ENV:+,$MODES_LABEL}" ;; esac
  pattern_pair normal_mode "$env" deepep_pattern normal
  if pattern_ok normal_mode; then
    result normal_mode pass "$(grep -h -m1 'ok normal_mode: every' "$RESULTS"/normal_mode.pe*.log | head -1 | sed 's/.*ok //'); ${ELAPSED}s; efaemu modes $label: $env"
  else
    result normal_mode fail "rc $RC0/$RC1; $(pattern_why normal_mode); efaemu modes $label: $env (a tail that overtakes its chunks: the proxy's add is another requester than the NIC that placed them)"
  fi
}

# neg_control NAME PROGRAM MODES_LIST BASE_ENV [ARGS...]: the switched build once under the modes (must fail: caught)
# and once without them (must pass: the failure is the modes' doing), both with BASE_ENV. The program must say it is
# the switched build (its shim_build line), or the control proves nothing.
neg_control() {
  local name=$1 prog=$2 list=$3 base=$4; shift 4
  local under; under=$(modes_env "$list")
  pattern_pair "$name.modes" "$base $under" "$prog" ll "$@"
  local rc_m="$RC0/$RC1" why_m caught=0 switched plain=0 widened="" other=""
  why_m=$(pattern_data_error "$name.modes")
  [ -n "$why_m" ] && caught=1
  pattern_ok "$name.modes" || [ "$caught" = 1 ] || other="$name.modes"
  switched=$(grep -h -m1 'RESULT shim_build' "$RESULTS/$name.modes.pe0.log" | sed 's/.*shim_build //' | cut -c1-60)
  if [ "$caught" = 0 ] && [ "${PLACE_SHARED:-0}" = 1 ]; then
    # Time-sliced PEs: the receiver looks only in its own timeslices (milliseconds), so a late write has usually landed
    # by then. The control is run again with the placement deferred by up to a timeslice and more (SHARED_DEFER_US).
    local narrow=$under
    under=$(wide_modes_env "$list")
    pattern_pair "$name.wide" "$base $under" "$prog" ll "$@"
    why_m=$(pattern_data_error "$name.wide")
    if [ -n "$why_m" ]; then caught=1 rc_m="$RC0/$RC1"; elif ! pattern_ok "$name.wide"; then other="$name.wide"; fi
    widened="; not caught under $narrow on the shared GPU, so run again with the windows widened: $([ "$caught" = 1 ] && echo caught || echo 'not caught either')"
  fi
  pattern_pair "$name.plain" "$base" "$prog" ll "$@"
  pattern_ok "$name.plain" && plain=1
  if [ "$switched" = product ] || [ -z "$switched" ]; then
    result "$name" fail "$PATTERN_DIR/$prog is not the negative-control build (shim_build: ${switched:-none}); rebuild it with its switch"
  elif [ "$caught" = 1 ] && [ "$plain" = 1 ]; then
    result "$name" pass "caught under modes $list ($under; rc $rc_m: ${why_m:-failed})$widened; passes without ($(signals_path "$name.plain")); build: $switched; $(placement_note)"
  elif [ "$caught" = 0 ]; then
    result "$name" fail "not caught under modes $list ($under)$widened: the modes prove nothing against this broken client$([ -n "$other" ] && echo " (it failed without a data error: $(pattern_why "$other"))"); without them it $([ $plain = 1 ] && echo passes || echo fails); $(placement_note)"
  else
    result "$name" fail "caught under modes $list, but fails without them too (rc $RC0/$RC1: $(pattern_why "$name.plain")): the failure is not the modes' doing"
  fi
}

check_neg_no_quiet() {
  need neg_no_quiet PATTERN_DIR NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed neg_no_quiet 2 || return
  neg_control neg_no_quiet deepep_pattern_no_quiet "${NEG_NO_QUIET_MODES:-place_order,defer}" ""
}

check_neg_signal_other_rail() {  # needs 2 rails per PE: the gda_rails namespaces
  need neg_signal_other_rail PATTERN_DIR NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed neg_signal_other_rail 2 || return
  two_nics_per_pe neg_signal_other_rail || return
  PATTERN_WRAP=("${RAILS_WRAP[@]}")
  neg_control neg_signal_other_rail deepep_pattern_other_rail "${NEG_OTHER_RAIL_MODES:-defer}" "$RAILS_ENV" --rails 2
  PATTERN_WRAP=()
}

check_neg_ignore_error() {  # pe_test ignore_error: a kernel that ignores a failed completion and reports success
  need neg_ignore_error PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed neg_ignore_error 2 || return
  local inject="EFAEMU_FAIL_EVERY=${FAIL_EVERY:-97} EFAEMU_FAIL_PATH=gda"
  rm -f "$RESULTS/uid-ign-m" "$RESULTS/uid-ign-p"
  CHECK_TIMEOUT=120 T=120 run_n neg_ignore_error.modes "NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_TIMEOUT_MS=${GDA_TIMEOUT_MS:-3000} $inject" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-ign-m" ignore_error
  local rc_m="$RC0/$RC1" caught=0 why
  why=$(grep -h ' FAIL ignore_error' "$RESULTS"/neg_ignore_error.modes.pe1.log | head -1 | cut -c1-180)
  [ "$RC1" != 0 ] && [ -n "$why" ] && caught=1
  CHECK_TIMEOUT=120 T=120 run_n neg_ignore_error.plain "NVSHMEM_EFA_GDA_ENABLE=1" -- "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-ign-p" ignore_error
  if [ "$caught" = 1 ] && [ "$RC0" = 0 ] && [ "$RC1" = 0 ]; then
    result neg_ignore_error pass "caught under $inject (rc $rc_m; PE 0's kernel reported success, PE 1: $why); passes without"
  else
    result neg_ignore_error fail "under $inject: rc $rc_m, PE 1 ${why:-found nothing wrong}; without: rc $RC0/$RC1 (caught needs PE 1 to fail under injection and both to pass without)"
  fi
}

# gda_pe_errors (review 3, finding 6): PE 1 refuses the GDA writes sent to it (EFAEMU_FAIL_AS_TARGET=gda in its
# environment alone), and PE 0 puts to PE 1, then to itself: its wait for PE 1 must report the failure, its wait for
# itself return 0 with its data in place. One dead peer must not stop the traffic to the others.
check_gda_pe_errors() {
  need gda_pe_errors PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed gda_pe_errors 2 || return
  rm -f "$RESULTS/uid-pe-errors"
  RANK_ENV=([1]="EFAEMU_FAIL_AS_TARGET=gda")
  CHECK_TIMEOUT=120 T=120 run_n gda_pe_errors "NVSHMEM_EFA_GDA_ENABLE=1 $(shared_bound)" -- "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-pe-errors" pe_errors
  RANK_ENV=()
  local got refused
  got=$(grep -h -m1 'RESULT pe_errors' "$RESULTS/gda_pe_errors.pe0.log" | sed 's/.*RESULT pe_errors //' | cut -c1-220)
  refused=$(estat gda_pe_errors faults.refused)
  if [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && [ "$(grep -c 'ok pe_errors' "$RESULTS/gda_pe_errors.pe0.log")" = 2 ]; then
    result gda_pe_errors pass "PE 1 refusing GDA (EFAEMU_FAIL_AS_TARGET=gda, $refused refused): $got; PE 0's own put landed; $(placement_note)"
  else
    result gda_pe_errors fail "rc $RC0/$RC1; ${got:-no result}; $(pattern_why gda_pe_errors) (an error of PE 1's must fail PE 1's wait alone)"
  fi
}

TRAP_RE='nvshmem-efa: EFA GDA '
# silent_bound: the GDA kernel test with failures injected and the queue silent after its error: every process must
# end by itself (not killed by the harness) within NVSHMEM_EFA_GDA_TIMEOUT_MS of its kernels starting (plus SLACK_S for
# reporting and exit), with the product's trap message or its error report.
check_silent_bound() {
  need silent_bound PE_TEST NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  placed silent_bound 2 || return
  local ms=${GDA_TIMEOUT_MS:-3000} slack=${SLACK_S:-10}
  rm -f "$RESULTS/uid-silent"
  local before; before=$(date +%s)
  CHECK_TIMEOUT=120 T=120 run_n silent_bound "NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_TIMEOUT_MS=$ms EFAEMU_FAIL_EVERY=${FAIL_EVERY:-97} EFAEMU_FAIL_PATH=gda EFAEMU_SILENT_AFTER_ERROR=1" -- \
    "$PE_TEST" --rank @R@ --uid-file "$RESULTS/uid-silent" gda
  local end=$((before + ELAPSED)) start trap0 trap1 took
  start=$(grep -h -m1 'RESULT kernel_start_unix' "$RESULTS/silent_bound.pe0.log" | awk '{print int($NF)}')
  took=$(( end - ${start:-$before} ))
  # PE 0's kernels check every return value themselves (pe_test reports "error 0x10b", the product's
  # NVSHMEMX_EFA_GDA_ERR_TIMEOUT, rather than trapping): either is the bounded wait giving up.
  trap0=$(grep -h -m1 "$TRAP_RE\|error 0x10b" "$RESULTS/silent_bound.pe0.log" | cut -c1-160)
  trap1=$(grep -h -m1 "$TRAP_RE\| FAIL " "$RESULTS/silent_bound.pe1.log" | cut -c1-160)
  # PE 1 only waits for PE 0 (its own bounded waits); run_n stops it once PE 0 has failed, so only PE 0 must end
  # by itself, and both within the bound.
  if [ -n "$start" ] && [ "$RC0" != 0 ] && [ "${RC0#killed}" = "$RC0" ] &&
     [ "$took" -le $(( ms / 1000 + slack )) ] && [ -n "$trap0" ]; then
    result silent_bound pass "both PEs ended by themselves ${took}s after the kernels started (bound ${ms} ms + ${slack}s; rc $RC0/$RC1); PE 0: $trap0; PE 1: ${trap1:-exit $RC1}"
  else
    result silent_bound fail "rc $RC0/$RC1, ${took}s after the kernels started (bound ${ms} ms + ${slack}s); PE 0 trap: ${trap0:-none}; PE 1: ${trap1:-nothing}"
  fi
}

# deepep_silent_bound: DeepEP's low-latency test, GDA on, failures injected on the GDA path of both PEs, queues silent
# after their error: every process ends by itself within DEEPEP_START_S (torch, NVSHMEM init) + the bound, with a
# trap message: the shim's (a GDA wait gave up, or saw the NIC's error) or DeepEP's receive timeout naming the source
# rank, whose bound the shim sets from NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS (a failed signal write is seen by its sender
# only: the receiver learns of it by waiting).
DEEPEP_TRAP_RE="$TRAP_RE|DeepEP timeout for (dispatch|combine) receive"
check_deepep_silent_bound() {
  need deepep_silent_bound DEEPEP_DIR NVSHMEM_HOME EFAEMU_BUILD || return
  placed deepep_silent_bound 2 || return
  # Start-up (torch, NVSHMEM) of PEs time-sliced on a shared GPU: 90 s.
  local ms=${GDA_TIMEOUT_MS:-3000} start_s=${DEEPEP_START_S:-$([ "${PLACE_SHARED:-0}" = 1 ] && echo 90 || echo 60)}
  # Each rank has until the check's own allowance to end by itself, however early its peer failed (PEER_FAIL_GRACE_S):
  # 1x H200, PE 0 printed its trap message and was still in cudaDeviceSynchronize when the default 15 s after PE 1's
  # failure ran out, 40 s into the run. Stopped then, it could not show whether it would have ended within the bound.
  # shellcheck disable=SC2046 # word lists: paths and arguments without spaces
  PEER_FAIL_GRACE_S=$((start_s + ms / 1000 + 10)) CHECK_TIMEOUT=$((start_s + ms / 1000 + 60)) T=$((start_s + ms / 1000 + 60)) deepep_pair deepep_silent_bound \
    "NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_TIMEOUT_MS=$ms NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS=$ms EFAEMU_FAIL_EVERY=${DEEPEP_FAIL_EVERY:-5000} EFAEMU_FAIL_PATH=gda EFAEMU_SILENT_AFTER_ERROR=1" \
    $(deepep_args)
  local t0 t1
  t0=$(grep -hE -m1 "$DEEPEP_TRAP_RE" "$RESULTS/deepep_silent_bound.pe0.log" | cut -c1-160)
  t1=$(grep -hE -m1 "$DEEPEP_TRAP_RE" "$RESULTS/deepep_silent_bound.pe1.log" | cut -c1-160)
  if [ "$RC0" != 0 ] && [ "$RC1" != 0 ] && [ "${RC0#killed}" = "$RC0" ] && [ "${RC1#killed}" = "$RC1" ] && [ "$RC0" != 124 ] && [ "$RC1" != 124 ] &&
     [ "$ELAPSED" -le $((start_s + ms / 1000 + 10)) ] && [ -n "$t0" ] && [ -n "$t1" ]; then
    result deepep_silent_bound pass "both PEs ended by themselves in ${ELAPSED}s (start-up allowance ${start_s}s + bound ${ms} ms; rc $RC0/$RC1), each with the trap message: PE 0: $t0; PE 1: $t1$(deepep_args_note)"
  else
    result deepep_silent_bound fail "rc $RC0/$RC1 in ${ELAPSED}s (allowance ${start_s}s + ${ms} ms); trap message on PE 0: ${t0:-none}; PE 1: ${t1:-none}; $(deepep_tail deepep_silent_bound)$(deepep_args_note)"
  fi
}

# device_api (issue 23): NVSHMEM's own perftests and examples, unmodified, on 2 PEs started by `nvshmem-efa launch`
# (PMI-1: they call nvshmem_init(), and the host has no MPI), with the device API over GDA on and then off
# (NVSHMEM_EFA_GDA_DEVICE_API=1 / 0), under the run's efaemu modes. Each program's rows: its exit status, the bytes
# efaemu counted on the GDA path (written and read) and GPU-sourced RDM writes, and the device API's own proxy counters
# (NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1, at finalize). The pure-RMA programs must move their bytes on GDA with no
# GPU-sourced RDM write when on, and none on GDA when off; every program must finish; the examples must report no
# data error. DEVICE_API_PROGRAMS / DEVICE_API_OFF choose which run (default: all / the RMA and signal ones).
device_api_program() {  # the built program NAME under NVSHMEM_TESTS
  find "$NVSHMEM_TESTS" -type f -perm -u+x -name "$1" -not -path '*/CMakeFiles/*' 2>/dev/null | head -1
}
# run_launch NAME EXTRA_ENV -- CMD...: the PLACE_PES ranks of the last `place` (2 without one) through nvshmem-efa
# launch, each in its PE environment (--pe-exec, which reads the exported placement); logs in NAME/rank<R>.log,
# statistics in stats-NAME/. Sets RC and ELAPSED.
run_launch() {
  local name=$1 extra=$2; shift 3
  local st="$RESULTS/stats-$name" start
  rm -rf "$st" "${RESULTS:?}/$name"; mkdir -p "$st"
  start=$(date +%s)
  # shellcheck disable=SC2086 # EXTRA_ENV and NVSHMEM_EFA_LAUNCH are words
  env EFAEMU_STATS="$st" $extra $NVSHMEM_EFA_LAUNCH launch -n "${PLACE_PES:-2}" --timeout "$T" --grace 15 --output-dir "$RESULTS/$name" -- \
    bash "$HERE/checks.sh" --pe-exec "$@" >"$RESULTS/$name.launch.log" 2>&1
  RC=$?
  ELAPSED=$(($(date +%s) - start))
}
check_device_api() {
  need device_api NVSHMEM_TESTS NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  if [ -z "${NVSHMEM_EFA_LAUNCH:-}" ]; then result device_api skip "NVSHMEM_EFA_LAUNCH is not set (nvshmem-efa selftest sets it)"; return; fi
  # device_api_order is not run switched off by default: NVSHMEM 3.4.5's own proxy path fails its signal and atomic
  # tests under the placement modes (bench/results/device-api-gpu.md, call 8); DEVICE_API_OFF=order runs it.
  local off=${DEVICE_API_OFF:-rma,value,sig} ok=1 ev="" n=0 row name kind args prog sw state tag
  for row in "${DEVICE_API_TABLE[@]}"; do
    IFS='|' read -r name kind args <<<"$row"
    device_api_wanted "$name" || continue
    # NAME@N: the program on N PEs (device_api_order@4: puts to a PE that is not a barrier neighbour). NAME+rails: on 2
    # NICs per PE (PE_RAILS=2), only where the build can use them (DEVICE_API_RAILS).
    local pes=2 rails=1; [[ $name == *@* ]] && pes=${name#*@} pes=${pes%%+*}
    if [[ $name == *+rails ]]; then
      rails=2
      if [ "${DEVICE_API_RAILS:-1}" != 1 ]; then
        ev+="$name: not run: DEVICE_API_RAILS=${DEVICE_API_RAILS} (a single-rail NVSHMEM gives GDA one NIC per PE: build a multi-rail one, e.g. AWS's 3.5.7 branch); "
        echo "device_api: $name: not run (DEVICE_API_RAILS=${DEVICE_API_RAILS})"
        continue
      fi
    fi
    if ! place "$pes"; then ok=0; ev+="$name: $PLACE_WHY; "; continue; fi
    if [ "$PLACE_SHARED" = 1 ] && [ -n "${DEVICE_API_SHARED_OMIT[$name]:-}" ] && [ "${DEVICE_API_SHARED_ALL:-0}" != 1 ]; then
      ev+="$name: not run on a shared GPU: ${DEVICE_API_SHARED_OMIT[$name]} (DEVICE_API_SHARED_ALL=1 runs it); "
      echo "device_api: $name: not run on a shared GPU (DEVICE_API_SHARED_ALL=1 runs it)"
      continue
    fi
    prog=$(device_api_program "${name%%[@+]*}")
    if [ -z "$prog" ]; then ok=0; ev+="$name: not built in $NVSHMEM_TESTS; "; continue; fi
    for sw in 1 0; do
      [ "$sw" = 0 ] && ! [[ ",$off," == *",$kind,"* || ",$off," == *",$name,"* ]] && continue
      state=$([ "$sw" = 1 ] && echo on || echo off)
      tag="device_api.$name.$state"
      local note=""
      # shellcheck disable=SC2086 # args are words
      run_launch "$tag" "NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_DEVICE_API=$sw NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1 PE_RAILS=$rails $([[ $kind == ex* ]] && echo PE_OWN_HOST=1) $MODES_ENV" -- "$prog" $args
      n=$((n + 1))
      local logs gw gr rw rdw rdr rr proxy bad path_ok=1 why=""
      logs=$(for ((r = 0; r < PLACE_PES; r++)); do echo "$RESULTS/$tag/rank$r.log"; done)
      read -r gw gr rw rdw rdr < <(estat "$tag" paths.gda.write.bytes paths.gda.read.bytes paths.rdm.write.gpu_bytes paths.rdm.write.bytes paths.rdm.read.bytes)
      rr=$((rdw + rdr))
      proxy=$(grep -h -o 'NVSHMEM device API proxy operations [0-9]* ([^)]*)' $logs 2>/dev/null | head -1 | sed 's/NVSHMEM device API //')
      # Not libfabric's own log lines (FI_LOG_LEVEL=warn prints "gdr_open failed!" on hosts without gdrdrv).
      bad=$(grep -h -i -E 'error|fail|mismatch' $logs 2>/dev/null | grep -v -E 'nvshmem-efa: PE [0-9]|^libfabric:[0-9]+:' | head -2 | cut -c1-120 | paste -sd';' -)
      if [ "$kind" = exrace ]; then
        note=" (data not judged: it reads its peer's put with no synchronization; ${bad:-no data error})"
        bad=""
      fi
      if [ "$sw" = 1 ]; then
        grep -q 'NVSHMEM device API over GDA on' $logs || { path_ok=0; why+="the status line at finalize does not say the device API was on; "; }
        if [ "$rails" = 2 ]; then  # every PE's GDA on both NICs, or the cross-NIC tests tested nothing
          local on2; on2=$(cat $logs 2>/dev/null | grep -c 'at finalize: EFA GDA active on 2 rails')
          [ "$on2" = "$PLACE_PES" ] || { path_ok=0; why+="GDA on 2 rails at finalize on $on2 of $PLACE_PES PEs (2 NICs per PE, PE_RAILS=2); "; }
        fi
        case $kind in
          rma)
            [ $((gw + gr)) -gt 0 ] || { path_ok=0; why+="no GDA bytes; "; }
            [ "$rw" = 0 ] || { path_ok=0; why+="$rw GPU-sourced RDM write bytes; "; } ;;
          value)  # p and g: GDA writes, or the proxy where the device API counted why (a NIC that may deliver twice; g)
            local pv; pv=$(grep -h -o -E '(p or value writes|g) [0-9]+' $logs 2>/dev/null | awk '{s += $NF} END {print s + 0}')
            [ $((gw + gr)) -gt 0 ] || [ "$pv" -gt 0 ] || { path_ok=0; why+="neither GDA bytes nor p/g counted at the proxy; "; }
            [ "$rw" = 0 ] || { path_ok=0; why+="$rw GPU-sourced RDM write bytes; "; } ;;
          sig | mixed | order) [ $((gw + gr)) -gt 0 ] || { path_ok=0; why+="no GDA bytes; "; } ;;
        esac
      else
        [ $((gw + gr)) = 0 ] || { path_ok=0; why+="$((gw + gr)) GDA bytes with the switch off; "; }
        [ "$kind" != rma ] || [ "$rr" -gt 0 ] || { path_ok=0; why+="no RDM write or read bytes; "; }
      fi
      local line
      if [ "$RC" = 0 ] && [ "$path_ok" = 1 ] && { [[ $kind != ex* && $kind != order ]] || [ -z "$bad" ]; }; then
        line="$name $state$note: ok ${ELAPSED}s, GDA w/r $gw/$gr B, RDM w+r $rr B (GPU-sourced writes $rw B)${proxy:+, $proxy}"
      else
        ok=0
        line="$name $state$note: FAIL rc $RC ${why}${bad:+output: $bad }(${tag}/rank*.log, $tag.launch.log)"
      fi
      ev+="$line; "
      echo "device_api: $line"  # progress in checks.log, one line per run
    done
  done
  [ "$n" -gt 0 ] || { ok=0; ev="no program of DEVICE_API_PROGRAMS=${DEVICE_API_PROGRAMS:-all} ran${ev:+: ${ev%; }}; "; }
  result device_api "$([ "$ok" = 1 ] && echo pass || echo fail)" "$n runs: ${ev%; } (through efaemu, nvshmem-efa launch PMI-1)$(modes_note)"
}

# neg_device_api: the negative controls of the device API's ordering (issue 23). device_api_order, linked against a
# device library whose transfer functions were rebuilt with one rule broken (a fence that skips the GDA quiet; a signal
# that does not wait for its payload; a proxy atomic not preceded by the GDA flush), must report data errors in the test
# that rule is for under placement reordering (NEG_DEVICE_API_MODES, default place_order,defer), and pass without the
# modes (the failure is the modes' doing); the unbroken program must pass under the modes. A control that passes
# under the modes, or hangs instead of reporting, fails the check: those modes would prove nothing.
check_neg_device_api() {
  need neg_device_api NVSHMEM_TESTS NVSHMEM_HOME EFAEMU_BUILD LIBFABRIC_HOME || return
  if [ -z "${NVSHMEM_EFA_LAUNCH:-}" ]; then result neg_device_api skip "NVSHMEM_EFA_LAUNCH is not set (nvshmem-efa selftest sets it)"; return; fi
  placed neg_device_api 2 || return
  local where; where=$(placement_note)
  local list=${NEG_DEVICE_API_MODES:-place_order,defer} under base="NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_DEVICE_API=1 NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1"
  under=$(modes_env "$list")
  local ok=1 ev="" c ctl test pes prog caught plain first
  prog=$(device_api_program device_api_order)
  if [ -z "$prog" ]; then result neg_device_api fail "device_api_order is not built in $NVSHMEM_TESTS"; return; fi
  run_launch neg_device_api.unbroken "$base $under" -- "$prog" 100
  if [ "$RC" = 0 ]; then ev+="unbroken: passes under the modes; "
  else ok=0; ev+="unbroken: FAIL rc $RC under the modes: $(grep -h -m1 FAIL "$RESULTS"/neg_device_api.unbroken/rank*.log | cut -c1-160); "; fi
  local rails_done=0
  for c in "${NEG_DEVICE_API_CONTROLS[@]}"; do
    local nics
    IFS=: read -r ctl test pes nics <<<"$c"
    pes=${pes:-2}
    # A host that cannot place the control's PEs (--pes-per-gpu) has not run it: said, not failed. Nor has a build
    # that cannot put GDA on 2 NICs run a control that needs them (DEVICE_API_RAILS=0: a single-rail NVSHMEM).
    if ! place "$pes"; then ev+="$ctl: not run: $PLACE_WHY; "; continue; fi
    local rails_env=""
    if [ "$nics" = rails ]; then
      if [ "${DEVICE_API_RAILS:-1}" != 1 ]; then ev+="$ctl: not run: DEVICE_API_RAILS=${DEVICE_API_RAILS} (it needs 2 NICs per PE and a multi-rail NVSHMEM); "; continue; fi
      rails_env="PE_RAILS=2"
      # The unbroken program on 2 NICs per PE first: the rails controls' tests must pass there under the modes.
      if [ "$rails_done" = 0 ]; then
        rails_done=1
        run_launch neg_device_api.unbroken.rails "$base $under $rails_env" -- "$(device_api_program device_api_order)" 100 xwarp_p proxy_fence_gda
        if [ "$RC" = 0 ]; then ev+="unbroken on 2 NICs per PE: passes under the modes; "
        else ok=0; ev+="unbroken on 2 NICs per PE: FAIL rc $RC under the modes: $(grep -h -m1 FAIL "$RESULTS"/neg_device_api.unbroken.rails/rank*.log | cut -c1-160); "; fi
      fi
    fi
    prog=$(device_api_program "device_api_order_$ctl")
    if [ -z "$prog" ]; then ok=0; ev+="$ctl: not built in $NVSHMEM_TESTS; "; continue; fi
    run_launch "neg_device_api.$ctl.modes" "$base $under $rails_env" -- "$prog" 100 "$test"
    first=$(grep -h -m1 "FAIL $test: .*data errors" "$RESULTS/neg_device_api.$ctl.modes"/rank*.log 2>/dev/null | head -1 | cut -c1-200)
    caught=0; [ -n "$first" ] && caught=1
    local rc_m=$RC widened=""
    if [ "$caught" = 0 ] && [ "${PLACE_SHARED:-0}" = 1 ]; then  # time-sliced PEs: as neg_control says, the rounds' time too
      local ru; ru=$(round_us "neg_device_api.$ctl.modes" "$test")
      run_launch "neg_device_api.$ctl.wide" "$base $(wide_modes_env "$list" "$ru") $rails_env" -- "$prog" 100 "$test"
      first=$(grep -h -m1 "FAIL $test: .*data errors" "$RESULTS/neg_device_api.$ctl.wide"/rank*.log 2>/dev/null | head -1 | cut -c1-200)
      [ -n "$first" ] && caught=1 rc_m=$RC
      widened=" (not caught under $under on the shared GPU, $((ru / 1000)) ms a round; with the placement deferred $(wide_defer_us "$ru") us: $([ "$caught" = 1 ] && echo caught || echo 'not caught either'))"
    fi
    run_launch "neg_device_api.$ctl.plain" "$base $rails_env" -- "$prog" 100 "$test"
    plain=0; [ "$RC" = 0 ] && plain=1
    local on=""; [ "$pes" = 2 ] || on=" on $pes PEs"; [ -z "$rails_env" ] || on+=" with 2 NICs per PE"
    if [ "$caught" = 1 ] && [ "$plain" = 1 ]; then ev+="$ctl: caught by $test$on (rc $rc_m: $first)$widened, passes without the modes; "
    elif [ "$caught" = 0 ]; then ok=0; ev+="$ctl: NOT caught under the modes (rc $rc_m, no data error in $test$([ "$rc_m" = 124 ] && echo ': it hung'))$widened"
      ev+=" ($RESULTS/neg_device_api.$ctl.modes/rank*.log); "
    else ok=0; ev+="$ctl: caught, but fails without the modes too (rc $RC): not the modes' doing; "; fi
  done
  result neg_device_api "$([ "$ok" = 1 ] && echo pass || echo fail)" "${ev%; } (device_api_order through nvshmem-efa launch, through efaemu; modes $list: $under; $where)"
}

list=("$@")
[ "${list[0]}" = all ] && list=("${CHECKS[@]}")
for c in "${list[@]}"; do
  if declare -F "check_$c" >/dev/null; then "check_$c"; else result "$c" fail "no such check (checks.sh --list)"; fi
done
