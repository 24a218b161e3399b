#!/usr/bin/env bash
# The device API hook's cost in the device library's build time, without a GPU (issue 23): the wall time of compiling
# comm/transfer_device.cu (transfer_device.cuh.in, the library's dominant object) unpatched and hooked by the device
# API patcher, with the device library's flags (-rdc, -O3, --maxrregcount=32, sm_90), alternating, RUNS times each.
#   bash bench/device-api/build-time.sh NVSHMEM_SRC [OUT_DIR [RUNS]]
# Prints every time, the medians and the ratio hooked/unpatched. A ratio within one run on one machine: run it on an
# otherwise idle machine; the absolute times are the machine's, not a build server's.
set -euo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}; RUNS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cost-common.sh"
gen_headers "$N" "$O/gen"
hooked_tree "$N" "$O/tree"
cp "$N/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/unpatched.cu"
cp "$O/tree/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/hooked.cu"
flags=(-std=c++17 -O3 -rdc=true -arch=sm_90 --maxrregcount=32 -DNVSHMEM_X86_64 -D__STDC_LIMIT_MACROS -D__STDC_CONSTANT_MACROS
       -I "$O/gen" -I "$O/tree/src/include" -I "$COST_R/test/efa_abi")
: > "$O/times"
for _ in $(seq "$RUNS"); do
  for f in unpatched hooked; do
    s=$(date +%s.%N)
    nvcc "${flags[@]}" -c "$O/$f.cu" -o "$O/$f.o"
    e=$(date +%s.%N)
    echo "$f $(echo "$e - $s" | bc)" | tee -a "$O/times"
  done
done
python3 - "$O/times" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    t.setdefault(k, []).append(float(v))
m = {k: statistics.median(v) for k, v in t.items()}
for k, v in t.items():
    print(f'{k}: median {m[k]:.2f} s over {len(v)} (min {min(v):.2f}, max {max(v):.2f})')
print(f'ratio hooked/unpatched (medians): {m["hooked"] / m["unpatched"]:.2f}')
PY
