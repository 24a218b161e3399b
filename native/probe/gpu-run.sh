#!/usr/bin/env bash
# Runs the probe on a GPU machine without network, as a new user would, from a carry directory holding
# node.xz, nvshmem-efa-standalone.tar.gz, libfabric-2.3.0.tar.gz, cmake-3.25.tar.xz and a prebuilt
# nvshmem-efa-probe:   native/probe/gpu-run.sh CARRY_DIR OUT_DIR
set -u
C=$(cd "$1" && pwd) OUT=$2 W=/tmp/nvshmem-efa-probe-run
mkdir -p "$W" "$OUT" && cd "$W" || exit 1
xz -dc "$C/node.xz" > node && chmod +x node
for t in nvshmem-efa-standalone libfabric-2.3.0; do tar xzf "$C/$t.tar.gz"; done
tar xJf "$C/cmake-3.25.tar.xz"
export PATH=$PATH:$W/cmk/bin LD_LIBRARY_PATH=$W/lfcarry/lib:${LD_LIBRARY_PATH:-}:$W/cmk/lib
"$C/nvshmem-efa-probe" --human > "$OUT/probe-prebuilt.txt" 2>&1; echo "prebuilt probe exit $?" >> "$OUT/probe-prebuilt.txt"
"$C/nvshmem-efa-probe" > "$OUT/probe-prebuilt.json" 2>&1
CI=true ./node sa/nvshmem-efa.mjs probe --libfabric-home "$W/lfcarry" --work-dir "$W/w" > "$OUT/probe-cli.txt" 2>&1; echo "nvshmem-efa probe exit $?" >> "$OUT/probe-cli.txt"
CI=true ./node sa/nvshmem-efa.mjs doctor --libfabric-home "$W/lfcarry" > "$OUT/doctor.txt" 2>&1; echo "nvshmem-efa doctor exit $?" >> "$OUT/doctor.txt"
cat "$OUT/probe-cli.txt" "$OUT/doctor.txt"
