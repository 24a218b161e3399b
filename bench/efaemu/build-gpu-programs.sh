#!/usr/bin/env bash
# Builds the GPU test programs of native/efaemu/gpu against an NVSHMEM install, as `nvshmem-efa selftest` does:
# pe_test (with the GDA device API) and deepep_pattern, once for the product's shim and once per negative-control
# switch of templates/deepep_efa/nvshmem_efa_shim.cuh (deepep_pattern_no_quiet, deepep_pattern_other_rail).
#   build-gpu-programs.sh NVSHMEM_HOME OUT_DIR [CUDA_ARCH (default 90)]
# The nvcc runs go in parallel (JOBS, default 2): each deepep_pattern build takes about a minute on 2 cores.
set -euo pipefail
nv=$1 out=$2 arch=${3:-90}
root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=$root/native/efaemu/gpu
mkdir -p "$out"
common=(-O2 -std=c++17 -rdc=true -gencode "arch=compute_$arch,code=sm_$arch" -I "$nv/include")
link=(-L "$nv/lib" -lnvshmem_host -lnvshmem_device -ldl "-Xlinker=-rpath,$nv/lib")
build() {  # build OUT [FLAGS...]
  local o=$1; shift
  if nvcc "${common[@]}" "$@" -o "$out/$o" "${link[@]}" >"$out/$o.build.log" 2>&1; then echo "built $out/$o"
  else echo "FAILED $o (see $out/$o.build.log)" >&2; return 1; fi
}
pids=()
build pe_test -DPE_TEST_GDA "$gpu/pe_test.cu" & pids+=($!)
for v in ":deepep_pattern" "-DNVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL:deepep_pattern_no_quiet" \
         "-DNVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL:deepep_pattern_other_rail"; do
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-2}" ]; do sleep 1; done
  flag=${v%%:*}
  # shellcheck disable=SC2086 # an empty flag is no argument
  build "${v#*:}" $flag -I "$root/templates/deepep_efa" "$gpu/deepep_pattern.cu" & pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
