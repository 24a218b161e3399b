#!/usr/bin/env bash
# Container entrypoint: build NVSHMEM with the EFA GDA transport into the cache volume (a no-op when nothing
# changed), export the run-time environment of that build, then exec the command: the signals the container
# gets (passed on by tini, process 1 in the image) go straight to it, and its exit status is the container's.
#
#   NVSHMEM_EFA_WORK_DIR    work dir of the build, on the cache volume (default /cache/nvshmem-efa)
#   NVSHMEM_EFA_BUILD_ARGS  arguments of `nvshmem-efa build` (default: --offline with the sources baked into the
#                           image: NVSHMEM, efa_io_defs.h, and DeepEP when the image has it)
#   NVSHMEM_EFA_SKIP_BUILD  1: do not build, only export the environment of the last build
#   NVSHMEM_EFA_LOCK_WAIT   seconds to wait while another container builds into the same volume (default 3600)
#   NVSHMEM_EFA_BIN         the nvshmem-efa command (default nvshmem-efa)
# Variables already set in the container's environment keep their values; LD_LIBRARY_PATH is prepended to.
#
# A command of nvshmem-efa itself (`IMAGE --help`, `IMAGE doctor`, `IMAGE env --json`, ...) is run at once, without
# the build: asking the tool something must not first spend a build. Its work dir is NVSHMEM_EFA_WORK_DIR's, which
# the CLI reads itself. No command at all builds, then starts bash, as before.
set -uo pipefail

bin=${NVSHMEM_EFA_BIN:-nvshmem-efa}
work=${NVSHMEM_EFA_WORK_DIR:-/cache/nvshmem-efa}
wait_max=${NVSHMEM_EFA_LOCK_WAIT:-3600}

# The CLI's commands (nvshmem-efa --help lists them; test/integration/entrypoint-dispatch.test.ts keeps this list
# equal to it) and its options (--help, --version, -V, ...).
cli_commands=" build patch report env probe doctor bench selftest launch clean help "
if [ "$#" -gt 0 ] && { [[ $1 == -* ]] || [[ $cli_commands == *" $1 "* ]]; }; then
  export NVSHMEM_EFA_WORK_DIR="$work"
  exec "$bin" "$@"
fi
if [ -n "${NVSHMEM_EFA_BUILD_ARGS+set}" ]; then
  read -r -a build_args <<< "$NVSHMEM_EFA_BUILD_ARGS"
else
  # The image's sources (docker/Dockerfile), each verified when the image was built: no network needed.
  src=/opt/nvshmem-efa-src
  build_args=(--offline --nvshmem-src "$src/nvshmem")
  if [ -f "$src/efa_io_defs.h" ]; then build_args+=(--efa-io-defs "$src/efa_io_defs.h"); fi
  if [ -d "$src/DeepEP" ]; then build_args+=(--deepep-src "$src/DeepEP"); fi
  if [ -x /opt/venv/bin/python ]; then export PYTHON="${PYTHON:-/opt/venv/bin/python}"; fi
fi

say() { printf 'nvshmem-efa entrypoint: %s\n' "$*" >&2; }

# While the build runs, signals reach this shell (from tini, process 1 in the image, or from whoever started
# it): pass them on to the build, which stops its commands and exits 130.
child=
pass_on() { if [ -n "$child" ]; then kill -s "$1" "$child" 2>/dev/null; fi; }
trap 'pass_on TERM' TERM
trap 'pass_on INT' INT
trap 'pass_on HUP' HUP

if [ "${NVSHMEM_EFA_SKIP_BUILD:-0}" != 1 ]; then
  started=$SECONDS
  while :; do
    # The build's summary goes to stderr: stdout belongs to the command.
    "$bin" build --work-dir "$work" "${build_args[@]}" >&2 &
    child=$!
    wait "$child"
    rc=$?
    # A trapped signal ends `wait` early: wait again for the build's own status.
    while kill -0 "$child" 2>/dev/null; do
      wait "$child"
      rc=$?
    done
    child=
    # Exit 7: another container is building into the same volume; its result is ours once it is done.
    if [ "$rc" -eq 7 ] && [ $((SECONDS - started)) -lt "$wait_max" ]; then
      say "another run is building in $work; waiting for it"
      sleep 2
      continue
    fi
    break
  done
  if [ "$rc" -ne 0 ]; then
    say "build failed (exit $rc); report: $work/report.md"
    exit "$rc"
  fi
fi

if ! exports=$("$bin" env --work-dir "$work" --keep-set); then
  say "no usable build in $work; report: $work/report.md"
  exit 1
fi
eval "$exports"
trap - TERM INT HUP
if [ "$#" -eq 0 ]; then set -- bash; fi
exec "$@"
