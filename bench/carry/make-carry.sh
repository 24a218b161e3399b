#!/usr/bin/env bash
# Makes .carry/ (ignored), what the GPU-host scripts carry to a lent machine that has no network and no Node.js
# (bench/quickstart/gpu-host.sh and the scripts that source it): node, the standalone bundle, and the pinned sources,
# each made from a git mirror at the commit the project pins (src/pins.ts, third_party/*/lock.json) and checked.
#
#   MIRRORS=/work/.mirror bash bench/carry/make-carry.sh [pplx] [rails]
#
# MIRRORS holds one bare clone per repository, named owner+name/repo (the library's `fetch` makes them):
# NVIDIA+nvshmem, deepseek-ai+DeepEP, ofiwg+libfabric, linux-rdma+rdma-core, NVIDIA+gdrcopy, with `pplx`
# ppl-ai+pplx-kernels, and with `rails` a-szegel+NVSHMEM (AWS's multi-rail NVSHMEM 3.5.7, for the checks on 2 NICs
# per PE: bench/one-gpu/gpu-run.sh PHASE=rails-build,rails-check). Where a release archive is not reachable, what is carried says so:
# - libfabric and fabtests are `make dist-bzip2` of the pinned v2.3.0 tree, rdma-core a `git archive` of the pinned
#   v60.1 commit. Their sha256 differ from the release archives', so qs/fabric-lock.json is the project's lock with
#   ours in their place (the scripts pass it as NVSHMEM_EFA_FABRIC_LOCK); the commits are the pinned ones.
# - GDRCopy's and pplx-kernels' archives are `git archive | gzip -n` and must match the pinned sha256 (checked).
# Existing files are kept (delete one to remake it), so a rerun costs seconds. Prints each file's size and the total,
# which must stay under the device call's 64 MiB.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
M=${MIRRORS:-/work/.mirror}
C=$REPO/.carry Q=$REPO/.carry/qs
mkdir -p "$Q"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say() { echo "make-carry: $*"; }
die() { echo "make-carry: $*" >&2; exit 1; }
# git_dir OWNER+NAME: the mirror's git directory, or a message naming the fetch to run.
git_dir() {
  [ -d "$M/$1/repo" ] || die "no mirror $M/$1/repo: fetch github:${1/+//} (the library's fetch) or set MIRRORS"
  echo "$M/$1/repo"
}
# has_commit GIT COMMIT: the mirror holds the pinned commit.
has_commit() { git --git-dir="$1" cat-file -e "$2^{commit}" 2>/dev/null || die "$1 lacks the pinned commit $2: fetch it again"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# json FILE EXPR: a value of a lock file (EXPR is JavaScript over `j`).
json() { node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(eval(process.argv[2]))' "$1" "$2"; }
# pin_commit REF: the commit src/pins.ts pins for REF.
pin_commit() { grep -E "ref: '$1', commit: '" "$REPO/src/pins.ts" | sed -E "s/.*commit: '([0-9a-f]{40})'.*/\1/" | head -1; }
# archive GIT COMMIT PREFIX OUT [LEVEL]: a gzip'd git archive with a fixed prefix, byte-stable (gzip -n; the level is
# part of the bytes: GDRCopy's pinned sha256 is gzip's default, pplx-kernels' lock says -9).
archive() {
  [ -s "$4" ] && return 0
  has_commit "$1" "$2"
  git --git-dir="$1" archive --format=tar --prefix="$3/" "$2" | gzip -n "-${5:-9}" >"$4.part" && mv "$4.part" "$4"
}

# node and the standalone bundle (this checkout's code: remade every run).
[ -s "$C/node.xz" ] || { say "node $(node --version)"; xz -T0 -9 -c "$(command -v node)" >"$C/node.xz.part" && mv "$C/node.xz.part" "$C/node.xz"; }
say "bundle of $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD || echo ' (with the working tree)')"
node "$REPO/scripts/bundle.mjs" --standalone "$tmp/bundle" >/dev/null
tar cJf "$C/bundle.tar.xz" -C "$tmp" bundle

# NVSHMEM 3.4.5 and DeepEP 567632d, as the scripts unpack them.
nv=$(pin_commit v3.4.5-0) dp=$(pin_commit 567632d)
{ [ -n "$nv" ] && [ -n "$dp" ]; } || die "src/pins.ts no longer pins v3.4.5-0 and 567632d: update this script with the scripts that carry them"
archive "$(git_dir NVIDIA+nvshmem)" "$nv" nvshmem-v3.4.5 "$C/nvshmem-v3.4.5.tar.gz"
archive "$(git_dir deepseek-ai+DeepEP)" "$dp" deepep-567632d "$C/deepep-567632d.tar.gz"

# efa_io_defs.h at the pinned rdma-core commit, checked against its lock.
L=$REPO/third_party/efa_gda/lock.json
if [ ! -s "$C/efa_io_defs.h" ]; then
  g=$(git_dir linux-rdma+rdma-core) c=$(json "$L" j.commit)
  has_commit "$g" "$c"
  git --git-dir="$g" show "$c:$(json "$L" j.path)" >"$C/efa_io_defs.h"
fi
[ "$(sha "$C/efa_io_defs.h")" = "$(json "$L" j.sha256)" ] || die "efa_io_defs.h: sha256 differs from $L"

# GDRCopy: the pinned archive's bytes.
L=$REPO/third_party/gdrcopy/lock.json
v=$(json "$L" 'j.gdrcopy.pins[0].version')
archive "$(git_dir NVIDIA+gdrcopy)" "$(json "$L" 'j.gdrcopy.pins[0].commit')" "gdrcopy-$v" "$Q/gdrcopy-$v.tar.gz" 6
[ "$(sha "$Q/gdrcopy-$v.tar.gz")" = "$(json "$L" 'j.gdrcopy.pins[0].archive.sha256')" ] || die "gdrcopy-$v.tar.gz: sha256 differs from $L"

# rdma-core v60.1 and libfabric/fabtests v2.3.0 (the locks' defaults).
L=$REPO/third_party/libfabric/lock.json
rv=$(json "$L" 'j.rdmaCore.pins.find(p => p.ref === j.rdmaCore.default).version')
archive "$(git_dir linux-rdma+rdma-core)" "$(json "$L" 'j.rdmaCore.pins.find(p => p.ref === j.rdmaCore.default).commit')" "rdma-core-$rv" "$Q/rdma-core-$rv.tar.gz"
lv=$(json "$L" 'j.libfabric.pins.find(p => p.ref === j.libfabric.default).version')
lc=$(json "$L" 'j.libfabric.pins.find(p => p.ref === j.libfabric.default).commit')
if [ ! -s "$Q/libfabric-$lv.tar.bz2" ] || [ ! -s "$Q/fabtests-$lv.tar.bz2" ]; then
  g=$(git_dir ofiwg+libfabric)
  has_commit "$g" "$lc"
  # fabtests' configure links a test program against a libfabric even for `make dist`: the host's will do.
  ldconfig -p | grep -q 'libfabric\.so ' || die "fabtests' configure needs a libfabric to link against: apt-get install libfabric-dev autoconf automake libtool"
  say "libfabric $lv: make dist-bzip2 (autogen and configure: minutes)"
  mkdir -p "$tmp/lf" && git --git-dir="$g" archive "$lc" | tar x -C "$tmp/lf"
  (cd "$tmp/lf" && ./autogen.sh && ./configure -q && make -s dist-bzip2) >"$tmp/lf.log" 2>&1 || { tail -20 "$tmp/lf.log"; die "libfabric's make dist-bzip2 failed"; }
  (cd "$tmp/lf/fabtests" && ./autogen.sh && ./configure -q --with-libfabric="$tmp/lf" && make -s dist-bzip2) >>"$tmp/lf.log" 2>&1 || { tail -20 "$tmp/lf.log"; die "fabtests' make dist-bzip2 failed"; }
  mv "$tmp/lf/libfabric-$lv.tar.bz2" "$Q/" && mv "$tmp/lf/fabtests/fabtests-$lv.tar.bz2" "$Q/"
fi
# The lock with our archives' sha256 in place of the release archives'.
# shellcheck disable=SC2016 # JavaScript, not shell
node -e '
const fs = require("fs"), crypto = require("crypto");
const [lockPath, q, lv, rv, out] = process.argv.slice(1);
const sum = (f) => crypto.createHash("sha256").update(fs.readFileSync(`${q}/${f}`)).digest("hex");
const j = JSON.parse(fs.readFileSync(lockPath, "utf8"));
const lf = j.libfabric.pins.find((p) => p.ref === j.libfabric.default);
lf.archive.sha256 = sum(`libfabric-${lv}.tar.bz2`);
lf.fabtests.sha256 = sum(`fabtests-${lv}.tar.bz2`);
lf.archive.note = lf.fabtests.note = "make dist-bzip2 of the pinned commit (bench/carry/make-carry.sh), not the release archive";
const rc = j.rdmaCore.pins.find((p) => p.ref === j.rdmaCore.default);
rc.archive.sha256 = sum(`rdma-core-${rv}.tar.gz`);
rc.archive.note = "git archive of the pinned commit (bench/carry/make-carry.sh), not the release archive";
fs.writeFileSync(out, JSON.stringify(j, null, 2) + "\n");
' "$L" "$Q" "$lv" "$rv" "$Q/fabric-lock.json"

# AWS's multi-rail NVSHMEM 3.5.7 (a-szegel/NVSHMEM devel-aws-2025-11-25, "transport/libfabric: Implement multi-rail",
# the tree bench/results/multirail-patch-cpu.md and device-api-layouts.md patched), as bench/efaemu/unkind-gpu.sh and
# bench/one-gpu/gpu-run.sh unpack it: a single-rail NVSHMEM gives GDA one NIC per PE, so the device API's 2-NIC
# checks (device_api_order+rails, neg_device_api's warp_rail and no_proxy_flush) need this build. About 0.8 MB.
AWS357=8765344313b18560048f1f80dced06c4359c87d0
if [[ " $* " == *" rails "* ]]; then
  archive "$(git_dir a-szegel+NVSHMEM)" "$AWS357" nvshmem-aws-357 "$C/nvshmem-aws-357.tar.gz"
fi

# pplx-kernels and pytest's wheels, for bench/pplx/gpu-run.sh.
if [[ " $* " == *" pplx "* ]]; then
  L=$REPO/third_party/pplx-kernels/lock.json
  ref=$(json "$L" 'j.pplxKernels.pins[0].ref') file=$(json "$L" 'j.pplxKernels.pins[0].archive.file')
  archive "$(git_dir ppl-ai+pplx-kernels)" "$(json "$L" 'j.pplxKernels.pins[0].commit')" "pplx-kernels-$ref" "$C/$file"
  [ "$(sha "$C/$file")" = "$(json "$L" 'j.pplxKernels.pins[0].archive.sha256')" ] || die "$file: sha256 differs from $L"
  # The GPU hosts' Python is 3.12; pytest is pure Python.
  [ -n "$(ls "$C/pplx/wheels" 2>/dev/null)" ] || python3 -m pip download -q -d "$C/pplx/wheels" --only-binary=:all: --python-version 3.12 pytest
fi

du -ab "$C" | sort -k2 | awk -v c="$C" '$2 != c { printf "make-carry: %9d %s\n", $1, substr($2, length(c) + 2) }'
total=$(du -sb "$C" | cut -f1)
say "total $((total / 1048576)) MiB (a device call carries at most 64 MiB)"
[ "$total" -lt $((64 * 1048576)) ] || die ".carry is over 64 MiB: carry fewer files per call"
