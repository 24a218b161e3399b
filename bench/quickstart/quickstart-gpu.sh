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
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
C=$(pwd)/.carry Q=$(pwd)/.carry/qs W=/tmp/qs OUT=${OUT:-/tmp/qs-out} PHASE=${PHASE:-build}
mkdir -p "$W" "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PYTHON=$(command -v python3)
export CI=true PYTHON
nvshmem-efa() { "$W/node" "$W/bundle/nvshmem-efa.mjs" "$@"; }
export NVSHMEM_EFA_FABRIC_LOCK=$Q/fabric-lock.json \
  NVSHMEM_EFA_LIBFABRIC_URL=file://$Q/libfabric-2.3.0.tar.bz2 \
  NVSHMEM_EFA_FABTESTS_URL=file://$Q/fabtests-2.3.0.tar.bz2 \
  NVSHMEM_EFA_RDMA_CORE_URL=file://$Q/rdma-core-60.1.tar.gz \
  NVSHMEM_EFA_GDRCOPY_URL=file://$Q/gdrcopy-2.5.1.tar.gz
# The README's "pip NVSHMEM shadowing" fix, in this run's environment.
pip uninstall -y -q nvidia-nvshmem-cu12 nvidia-nvshmem-cu13 >/dev/null 2>&1 || true

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
