#!/usr/bin/env bash
# GPU acceptance of the EFA GDA device path, every step with the software EFA completing out of order:
#   native/softefa/gpu/acceptance.sh BIN_DIR OUT_DIR [ABI_DIR]
# BIN_DIR holds efa_gda_proof, efa_gda_post_cost, softefa_cpu_test and gda_device_cpu_test (built against
# the vendored upstream efa_io_defs.h); OUT_DIR receives the logs (9 files at most); ABI_DIR holds upstream
# headers: rdma-core-*/efa_io_defs.h and libfabric-*/include/rdma/*.h. Exits non-zero when a step fails.
#
# Steps: the proof under two completion orders; the concurrent-quiet test with this release's quiet (must
# pass), with the count-based quiet it replaced (must fail) and with each checker on an owned queue (must pass); compute-sanitizer memcheck and racecheck of
# the proof and the concurrent test; DeepEP-shaped signals after completion (must pass) and right after the post
# (must fail); a failed post trapping with its message; the post-cost bench and the
# throughput bench; the CPU tests and the ABI check, for the record.
set -u
bin=$1 out=$2 abi=${3:-}
mkdir -p "$out"
export CUDA_MODULE_LOADING=EAGER
status=0
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# run LOG NAME EXPECT CMD...: EXPECT is pass (exit 0) or fail (non-zero exit).
run() {
  local log=$1 name=$2 expect=$3; shift 3
  local t0=$SECONDS rc
  { echo "== $name: $*"; timeout 150 "$@"; } >>"$out/$log" 2>&1
  rc=$?
  echo "== $name: exit $rc, $((SECONDS - t0)) s" >>"$out/$log"
  if { [ "$expect" = pass ] && [ $rc -eq 0 ]; } || { [ "$expect" = fail ] && [ $rc -ne 0 ] && [ $rc -ne 124 ]; }; then
    echo "ok   $name (exit $rc, expected $expect, $((SECONDS - t0)) s)"
  else
    echo "FAIL $name (exit $rc, expected $expect, $((SECONDS - t0)) s)"; status=1
  fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /' | tee "$out/summary.log"
{
run proof.log "proof, large writes complete after 8 later WQEs" pass "$bin/efa_gda_proof" --reorder large:65536:8
run proof.log "proof, seeded random completion order" pass "$bin/efa_gda_proof" --reorder random:7:16 --seed 777
run concurrent_quiet.log "concurrent quiet, this release (retired prefix)" pass "$bin/efa_gda_proof" --concurrent-quiet new
run concurrent_quiet.log "concurrent quiet, the count-based quiet it replaced (must be caught)" fail "$bin/efa_gda_proof" --concurrent-quiet old
# The count-based run must have failed on its checks (not by crashing or hanging).
grep -q "^FAIL checkers=.* saw the target unwritten after quiet" "$out/concurrent_quiet.log" \
  || { echo "FAIL the count-based quiet was not caught by the target checks"; status=1; }
run concurrent_quiet.log "concurrent quiet, each checker on a queue of its own (owned queues, ABI 6)" pass "$bin/efa_gda_proof" --concurrent-quiet owned
run signals.log "signals after payload completion (DeepEP dispatch shape)" pass "$bin/efa_gda_proof" --signals new
run signals.log "signals right after the payload post (must be caught)" fail "$bin/efa_gda_proof" --signals old --idle-us 20000
grep -q "^FAIL signals: .* [1-9][0-9]* tokens not in place when their count was seen" "$out/signals.log" \
  || { echo "FAIL the early signals were not caught by the receiver's checks"; status=1; }
# Instrumented kernels post slowly: the software EFA holds reordered WQEs longer, so they still get overtaken.
run memcheck.log "memcheck: proof" pass "$san" --tool memcheck --error-exitcode 9 "$bin/efa_gda_proof" --quick --idle-us 20000
run memcheck.log "memcheck: concurrent quiet" pass "$san" --tool memcheck --error-exitcode 9 "$bin/efa_gda_proof" --concurrent-quiet new --quick --idle-us 20000
run memcheck.log "memcheck: owned queues" pass "$san" --tool memcheck --error-exitcode 9 "$bin/efa_gda_proof" --concurrent-quiet owned --quick --idle-us 20000
run racecheck.log "racecheck: proof" pass "$san" --tool racecheck --error-exitcode 9 "$bin/efa_gda_proof" --quick --idle-us 20000
run racecheck.log "racecheck: concurrent quiet" pass "$san" --tool racecheck --error-exitcode 9 "$bin/efa_gda_proof" --concurrent-quiet new --quick --idle-us 20000
run racecheck.log "racecheck: owned queues" pass "$san" --tool racecheck --error-exitcode 9 "$bin/efa_gda_proof" --concurrent-quiet owned --quick --idle-us 20000
run bench.log "post cost (ratios, one run)" pass "$bin/efa_gda_post_cost"
run bench.log "throughput through the software EFA" pass "$bin/efa_gda_proof" --bench
run bench.log "a failed post traps with the op and address" pass "$bin/efa_gda_proof" --trap-test
grep -q "nvshmem-efa: EFA GDA put_nbi_warp failed: local buffer not in a region registered for GDA" "$out/bench.log" \
  || { echo "FAIL the trap message was not printed"; status=1; }
run cpu.log "softefa CPU tests" pass "$bin/softefa_cpu_test"
run cpu.log "GDA device code on CPU threads" pass "$bin/gda_device_cpu_test"
if [ -n "$abi" ]; then
  abi_args=()
  for d in "$abi"/rdma-core-*; do abi_args+=(--io "$d"); done
  for d in "$abi"/libfabric-*; do abi_args+=(--fi "$d/include"); done
  run cpu.log "ABI check against upstream headers" pass bash test/efa_abi/abi_check.sh "${abi_args[@]}"
fi
echo "acceptance: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
} 2>&1 | tee -a "$out/summary.log"
exit "${PIPESTATUS[0]}"
