#!/usr/bin/env bash
# DeepEP's NVLink path: ours (patched and built by nvshmem-efa) vs upstream, on one host with 2 GPUs, in one run.
# tests/test_low_latency.py --num-processes 2 (NVLink on), upstream and ours alternating RUNS times (default 3); the
# ratio is ours/upstream of the median over runs of rank 0's "Dispatch + combine" avg_t (min_t too). Both modules
# are built beforehand (on the GPU host or carried).
#
#   deepep-nvlink-ratio.sh OURS_DEEPEP_DIR UPSTREAM_DEEPEP_DIR NVSHMEM_HOME OUT_DIR [LIBFABRIC_HOME]
#
# OURS runs with the build's libnvshmem_host preloaded (torch may load its pip NVSHMEM first, which would then serve
# our module too); UPSTREAM runs against the pip NVSHMEM it was built with. NVLink multicast stays off (host rule).
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: deepep-nvlink-ratio.sh OURS_DEEPEP_DIR UPSTREAM_DEEPEP_DIR NVSHMEM_HOME OUT_DIR [LIBFABRIC_HOME]" >&2; exit 2; }
ours=$1 up=$2 nv=$3 out=$4 lf=${5:-}
runs=${RUNS:-3}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
PY=${PYTHON:-python3}
mkdir -p "$out"
for d in "$ours" "$up"; do
  ls "$d"/deep_ep_cpp*.so >/dev/null 2>&1 || { echo "no deep_ep_cpp*.so in $d: build DeepEP there first" >&2; exit 4; }
done
run_one() { # name dir [preload]
  local name=$1 dir=$2 pre=${3:-}
  ( cd "$dir" && env ${pre:+LD_PRELOAD=$pre} ${lf:+LD_LIBRARY_PATH=$lf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} PYTHONPATH="$dir" \
      timeout 240 "$PY" tests/test_low_latency.py --num-processes 2 ) >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name exit $rc" | tee -a "$out/summary.log"
  return $rc
}
fail=0
for i in $(seq "$runs"); do
  run_one "upstream-ll-$i" "$up" || fail=1
  run_one "ours-ll-$i" "$ours" "$nv/lib/libnvshmem_host.so.3" || fail=1
done
median() { # which field (avg_t|min_t) over the runs of $1, rank 0
  for i in $(seq "$runs"); do grep -oP "\[rank 0\] Dispatch \+ combine bandwidth: [^\[]*$2=\K[0-9.]+" "$out/$1-ll-$i.log" | head -1; done |
    sort -n | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}
for f in avg_t min_t; do
  u=$(median upstream $f) o=$(median ours $f)
  echo "NVLink low-latency dispatch+combine $f (rank 0, median of $runs runs): upstream ${u:-?} us, ours ${o:-?} us, ratio ours/upstream $(awk -v a="${o:-0}" -v b="${u:-0}" 'BEGIN{ if (b>0) printf "%.3f", a/b; else print "?" }')" | tee -a "$out/summary.log"
done
exit $fail
