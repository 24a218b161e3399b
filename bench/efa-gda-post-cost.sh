#!/usr/bin/env bash
# Device-side cost of an EFA GDA post as ratios, measured in one run on a GPU machine:
#   bench/efa-gda-post-cost.sh [EFA_IO_DEFS_DIR]
# Builds bench/efa_gda_post_cost.cu (against the given efa_io_defs.h directory, default our test header) and
# prints the minimal sequence (8 x 64-bit stores + system fence + doorbell + system fence), a single
# efa_gda_put_nbi (on a hot region, through a prepared handle, on a region only in the table) and warp
# batches of 32 WQEs, with their ratios and a per-stage breakdown. No NIC is
# involved: nothing completes, so only the device's own cost is timed. Results: bench/results/efa-gda-post-cost.md.
# GDA_TEMPLATES=DIR builds against another copy of templates/transport_efa_gda (bench/efa-gda-post-cost-pair.sh
# uses it to time two revisions in one run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=$(mktemp -d)
"$nvcc" -O3 -std=c++17 -arch=${CUDA_ARCH:-sm_90} -I "${GDA_TEMPLATES:-$root/templates/transport_efa_gda}" -I "${1:-$root/test/efa_abi}" \
  "$root/bench/efa_gda_post_cost.cu" -o "$out/efa_gda_post_cost"
"$out/efa_gda_post_cost"
