#!/usr/bin/env bash
# What NVSHMEM's hooked transfer functions execute with the device API switch off, from the SASS, without a GPU
# (issue 23's bar: "at most a uniform constant load and a branch when GDA is off").
#   bash bench/device-api/sass-off-path.sh NVSHMEM_SRC [OUT_DIR]
# transfer_device.cuh.in is compiled as NVSHMEM's device library compiles it and as ptxas-cost.sh does (-rdc, sm_90,
# --maxrregcount=32): unpatched, hooked by the device API patcher (patch-tree.ts on a copy of the tree), in the
# wrapper shape (hook_shapes.py wrapper: the patcher's hooks, NVSHMEM's body moved into a function of its own) and in
# the caller shape (hook_shapes.py caller: 3.4.5's parameter lists; NVSHMEM's bodies unhooked, the entries defined). The
# cubins are disassembled (cuobjdump -xelf, nvdisasm -c) and sass_off_path.py prints, per nvshmemi_transfer_*
# function: the instructions from the entry to the first instruction of NVSHMEM's own body with the slot off (of them
# the hook's own: the slot load, its compare, the branch), the instructions after the body's return in the wrapper
# shape, the frame's saves at the entry, and the body against the unpatched function (instructions, STL, LDL, register
# moves, instructions that differ). OUT_DIR/diffs-<shape>/<function>.diff has each off path and unified diff.
# cuobjdump and nvdisasm: $CUOBJDUMP / $NVDISASM or PATH (cost-common.sh says where to get them).
set -euo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cost-common.sh"
CUOBJDUMP=$(need_tool cuobjdump); NVDISASM=$(need_tool nvdisasm)
gen_headers "$N" "$O/gen"
hooked_tree "$N" "$O/tree"
cp "$N/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/unpatched.cu"
cp "$O/tree/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/hooked.cu"
python3 "$HERE/hook_shapes.py" wrapper "$O/hooked.cu" "$O/wrapper.cu"
rm -rf "$O/tree-caller" && cp -r "$O/tree" "$O/tree-caller" && python3 "$HERE/hook_shapes.py" caller "$O/tree-caller"
cp "$O/tree-caller/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/caller.cu"
for f in unpatched hooked wrapper caller; do
  inc=$O/tree/src/include; [ $f = caller ] && inc=$O/tree-caller/src/include
  nvcc -std=c++17 -rdc=true -arch=sm_90 -maxrregcount=32 -Xptxas -v -c "$O/$f.cu" -o "$O/$f.o" \
    -I "$O/gen" -I "$inc" -I "$COST_R/test/efa_abi" > "$O/$f.log" 2>&1 ||
    { echo "nvcc failed on $f.cu:"; grep -m5 error "$O/$f.log"; exit 1; }
  rm -rf "$O/cubin-$f" && mkdir -p "$O/cubin-$f"
  (cd "$O/cubin-$f" && "$CUOBJDUMP" -xelf all "$O/$f.o" > /dev/null)
  "$NVDISASM" -c "$O/cubin-$f"/*.cubin > "$O/$f.sass"
done
echo "ptxas, summed over every nvshmemi_transfer_* function (the wrapper shape's _nvshmem bodies included):"
python3 - "$O"/{unpatched,hooked,wrapper,caller}.log <<'PY'
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
for f in hooked wrapper caller; do
  echo "## $f (against unpatched)"
  python3 "$HERE/sass_off_path.py" "$O/unpatched.sass" "$O/$f.sass" "$O/diffs-$f"
  echo
done
echo "off paths and diffs: $O/diffs-hooked, $O/diffs-wrapper, $O/diffs-caller"
echo "(the caller shape's hook is in the application's kernel: here its transfer functions must read 'no hook' and differ in 0"
echo " instructions; perftest-regs.sh SHAPES=1 builds kernels with it)"
