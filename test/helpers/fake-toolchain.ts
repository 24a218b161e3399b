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
  /** Environment for the CLI: PATH, PYTHON, CI. Add FAKE_HANG=configure|build|install|setup to hang there. */
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
    if [ "$mode" = install ]; then
      prefix=$(cat "$dir/fake-prefix")
      mkdir -p "$prefix/lib" "$prefix/include/nvshmem_efa"
      touch "$prefix/include/nvshmem.h" "$prefix/lib/libnvshmem_host.so" "$prefix/lib/libnvshmem_device.a" "$prefix/lib/nvshmem_transport_libfabric.so"
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
  *"setup.py build_ext"*) [ "$FAKE_HANG" = setup ] && hang setup; touch deep_ep_cpp.cpython-312-x86_64-linux-gnu.so ;;
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
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, PYTHON: python, FAKE_PIDS: pids, FAKE_ROOT: root, CI: 'true', NO_COLOR: '1' },
  };
}

/** The pids the hanging fake tools wrote. */
export function hungPids(t: FakeToolchain): number[] {
  return ['tool', 'child', 'grandchild'].map((n) => path.join(t.pids, n)).filter(existsSync).map((f) => Number(readFileSync(f, 'utf8').trim()));
}
