#!/usr/bin/env bash
# Issue 34 on a lent host with one GPU (no network, no Node.js of its own): the README's quick start (cold build with
# DeepEP), then selftest with every PE on the one GPU, through efaemu, and the experiments on how the GPU shares itself
# between processes whose kernels spin on each other. Everything is carried as bench/quickstart/gpu-host.sh says.
#
#   PHASE=build   bench/quickstart/quickstart-gpu.sh PHASE=build (doctor, cold build into /tmp/qs/wd, a rerun)
#   PHASE=quick   selftest --quick (modes all)
#   PHASE=start   the full selftest (modes all) started in its own session, so it outlives this call (the machine stays
#                 warm while the next call starts within its idle time); logs in /tmp/og; waits up to WAIT_S
#   PHASE=wait    waits for that selftest up to WAIT_S, then copies what it has
#   PHASE=proof   the softefa proof (.carry/bins/efa_gda_proof, built here: cmake -S native/softefa): --quick,
#                 --signals new --quick, --concurrent-quiet owned --quick (the GDA race tests a post change must pass)
#   PHASE=postcost the GDA post cost of each carried variant (.carry/bins/efa_gda_post_cost.*: before, any variants of
#                 bench/efa-gda-post-cost-pair.sh --variant, after; in the order of .carry/bins/post_cost_order.txt when
#                 carried), 3 rounds, each running every variant once, so the ratios of all come from one machine and
#                 one call; then the median of the 3 runs of each ratio per variant (bench/post-cost-medians.sh) (issue 38)
#   PHASE=patchtime bench/patch-time/patch-time.mjs --bundle: the carried bundle's `patch --dry-run` of the carried
#                 NVSHMEM 3.4.5 against `node -e 0`, 5 paired rounds, on an idle 16-core host (issue 38 item 3)
#   PHASE=probe   bench/one-gpu/mpg_probe.cu: two processes on GPU 0 ping-pong through efaemu's path (mapped host
#                 memory, a peer thread's cudaMemcpyAsync), by grid size and launch kind; each pair bounded, and after a
#                 pair that does not end, every process left is described (state, wait channel, kernel stack)
#   PHASE=rails-build  (issue 35; after build) AWS's multi-rail NVSHMEM 3.5.7 (.carry/nvshmem-aws-357.tar.gz: make-carry.sh
#                 rails) into /tmp/qs/wd-rails (RAILS_DEEPEP=1: with DeepEP, for deepep_rails; the device API checks need
#                 none), libfabric and GDRCopy from the build's install, started in its
#                 own session; waits up to the call's time; call it again to keep waiting (logs: $OUT/rails-build.txt)
#   PHASE=rails-check  selftest of /tmp/qs/wd-rails, CHECKS (default device_api,neg_device_api) with DEVICE_API_PROGRAMS
#                 (default device_api_order,device_api_order+rails): device_api_order on 2 NICs per PE and the controls
#                 warp_rail and no_proxy_flush; own session, waits, call again to keep waiting ($OUT/rails-check.txt)
#   PHASE=api     selftest --checks CHECKS (default device_api) of /tmp/qs/wd (after build) with DEVICE_API_PROGRAMS
#                 (default device_api_order) and SELFTEST_ARGS (e.g. --efaemu-modes each: which mode a failure needs);
#                 own session, waits, call again to keep waiting ($OUT/api.txt)
#   PHASE=shrink  selftest --checks deepep_shrink of /tmp/qs/wd (6 PEs on the GPU; rank 1 refusing GDA, the shim masking
#                 a failed peer); own session, waits, call again to keep waiting ($OUT/shrink.txt)
# PHASE may list several (build,quick,start). CHECKS: selftest --checks instead of the full list (start). CALL_S: the
# call's limit (default 590 s): the quick selftest and the probe stop in time for the logs to come back.
# What comes back: $OUT/{build,quick,full,probe}.txt and $OUT/og.tgz (every log, no programs).
set -uo pipefail
OUT=${OUT:-/tmp/og-out}
HERE=$(cd "$(dirname "$0")" && pwd) REPO=$(cd "$(dirname "$0")/../.." && pwd)
W=/tmp/qs OG=/tmp/og
mkdir -p "$OG" "$OUT"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0))s] $*"; }
phase() { [[ ",${PHASE:-build}," == *",$1,"* ]]; }
# collect: the selftest's logs and the probe's results, no binaries, into $OUT (each call gets what is there now).
# Text files only, each cut to its last LOG_TAIL_B bytes (60000): run 3's whole tree did not come back (too large).
collect() {
  cp "$OG"/{build,quick,full,probe,proof,postcost,postcost-medians,patchtime,rails-build,rails-check,api,shrink}.txt "$OG"/ninja*.txt "$OUT/" 2>/dev/null
  local tmp; tmp=$(mktemp -d)
  (cd / && find tmp/og tmp/qs/wd/selftest tmp/qs/wd-rails/selftest -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' -o -name '*.md' \) \
      -not -path '*/efaemu-build/*' -not -path '*/patterns/*' -not -path '*/nvshmem-tests/*' 2>/dev/null) |
    while read -r f; do mkdir -p "$tmp/$(dirname "$f")"; tail -c "${LOG_TAIL_B:-60000}" "/$f" >"$tmp/$f"; done
  tar czf "$OUT/og.tgz" -C "$tmp" . 2>/dev/null
  rm -rf "$tmp"
  ls -la "$OUT" | tail -n +2
}
run_selftest() {  # run_selftest NAME ARGS...: the tool's selftest of /tmp/qs/wd, output in $OG/NAME.txt
  local name=$1; shift
  (
    cd "$W" || exit 1
    eval "$("$W/node" "$W/bundle/nvshmem-efa.mjs" env --work-dir "$W/wd")"
    s0=$(date +%s)
    # LIMIT: seconds before SIGTERM (the call's own limit would take the logs with it).
    ${LIMIT:+timeout -s TERM "$LIMIT"} "$W/node" "$W/bundle/nvshmem-efa.mjs" selftest --work-dir "$W/wd" "$@" >"$OG/$name.txt" 2>&1
    echo "selftest exit $? in $(($(date +%s) - s0)) s" >>"$OG/$name.txt"
  )
}

# in_session NAME CMD: CMD (a bash command line) in a session of its own, output in $OG/NAME.txt, unless a call before
# started it; then waits until it is done or the call's time (CALL_S, less KEEP_S for the logs) is nearly out. Prints
# the tail; NAME.done holds the exit status. Every wait is bounded: a rerun of the phase waits again.
in_session() {
  local name=$1 cmd=$2
  if [ ! -e "$OG/$name.started" ]; then
    touch "$OG/$name.started"
    stamp "$name: started in its own session"
    setsid bash -c "( $cmd ) >\"$OG/$name.txt\" 2>&1; echo \$? >\"$OG/$name.done\"" </dev/null >/dev/null 2>&1 &
  else
    stamp "$name: started by an earlier call; waiting"
  fi
  until [ -e "$OG/$name.done" ] || [ $(($(date +%s) - t0)) -ge $((${CALL_S:-590} - ${KEEP_S:-30})) ]; do sleep 5; done
  stamp "$name: $([ -e "$OG/$name.done" ] && echo "done, exit $(cat "$OG/$name.done")" || echo 'still running (call this phase again)')"
  tail -25 "$OG/$name.txt" 2>/dev/null | cut -c1-400
  cp "$OG/$name.txt" "$OUT/" 2>/dev/null
}
# tool_env: the start of the build's and selftest's command line: gpu-host.sh's environment (the carried sources through
# the mirror variables, NVLink multicast off, CI, PYTHON), then the node and bundle the build phase unpacked into $W.
tool_env() { echo "cd $REPO && W=$W OUT=$OG && source bench/quickstart/gpu-host.sh && cd $W"; }

# The build comes first: rails-build takes the fabric it installed, shrink its DeepEP.
if phase build; then
  OUT=$OG/qs PHASE=build bash "$REPO/bench/quickstart/quickstart-gpu.sh" 2>&1 | tee "$OG/build.txt" | tail -25
  du -sh "$W/wd"/{install,build,sources} 2>/dev/null | tee -a "$OG/build.txt"
  # Where the cold build's time went (issue 38 item 4): every ninja log of the build, named by its directory.
  find "$W/wd" -name .ninja_log 2>/dev/null | while read -r f; do
    cp "$f" "$OG/ninja$(dirname "${f#"$W/wd"}" | tr / _).txt"
  done
fi

# unpack_tool: the carried node and this call's bundle (fresh: a warm machine may hold an older one) into $W, and cd
# there; for the phases that run without the build phase (which unpacks them itself).
unpack_tool() {
  mkdir -p "$W" && cd "$W" || exit 1
  [ -x node ] || { xz -dc "$REPO/.carry/node.xz" >node && chmod +x node; }
  rm -rf bundle && tar xJf "$REPO/.carry/bundle.tar.xz"
}

if phase rails-build; then
  if [ ! -s "$REPO/.carry/nvshmem-aws-357.tar.gz" ]; then
    stamp "rails-build: .carry/nvshmem-aws-357.tar.gz is missing (MIRRORS=/work/.mirror bash bench/carry/make-carry.sh rails)"
  else
    unpack_tool && cd "$REPO" || exit 1
    # The build phase's fabric when it ran in this machine's life, else the tool builds its own from the carried sources.
    fabric=()
    if [ -e "$W/wd/install/libfabric/lib/libfabric.so" ] || ls "$W"/wd/install/libfabric/lib*/libfabric.so >/dev/null 2>&1; then
      fabric=(--libfabric-home "$W/wd/install/libfabric")
      [ -d "$W/wd/install/gdrcopy" ] && fabric+=(--gdrcopy-home "$W/wd/install/gdrcopy")
    fi
    mkdir -p "$W/src"
    [ -d "$W/src/nvshmem-aws-357" ] || tar xzf "$REPO/.carry/nvshmem-aws-357.tar.gz" -C "$W/src"
    # DeepEP built in place: a copy of its own for this build, only with RAILS_DEEPEP=1.
    deepep=()
    if [ "${RAILS_DEEPEP:-0}" = 1 ]; then
      [ -d "$W/src/deepep-357" ] || { tar xzf "$REPO/.carry/deepep-567632d.tar.gz" -C "$W/src" && cp -r "$W/src/deepep-567632d" "$W/src/deepep-357"; }
      deepep=(--deepep-src "$W/src/deepep-357")
    fi
    in_session rails-build "$(tool_env) && ./node bundle/nvshmem-efa.mjs build --nvshmem-src $W/src/nvshmem-aws-357 ${deepep[*]} \
      ${fabric[*]} --efa-io-defs $REPO/.carry/efa_io_defs.h --work-dir $W/wd-rails; \
      rc=\$?; grep -E 'layout|EFA GDA|NVSHMEM device API' $W/wd-rails/report.md | cut -c1-300; exit \$rc"
  fi
fi

if phase rails-check; then
  if [ ! -e "$OG/rails-build.done" ] || [ "$(cat "$OG/rails-build.done")" != 0 ]; then
    stamp "rails-check: the multi-rail build is not done (PHASE=rails-build first)"
  else
    in_session rails-check "$(tool_env) && DEVICE_API_PROGRAMS=${DEVICE_API_PROGRAMS:-device_api_order,device_api_order+rails} \
      ./node bundle/nvshmem-efa.mjs selftest --work-dir $W/wd-rails --checks ${CHECKS:-device_api,neg_device_api} ${SELFTEST_ARGS:-}"
    grep -E '^(RESULT|device_api:)|device_api_order|passed, ' "$OG/rails-check.txt" 2>/dev/null | cut -c1-600 | tail -20
  fi
fi

if phase api; then
  if [ ! -e "$W/wd/state.json" ]; then
    stamp "api: no build in $W/wd (PHASE=build first)"
  else
    in_session api "$(tool_env) && DEVICE_API_PROGRAMS=${DEVICE_API_PROGRAMS:-device_api_order} \
      ./node bundle/nvshmem-efa.mjs selftest --work-dir $W/wd --checks ${CHECKS:-device_api} ${SELFTEST_ARGS:-}"
    grep -E '^device_api:|passed, ' "$OG/api.txt" 2>/dev/null | cut -c1-600 | tail -30
  fi
fi

if phase shrink; then
  if [ ! -e "$W/wd/state.json" ]; then
    stamp "shrink: no build in $W/wd (PHASE=build first)"
  else
    in_session shrink "$(tool_env) && ./node bundle/nvshmem-efa.mjs selftest --work-dir $W/wd --checks deepep_shrink"
  fi
fi

if phase proof; then
  stamp "softefa proof"
  B=$REPO/.carry/bins
  for args in "--quick" "--signals new --quick" "--concurrent-quiet owned --quick"; do
    echo "== efa_gda_proof $args"
    # shellcheck disable=SC2086 # args is words
    CUDA_MODULE_LOADING=EAGER timeout -k 5 70 "$B/efa_gda_proof" $args 2>&1 | tail -c 20000
    echo "exit ${PIPESTATUS[0]}"
  done >"$OG/proof.txt"
  grep -E '^(==|ok |FAIL|RESULT|exit)' "$OG/proof.txt" | cut -c1-300
  cp "$OG/proof.txt" "$OUT/"
fi

if phase postcost; then
  stamp "GDA post cost, every carried variant, 3 runs each"
  B=$REPO/.carry/bins
  # Every carried variant (efa_gda_post_cost.NAME), in the order of post_cost_order.txt where it was carried with them
  # (bench/efa-gda-post-cost-pair.sh writes it: before, each --variant, after), else before, the others by name, after;
  # round by round, so each round runs every variant once.
  names=()
  if [ -f "$B/post_cost_order.txt" ]; then
    while read -r n; do [ -x "$B/efa_gda_post_cost.$n" ] && names+=("$n"); done <"$B/post_cost_order.txt"
  fi
  for f in "$B"/efa_gda_post_cost.before "$B"/efa_gda_post_cost.* "$B"/efa_gda_post_cost.after; do
    n=${f##*/efa_gda_post_cost.}
    [ -x "$f" ] && [[ " ${names[*]} " != *" $n "* ]] && [ "$n" != after ] && names+=("$n")
  done
  [ -x "$B/efa_gda_post_cost.after" ] && [[ " ${names[*]} " != *" after "* ]] && names+=(after)
  echo "variants: ${names[*]:-none carried}"
  for i in 1 2 3; do for n in "${names[@]}"; do
    echo "== $n run $i"; timeout -k 5 60 "$B/efa_gda_post_cost.$n" 2>&1; echo "exit $?"
  done; done >"$OG/postcost.txt"
  grep -E '^(==|templates:|\| (minimal|single post)|exit)' "$OG/postcost.txt" | cut -c1-200
  # The medians of the 3 runs per variant (each ratio is to the minimal sequence of its own run).
  printf '%s\n' "${names[@]}" >"$OG/postcost-order.txt"
  bash "$HERE/../post-cost-medians.sh" "$OG/postcost.txt" "$OG/postcost-order.txt" | tee "$OG/postcost-medians.txt"
  cp "$OG/postcost.txt" "$OG/postcost-medians.txt" "$OUT/"
fi

if phase patchtime; then
  stamp "patch --dry-run against node -e 0"
  unpack_tool
  [ -d src/nvshmem-v3.4.5 ] || { mkdir -p src && tar xzf "$REPO/.carry/nvshmem-v3.4.5.tar.gz" -C src; }
  {
    echo "bundle: $("$W/node" "$W/bundle/nvshmem-efa.mjs" --version | head -1); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$W/node" "$REPO/bench/patch-time/patch-time.mjs" --nvshmem-src "$W/src/nvshmem-v3.4.5" --runs 5 --bundle "$W/bundle"
  } >"$OG/patchtime.txt" 2>&1
  tail -8 "$OG/patchtime.txt"
  cp "$OG/patchtime.txt" "$OUT/"
  cd "$REPO" || exit 1
fi


if phase quick; then
  stamp "selftest --quick"
  LIMIT=$((${CALL_S:-590} - ($(date +%s) - t0) - ${KEEP_S:-20})) run_selftest quick --quick
  tail -25 "$OG/quick.txt" | cut -c1-400
  collect >/dev/null
fi

if phase start; then
  stamp "full selftest, in its own session"
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c "$(declare -f run_selftest); W=$W OG=$OG; run_selftest full ${CHECKS:+--checks $CHECKS}; touch $OG/full.done" </dev/null >/dev/null 2>&1 &
fi

if phase start || phase wait; then
  until [ -e "$OG/full.done" ] || [ $(($(date +%s) - t0)) -ge "${WAIT_S:-540}" ]; do sleep 5; done
  stamp "full selftest: $([ -e "$OG/full.done" ] && echo 'done' || echo 'still running')"
  grep -E '^(running|[a-z_0-9]+ \(efaemu modes)' "$OG/full.txt" 2>/dev/null | tail -30
  tail -32 "$OG/full.txt" 2>/dev/null | cut -c1-400
  collect >/dev/null
fi

if phase probe; then
  cd "$OG" || exit 1
  nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  "$nvcc" -O2 -std=c++17 -arch=sm_90 "$HERE/mpg_probe.cu" -o mpg_probe -L"${CUDA_HOME:-/usr/local/cuda}/lib64/stubs" -lcuda >probe-build.txt 2>&1 || { tail probe-build.txt; exit 1; }
  {
    nvidia-smi --query-gpu=name,driver_version,compute_mode,clocks.max.sm --format=csv,noheader
    nvidia-smi -q | grep -iE 'preempt|timeslice|compute mode' || echo "nvidia-smi -q names no preemption setting"
    echo "MPS daemon: $(echo get_server_list | nvidia-cuda-mps-control 2>&1 | head -1)"
  } >probe.txt 2>&1
  # pair ARGS...: both roles, bounded: 25 s, then KILL; processes left after 10 s more are described and the series stops.
  pair() {
    local n=/mpgp-$$-$RANDOM r pids=()
    for r in 0 1; do timeout -k 5 25 ./mpg_probe "$r" "$n" "$@" >"pair.$r" 2>&1 & pids+=($!); done
    wait "${pids[@]}" 2>/dev/null
    echo "== $*"; cat pair.0 pair.1
    sleep 2
    local left; left=$(pgrep -x mpg_probe)
    if [ -n "$left" ]; then
      sleep 10; left=$(pgrep -x mpg_probe)
      if [ -n "$left" ]; then
        echo "LEFT after SIGKILL: $left"
        for p in $left; do for t in /proc/"$p"/task/*; do
          echo "pid $p tid ${t##*/} $(cat "$t/comm") state $(awk '/^State:/ {print $2}' "$t/status") wchan $(cat "$t/wchan" 2>/dev/null)"
          sed 's/^/    /' "$t/stack" 2>/dev/null | head -8
        done; done
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
        return 1
      fi
    fi
  }
  stamp "probe"
  # From the likeliest to end to the least: a pair whose processes outlive SIGKILL stops the series.
  for spec in "200 1 5 coop" "200 32 5 coop 120" "200 66 5 coop 120" "200 132 5 plain 120" "200 132 5 coop 120" "200 full 5 plain" "200 full 5 coop"; do
    [ $(($(date +%s) - t0)) -lt $((${CALL_S:-590} - 50)) ] || { echo "== $spec: not run (the call's time is nearly out)" >>probe.txt; continue; }
    # shellcheck disable=SC2086 # spec is words
    pair $spec >>probe.txt 2>&1 || break
  done
  grep -E '^==|RESULT|LEFT|state D|stalled' probe.txt | cut -c1-300
  cp probe.txt "$OUT/"
  collect >/dev/null
fi
collect >/dev/null
stamp "done"
