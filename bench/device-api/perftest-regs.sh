#!/usr/bin/env bash
# The device API hook's cost in NVSHMEM's perftest kernels, without a GPU (issue 23): registers, stack and spills of
# each kernel, device-linked against libnvshmem_device.a built from the unpatched tree and from the tree the device
# API patcher hooked (and from any more trees named on the command line).
#   bash bench/device-api/perftest-regs.sh NVSHMEM_SRC [OUT_DIR [NAME=PATCHED_TREE ...]]
# The device library is its two device objects, compiled as src/device/CMakeLists.txt compiles them (-rdc, -O3,
# --maxrregcount=32, sm_90): init/init_device.cu and comm/transfer_device.cu (transfer_device.cuh.in);
# launch/collective_launch.cpp has no device code. Each perftest (perftest/device/pt-to-pt/shmem_<test>.cu, -rdc, -O3,
# sm_90, as perftest/CMakeLists.txt) is compiled once per distinct content of the files it includes (nvcc -M),
# with -Xptxas -v for its kernels' own spills, then `nvcc -dlink` with each library; `cuobjdump -res-usage` reads the
# object before and after the link.
# NVML's header is not on the machine: the perftests' utils.h gets a stand-in naming its four types.
# TESTS (space-separated shmem_<test>.cu names) overrides the list. DEEPEP=<DeepEP source patched by nvshmem-efa
# patch --deepep-src> adds DeepEP's internode_ll.cu and internode.cu kernels (tests deepep_internode_ll,
# deepep_internode), compiled with its setup.py's nvcc flags and without NVSHMEM_EFA_SHIM_GDA, as --deepep-gda
# device-api builds them: their remote operations are NVSHMEM device API calls. The patched tree's perftests are compiled against
# its headers, so their kernels carry the hooks at the callers, as an application built against the build's install.
set -euo pipefail
N=${1:?NVSHMEM source tree}; O=${2:-$(mktemp -d)}; shift $(( $# < 2 ? $# : 2 ))
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/cost-common.sh"
CUOBJDUMP=$(need_tool cuobjdump)
read -r -a tests <<< "${TESTS:-put_bw put_latency get_bw get_latency p_latency g_latency put_signal_ping_pong_latency signal_ping_pong_latency put_atomic_ping_pong_latency}"
gen_headers "$N" "$O/gen"
nvml_stub "$O/stub"
[ -n "${DEEPEP:-}" ] && tests+=(deepep_internode_ll deepep_internode)
hooked_tree "$N" "$O/tree-hooked"
variants=("unpatched=$N" "patched=$O/tree-hooked")
variants+=("$@")
names=()
for v in "${variants[@]}"; do
  name=${v%%=*} tree=${v#*=} d=$O/${v%%=*}
  names+=("$name")
  mkdir -p "$d"
  lib=(-std=c++17 -O3 -rdc=true -arch=sm_90 --maxrregcount=32 -DNVSHMEM_X86_64 -D__STDC_LIMIT_MACROS -D__STDC_CONSTANT_MACROS
       -I "$O/gen" -I "$tree/src/include" -I "$COST_R/test/efa_abi")
  nvcc "${lib[@]}" -c "$tree/src/device/init/init_device.cu" -o "$d/init_device.o"
  nvcc "${lib[@]}" -x cu -c "$tree/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in" -o "$d/transfer_device.o"
  rm -f "$d/libnvshmem_device.a" && nvcc -lib -o "$d/libnvshmem_device.a" "$d/init_device.o" "$d/transfer_device.o"
  for t in "${tests[@]}"; do
    case $t in
      deepep_*)  # DeepEP's kernels, with its setup.py's flags and the ones torch's CUDAExtension adds; without
                 # NVSHMEM_EFA_SHIM_GDA, as --deepep-gda device-api builds them
        tf=(-std=c++17 -O3 -rdc=true -arch=sm_90 --ptxas-options=--register-usage-level=10 -DDISABLE_AGGRESSIVE_PTX_INSTRS
            --expt-relaxed-constexpr -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__
            -D__CUDA_NO_HALF2_OPERATORS__
            "$DEEPEP/csrc/kernels/${t#deepep_}.cu" -I "$DEEPEP/csrc/kernels" -I "$O/gen" -I "$tree/src/include") ;;
      *) tf=(-std=c++17 -O3 -rdc=true -arch=sm_90 "$tree/perftest/device/pt-to-pt/shmem_$t.cu"
             -I "$O/stub" -I "$O/gen" -I "$tree/perftest/common" -I "$tree/src/include") ;;
    esac
    # one compile per distinct content of the files the perftest includes (nvcc -M), whatever tree they are in
    key=$(nvcc "${tf[@]}" -M -MT x | sed 's/[ \\]/\n/g' | grep -vx 'x\|:\|x:' | grep . | xargs cat | sha1sum | cut -c1-12)
    obj=$O/obj/$t-$key.o
    mkdir -p "$O/obj"
    [ -f "$obj" ] || nvcc "${tf[@]}" -Xptxas -v -c -o "$obj" > "$O/obj/$t-$key.ptxas.log" 2>&1 ||
      { echo "nvcc failed on $t:"; grep -m5 error "$O/obj/$t-$key.ptxas.log"; exit 1; }
    cp "$O/obj/$t-$key.ptxas.log" "$d/$t.ptxas.log"
    "$CUOBJDUMP" -res-usage "$obj" > "$d/$t.o.res"
    more=()
    if [[ $t == deepep_* ]]; then  # the shim's device state is defined in DeepEP's runtime.cu
      rt=(-std=c++17 -O3 -rdc=true -arch=sm_90 --expt-relaxed-constexpr "$DEEPEP/csrc/kernels/runtime.cu" -I "$DEEPEP/csrc/kernels"
          -I "$O/gen" -I "$tree/src/include")
      [ -f "$d/deepep_runtime.o" ] || nvcc "${rt[@]}" -c -o "$d/deepep_runtime.o" > "$d/deepep_runtime.log" 2>&1 ||
        { echo "nvcc failed on DeepEP's runtime.cu:"; grep -m5 error "$d/deepep_runtime.log"; exit 1; }
      # Linked alone, nvlink drops kernels whose host references it does not see (all of internode.cu's, the LL
      # combine kernels); DeepEP's own link keeps them, so they are named as used.
      more=("$d/deepep_runtime.o" -Xnvlink -kernels-used=deep_ep)
    fi
    nvcc -dlink -arch=sm_90 "$obj" "${more[@]}" "$d/libnvshmem_device.a" -o "$d/$t.dlink.o"
    "$CUOBJDUMP" -res-usage "$d/$t.dlink.o" > "$d/$t.dlink.res"
  done
  echo "built $name ($tree): libnvshmem_device.a and ${#tests[@]} perftests device-linked"
done
python3 "$HERE/perftest_regs.py" "$O" "${tests[@]}" -- "${names[@]}"
