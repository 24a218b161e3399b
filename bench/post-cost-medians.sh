#!/usr/bin/env bash
# The medians of the GDA post-cost runs per binary, from a log in which each run of a binary follows a line
# "== NAME run K" (bench/one-gpu/gpu-run.sh's postcost.txt, the pair script's DIR/postcost.txt):
#   bench/post-cost-medians.sh LOG [ORDER_FILE]
# For each binary (in the order of ORDER_FILE, one name a line, where given; else in the order first seen), the
# median over its runs of each ratio to the minimal sequence of the same run (shared post, prepared handle, owned
# queue, region table only) with the per-run ratios in brackets, and a run that failed (exit other than 0, or no
# ratio line) said as such. Issue 38's goals: shared <= 1.25, handle <= 1.15, owned <= 1.10.
set -euo pipefail
log=${1:?usage: post-cost-medians.sh LOG [ORDER_FILE]}
order=${2:-}
awk -v order_file="$order" -F'|' '
function median(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
  if (n == 0) return "-"
  return n % 2 ? a[(n + 1) / 2] : sprintf("%.2f", (a[n / 2] + a[n / 2 + 1]) / 2)
}
function cell(name, k,   r) { r = ratios[name, k]; return r == "" ? "-" : median(r) " [" r "]" }
BEGIN {
  if (order_file != "") while ((getline line < order_file) > 0) if (line != "" && !(line in seen)) { seen[line] = 1; names[++nn] = line }
  kind[1] = "shared"; kind[2] = "handle"; kind[3] = "owned"; kind[4] = "table"
}
/^== [^ ]+ run [0-9]+/ { split($0, h, " "); cur = h[2]; if (!(cur in seen)) { seen[cur] = 1; names[++nn] = cur }; runs[cur]++; next }
/^exit [0-9]+/ { if ($0 != "exit 0") bad[cur] = bad[cur] " " substr($0, 6); next }
/^\| single post/ {
  k = $2 ~ /prepared handle/ ? 2 : $2 ~ /owned queue/ ? 3 : $2 ~ /region table/ ? 4 : $2 ~ /hot region/ ? 1 : 0
  if (!k || $6 !~ /x minimal/) next
  split($6, r, " "); ratios[cur, k] = ratios[cur, k] (ratios[cur, k] == "" ? "" : " ") r[1]
}
END {
  print "| binary | runs | shared put_nbi (<= 1.25) | prepared handle (<= 1.15) | owned queue (<= 1.10) | region table only |"
  print "|---|---|---|---|---|---|"
  for (i = 1; i <= nn; i++) {
    n = names[i]
    note = bad[n] != "" ? " (exit" bad[n] ")" : ""
    printf "| %s | %d%s | %s | %s | %s | %s |\n", n, runs[n], note, cell(n, 1), cell(n, 2), cell(n, 3), cell(n, 4)
  }
}' "$log"
