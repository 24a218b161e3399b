#!/usr/bin/env bash
# Issue 23 on a lent 4-GPU host (no network, no Node.js of its own): pplx-kernels (third_party/pplx-kernels/lock.json)
# built against NVSHMEM 3.4.5 made by `nvshmem-efa build` (the device API hooks are its default), then its all-to-all tests, unmodified, on 4
# ranks (each on its own GPU) through efaemu, the emulated EFA NIC, with GDA and NVSHMEM's device API over GDA on.
#
#   PHASE=build  node + bundle, NVSHMEM 3.4.5 source, build into $WD (default /tmp/pplx-gpu/wd, kept while
#                the machine stays warm; WD=/tmp/da/wd reuses bench/device-api/gpu-run.sh's build, a rerun is a no-op),
#                selftest --checks fi_info (builds efaemu and lists its NICs, one per GPU), pytest from .carry/pplx/wheels
#                if the python lacks it, pplx-kernels from .carry/pplx-kernels-<ref>.tar.gz (sha256 checked) with its own
#                CMake, offline, against the install (nvshmem-targets.cmake: nvshmem::nvshmem = host .so + device .a)
#   PHASE=test   pplx's pytest, as its README runs it (pytest -svx), in one process in checks.sh's PE environment
#                (--pe-exec: the sysfs-ns namespace with a NIC at each GPU, softgdr, the CUDA interposer, FI_PROVIDER=efa,
#                NVSHMEM_REMOTE_TRANSPORT=libfabric, NVSHMEM_DISABLE_P2P=1, NVLink multicast off) with every GPU visible:
#                the tests start their 4 ranks with torch.multiprocessing and give rank R GPU R (torch.cuda.set_device)
#   PHASE=both   build, then test
# Knobs: TESTS  pytest argument sets separated by ';', run in order while time is left (default: NVSHMEM's alltoall
#               test, then the 6 internode cases without torch.compile, pplx's NVSHMEM path; TESTS=all runs both files
#               whole: intranode cases move tokens over CUDA IPC, not NVSHMEM, and the torch.compile cases add compile time)
#        LIMIT  seconds from the script's start after which no set starts and the running one is stopped (default 540)
#        MODES  efaemu's unkind modes (checks.sh --modes; default none), REORDER (EFAEMU_REORDER), DUMP_AFTER_S (efaemu state
#               dumps of a rank still running after that many seconds, default 120), LOADING (CUDA_MODULE_LOADING, default
#               EAGER as checks.sh: see native/efaemu/README.md), PPLX_CUDA_ARCH (pplx's CMAKE_CUDA_ARCHITECTURES, default
#               90a, pplx's own; see the build step)
# Carry: what bench/device-api/gpu-run.sh carries (.carry/node.xz, bundle.tar.xz, nvshmem-v3.4.5.tar.gz, efa_io_defs.h,
# .carry/qs/), plus .carry/pplx-kernels-<ref>.tar.gz and .carry/pplx/wheels/ (pytest and its dependencies). Logs and
# efaemu statistics under $OUT.
set -uo pipefail
START=$(date +%s)
W=${W:-/tmp/pplx-gpu} OUT=${OUT:-/tmp/pplx-out} PHASE=${PHASE:-both}
REPO=$(pwd)
# shellcheck source=bench/quickstart/gpu-host.sh
source "$(dirname "$0")/../quickstart/gpu-host.sh"
WD=${WD:-$W/wd}
LIMIT=${LIMIT:-540}
left() { echo $((LIMIT - ($(date +%s) - START))); }
read -r PPLX_REF PPLX_FILE PPLX_SHA < <("$PYTHON" -c 'import json, sys
p = json.load(open(sys.argv[1]))["pplxKernels"]["pins"][0]
print(p["ref"], p["archive"]["file"], p["archive"]["sha256"])' "$REPO/third_party/pplx-kernels/lock.json")
SRC=$W/pplx-kernels-$PPLX_REF
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')

# The NVSHMEM install and the libfabric of the build in $WD, from its state.
build_info() {
  "$PYTHON" - "$WD/state.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["steps"]["build-nvshmem"]["result"]
lf = next((a.split("=", 1)[1] for a in r.get("cmakeArgs", []) if a.startswith("-DLIBFABRIC_HOME=")), "")
print(r["prefix"], lf)
EOF
}

if [ "$PHASE" = build ] || [ "$PHASE" = both ]; then
  stamp "machine: $(hostname) $(nproc) cores, $NGPU GPUs"; nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader
  [ "$NGPU" -ge 4 ] || echo "WARNING: $NGPU GPUs: pplx's 4-GPU tests skip themselves below 4"
  device_api_build "$WD"
  read -r NH LF < <(build_info)
  echo "NVSHMEM_HOME=$NH LIBFABRIC_HOME=$LF"

  # efaemu (built by selftest against that libfabric, in $W/st/efaemu-build) and fi_info in the namespace: a NIC per GPU.
  stamp "selftest --checks fi_info (builds efaemu)"
  nvshmem-efa selftest --work-dir "$WD" --checks fi_info --efaemu-modes none --results "$W/st" >"$OUT/fi_info.txt" 2>&1
  echo "selftest fi_info exit $?"; grep -E '^fi_info|passed' "$OUT/fi_info.txt"
  cp "$W/st/fi_info.log" "$OUT/" 2>/dev/null

  "$PYTHON" -c 'import pytest' 2>/dev/null || {
    stamp "pytest from the carried wheels"
    "$PYTHON" -m pip install -q --no-index --find-links "$C/pplx/wheels" pytest 2>&1 | tail -3
  }
  "$PYTHON" -c 'import pytest; print("pytest", pytest.__version__)'

  stamp "pplx-kernels $PPLX_REF against $NH"
  echo "$PPLX_SHA  $C/$PPLX_FILE" | sha256sum -c - || { echo "$C/$PPLX_FILE does not match third_party/pplx-kernels/lock.json"; exit 1; }
  rm -rf "$SRC" && tar xzf "$C/$PPLX_FILE" -C "$W"
  TORCH_CMAKE=$(LD_PRELOAD=$NH/lib/libnvshmem_host.so.3 "$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # As pplx's README and setup.py build it (setup.py runs this CMake), without the wheel. CMAKE_CUDA_ARCHITECTURES: pplx
  # sets 90a only as a cache default after project(), which has already cached nvcc's own default (sm_75 for CUDA 13);
  # its objects would then carry sm_75 code whose device link needs NVSHMEM's device library for sm_75, and the build's
  # is sm_90 only (--cuda-arch: the GPUs here). Seen on the build machine: nvlink "Undefined reference to
  # nvshmemi_transfer_put_signal ... (target: sm_75)".
  # nvtx3_dir: torch's installed cmake/public/cuda.cmake looks for NVTX3 under the consumer's own
  # third_party/NVTX (pplx has none) and otherwise links CUDA::nvToolsExt, a library CUDA 12.9+ no longer has; the
  # CUDA toolkit's header-only nvtx3 (which pplx's kernels include too) answers that find_path.
  # CMAKE_POLICY_VERSION_MINIMUM: CMake 4 (the host has 4.4) refuses cmake_minimum_required below 3.5 in any
  # config file it reads; unknown to CMake 3 and ignored there.
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a+PTX}
  nvtx=()
  for d in ${CUDA_HOME:+"$CUDA_HOME"} /usr/local/cuda "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"; do
    [ -d "$d/include/nvtx3" ] && { nvtx=(-Dnvtx3_dir="$d/include"); break; }
  done
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  p0=$(date +%s)
  { cmake -S "$SRC/csrc" -B "$SRC/build-cmake" "${gen[@]}" -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$NH" \
      -DTORCH_CUDA_ARCH_LIST="$TORCH_CUDA_ARCH_LIST" -DCMAKE_PROJECT_INCLUDE="$REPO/bench/pplx/nvshmem-targets.cmake" \
      -DCMAKE_CUDA_ARCHITECTURES="${PPLX_CUDA_ARCH:-90a}" -DPython_EXECUTABLE="$PYTHON" "${nvtx[@]}" \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 &&
    cmake --build "$SRC/build-cmake" -j "$(nproc)" -v; } >"$OUT/pplx-build.log" 2>&1
  rc=$?; echo "pplx build exit $rc in $(($(date +%s) - p0)) s" | tee -a "$OUT/pplx-build.log"
  grep -E 'nvshmem::nvshmem =|CCCL include|Caffe2: CUDA|Added CUDA NVCC flags|NVTX|nvtx3|Found Torch|Found NVSHMEM|CMake Warning' "$OUT/pplx-build.log" | head -12
  grep -m1 -o -- '-dlink.*' "$OUT/pplx-build.log" | cut -c1-300
  [ "$rc" = 0 ] || { grep -E -m8 'error|Error' "$OUT/pplx-build.log"; tail -30 "$OUT/pplx-build.log"; exit 1; }
  lib=$SRC/src/pplx_kernels/libpplx_kernels.so
  readelf -d "$lib" | grep -E 'NEEDED|RUNPATH|RPATH' | grep -iE 'nvshmem|RUNPATH|RPATH'
  # Loads with the build's host library (preloaded, as the test run does) and registers its ops.
  LD_PRELOAD=$NH/lib/libnvshmem_host.so.3 PYTHONPATH=$SRC/src "$PYTHON" -c 'import torch, pplx_kernels
print("pplx_kernels ops:", hasattr(torch.ops.pplx_kernels, "nvshmem_init"), hasattr(torch.ops.pplx_kernels, "all_to_all_internode_create"))' 2>&1 | tail -3
  stamp "build done"
fi

if [ "$PHASE" = test ] || [ "$PHASE" = both ]; then
  cd "$W" || exit 1
  eval "$(nvshmem-efa env --work-dir "$WD")"
  read -r NH LF < <(build_info)
  EB=$W/st/efaemu-build CHECKS=$W/bundle/native/efaemu/gpu/checks.sh R=$OUT/pplx
  for f in "$EB/prov/libefa-fi.so" "$SRC/src/pplx_kernels/libpplx_kernels.so" "$CHECKS" "$NH/lib/libnvshmem_host.so.3"; do
    [ -e "$f" ] || { echo "$f is missing: run PHASE=build first (on this warm machine)"; exit 1; }
  done
  mkdir -p "$R"
  MODE_WORDS=$(bash "$CHECKS" --modes-env "${MODES:-none}") || exit 2
  GPUS=$(seq -s, 0 $((NGPU - 1)))
  env | grep -E '^(NVSHMEM_|FI_|EFAEMU_|LD_LIBRARY_PATH|PYTHONPATH)' | sort >"$R/env.txt"
  DEFAULT_TESTS="tests/test_nvshmem.py::test_all_to_all;tests/test_all_to_all.py -k False-True"
  [ "${TESTS:-}" = all ] && TESTS="tests/test_nvshmem.py;tests/test_all_to_all.py"
  IFS=';' read -r -a SETS <<<"${TESTS:-$DEFAULT_TESTS}"
  stamp "pplx tests on $NGPU GPUs (CUDA_VISIBLE_DEVICES=$GPUS), efaemu modes ${MODES:-none}${MODE_WORDS:+ ($MODE_WORDS)}, ${#SETS[@]} set(s), LIMIT $LIMIT s"
  i=0
  for set in "${SETS[@]}"; do
    i=$((i + 1)) bound=$(($(left) - 20))
    if [ "$bound" -lt 60 ]; then echo "RESULT pplx set $i ($set): not started, ${bound}s left before LIMIT"; continue; fi
    st=$R/stats-$i; rm -rf "$st"; mkdir -p "$st"
    stamp "set $i: pytest -svx $set (bound ${bound}s)"
    s0=$(date +%s)
    # One process, as pplx's README runs the tests; checks.sh gives it PE 0's environment, the inner env then shows it
    # every GPU (each rank picks its own) and adds the device API's switch, its report and efaemu's statistics.
    # shellcheck disable=SC2086 # $set and the mode words are words
    (cd "$SRC" && RESULTS=$R EFAEMU_BUILD=$EB LIBFABRIC_HOME=$LF NVSHMEM_HOME=$NH PMI_RANK=0 \
      PRELOAD_UNDER_TEST="$EB/interpose/libefaemu-cuda-interpose.so:$NH/lib/libnvshmem_host.so.3" \
      CUDA_MODULE_LOADING_UNDER_TEST=${LOADING:-EAGER} \
      timeout -k 20 "$bound" bash "$CHECKS" --pe-exec env -u MASTER_ADDR -u MASTER_PORT -u WORLD_SIZE -u RANK -u LOCAL_RANK \
      CUDA_VISIBLE_DEVICES="$GPUS" CUDA_DEVICE_ORDER=PCI_BUS_ID EFAEMU_STATS="$st" \
      NVSHMEM_EFA_GDA_ENABLE=1 NVSHMEM_EFA_GDA_DEVICE_API=1 NVSHMEM_EFA_GDA_DEVICE_API_REPORT=1 \
      EFAEMU_DUMP_AFTER_S="${DUMP_AFTER_S:-120}" ${REORDER:+EFAEMU_REORDER=$REORDER} $MODE_WORDS \
      PYTHONPATH="$SRC/src${PYTHONPATH:+:$PYTHONPATH}" \
      "$PYTHON" -m pytest -svx --tb=short -p no:cacheprovider $set) >"$R/set$i.log" 2>&1
    rc=$?
    took=$(($(date +%s) - s0)) log=$R/set$i.log
    summary=$(grep -E '^=+ .*(passed|failed|error|skipped|deselected|no tests ran).* =+$' "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//')
    on=$(grep -c 'at finalize: .*NVSHMEM device API over GDA on' "$log")
    off=$(grep -h -o 'at finalize: .*NVSHMEM device API over GDA off[^;]*' "$log" | head -1)
    proxy=$(grep -h -o 'NVSHMEM device API proxy operations [0-9]*' "$log" | awk '{s += $NF} END {print s + 0}')
    stats=$("$PYTHON" - "$st" <<'EOF'
import glob, json, re, sys
docs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/efaemu-*.json") if re.search(r"/efaemu-\d+\.json$", f)]
def get(d, path):
    for k in path.split("."):
        d = d.get(k, 0) if isinstance(d, dict) else 0
    return d if isinstance(d, int) else 0
tot = lambda p: sum(get(d, p) for d in docs)
gda_procs = sum(1 for d in docs if get(d, "paths.gda.write.bytes") + get(d, "paths.gda.read.bytes") > 0)
nics = sorted({n for d in docs for n, v in d.get("per_nic", {}).items() if get(v, "gda.write.bytes") > 0})
print(f"{len(docs)} processes with efaemu statistics, {gda_procs} of them moved bytes over GDA (NICs {','.join(nics) or 'none'}); "
      f"GDA write {tot('paths.gda.write.bytes')} B in {tot('paths.gda.write.ops')} ops, GDA read {tot('paths.gda.read.bytes')} B; "
      f"RDM write {tot('paths.rdm.write.bytes')} B (GPU-sourced {tot('paths.rdm.write.gpu_bytes')} B), RDM read {tot('paths.rdm.read.bytes')} B, "
      f"RDM sends {tot('paths.rdm.send.ops')}; GDA CQEs out of order {tot('faults.gda_cqe_out_of_order')}")
EOF
)
    echo "RESULT pplx set $i ($set): rc $rc in ${took}s; pytest: ${summary:-no summary line}; device API over GDA on in $on finalize report(s)${off:+, $off}; device API proxy operations $proxy; $stats"
    grep -E '^E |FAILED|PASSED|SKIPPED|Error|error:|Traceback|nvshmem-efa: EFA GDA|illegal|Timeout|timed out' "$log" | grep -v '^\[rank' | head -16
    [ "$rc" = 0 ] || { echo "--- tail of set$i.log"; grep -v '^\[rank' "$log" | tail -15; }
  done
  # Logs and statistics only (no binaries).
  tar czf "$OUT/pplx-results.tgz" -C "$OUT" pplx 2>/dev/null
  stamp "done"
fi
