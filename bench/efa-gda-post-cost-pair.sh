#!/usr/bin/env bash
# The GDA post cost before and after a change, in one GPU run: bench/efa_gda_post_cost.cu (the working tree's, so
# every binary times the same sequences) built against the templates of a base revision ("before"), of any number of
# intermediate revisions (--variant: one binary per step of a series, so each step's share is measured in the same
# call) and of the working tree ("after"), then run alternately (before, each variant, after; again), each printing
# its own ratios to its own minimal sequence, and the medians of the runs per binary.
#   bench/efa-gda-post-cost-pair.sh [--base REV] [--variant NAME=REV]... [--out DIR] [--runs N] [--build-only] [EFA_IO_DEFS_DIR]
# --base REV          the "before" templates (default: where HEAD left main, git merge-base HEAD main)
# --variant NAME=REV  one more binary, efa_gda_post_cost.NAME, against REV's templates; repeatable; run in the order
#                     given, between before and after. NAME: letters, digits, '-' and '_' (not before or after)
# --out DIR           where the binaries, run.sh and the outputs go (default: a new temporary directory)
# --runs N            runs of each binary (default 3; the goals are judged on the median of 3)
# --build-only        build only (a machine without a GPU: needs nvcc, no device). DIR then holds efa_gda_post_cost.before,
#                     .NAME per variant, .after (the names bench/one-gpu/gpu-run.sh's postcost phase runs from
#                     .carry/bins), post_cost_order.txt (the run order, which gpu-run.sh follows when carried beside them),
#                     post-cost-medians.sh, and run.sh, which runs them on a GPU machine with nothing else there:
#                     DIR/run.sh [N] writes DIR/postcost.txt and prints each run's ratios and the medians.
# The binaries run with no arguments. NVCC and CUDA_ARCH (default sm_90) as for bench/efa-gda-post-cost.sh; JOBS
# (default 2) nvcc processes at a time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
base='' out='' runs=3 build_only=0 defs=$root/test/efa_abi
variants=()
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --variant)
      [[ $2 =~ ^[A-Za-z0-9_-]+=.+$ ]] || { echo "--variant wants NAME=REV, got '$2'" >&2; exit 2; }
      case ${2%%=*} in before|after) echo "--variant $2: before and after are the base's and the working tree's" >&2; exit 2 ;; esac
      for v in "${variants[@]}"; do [ "${v%%=*}" != "${2%%=*}" ] || { echo "--variant ${2%%=*} given twice" >&2; exit 2; }; done
      variants+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) defs=$1; shift ;;
  esac
done
base=${base:-$(git -C "$root" merge-base HEAD main)}
out=${out:-$(mktemp -d)}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each revision's templates, checked before anything is built (a typo fails at once, not after minutes of nvcc).
templates_of() { # name, rev: extracts rev's templates into $tmp/name; prints the short hash
  local short
  short=$(git -C "$root" rev-parse --short --verify "$2^{commit}") || { echo "$1: no revision $2" >&2; exit 2; }
  mkdir -p "$tmp/$1"
  git -C "$root" archive "$short" templates/transport_efa_gda | tar -x -C "$tmp/$1"
  echo "$short"
}
rev=$(templates_of before "$base")
declare -A short
for v in "${variants[@]}"; do short[${v%%=*}]=$(templates_of "${v%%=*}" "${v#*=}"); done
here="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- templates/transport_efa_gda || echo '+changes')"
build() { # name, templates dir, label, nvcc options...
  local name=$1 dir=$2 label=$3; shift 3
  rm -f "$out/efa_gda_post_cost.$name" # a failed build must not leave an older binary to be run
  "$nvcc" -O3 -std=c++17 -arch="${CUDA_ARCH:-sm_90}" -I "$dir" -I "$defs" "-DPOST_COST_TEMPLATES=\"$label\"" "$@" \
    "$root/bench/efa_gda_post_cost.cu" -o "$out/efa_gda_post_cost.$name"
}
order=(before)
jobs=() labels=()
jobs+=("before|$tmp/before/templates/transport_efa_gda|before: $base ($rev)")
for v in "${variants[@]}"; do
  n=${v%%=*}
  order+=("$n")
  jobs+=("$n|$tmp/$n/templates/transport_efa_gda|$n: ${v#*=} (${short[$n]})")
done
order+=(after)
jobs+=("after|$root/templates/transport_efa_gda|after: working tree at $here")
# At most JOBS builds at once; any failure fails the script once every started build ended.
pids=() failed=0
for j in "${jobs[@]}"; do
  IFS='|' read -r n d l <<<"$j"
  build "$n" "$d" "$l" &
  pids+=($!)
  labels+=("$l")
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-2}" ]; do wait -n || failed=1; done
done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
wait || true
for n in "${order[@]}"; do [ -x "$out/efa_gda_post_cost.$n" ] || { echo "build of efa_gda_post_cost.$n failed" >&2; failed=1; }; done
[ "$failed" = 0 ] || exit 1
printf '%s\n' "${order[@]}" >"$out/post_cost_order.txt"
cp "$root/bench/post-cost-medians.sh" "$out/post-cost-medians.sh"
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the post-cost binaries beside this script in the order of post_cost_order.txt, alternately (N rounds, default
# 3), into postcost.txt; prints each run's ratio lines, then the median of the runs per binary (post-cost-medians.sh).
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
: >"$dir/postcost.txt"
for i in $(seq 1 "${1:-3}"); do
  while read -r w; do
    [ -x "$dir/efa_gda_post_cost.$w" ] || continue
    { echo "== $w run $i"; "$dir/efa_gda_post_cost.$w" 2>&1; echo "exit $?"; } | tee -a "$dir/postcost.txt" |
      grep -E '^(==|templates:|\| (minimal|single post)|exit)' | cut -c1-160
  done <"$dir/post_cost_order.txt"
done
bash "$dir/post-cost-medians.sh" "$dir/postcost.txt"
RUN
chmod +x "$out/run.sh"
echo "built in $out (run order: ${order[*]}):"
for l in "${labels[@]}"; do echo "  ${l%%:*}: ${l#*: }"; done
[ "$build_only" = 1 ] && exit 0
"$out/run.sh" "$runs"
