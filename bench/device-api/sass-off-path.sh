#!/usr/bin/env bash
# What the device API costs with the switch off, from the SASS, without a GPU (issue 23's bar: "at most a uniform
# constant load and a branch when GDA is off").
#   bash bench/device-api/sass-off-path.sh NVSHMEM_SRC [OUT_DIR]
# transfer_device.cuh.in is compiled as NVSHMEM's device library compiles it and as ptxas-cost.sh does (-rdc, sm_90,
# --maxrregcount=32), from a copy of the tree the device API patcher patched (patch-tree.ts), three ways:
#   patched   what the build ships: the hook is at the callers, so the library's transfer functions must read
#             "no hook" and differ from the unpatched ones in 0 instructions;
#   in-body   the same text with -DNVSHMEMI_EFA_GDA_DEVICE_API=1, which turns on the hook lines first in each body
#             (what an NVSHMEM_ENABLE_ALL_DEVICE_INLINING application gets, inlined; here out of line, the shape the
#             patcher made before the caller hook, for comparison);
#   wrapper   hook_shapes.py wrapper of it (NVSHMEM's body moved into a function of its own), for comparison.
# The cubins are disassembled (cuobjdump -xelf, nvdisasm -c) and sass_off_path.py prints, per nvshmemi_transfer_*
# function: the instructions from the entry to the first instruction of NVSHMEM's own body with the slot off (of them
# the hook's own: the slot load, its compare, the branch), the instructions after the body's return in the wrapper
# shape, the frame's saves at the entry, and the body against the unpatched function (instructions, STL, LDL, register
# moves, instructions that differ). OUT_DIR/diffs-<shape>/<function>.diff has each off path and unified diff.
# Then the caller's side: put_bw.cu (NVSHMEM's perftest) compiled against the patched headers, and each hook in its
# kernel's SASS: the slot's load, the instructions up to the branch, and the calls on both sides.
# cuobjdump and nvdisasm: $CUOBJDUMP / $NVDISASM or PATH (cost-common.sh says where to get them).
set -euo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cost-common.sh"
CUOBJDUMP=$(need_tool cuobjdump); NVDISASM=$(need_tool nvdisasm)
gen_headers "$N" "$O/gen"
hooked_tree "$N" "$O/tree"
cp "$N/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/unpatched.cu"
cp "$O/tree/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/patched.cu"
cp "$O/patched.cu" "$O/in-body.cu"
python3 "$HERE/hook_shapes.py" wrapper "$O/patched.cu" "$O/wrapper.cu"
for f in unpatched patched in-body wrapper; do
  extra=(); case $f in in-body|wrapper) extra=(-DNVSHMEMI_EFA_GDA_DEVICE_API=1) ;; esac
  inc=$O/tree/src/include; [ $f = unpatched ] && inc=$N/src/include  # 3.5's transfer file includes the API header
  nvcc -std=c++17 -rdc=true -arch=sm_90 -maxrregcount=32 -Xptxas -v -c "$O/$f.cu" -o "$O/$f.o" "${extra[@]}" \
    -I "$O/gen" -I "$inc" -I "$COST_R/test/efa_abi" > "$O/$f.log" 2>&1 ||
    { echo "nvcc failed on $f.cu:"; grep -m5 error "$O/$f.log"; exit 1; }
  rm -rf "$O/cubin-$f" && mkdir -p "$O/cubin-$f"
  (cd "$O/cubin-$f" && "$CUOBJDUMP" -xelf all "$O/$f.o" > /dev/null)
  "$NVDISASM" -c "$O/cubin-$f"/*.cubin > "$O/$f.sass"
done
echo "ptxas, summed over every nvshmemi_transfer_* function (the wrapper shape's _nvshmem bodies included):"
python3 - "$O"/{unpatched,patched,in-body,wrapper}.log <<'PY'
import os, re, sys
for p in sys.argv[1:]:
    n = fr = sp = 0; cur = None
    for line in open(p):
        m = re.search(r'Function properties for (\S+)', line)
        if m:
            cur = m.group(1); continue
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m and cur and 'nvshmemi_transfer_' in cur:
            n += 1; fr += int(m.group(1)); sp += int(m.group(2)) + int(m.group(3))
    print(f'  {os.path.basename(p)[:-4]}: {n} functions, stack frames {fr} bytes, spills {sp} bytes')
PY
echo
for f in patched in-body wrapper; do
  echo "## $f (against unpatched)"
  python3 "$HERE/sass_off_path.py" "$O/unpatched.sass" "$O/$f.sass" "$O/diffs-$f"
  echo
done
echo "off paths and diffs: $O/diffs-patched, $O/diffs-in-body, $O/diffs-wrapper"
echo
# The caller's side: a perftest kernel compiled against the patched headers.
nvml_stub "$O/stub"
nvcc -std=c++17 -O3 -rdc=true -arch=sm_90 -c "$O/tree/perftest/device/pt-to-pt/shmem_put_bw.cu" -o "$O/put_bw.o" \
  -I "$O/stub" -I "$O/gen" -I "$O/tree/perftest/common" -I "$O/tree/src/include" > "$O/put_bw.log" 2>&1 ||
  { echo "nvcc failed on shmem_put_bw.cu:"; grep -m5 error "$O/put_bw.log"; exit 1; }
rm -rf "$O/cubin-put_bw" && mkdir -p "$O/cubin-put_bw"
(cd "$O/cubin-put_bw" && "$CUOBJDUMP" -xelf all "$O/put_bw.o" > /dev/null)
"$NVDISASM" -c "$O/cubin-put_bw"/*.cubin > "$O/put_bw.sass"
echo "## the caller's side: every hook in shmem_put_bw.cu's kernels, compiled against the patched headers"
python3 - "$O/put_bw.sass" <<'PY'
import re, sys
lines = [l.strip() for l in open(sys.argv[1])]
ins = [re.sub(r'^/\*[0-9a-f]+\*/\s*', '', l).rstrip(' ;') for l in lines if re.match(r'/\*[0-9a-f]{4,}\*/', l)]
hooks = 0
for i, t in enumerate(ins):
    if 'nvshmemi_efa_gda_api_d' not in t:
        continue
    hooks += 1
    j = i
    while j < len(ins) and not re.match(r'(@!?U?P\d )?BRA', ins[j]):
        j += 1
    calls = [re.search(r'CALL\S* `?\(?(\w+)', x) for x in ins[j:j + 40]]
    names = []
    for c in calls:
        if c and c.group(1) not in names:
            names.append(c.group(1))
        if len(names) == 2:
            break
    print(f'hook {hooks}: {j - i + 1} instructions from the slot load to the branch: ' + ' ; '.join(ins[i:j + 1]))
    print(f'  then calls: {", ".join(names)}')
print(f'{hooks} hooks')
PY
