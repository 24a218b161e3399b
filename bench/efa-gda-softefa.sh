#!/usr/bin/env bash
# Throughput of the EFA GDA device post path through the software EFA, on a GPU machine:
#   bench/efa-gda-softefa.sh [EFA_IO_DEFS_DIR]
# Builds native/softefa (against the given efa_io_defs.h directory, default our test header) and prints a
# table of posted WQEs/s and GB/s per warp count and size, measured in one run. The ops/s are bounded by the
# emulator (one host thread serving each WQE with cudaMemcpyAsync), so compare them only with each other;
# the device-side cost of a post is bench/efa-gda-post-cost.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(mktemp -d)
cmake -S "$root/native/softefa" -B "$build" ${1:+-DEFA_IO_DEFS_DIR=$1} >/dev/null
cmake --build "$build" -j >/dev/null
CUDA_MODULE_LOADING=EAGER "$build/efa_gda_proof" --bench
