import { appendFileSync, chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli, IO_DEFS, LOCK, report, ROOT, tmp } from '../helpers/cli.ts';
import { fakeToolchain, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Issue 22, part 5: an unchanged `build` with DeepEP is a no-op (the container entrypoint reruns it on every
 * start), and a changed input reruns exactly the steps that depend on it. On the fake toolchain with a GPU
 * (a fake nvidia-smi), so build-deepep checks the module by importing it, as on a GPU host; a Python wrapper
 * logs every call to the fake python, answers `import deep_ep` as a real interpreter does (it writes
 * deep_ep/__pycache__ into the tree it imports from) and says where its torch package is.
 */

const DEEPEP_STEPS = ['get-deepep', 'patch-deepep', 'build-deepep'] as const;
// The preflight's own torch check (commands/preflight.ts), before the pipeline: not a DeepEP step.
const PREFLIGHT_TORCH = '-c import torch; print(torch.__version__)';

const WRAPPER = (fake: string) => `#!/bin/sh
printf '%s\\n' "$*" >> "$PY_CALLS"
case "$*" in
  *"import deep_ep"*)
    mkdir -p "$PYTHONPATH/deep_ep/__pycache__" && echo pyc > "$PYTHONPATH/deep_ep/__pycache__/__init__.cpython-312.pyc"
    echo "$PYTHONPATH/deep_ep/__init__.py"; exit 0 ;;
  *sys.executable*)
    printf '{"executable": "%s", "version": "3.12.0", "prefix": "/fake", "torch": "%s/torch/__init__.py", "nvshmem": null}\\n' "$0" "$FAKE_SITE"; exit 0 ;;
esac
exec ${fake} "$@"
`;

interface Fixture {
  t: FakeToolchain;
  work: string;
  deepepSrc: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  calls: string;
  site: string;
}

/** `gpu`: a fake nvidia-smi shows one (build-deepep checks by import), or shows none (it checks the link). */
function fixture({ gpu }: { gpu: boolean }): Fixture {
  const t = fakeToolchain();
  const dir = tmp('nvshmem-efa-noop-');
  const python = path.join(dir, 'bin', 'python3');
  mkdirSync(path.dirname(python));
  writeFileSync(python, WRAPPER(t.python));
  chmodSync(python, 0o755);
  writeFileSync(path.join(dir, 'bin', 'nvidia-smi'), gpu ? '#!/bin/sh\necho 9.0\n' : '#!/bin/sh\nexit 9\n');
  chmodSync(path.join(dir, 'bin', 'nvidia-smi'), 0o755);
  const site = path.join(dir, 'site-packages');
  mkdirSync(path.join(site, 'torch'), { recursive: true });
  writeFileSync(path.join(site, 'torch', '__init__.py'), '');
  writeFileSync(path.join(site, 'torch', 'version.py'), "__version__ = '2.11.0+cu130'\ncuda = '13.0'\n");
  // A GDRCopy install named with --gdrcopy-home: nothing of GDRCopy to fetch or build (not what this test is about).
  const gdrcopy = path.join(dir, 'gdrcopy');
  mkdirSync(path.join(gdrcopy, 'include'), { recursive: true });
  mkdirSync(path.join(gdrcopy, 'lib'));
  writeFileSync(path.join(gdrcopy, 'include', 'gdrapi.h'), '/* fake */\n');
  writeFileSync(path.join(gdrcopy, 'lib', 'libgdrapi.so'), '');
  const calls = path.join(dir, 'python-calls.log');
  const work = tmp();
  const deepepSrc = materialize('v1', GOLDEN_DEEPEP);
  const args = ['build', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', deepepSrc, '--work-dir', work,
    '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS, '--jobs', '2', '--cuda-arch', '90', '--gdrcopy-home', gdrcopy];
  const env = { ...t.env, PATH: `${path.dirname(python)}:${t.env.PATH}`, PYTHON: python, PY_CALLS: calls, FAKE_SITE: site, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
  return { t, work, deepepSrc, args, env, calls, site };
}

const lines = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').filter(Boolean) : []);

/** One more `build`: the DeepEP steps' (and build-nvshmem's) outcomes, and what ran of setup.py and python. */
function rerun(f: Fixture, env: NodeJS.ProcessEnv = {}, args = f.args) {
  rmSync(f.calls, { force: true });
  rmSync(path.join(f.t.root, 'setup.log'), { force: true });
  const r = cli(args, { ...f.env, ...env });
  expect(r.code, r.stderr).toBe(0);
  const steps = Object.fromEntries(report(f.work).steps.filter((s) => [...DEEPEP_STEPS, 'build-nvshmem'].includes(s.id)).map((s) => [s.id, s.status === 'skipped' ? `skipped: ${s.reason}` : s.status]));
  return { steps, setup: lines(path.join(f.t.root, 'setup.log')), calls: lines(f.calls) };
}

const UP = 'skipped: up to date';

describe('build with DeepEP, rerun: no-op when unchanged, exactly the dependent steps when an input changed', () => {
  let f: Fixture;
  beforeAll(() => {
    f = fixture({ gpu: true });
    const cold = rerun(f);
    expect(cold.steps).toEqual({ 'get-deepep': 'done', 'patch-deepep': 'done', 'build-nvshmem': 'done', 'build-deepep': 'done' });
    expect(report(f.work).deepep).toMatchObject({ check: 'import' });
  });

  it('an unchanged rerun skips get-deepep, patch-deepep and build-deepep: no setup.py, no import of deep_ep, no torch import at all (the preflight trusts the last build\'s import with this interpreter)', () => {
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': UP });
    expect(r.setup).toEqual([]);
    expect(r.calls.filter((c) => /setup\.py|deep_ep|import torch/.test(c))).toEqual([]);
    // The import check's result is kept, not redone.
    expect(report(f.work).deepep).toMatchObject({ check: 'import' });
  });

  it('a changed NVSHMEM install (a library rebuilt) reruns build-deepep only', () => {
    appendFileSync(path.join(f.work, 'install/nvshmem/lib/libnvshmem_host.so'), 'relinked\n');
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': 'done' });
    expect(r.setup).toEqual([expect.stringMatching(/^after /)]);
  });

  it('a changed installed NVSHMEM header reruns build-deepep only', () => {
    appendFileSync(path.join(f.work, 'install/nvshmem/include/nvshmem.h'), '/* reinstalled */\n');
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': 'done' });
  });

  it('a changed DeepEP shim template reruns patch-deepep and build-deepep, not get-deepep (its copy keeps build/)', () => {
    const pkg = tmp('nvshmem-efa-pkg-');
    for (const d of ['templates', 'third_party', 'native/probe', 'package.json']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true });
    appendFileSync(path.join(pkg, 'templates/deepep_efa/nvshmem_efa_shim.cuh'), '\n// a shim-only change\n');
    const r = rerun(f, { NVSHMEM_EFA_HOME: pkg });
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': 'done', 'build-nvshmem': UP, 'build-deepep': 'done' });
    expect(readFileSync(path.join(f.work, 'sources/deepep/csrc/kernels/nvshmem_efa_shim.cuh'), 'utf8')).toContain('// a shim-only change');
    expect(r.setup).toEqual([expect.stringMatching(/^after reused /)]);
    // Back to the package's own shim: patched and built again, then a no-op.
    expect(rerun(f).steps).toMatchObject({ 'patch-deepep': 'done', 'build-deepep': 'done' });
  });

  it('a changed DeepEP source (the --deepep-src checkout) reruns get-deepep, patch-deepep and build-deepep', () => {
    appendFileSync(path.join(f.deepepSrc, 'deep_ep/buffer.py'), '\n# edited\n');
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': 'done', 'patch-deepep': 'done', 'build-nvshmem': UP, 'build-deepep': 'done' });
  });

  it("build outputs in the --deepep-src checkout (the user's own build or test run) are not a change", () => {
    writeFileSync(path.join(f.deepepSrc, 'deep_ep_cpp.cpython-312-x86_64-linux-gnu.so'), 'built by the user\n');
    mkdirSync(path.join(f.deepepSrc, 'deep_ep/__pycache__'), { recursive: true });
    writeFileSync(path.join(f.deepepSrc, 'deep_ep/__pycache__/buffer.cpython-312.pyc'), 'pyc\n');
    expect(rerun(f).steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': UP });
  });

  it('another PYTHON reruns build-deepep only', () => {
    const other = path.join(path.dirname(f.calls), 'other-bin', 'python3');
    mkdirSync(path.dirname(other));
    copyFileSync(f.env.PYTHON!, other);
    chmodSync(other, 0o755);
    const r = rerun(f, { PYTHON: other });
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': 'done' });
    // Back to the first interpreter: built with it again.
    expect(rerun(f).steps).toMatchObject({ 'build-deepep': 'done' });
  });

  it("another torch in the same Python (its version.py) reruns build-deepep only, and the stamp never imports torch", () => {
    writeFileSync(path.join(f.site, 'torch', 'version.py'), "__version__ = '2.12.0+cu130'\ncuda = '13.0'\n");
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': 'done' });
    expect(r.calls).toContain(PREFLIGHT_TORCH); // another torch: the preflight imports it again
    expect(rerun(f).calls.filter((c) => c !== PREFLIGHT_TORCH && /import torch/.test(c))).toEqual([]);
  });

  it('a module replaced since its import check reruns build-deepep (the kept check no longer applies)', () => {
    const module = report(f.work).deepep!.module!;
    writeFileSync(module, readFileSync(module, 'utf8') + 'replaced\n');
    const r = rerun(f);
    expect(r.steps).toMatchObject({ 'build-deepep': 'done' });
    expect(r.calls.some((c) => c.includes('import deep_ep'))).toBe(true);
  });
});

describe('build with DeepEP on a host without a GPU (the link check), rerun', () => {
  it('an unchanged rerun skips the DeepEP steps and keeps the link check', () => {
    const f = fixture({ gpu: false });
    expect(rerun(f).steps).toMatchObject({ 'patch-deepep': 'done', 'build-deepep': 'done' });
    expect(report(f.work).deepep).toMatchObject({ check: 'link' });
    const r = rerun(f);
    expect(r.steps).toEqual({ 'get-deepep': UP, 'patch-deepep': UP, 'build-nvshmem': UP, 'build-deepep': UP });
    expect(r.setup).toEqual([]);
    expect(report(f.work).deepep).toMatchObject({ check: 'link' });
  });
});
