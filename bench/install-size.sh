#!/usr/bin/env bash
# What a user's install costs (issue 39 item 3): packs this clone (`npm pack`, which bundles dist/), installs the
# tarball into an empty temporary folder as a user would (`npm install <tgz>`, dependencies from the registry or
# npm's cache: needs the npm registry unless its metadata is cached), and prints the packages npm added, the size
# of node_modules (du: disk usage and apparent size), the five largest packages and npm's install-script warnings.
#   bench/install-size.sh [TARBALL]    (TARBALL: an earlier one to measure instead, e.g. another commit's pack)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -ge 1 ]; then cp "$1" "$tmp/"; else npm pack --silent --pack-destination "$tmp" >/dev/null; fi
tgz=$(ls "$tmp"/*.tgz)
mkdir "$tmp/user" && cd "$tmp/user" && echo '{}' >package.json
npm install --prefer-offline --no-audit --no-fund "$tgz" >"$tmp/npm.log" 2>&1 || { cat "$tmp/npm.log"; exit 1; }
grep -E '^added ' "$tmp/npm.log"
echo "node_modules: $(du -s --block-size=1 node_modules | cut -f1) bytes on disk, $(du -sb node_modules | cut -f1) apparent"
du -sk node_modules/* node_modules/@*/* 2>/dev/null | grep -v '/@[^/]*$' | sort -rn | head -5 | awk '{printf "  %6.1f MiB  %s\n", $1 / 1024, $2}'
echo "install-script warnings: $(grep -c 'install-scripts  ' "$tmp/npm.log" || true)"
grep 'install-scripts  ' "$tmp/npm.log" || true
