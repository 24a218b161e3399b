import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A toolchain of shell scripts for driving the CLI through whole runs without a CUDA toolkit, libfabric or
 * a compiler, fast and on any host: a CUDA home whose nvcc prints a version, a libfabric prefix with a
 * fabric.h, and `cmake` / `python3` scripts that do nothing, or hang (with a child and a grandchild in a
 * session of its own, as ninja's compilers are) when told to. Each hanging process writes its pid to
 * `<pids>/<name>` so a test can check that an interrupt stopped it.
 */
export interface FakeToolchain {
  /** Pass as --cuda-home. */
  cudaHome: string;
  /** Pass as --libfabric-home. */
  libfabricHome: string;
  /** Prepend to PATH (holds cmake). */
  bin: string;
  /** Set as PYTHON. */
  python: string;
  /** Where hanging processes write their pids. */
  pids: string;
  /** Where the fakes write what they saw (setup.log: a line per setup.py run; cmake.log: a line per cmake run but --version). */
  root: string;
  /**
   * Environment for the CLI: PATH, PYTHON, CI. Add FAKE_HANG=configure|build|install|setup|setup-beside to hang
   * there (setup: DeepEP's setup.py after NVSHMEM's install; setup-beside: the one beside NVSHMEM's build).
   */
  env: NodeJS.ProcessEnv;
}

const HANG = `
hang() {
  echo "fake: hanging in $1"
  # A grandchild in a session of its own (ninja starts compilers in their own process groups)...
  setsid sh -c 'echo $$ > "$FAKE_PIDS/grandchild"; exec sleep 300' &
  # ...and a plain child; the shell waits for both, holding the output pipe like a build does.
  sleep 300 &
  echo $! > "$FAKE_PIDS/child"
  echo $$ > "$FAKE_PIDS/tool"
  wait
}
`;

const CMAKE = `#!/bin/sh
${HANG}
case "$1" in
  --version) echo "cmake version 3.25.1"; exit 0 ;;
  --build) mode=build; dir="$2" ;;
  --install) mode=install; dir="$2" ;;
  *) mode=configure ;;
esac
# Every configure, build and install, for a test that asserts none ran (a no-op rerun).
echo "$mode $*" >> "$FAKE_ROOT/cmake.log"
if [ "$mode" = configure ]; then
  src=""; dir=""; prefix=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -S) src="$2"; shift ;;
      -B) dir="$2"; shift ;;
      -DCMAKE_INSTALL_PREFIX=*) prefix="\${1#-DCMAKE_INSTALL_PREFIX=}" ;;
    esac
    shift
  done
  mkdir -p "$dir"
  echo "$src" > "$dir/fake-src"
  echo "$prefix" > "$dir/fake-prefix"
  # NVSHMEM's configure copies the headers it installs into <build>/src/include (configure_file COPYONLY).
  case "$src" in */native/probe) ;; *)
    # ...and writes configure_file() outputs into its source tree (v3.4.5 src/CMakeLists.txt:587, 600, 625, 626):
    # transfer_device.cuh, a file the release ships, is overwritten with transfer_device.cuh.in, which the device
    # API patch changed. configure_file writes only what differs, so a second configure leaves them alone.
    configured() { cmp -s "$1" "$2" 2>/dev/null || { mkdir -p "$(dirname "$2")"; cp "$1" "$2"; }; }
    tdin="$src/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in"
    if [ -f "$tdin" ]; then
      configured "$tdin" "$src/src/include/non_abi/device/pt-to-pt/transfer_device.cuh"
      configured "$tdin" "$src/src/device/comm/transfer_device.cu"
      printf '#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n' > "$dir/fake-version.h"
      configured "$dir/fake-version.h" "$src/src/include/non_abi/nvshmem_version.h"
      printf '#define NVSHMEM_USE_GDRCOPY 0\n' > "$dir/fake-build-options.h"
      configured "$dir/fake-build-options.h" "$src/src/include/non_abi/nvshmem_build_options.h"
    fi
    mkdir -p "$dir/src/include/device"
    [ -e "$dir/src/include/nvshmem.h" ] || echo '/* fake nvshmem.h */' > "$dir/src/include/nvshmem.h"
    [ -e "$dir/src/include/device/nvshmem_defines.h" ] || echo '/* fake */' > "$dir/src/include/device/nvshmem_defines.h" ;;
  esac
fi
[ "$FAKE_HANG" = "$mode" ] && case "$dir" in *build/nvshmem*) hang "$mode" ;; esac
src=$(cat "$dir/fake-src" 2>/dev/null)
case "$src" in
  */native/probe)
    if [ "$mode" = build ]; then
      printf '#!/bin/sh\\ncat "%s"\\n' "$FAKE_ROOT/probe.json" > "$dir/nvshmem-efa-probe"
      chmod +x "$dir/nvshmem-efa-probe"
    fi ;;
  *)
    # NVSHMEM's build writes these into its source tree (src/CMakeLists.txt, target git_commit).
    [ "$mode" = build ] && [ -n "$src" ] && date +%s%N > "$src/git_commit.txt" && cp "$src/git_commit.txt" "$src/version.txt"
    if [ "$mode" = build ]; then
      touch "$FAKE_ROOT/nvshmem-building"
      # FAKE_WAIT_SETUP: the build lasts until DeepEP's setup.py has started beside it. The bound is generous
      # (FAKE_WAIT_LIMIT tenths of a second, 120 s) so that a loaded machine does not end the wait early.
      if [ -n "$FAKE_WAIT_SETUP" ]; then
        i=0; while [ $i -lt "\${FAKE_WAIT_LIMIT:-1200}" ] && ! grep -q '^beside' "$FAKE_ROOT/setup.log" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
        grep -q '^beside' "$FAKE_ROOT/setup.log" 2>/dev/null && echo "nvshmem-build saw setup.py beside it" >> "$FAKE_ROOT/setup.log"
      fi
      # FAKE_FAIL_BUILD: fails, once a hanging setup.py beside it has started and all three of its processes
      # have written their pids (a pid file is created empty before its pid is in it), bounded as above.
      if [ -n "$FAKE_FAIL_BUILD" ]; then
        i=0; while [ $i -lt "\${FAKE_WAIT_LIMIT:-1200}" ] && ! { [ -s "$FAKE_PIDS/tool" ] && [ -s "$FAKE_PIDS/child" ] && [ -s "$FAKE_PIDS/grandchild" ]; }; do sleep 0.1; i=$((i+1)); done
        echo "error: fake compile failure"; exit 1
      fi
      # FAKE_BG_HOLD: leaves a child in a session of its own holding the output pipe, as a compiler cache server does.
      if [ -n "$FAKE_BG_HOLD" ]; then setsid sh -c 'echo $$ > "$FAKE_PIDS/bg"; exec sleep 300' & fi
      # FAKE_LONG_LINE=N: one line of N bytes (cmake's flags echoed whole); FAKE_LONG_LINE_FAIL: then fails, saying
      # nothing more (so the line is among the last lines a failure shows).
      if [ -n "$FAKE_LONG_LINE" ]; then
        head -c "$FAKE_LONG_LINE" /dev/zero | tr '\\0' x; echo
        [ -n "$FAKE_LONG_LINE_FAIL" ] && exit 1
      fi
    fi
    if [ "$mode" = install ]; then
      prefix=$(cat "$dir/fake-prefix")
      mkdir -p "$prefix/lib" "$prefix/include/nvshmem_efa"
      # As NVSHMEM's install rules (and the patch's install(FILES ... OPTIONAL)) do, keeping the files' times.
      [ -d "$dir/src/include" ] && cp -pR "$dir/src/include/." "$prefix/include/"
      for f in "$src/src/modules/transport/libfabric/efa_gda/"nvshmemx_efa_gda* "$src/src/modules/transport/libfabric/efa_gda/efa_io_defs.h"; do
        [ -f "$f" ] && cp -p "$f" "$prefix/include/nvshmem_efa/"
      done
      [ -n "$FAKE_HEADER_DRIFT" ] && echo '/* changed by the build */' >> "$prefix/include/nvshmem.h"
      [ -e "$prefix/include/nvshmem.h" ] || touch "$prefix/include/nvshmem.h"
      # NVSHMEM's install(CODE) rewrites its exported targets files (file(WRITE), src/CMakeLists.txt:823-849) at
      # every install, and install(EXPORT) copies them: new times under lib/cmake/nvshmem whatever changed.
      mkdir -p "$prefix/lib/cmake/nvshmem"
      echo '# fake NVSHMEMTargets.cmake' > "$prefix/lib/cmake/nvshmem/NVSHMEMTargets.cmake"
      touch "$prefix/lib/libnvshmem_host.so" "$prefix/lib/libnvshmem_device.a" "$prefix/lib/nvshmem_transport_libfabric.so"
    fi ;;
esac
exit 0
`;

const PYTHON = `#!/bin/sh
${HANG}
case "$*" in
  --version) echo "Python 3.12.0" ;;
  *"import torch"*) echo "2.11.0 13.0" ;;
  *find_spec*) echo "" ;;
  *"import deep_ep"*)
    # The import check: Python writes byte code beside the modules it imports (deep_ep/__pycache__).
    mkdir -p "$PYTHONPATH/deep_ep/__pycache__" && echo pyc > "$PYTHONPATH/deep_ep/__pycache__/__init__.cpython-312.pyc"
    echo "$PYTHONPATH/deep_ep/__init__.py" ;;
  *"setup.py build_ext"*)
    # Like DeepEP's setup.py under torch's ninja: objects in build/, then a device link that needs
    # NVSHMEM's libraries. Each run appends a line to $FAKE_ROOT/setup.log.
    hdr=no; [ -e "$NVSHMEM_DIR/include/nvshmem.h" ] && hdr=yes
    if [ ! -e "$NVSHMEM_DIR/lib/libnvshmem_host.so" ]; then
      echo "beside headers=$hdr flags=\${NVCC_APPEND_FLAGS:-none} jobs=$MAX_JOBS" >> "$FAKE_ROOT/setup.log"
      [ "$FAKE_HANG" = setup-beside ] && hang setup
      [ "$hdr" = yes ] || { echo "fatal error: nvshmem.h: No such file or directory"; exit 1; }
      echo "[1/2] nvcc -c csrc/kernels/internode.cu"
      mkdir -p build/temp && cp "$NVSHMEM_DIR/include/nvshmem.h" build/temp/internode.o
      sleep "\${FAKE_SETUP_SECONDS:-0}"
      echo "/usr/bin/ld: cannot find -l:libnvshmem_host.so"
      exit 1
    fi
    [ "$FAKE_HANG" = setup ] && hang setup
    if [ -e build/temp/internode.o ]; then
      echo "after reused flags=\${NVCC_APPEND_FLAGS:-none} jobs=$MAX_JOBS" >> "$FAKE_ROOT/setup.log"
    else
      echo "after compiled flags=\${NVCC_APPEND_FLAGS:-none} jobs=$MAX_JOBS" >> "$FAKE_ROOT/setup.log"
      echo "[1/2] nvcc -c csrc/kernels/internode.cu"
      mkdir -p build/temp && cp "$NVSHMEM_DIR/include/nvshmem.h" build/temp/internode.o
    fi
    # torch's BuildExtension writes its ninja files beside the objects, in build/.
    mkdir -p build/temp && echo "# fake build.ninja" > build/temp/build.ninja && echo "# ninja log v5" >> build/temp/.ninja_log
    echo "[2/2] nvcc -dlink"
    # What readelf -d shows of the module (the fake readelf prints the file).
    printf ' (NEEDED) Shared library: [libnvshmem_host.so.3]\n (RUNPATH) Library runpath: [%s/lib]\n' "$NVSHMEM_DIR" > deep_ep_cpp.cpython-312-x86_64-linux-gnu.so ;;
  *) exit 1 ;;
esac
`;

function write(file: string, content: string, exec = false): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  if (exec) chmodSync(file, 0o755);
}

export function fakeToolchain(o: { nvml?: boolean } = {}): FakeToolchain {
  const root = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-fake-'));
  const cudaHome = path.join(root, 'cuda');
  write(path.join(cudaHome, 'bin/nvcc'), '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.48"\n', true);
  write(path.join(cudaHome, 'include/cuda.h'), '/* fake */\n');
  write(path.join(cudaHome, 'lib64/stubs/libcuda.so'), '');
  if (o.nvml !== false) write(path.join(cudaHome, 'include/nvml.h'), '/* fake */\n');
  const libfabricHome = path.join(root, 'libfabric');
  write(path.join(libfabricHome, 'include/rdma/fabric.h'), '#define FI_MAJOR_VERSION 1\n#define FI_MINOR_VERSION 17\n#define FI_REVISION_VERSION 0\n');
  const bin = path.join(root, 'bin');
  write(path.join(bin, 'cmake'), CMAKE, true);
  // The DeepEP build's link check on a host without a GPU: readelf -d and nm -D of the fake module.
  write(path.join(bin, 'readelf'), '#!/bin/sh\n[ "$1" = -d ] && cat "$2"\n', true);
  write(path.join(bin, 'nm'), '#!/bin/sh\nexit 0\n', true);
  const python = path.join(bin, 'python3');
  write(python, PYTHON, true);
  const probe = { schema: 'nvshmem-efa-probe/1', host: 'fake', root: '/', checks: [{ id: 'fake', title: 'fake', status: 'skip', evidence: 'fake probe', fix: '' }], summary: { pass: 0, warn: 0, fail: 0, skip: 1 }, verdict: 'fake: no EFA device' };
  write(path.join(root, 'probe.json'), JSON.stringify(probe) + '\n');
  const pids = path.join(root, 'pids');
  mkdirSync(pids);
  return {
    cudaHome,
    libfabricHome,
    bin,
    python,
    pids,
    root,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, PYTHON: python, FAKE_PIDS: pids, FAKE_ROOT: root, CI: 'true', NO_COLOR: '1', NVSHMEM_EFA_GDRCOPY: '0' },
  };
}

/**
 * The pids the hanging fake tools have written. A pid file exists (empty) a moment before the shell writes its
 * pid; an empty one would read as pid 0, which `kill(0)` takes for our own process group: only whole pids count.
 */
export function hungPids(t: FakeToolchain): number[] {
  return ['tool', 'child', 'grandchild']
    .map((n) => path.join(t.pids, n))
    .filter(existsSync)
    .map((f) => Number(readFileSync(f, 'utf8').trim()))
    .filter((p) => Number.isInteger(p) && p > 0);
}
