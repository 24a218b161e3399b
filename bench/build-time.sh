#!/usr/bin/env bash
# Build time on one GPU host, in one run (issue 14, section 4):
#   bench/build-time.sh CARRY_DIR OUT_DIR [JOBS]
# CARRY_DIR holds what bench/deepep-gpu-proof.sh carries (node.xz, nvshmem-efa-standalone.tar.gz,
# nvshmem-v3.4.5.tar.gz, deepep-567632d.tar.gz, libfabric-2.3.0.tar.gz, efa_io_defs.h, cmake-3.25.tar.xz), for a
# host without network access or Node.js. Three builds, one after the other, same host, same JOBS (default: all cores):
#   recipe  the common sequence (the EFA recipes' NVSHMEM flags: IBRC, IBGDA, libfabric, GDRCopy when present,
#           tests, examples; MPI/PMIx/SHMEM/UCX/NCCL off because this host has none of them), then DeepEP against it
#   tool    nvshmem-efa build: NVSHMEM (lean) + probe + patched DeepEP, into a new work dir
#   rebuild the same work dir after one template file changed (templates/transport_efa_gda/transport_efa_gda.cpp)
# and prints the seconds of each, tool / recipe (goal <= 0.45) and the template-only rebuild (goal <= 30 s), with
# ccache on or off as found (the tool uses ccache when it is on PATH; the recipe is given the same launcher).
# PHASE (default all) runs one part alone, for a device tool whose calls end after 10 minutes: recipe-nvshmem,
# recipe-deepep (recipe = both), tool, rebuild, in that order on one machine (the work tree
# /tmp/nvshmem-efa-build-time stays between them; recipe-nvshmem starts it afresh). Each part records its
# seconds there, and the ratio is printed once recipe, tool and rebuild are all in. tool may run alone on a fresh
# machine; its seconds then stand without a recipe from the same machine. PHASE=tool-serial (not part of all) is
# the tool's cold build with --no-overlap in a work dir of its own: what compiling DeepEP beside NVSHMEM buys.
set -u
C=$(cd "$1" && pwd) OUT=$2 JOBS=${3:-$(nproc)}
W=/tmp/nvshmem-efa-build-time PHASE=${PHASE:-all}
case $PHASE in all | recipe | recipe-nvshmem | recipe-deepep | tool | rebuild | tool-serial) ;; *) echo "PHASE is all, recipe, recipe-nvshmem, recipe-deepep, tool, rebuild or tool-serial, not $PHASE" >&2; exit 2 ;; esac
case $PHASE in all | recipe | recipe-nvshmem) rm -rf "$W" ;; esac
# The rebuild needs the tool's work dir from this machine; recipe-deepep needs the recipe's NVSHMEM install.
# tool alone is allowed on a fresh machine (its seconds then stand without a recipe from the same machine).
if [ "$PHASE" = rebuild ] && [ ! -d "$W/work" ]; then
  echo "PHASE=rebuild needs the work dir of PHASE=tool on this machine ($W/work is missing)" >&2; exit 2
fi
if [ "$PHASE" = recipe-deepep ] && [ ! -d "$W/recipe-install" ]; then
  echo "PHASE=recipe-deepep needs the NVSHMEM install of PHASE=recipe-nvshmem on this machine ($W/recipe-install is missing)" >&2; exit 2
fi
mkdir -p "$W/times" "$OUT"
cd "$W" || exit 1
if [ ! -f .unpacked ]; then
  xz -dc "$C/node.xz" > node && chmod +x node
  for t in nvshmem-efa-standalone nvshmem-v3.4.5 deepep-567632d libfabric-2.3.0; do tar xzf "$C/$t.tar.gz"; done
  tar xJf "$C/cmake-3.25.tar.xz"
  touch .unpacked
fi
runs() { [ "$PHASE" = all ] || [ "$PHASE" = "$1" ] || { [ "$PHASE" = recipe ] && [ "${1#recipe-}" != "$1" ]; }; }
export PATH=$W:$PATH:$W/cmk/bin LD_LIBRARY_PATH=$W/lfcarry/lib:${LD_LIBRARY_PATH:-}:$W/cmk/lib CI=true
PY=$(command -v python3 || command -v python)
GDR=$(for d in /usr/local/gdrdrv /opt/gdrcopy /usr/local /usr; do [ -f "$d/include/gdrapi.h" ] && echo "$d" && break; done)
CCACHE=$(command -v ccache || true)
launcher=()
gdr_flags=(-DNVSHMEM_USE_GDRCOPY=OFF)
[ -n "$GDR" ] && gdr_flags=(-DNVSHMEM_USE_GDRCOPY=ON -DGDRCOPY_HOME="$GDR")
[ -n "$CCACHE" ] && launcher=(-DCMAKE_C_COMPILER_LAUNCHER="$CCACHE" -DCMAKE_CXX_COMPILER_LAUNCHER="$CCACHE" -DCMAKE_CUDA_COMPILER_LAUNCHER="$CCACHE")
{ nvidia-smi -L; nproc; echo "jobs $JOBS, ccache ${CCACHE:-none}, gdrcopy ${GDR:-none}"; } > "$OUT/env.log" 2>&1
now() { date +%s.%N; }
# awk, not bc: GPU hosts may lack bc.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# The tool's build of this carry's NVSHMEM and DeepEP: tool_build WORK_DIR LOG [more options]; the package
# (templates) is NVSHMEM_EFA_HOME when set, else the bundle's own.
tool_build() {
  local work=$1 log=$2; shift 2
  PYTHON=$PY ./node sa/nvshmem-efa.mjs build --nvshmem-src "$W/v345" --deepep-src "$W/567632d" --work-dir "$work" \
    --libfabric-home "$W/lfcarry" --efa-io-defs "$C/efa_io_defs.h" --cuda-arch 90 --jobs "$JOBS" "$@" > "$log" 2>&1
}

# 1. The recipe, in two parts that can run in separate calls (NVSHMEM with tests and examples alone takes
# about 8 minutes on 16 cores): its seconds are the sum.
if runs recipe-nvshmem; then
rm -rf recipe-src recipe-build recipe-install && cp -r v345 recipe-src
t0=$(now)
cmake -S recipe-src -B recipe-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$W/recipe-install" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DLIBFABRIC_HOME="$W/lfcarry" -DNVSHMEM_LIBFABRIC_SUPPORT=ON -DNVSHMEM_IBRC_SUPPORT=ON \
  -DNVSHMEM_IBGDA_SUPPORT=ON -DNVSHMEM_BUILD_TESTS=ON -DNVSHMEM_BUILD_EXAMPLES=ON -DNVSHMEM_MPI_SUPPORT=OFF \
  -DNVSHMEM_PMIX_SUPPORT=OFF -DNVSHMEM_SHMEM_SUPPORT=OFF -DNVSHMEM_UCX_SUPPORT=OFF -DNVSHMEM_USE_NCCL=OFF \
  -DNVSHMEM_BUILD_PYTHON_LIB=OFF -DNVSHMEM_BUILD_TXZ_PACKAGE=OFF \
  "${gdr_flags[@]}" "${launcher[@]}" > "$OUT/recipe-nvshmem.log" 2>&1 &&
  cmake --build recipe-build --parallel "$JOBS" >> "$OUT/recipe-nvshmem.log" 2>&1 &&
  cmake --install recipe-build >> "$OUT/recipe-nvshmem.log" 2>&1
rc=$? t1=$(now)
echo "recipe, NVSHMEM part exit $rc, $(secs "$t0" "$t1") s" | tee -a "$OUT/summary.log"
echo "$rc $(secs "$t0" "$t1")" > times/recipe-nvshmem
fi
if runs recipe-deepep; then
rm -rf recipe-deepep && cp -r 567632d recipe-deepep
t0=$(now)
# deep_ep.cpp goes through g++, which NVCC_APPEND_FLAGS does not reach: CPATH carries CUDA 13's cccl to both.
( cd recipe-deepep && NVSHMEM_DIR="$W/recipe-install" NVCC_APPEND_FLAGS="-I/usr/local/cuda/include/cccl" \
    CPATH=/usr/local/cuda/include/cccl TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$JOBS $PY setup.py build_ext --inplace > "$OUT/recipe-deepep.log" 2>&1 )
rc=$? t1=$(now)
echo "recipe, DeepEP part exit $rc, $(secs "$t0" "$t1") s" | tee -a "$OUT/summary.log"
echo "$rc $(secs "$t0" "$t1")" > times/recipe-deepep
fi
if [ -f times/recipe-nvshmem ] && [ -f times/recipe-deepep ]; then
  read -r a_rc a < times/recipe-nvshmem; read -r b_rc b < times/recipe-deepep
  echo "$([ "$a_rc" = 0 ] && [ "$b_rc" = 0 ] && echo 0 || echo 1) $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a + b }')" > times/recipe
fi

# 2. The tool, cold: a work dir left by an earlier tool phase on this machine would make it a rebuild.
if runs tool; then
rm -rf "$W/work"
t0=$(now)
tool_build "$W/work" "$OUT/tool.log"
tool_rc=$? t1=$(now)
tool=$(secs "$t0" "$t1")
echo "tool exit $tool_rc, $tool s" | tee -a "$OUT/summary.log"
echo "$tool_rc $tool" > times/tool
# The cold build's report (its step times); the rebuild writes its own over it.
cp "$W/work/report.md" "$OUT/tool-report.md" 2>/dev/null
cp "$W/work/report.json" "$OUT/tool-report.json" 2>/dev/null
# DeepEP's two setup.py runs (beside NVSHMEM's build, then after its install) and the end of NVSHMEM's build.
cp "$W/work/logs/deepep-beside-nvshmem.log" "$OUT/tool-deepep-beside.log" 2>/dev/null
cp "$W/work/logs/build-deepep.log" "$OUT/tool-build-deepep.log" 2>/dev/null
tail -n 40 "$W/work/logs/build-nvshmem.log" > "$OUT/tool-build-nvshmem-tail.log" 2>/dev/null
fi

# 3. Template-only rebuild: the bundle with one template file changed.
if runs rebuild; then
rm -rf sa-changed && cp -r sa sa-changed
echo "// a template-only change" >> sa-changed/templates/transport_efa_gda/transport_efa_gda.cpp
t0=$(now)
NVSHMEM_EFA_HOME=$W/sa-changed tool_build "$W/work" "$OUT/rebuild.log"
rebuild_rc=$? t1=$(now)
rebuild=$(secs "$t0" "$t1")
echo "template-only rebuild exit $rebuild_rc, $rebuild s" | tee -a "$OUT/summary.log"
echo "$rebuild_rc $rebuild" > times/rebuild
cp "$W/work/report.md" "$OUT/" 2>/dev/null
fi

# 4. The tool's cold build with DeepEP after NVSHMEM (--no-overlap), beside the tool's own.
if [ "$PHASE" = tool-serial ]; then
rm -rf "$W/work-serial"
t0=$(now)
tool_build "$W/work-serial" "$OUT/tool-serial.log" --no-overlap
serial_rc=$? t1=$(now)
serial=$(secs "$t0" "$t1")
echo "tool --no-overlap exit $serial_rc, $serial s" | tee -a "$OUT/summary.log"
cp "$W/work-serial/report.md" "$OUT/tool-serial-report.md" 2>/dev/null
if [ -f times/tool ]; then
  read -r tool_rc tool < times/tool
  echo "tool (DeepEP beside NVSHMEM) / tool --no-overlap = $(awk -v t="$tool" -v s="$serial" 'BEGIN { printf "%.3f", t / s }')" | tee -a "$OUT/summary.log"
fi
exit $serial_rc
fi

# The ratio, once every phase has run on this machine (each line: exit status, seconds).
if [ -f times/recipe ] && [ -f times/tool ] && [ -f times/rebuild ]; then
  read -r recipe_rc recipe < times/recipe; read -r tool_rc tool < times/tool; read -r rebuild_rc rebuild < times/rebuild
  echo "recipe exit $recipe_rc, $recipe s; tool exit $tool_rc, $tool s; template-only rebuild exit $rebuild_rc, $rebuild s" | tee -a "$OUT/summary.log"
  echo "tool / recipe = $(awk -v t="$tool" -v r="$recipe" 'BEGIN { printf "%.3f", t / r }') (goal <= 0.45); template-only rebuild $rebuild s (goal <= 30); ccache ${CCACHE:-none}" | tee -a "$OUT/summary.log"
  [ "$recipe_rc" = 0 ] && [ "$tool_rc" = 0 ] && [ "$rebuild_rc" = 0 ]
else
  echo "phases done on this machine: $(ls times | paste -sd' ' -); the ratio comes once recipe, tool and rebuild have all run" | tee -a "$OUT/summary.log"
fi
