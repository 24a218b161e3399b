#!/usr/bin/env bash
# The device API hook's cost in NVSHMEM's transfer functions, without a GPU: ptxas's stack frame and spill bytes of
# every nvshmemi_transfer_* instantiation, compiled as NVSHMEM's device library compiles transfer_device.cu
# (-rdc, sm_90, --maxrregcount=32), before and after the hook lines (issue 23, part 3). ptxas prints registers only
# for kernels, so frames and spills are what it can say about these __noinline__ functions.
#   bash bench/device-api/ptxas-cost.sh NVSHMEM_SRC [OUT_DIR]
# The hooks are the patcher's own (src/patchers/nvshmem/device-api.ts, applied by patch-tree.ts to a copy of the tree),
# and the patched init_device.cu (the slot) is compiled too; NVSHMEM's generated headers are made from their .in files.
set -euo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}; HERE=$(cd "$(dirname "$0")" && pwd); R=$(cd "$HERE/../.." && pwd)
# shellcheck source=bench/device-api/cost-common.sh
. "$HERE/cost-common.sh"
gen_headers "$N" "$O/gen"
rm -rf "$O/tree" && cp -r "$N" "$O/tree"
(cd "$R" && npx tsx bench/device-api/patch-tree.ts "$O/tree")
cp "$N/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/orig.cu"
cp "$O/tree/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" "$O/hooked.cu"
cp "$O/tree/src/device/init/init_device.cu" "$O/init_device.cu"
for f in orig hooked init_device; do
  nvcc -std=c++17 -rdc=true -arch=sm_90 -maxrregcount=32 -Xptxas -v -c "$O/$f.cu" -o "$O/$f.o" \
    -I "$O/gen" -I "$O/tree/src/include" -I "$R/test/efa_abi" > "$O/$f.log" 2>&1 ||
    { echo "nvcc failed on $f.cu:"; grep -m5 error "$O/$f.log"; exit 1; }
done
echo "patched transfer_device.cuh.in and init_device.cu compile (sm_90, -rdc); init_device.o defines the slot: $(nm "$O/init_device.o" | grep -c " B nvshmemi_efa_gda_api_d$") (host shadow of the __constant__)"
python3 "$HERE/ptxas_frames.py" "$O/orig.log" "$O/hooked.log"
