#!/usr/bin/env bash
# The GDA post cost before and after a change, in one GPU run: bench/efa_gda_post_cost.cu (the working tree's, so
# both binaries time the same sequences) built twice, against the templates of a base revision and against the
# working tree's templates, then run alternately (before, after, before, ...), each printing its own ratios to its
# own minimal sequence.
#   bench/efa-gda-post-cost-pair.sh [--base REV] [--out DIR] [--runs N] [--build-only] [EFA_IO_DEFS_DIR]
# --base REV    the "before" templates (default: where HEAD left main, git merge-base HEAD main)
# --out DIR     where the binaries, run.sh and the outputs go (default: a new temporary directory)
# --runs N      runs of each binary (default 3; the goals are judged on the median of 3)
# --build-only  build only (a machine without a GPU: needs nvcc, no device). DIR then holds efa_gda_post_cost.before,
#               efa_gda_post_cost.after (the names bench/one-gpu/gpu-run.sh's postcost phase runs from .carry/bins) and
#               run.sh, which runs them on a GPU machine with nothing else there: DIR/run.sh [N] writes
#               DIR/{before,after}-K.txt and prints the ratio lines.
# The binaries run with no arguments. NVCC and CUDA_ARCH (default sm_90) as for bench/efa-gda-post-cost.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
base='' out='' runs=3 build_only=0 defs=$root/test/efa_abi
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) defs=$1; shift ;;
  esac
done
base=${base:-$(git -C "$root" merge-base HEAD main)}
out=${out:-$(mktemp -d)}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rev=$(git -C "$root" rev-parse --short "$base")
git -C "$root" archive "$rev" templates/transport_efa_gda | tar -x -C "$tmp"
here="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- templates/transport_efa_gda || echo '+changes')"
build() { # name, templates dir, label, nvcc options...
  local name=$1 dir=$2 label=$3; shift 3
  "$nvcc" -O3 -std=c++17 -arch="${CUDA_ARCH:-sm_90}" -I "$dir" -I "$defs" "-DPOST_COST_TEMPLATES=\"$label\"" "$@" \
    "$root/bench/efa_gda_post_cost.cu" -o "$out/efa_gda_post_cost.$name"
}
build before "$tmp/templates/transport_efa_gda" "before: $base ($rev)" &
build after "$root/templates/transport_efa_gda" "after: working tree at $here" &
wait %1 && wait %2
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the post-cost binaries beside this script (before, after) alternately (N rounds, default 3) and prints each run's ratios.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 1 "${1:-3}"); do
  for w in before after; do
    [ -x "$dir/efa_gda_post_cost.$w" ] || continue
    "$dir/efa_gda_post_cost.$w" > "$dir/$w-$i.txt"
    echo "== $w, run $i: $(sed -n 2p "$dir/$w-$i.txt")"
    grep -E '^\| (minimal|single post)' "$dir/$w-$i.txt" | awk -F'|' '{ printf "  %-80.80s %s\n", $2, $6 }'
    grep -E 'post path.s since f38' "$dir/$w-$i.txt" | sed 's/^/  /'
  done
done
RUN
chmod +x "$out/run.sh"
echo "built: $out/efa_gda_post_cost.before (templates of $base, $rev), $out/efa_gda_post_cost.after (working tree, $here)"
[ "$build_only" = 1 ] && exit 0
"$out/run.sh" "$runs"
