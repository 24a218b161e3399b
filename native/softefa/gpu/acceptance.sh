#!/usr/bin/env bash
# GPU acceptance of the EFA GDA device path: proof, bench, compute-sanitizer memcheck and racecheck, and the
# ABI conformance check. Run on a GPU machine from the repository root:
#   native/softefa/gpu/acceptance.sh BIN_DIR OUT_DIR ABI_DIR
# BIN_DIR holds efa_gda_proof (built against the vendored upstream efa_io_defs.h), OUT_DIR receives one log
# per step, ABI_DIR holds the upstream headers: rdma-core-*/efa_io_defs.h and libfabric-*/include/rdma/*.h.
# Exits non-zero when any step fails.
set -u
bin=$1 out=$2 abi=$3
mkdir -p "$out"
export CUDA_MODULE_LOADING=EAGER
status=0
step() {
  local name=$1; shift
  echo "== $name: $*"
  if timeout 400 "$@" >"$out/$name.log" 2>&1; then echo "   pass"; else echo "   FAIL (exit $?)"; status=1; fi
  tail -n 12 "$out/$name.log" | sed 's/^/   | /'
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /'
step proof "$bin/efa_gda_proof"
step bench "$bin/efa_gda_proof" --bench
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck "$san" --tool memcheck --error-exitcode 9 "$bin/efa_gda_proof" --quick
step racecheck "$san" --tool racecheck --error-exitcode 9 "$bin/efa_gda_proof" --quick
abi_args=()
for d in "$abi"/rdma-core-*; do abi_args+=(--io "$d"); done
for d in "$abi"/libfabric-*; do abi_args+=(--fi "$d/include"); done
step abi bash test/efa_abi/abi_check.sh "${abi_args[@]}"
echo "acceptance: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
