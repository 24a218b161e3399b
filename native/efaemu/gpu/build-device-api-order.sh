#!/usr/bin/env bash
# Builds device_api_order.cu (ours: the device API's ordering, checked by the receiver) against an NVSHMEM install, and
# its negative controls: the same program linked against a copy of the install's libnvshmem_device.a whose transfer
# functions were recompiled with one ordering rule of the device API broken (NVSHMEMX_EFA_GDA_API_TEST_<CONTROL>, the
# switches of templates/transport_efa_gda/nvshmemx_efa_gda_device_api.cuh). The object is recompiled with the exact
# command NVSHMEM's build used (its compile_commands.json), so the only difference is the switch.
#
#   build-device-api-order.sh PREFIX OUT ARCH [PROGRAM...]
#
# PROGRAM: device_api_order, or device_api_order_<control> (control: fence_no_gda_quiet, signal_no_wait, warp_rail, no_proxy_flush,
# no_flush_before_proxy, quiet_no_flush); default: device_api_order. Negative controls need NVSHMEM_BUILD, the NVSHMEM build
# directory (<work-dir>/build/nvshmem), configured with CMAKE_EXPORT_COMPILE_COMMANDS=ON (nvshmem-efa build does).
# Programs land in OUT/ours/, the broken libraries in OUT/ours/neg-<control>/. CUDA_HOME names the toolkit.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: build-device-api-order.sh PREFIX OUT ARCH [PROGRAM...]" >&2; exit 2; }
PREFIX=$1 OUT=$2/ours ARCH=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[ $# -gt 0 ] || set -- device_api_order
mkdir -p "$OUT"
gencode=()
for a in ${ARCH//[;,]/ }; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done

# link OUT_PROGRAM [LIBDIR]: the program, against LIBDIR's libnvshmem_device.a when given (searched first).
link() {
  local out=$1 first=${2:+-L$2}
  "$NVCC" -O2 -std=c++17 -rdc=true "${gencode[@]}" -I "$PREFIX/include" "$HERE/device_api_order.cu" -o "$out" \
    ${first:+"$first"} -L "$PREFIX/lib" -lnvshmem_host -lnvshmem_device -ldl "-Xlinker=-rpath,$PREFIX/lib"
}

# broken_library CONTROL DIR: DIR/libnvshmem_device.a with transfer_device recompiled under the control's switch.
broken_library() {
  local ctl=$1 dir=$2 db=${NVSHMEM_BUILD:-}/compile_commands.json member
  [ -f "$db" ] || { echo "build-device-api-order.sh: $db is missing: set NVSHMEM_BUILD to an NVSHMEM build configured with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (rebuild with nvshmem-efa build --force)" >&2; exit 4; }
  mkdir -p "$dir"
  member=$(ar t "$PREFIX/lib/libnvshmem_device.a" | grep -m1 'transfer_device') || {
    echo "build-device-api-order.sh: $PREFIX/lib/libnvshmem_device.a has no transfer_device object (an NVSHMEM_ENABLE_ALL_DEVICE_INLINING build?)" >&2; exit 4; }
  # NVSHMEM builds libnvshmem_device.a in a CMake project of its own (ExternalProject, <build>/src/device), which does
  # not inherit CMAKE_EXPORT_COMPILE_COMMANDS: 3.4 also compiles transfer_device.cu into its combined static library in
  # the top project (so the top database has it), AWS's 3.5.7 has no such library. There, ninja writes the device
  # project's database from its build.ninja (`ninja -t compdb`), with the very command it ran.
  local sub=${NVSHMEM_BUILD:-}/src/device
  if [ -f "$sub/build.ninja" ] && ! grep -q 'comm/transfer_device.cu"' "$db"; then
    db=$dir/device-compile_commands.json
    (cd "$sub" && ninja -t compdb) >"$db" || { echo "build-device-api-order.sh: ninja -t compdb in $sub failed" >&2; exit 4; }
  fi
  python3 - "$db" "NVSHMEMX_EFA_GDA_API_TEST_${ctl^^}" "$dir/$member" <<'PY'
import json, shlex, subprocess, sys
db, define, out = sys.argv[1:]
entries = [e for e in json.load(open(db)) if e["file"].endswith("comm/transfer_device.cu")]
if not entries:
    sys.exit(f"build-device-api-order.sh: {db} has no entry for comm/transfer_device.cu (nor has the device project build.ninja)")
e = entries[0]
argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
i = argv.index("-o")
argv[i + 1] = out
argv.insert(1, f"-D{define}")
print("+", shlex.join(argv), flush=True)
sys.exit(subprocess.call(argv, cwd=e["directory"]))
PY
  cp "$PREFIX/lib/libnvshmem_device.a" "$dir/libnvshmem_device.a"
  (cd "$dir" && ar rs libnvshmem_device.a "$member")
}

# One program: built, or the reason on stderr and a non-zero status.
build_one() {
  local p=$1 ctl targets
  case $p in
    device_api_order) link "$OUT/device_api_order" ;;
    device_api_order_*)
      ctl=${p#device_api_order_}
      # The controls are checks.sh's (NEG_DEVICE_API_CONTROLS): an unknown name would build an unbroken library.
      # Read whole before matching: under pipefail, grep -q closing the pipe early can SIGPIPE checks.sh (a race).
      targets=$(bash "$HERE/checks.sh" --neg-device-api-targets)
      grep -qx "$p" <<<"$targets" || { echo "build-device-api-order.sh: no control $ctl" >&2; return 2; }
      broken_library "$ctl" "$OUT/neg-$ctl" && link "$OUT/$p" "$OUT/neg-$ctl" ;;
    *) echo "build-device-api-order.sh: unknown program $p" >&2; return 2 ;;
  esac && echo "built $OUT/$p"
}
# In parallel (each is one nvcc of the device library's largest object, then a link); the first failure's status.
pids=()
for p in "$@"; do build_one "$p" & pids+=($!); done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || { s=$?; [ "$rc" = 0 ] && rc=$s; }; done
exit "$rc"
