#!/usr/bin/env bash
# Packs what a 2-GPU host without network or our build needs to run the issue-11 checks into DIR: the NVSHMEM work
# dir (state + install), libfabric 2.3.0 with its fabtests, efaemu, pe_test and deepep_pattern (3 builds) prebuilt, the DeepEP tree patched by
# `nvshmem-efa patch`, native/efaemu/gpu/checks.sh with its sysfs-ns.sh, and two run scripts: checks-run.sh
# (gpu-checks.sh: checks.sh directly, no Node.js) and run.sh (gpu-run.sh: `nvshmem-efa selftest`, which needs
# WITH_NODE=1 to pack this machine's node and the standalone bundle). Paths inside the tarballs are absolute, as the
# work dir's state records them.
#
#   [WITH_NODE=1] prepare-carry.sh DIR WORK_DIR LIBFABRIC_HOME DEEPEP_PATCHED_DIR
set -euo pipefail
out=$1 wd=$2 lf=$3 deepep=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
if [ "${WITH_NODE:-}" = 1 ]; then
  [ -f "$out/node.xz" ] || xz -T2 -c "$(command -v node)" >"$out/node.xz"
  rm -rf "$out/bundle" && node "$root/scripts/bundle.mjs" --standalone "$out/bundle.d" && tar cJf "$out/bundle.tar.xz" -C "$out" --transform 's,^bundle.d,bundle,' bundle.d && rm -rf "$out/bundle.d"
fi
tar cJf "$out/nv.tar.xz" -P "$wd/state.json" "$wd/install" "$wd/report.json" 2>/dev/null || tar cJf "$out/nv.tar.xz" -P "$wd/state.json" "$wd/install"
tar cJf "$out/lf.tar.xz" -P "$lf"
b=$(mktemp -d)
cmake -S "$root/native/efaemu" -B "$b/efaemu" -G Ninja -DLIBFABRIC_PREFIX="$lf" -DEFAEMU_TESTS=OFF >/dev/null
cmake --build "$b/efaemu" >/dev/null
# pe_test and the deepep_pattern builds (product shim and its negative controls, issue 21), as selftest builds them.
bash "$root/bench/efaemu/build-gpu-programs.sh" "$wd/install/nvshmem" "$b/patterns"
mv "$b/patterns/pe_test" "$b/pe_test"
tar cJf "$out/pre.tar.xz" -C "$b" efaemu/prov efaemu/interpose efaemu/softgdr pe_test \
  patterns/deepep_pattern patterns/deepep_pattern_no_quiet patterns/deepep_pattern_other_rail
tar cJf "$out/deepep.tar.xz" -C "$(dirname "$deepep")" --transform "s,^$(basename "$deepep"),DeepEP," "$(basename "$deepep")"
tar cJf "$out/g.tar.xz" -C "$root/native/efaemu" --transform 's,^,g/,' gpu/checks.sh gpu/warmup scripts/sysfs-ns.sh
cp "$root/bench/efaemu/gpu-run.sh" "$out/run.sh"
cp "$root/bench/efaemu/gpu-checks.sh" "$out/checks-run.sh"
du -sh "$out"/*
