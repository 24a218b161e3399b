#!/usr/bin/env bash
# Issue 23 on a lent 2-GPU host (no network, no Node.js of its own): build NVSHMEM 3.4.5 (the device API hooks are the
# tool's default), then
# selftest's device_api check (NVSHMEM's own perftests and examples, unmodified, through nvshmem-efa launch, the
# switch on and off, under efaemu's unkind modes). Everything runs through efaemu, the emulated EFA NIC.
#
#   PHASE=build     node + bundle, sources, build into $WD (default /tmp/da/wd, kept while the machine stays warm);
#                   BUILD_ARGS: more build options (--no-device-api: the build without the hooks, e.g. WD=/tmp/da/wd-off
#                   to time it beside the default one: the report's step table has each step's time)
#   PHASE=selftest  eval env, selftest --checks ${CHECKS:-device_api} (MODES: --efaemu-modes, default all; PROGRAMS:
#                   DEVICE_API_PROGRAMS; LIMIT: seconds before SIGTERM; CHECK_TIMEOUT: per program)
#   PHASE=both      build, then selftest
#   PHASE=diag      ring-bcast's hang: NVSHMEM's ring-bcast and bench/device-api/ring_bcast_variants.cu (plain launch,
#                   NVSHMEM's collective launch, a bare cooperative launch; two of them again with the host waiting in a
#                   pageable copy, as the example does) through device_api with efaemu's state dump after 8 s
#                   (EFAEMU_DUMP_AFTER_S: every thread's backtrace) and warnings, modes none, 30 s a run
#   PHASE=bench     nvshmem-efa bench's put table through efaemu (--no-deepep), with the device API column (SIZES)
# Sources as bench/quickstart/quickstart-gpu.sh carries them (.carry/, .carry/qs). Logs under $OUT.
set -uo pipefail
W=/tmp/da OUT=${OUT:-/tmp/da-out} PHASE=${PHASE:-both} HERE=$(cd "$(dirname "$0")" && pwd)
WD=${WD:-$W/wd}
# shellcheck source=bench/quickstart/gpu-host.sh
source "$HERE/../quickstart/gpu-host.sh"

if [ "$PHASE" = build ] || [ "$PHASE" = both ]; then
  stamp "machine: $(hostname) $(nproc) cores"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  # DEEPEP=device-api|shim: also DeepEP 567632d, with that --deepep-gda path (device-api: no shim GDA path, its remote
  # operations are NVSHMEM device API calls).
  # shellcheck disable=SC2086 # BUILD_ARGS are words
  device_api_build "$WD" ${BUILD_ARGS:-}
  if [ -n "${DEEPEP:-}" ]; then
    # The hosts' torch (2.11+cu130) links libnvshmem_host.so.3 and gpu-host.sh removed the pip NVSHMEM it came with, so
    # torch imports only with the build's NVSHMEM on the library path: NVSHMEM first, then DeepEP (a no-op for NVSHMEM).
    mkdir -p "$W/src" && { [ -d "$W/src/deepep-567632d" ] || tar xzf "$C/deepep-567632d.tar.gz" -C "$W/src"; }
    mv "$OUT/build.log" "$OUT/build-nvshmem.log"
    export LD_LIBRARY_PATH=$WD/install/nvshmem/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # shellcheck disable=SC2086 # BUILD_ARGS are words
    device_api_build "$WD" ${BUILD_ARGS:-} --deepep-src "$W/src/deepep-567632d" --deepep-gda "$DEEPEP"
  fi
  stamp "build done"
fi

if [ "$PHASE" = selftest ] || [ "$PHASE" = both ]; then
  cd "$W" || exit 1
  eval "$(nvshmem-efa env --work-dir "$WD")"  # its LD_LIBRARY_PATH starts with the build's NVSHMEM (torch, above)
  env | grep -E '^(NVSHMEM_|FI_EFA|LD_LIBRARY_PATH)' | sort >"$OUT/env.txt"
  stamp "selftest --checks ${CHECKS:-device_api} (modes ${MODES:-all}; programs ${PROGRAMS:-all})"
  s0=$(date +%s)
  DEVICE_API_PROGRAMS=${PROGRAMS:-all} ${LIMIT:+timeout -s TERM "$LIMIT"} "$W/node" "$W/bundle/nvshmem-efa.mjs" selftest --work-dir "$WD" \
    --checks "${CHECKS:-device_api}" --efaemu-modes "${MODES:-all}" ${CHECK_TIMEOUT:+--timeout "$CHECK_TIMEOUT"} >"$OUT/selftest.txt" 2>&1
  rc=$?; echo "selftest exit $rc in $(( $(date +%s) - s0 )) s" | tee -a "$OUT/selftest.txt"
  tail -c 6000 "$OUT/selftest.txt"
  cp "$WD/selftest/nvshmem-tests-build.log" "$OUT/" 2>/dev/null
  # Logs only (rank logs, launch logs, statistics), not the programs.
  tar czf "$OUT/selftest-results.tgz" -C "$WD" --exclude='*.so' --exclude='efaemu-build' selftest 2>/dev/null
  stamp "done"
fi

if [ "$PHASE" = diag ]; then
  cd "$W" || exit 1
  eval "$(nvshmem-efa env --work-dir "$WD")"
  d="$WD/build/nvshmem-tests/diag" NH=$WD/install/nvshmem
  mkdir -p "$d"
  "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -O2 -std=c++17 -rdc=true -arch=sm_90 -I "$NH/include" "$HERE/ring_bcast_variants.cu" -o "$d/ring_bcast_plain" \
    -L "$NH/lib" -lnvshmem_host -lnvshmem_device -ldl "-Xlinker=-rpath,$NH/lib" >"$OUT/diag-build.log" 2>&1 || { tail -20 "$OUT/diag-build.log"; exit 1; }
  # One program; the variant is its name (ring_bcast_variants.cu).
  programs=ring-bcast extra=""
  for v in plain coop coopdirect plain_pageable coop_pageable; do
    [ "$v" = plain ] || cp "$d/ring_bcast_plain" "$d/ring_bcast_$v"
    programs+=",ring_bcast_$v" extra+="${extra:+;}ring_bcast_$v|ex|"
  done
  stamp "diag: ring-bcast and its variants, dump after 8 s"
  # FI_LOG_LEVEL=warn: efaemu says why a copy or a WQE failed.
  EFAEMU_DUMP_AFTER_S=8 FI_LOG_LEVEL=warn DEVICE_API_OFF=none DEVICE_API_PROGRAMS=$programs DEVICE_API_TABLE_EXTRA=$extra \
    "$W/node" "$W/bundle/nvshmem-efa.mjs" selftest --work-dir "$WD" --results "$W/diag-results" --checks device_api --efaemu-modes none --timeout 30 >"$OUT/diag.txt" 2>&1
  echo "diag selftest exit $?"; grep -E '^device_api:' "$W"/diag-results/checks.log
  tar czf "$OUT/diag-results.tgz" -C "$W" --exclude='*.so' --exclude='efaemu-build' --exclude='pe_test' diag-results 2>/dev/null
  stamp "diag done"
fi

if [ "$PHASE" = bench ]; then
  cd "$W" || exit 1
  stamp "bench --fabric efaemu --no-deepep (sizes ${SIZES:-4K,64K,1M,16M})"
  nvshmem-efa bench --work-dir "$WD" --fabric efaemu --no-deepep --sizes "${SIZES:-4K,64K,1M,16M}" --results "$W/bench-results" >"$OUT/bench.txt" 2>&1
  echo "bench exit $?"; tail -40 "$OUT/bench.txt"
  cp "$W/bench-results/gda-signals.md" "$W/bench-results/put-bandwidth.svg" "$OUT/" 2>/dev/null
  tar czf "$OUT/bench-results.tgz" -C "$W" --exclude='*.so' --exclude='efaemu-build' --exclude='put_bw' bench-results 2>/dev/null
  stamp "bench done"
fi
