#!/usr/bin/env bash
# The README's quick start on a lent 2-GPU host (no EFA, no network, no Node.js of its own), for issue 22's
# acceptance: doctor -> build (the tool builds rdma-core, libfabric, fabtests, GDRCopy, NVSHMEM and DeepEP) ->
# eval "$(nvshmem-efa env)" -> selftest through efaemu (fabtests run, not skipped).
#
# The host has no network, so the pinned sources come from files carried in .carry/qs (ignored) through the
# tool's documented mirror variables (NVSHMEM_EFA_<PKG>_URL). GDRCopy's archive is the pinned one (same sha256).
# GitHub's release assets could not be fetched where this was prepared: libfabric's and fabtests' archives are
# `make dist-bzip2` of the pinned v2.3.0 tree, rdma-core's a `git archive` of the pinned v60.1 commit, so their
# sha256 differ from the release archives' and a lock naming ours is passed (NVSHMEM_EFA_FABRIC_LOCK,
# .carry/qs/fabric-lock.json); the commits are the pinned ones.
#
#   PHASE=build     node + bundle, sources, doctor, build (into /tmp/qs, kept while the machine stays warm)
#   PHASE=selftest  eval env, selftest (CHECKS: default all; LIMIT: seconds before SIGTERM)
# Logs under $OUT.
set -uo pipefail
W=/tmp/qs OUT=${OUT:-/tmp/qs-out} PHASE=${PHASE:-build}
# shellcheck source=bench/quickstart/gpu-host.sh
source "$(dirname "$0")/../quickstart/gpu-host.sh"

if [ "$PHASE" = build ]; then
  stamp "machine: $(hostname) $(nproc) cores"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  for t in autoreconf automake libtool cmake ninja make gcc g++ pkg-config bzip2; do printf '%s: %s\n' "$t" "$(command -v $t || echo missing)"; done
  ls /usr/include/netlink/netlink.h /usr/include/libnl3 /usr/include/infiniband/efadv.h /usr/include/gdrapi.h 2>&1 | sed 's/^/header: /'
  cd "$W" || exit 1
  xz -dc "$C/node.xz" >node && chmod +x node
  tar xJf "$C/bundle.tar.xz"
  mkdir -p src && tar xzf "$C/nvshmem-v3.4.5.tar.gz" -C src && tar xzf "$C/deepep-567632d.tar.gz" -C src
  stamp "1. doctor"
  nvshmem-efa doctor >"$OUT/doctor.txt" 2>&1; echo "doctor exit $?" | tee -a "$OUT/doctor.txt"
  stamp "2. build"
  b0=$(date +%s)
  nvshmem-efa build --nvshmem-src "$W/src/nvshmem-v3.4.5" --deepep-src "$W/src/deepep-567632d" \
    --efa-io-defs "$C/efa_io_defs.h" --work-dir "$W/wd" >"$OUT/build.log" 2>&1
  rc=$?; echo "build exit $rc in $(( $(date +%s) - b0 )) s" | tee -a "$OUT/build.log"
  cp "$W/wd/report.md" "$OUT/report.md" 2>/dev/null
  [ "$rc" = 0 ] || { tail -40 "$OUT/build.log"; cp -r "$W/wd/logs" "$OUT/" 2>/dev/null; }
  r0=$(date +%s)
  nvshmem-efa build --nvshmem-src "$W/src/nvshmem-v3.4.5" --deepep-src "$W/src/deepep-567632d" \
    --efa-io-defs "$C/efa_io_defs.h" --work-dir "$W/wd" >"$OUT/rerun.log" 2>&1
  echo "rerun exit $? in $(( $(date +%s) - r0 )) s" | tee -a "$OUT/rerun.log"
  ls "$W/wd/install/libfabric/bin" | tr '\n' ' ' | sed 's/^/libfabric bin: /'; echo
  stamp "build phase done"
  exit 0
fi

# PHASE=selftest
stamp "3. env"
eval "$(nvshmem-efa env --work-dir "$W/wd")" && env | grep -E '^(NVSHMEM_|FI_EFA|LD_LIBRARY_PATH|PYTHONPATH)' | sort | tee "$OUT/env.txt"
stamp "4. selftest ${CHECKS:-(all)}"
s0=$(date +%s)
# LIMIT (seconds) ends the selftest with SIGTERM before the call's own limit, so its logs come back.
${LIMIT:+timeout -s TERM "$LIMIT"} "$W/node" "$W/bundle/nvshmem-efa.mjs" selftest --work-dir "$W/wd" ${CHECKS:+--checks "$CHECKS"} >"$OUT/selftest.txt" 2>&1
rc=$?; echo "selftest exit $rc in $(( $(date +%s) - s0 )) s" | tee -a "$OUT/selftest.txt"
tail -40 "$OUT/selftest.txt"
tar czf "$OUT/selftest-results.tgz" -C "$W/wd" selftest 2>/dev/null
stamp "done"
