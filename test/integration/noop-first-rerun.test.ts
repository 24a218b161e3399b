import { appendFileSync, chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, IO_DEFS, LOCK, report, tmp } from '../helpers/cli.ts';
import { fakeToolchain, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Issue 38, item 1: the first rerun after a cold build is a no-op. NVSHMEM's build writes into its source tree
 * (configure_file() outputs, among them transfer_device.cuh, which the release ships and configure overwrites
 * with the patched transfer_device.cuh.in; git_commit.txt and version.txt) and rewrites its CMake package files
 * at every install; DeepEP's build and its import check write into DeepEP's tree. The fake toolchain does each
 * of these as the real builds do (test/helpers/fake-toolchain.ts), with a GPU shown so that build-deepep
 * checks the module by importing it. Nothing the build wrote may make the rerun build again.
 */

const TRANSFER_DEVICE = 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh';

interface Fixture {
  t: FakeToolchain;
  work: string;
  nvshmemSrc: string;
  deepepSrc: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

function fixture(mode: 'copy' | 'in place'): Fixture {
  const t = fakeToolchain();
  const bin = tmp('nvshmem-efa-gpu-');
  // One GPU shown: build-deepep checks the module by importing it, as on a GPU host.
  writeFileSync(path.join(bin, 'nvidia-smi'), '#!/bin/sh\necho 9.0\n');
  chmodSync(path.join(bin, 'nvidia-smi'), 0o755);
  const nvshmemSrc = materialize('v3.4-like');
  // The release ships transfer_device.cuh, identical to its .in (v3.4.5); the patch changes only the .in.
  copyFileSync(path.join(nvshmemSrc, `${TRANSFER_DEVICE}.in`), path.join(nvshmemSrc, TRANSFER_DEVICE));
  const deepepSrc = materialize('v1', GOLDEN_DEEPEP);
  const gdrcopy = tmp('nvshmem-efa-gdrcopy-');
  mkdirSync(path.join(gdrcopy, 'include'));
  mkdirSync(path.join(gdrcopy, 'lib'));
  writeFileSync(path.join(gdrcopy, 'include', 'gdrapi.h'), '/* fake */\n');
  writeFileSync(path.join(gdrcopy, 'lib', 'libgdrapi.so'), '');
  const work = tmp();
  const args = ['build', '--nvshmem-src', nvshmemSrc, '--deepep-src', deepepSrc, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome,
    '--efa-io-defs', IO_DEFS, '--jobs', '2', '--cuda-arch', '90', '--gdrcopy-home', gdrcopy, ...(mode === 'in place' ? ['--in-place'] : [])];
  const env = { ...t.env, PATH: `${bin}:${t.env.PATH}`, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
  return { t, work, nvshmemSrc, deepepSrc, args, env };
}

const lines = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').filter(Boolean) : []);

/** One `build`: each step's outcome, and every cmake and setup.py run it made. */
function build(f: Fixture) {
  for (const log of ['cmake.log', 'setup.log']) rmSync(path.join(f.t.root, log), { force: true });
  const r = cli(f.args, f.env);
  expect(r.code, r.stderr).toBe(0);
  const steps = Object.fromEntries(report(f.work).steps.map((s) => [s.id, s.status === 'skipped' ? `skipped: ${s.reason}` : s.status]));
  return { steps, cmake: lines(path.join(f.t.root, 'cmake.log')), setup: lines(path.join(f.t.root, 'setup.log')) };
}

const UP = 'skipped: up to date';
/** The steps a cold build runs here: each must be up to date on the rerun (detect has no stamp: it always runs). */
const BUILT = ['get-nvshmem', 'vendor-efa-io-defs', 'patch-nvshmem', 'get-deepep', 'patch-deepep', 'build-nvshmem', 'probe', 'build-deepep'];

describe.each(['copy', 'in place'] as const)('the first rerun after a cold build is a no-op (%s)', (mode) => {
  it('every step that ran is up to date, and no cmake or setup.py runs', () => {
    const f = fixture(mode);
    const cold = build(f);
    for (const id of BUILT) expect(cold.steps[id], id).toBe('done');
    // The build wrote into the trees whose content the stamps hash, as NVSHMEM's and DeepEP's builds do.
    const nvshmem = mode === 'copy' ? path.join(f.work, 'sources/nvshmem') : f.nvshmemSrc;
    const deepep = mode === 'copy' ? path.join(f.work, 'sources/deepep') : f.deepepSrc;
    expect(readFileSync(path.join(nvshmem, TRANSFER_DEVICE), 'utf8')).toBe(readFileSync(path.join(nvshmem, `${TRANSFER_DEVICE}.in`), 'utf8'));
    expect(readFileSync(path.join(nvshmem, TRANSFER_DEVICE), 'utf8')).toContain('nvshmem-efa:begin');
    for (const out of ['git_commit.txt', 'version.txt', 'src/device/comm/transfer_device.cu', 'src/include/non_abi/nvshmem_version.h']) expect(existsSync(path.join(nvshmem, out)), out).toBe(true);
    for (const out of ['build/temp/build.ninja', 'deep_ep/__pycache__']) expect(existsSync(path.join(deepep, out)), out).toBe(true);
    expect(cold.cmake.length).toBeGreaterThan(0);

    const rerun = build(f);
    expect(Object.fromEntries(BUILT.map((id) => [id, rerun.steps[id]]))).toEqual(Object.fromEntries(BUILT.map((id) => [id, UP])));
    expect(rerun.cmake).toEqual([]);
    expect(rerun.setup).toEqual([]);
  });
});

describe('what the no-op leaves out is only what the builds write', () => {
  it('an edit to transfer_device.cuh.in (what configure copies over transfer_device.cuh) rebuilds NVSHMEM', () => {
    const f = fixture('copy');
    build(f);
    const input = path.join(f.nvshmemSrc, `${TRANSFER_DEVICE}.in`);
    writeFileSync(input, `// edited\n${readFileSync(input, 'utf8')}`);
    const r = build(f);
    expect(r.steps).toMatchObject({ 'get-nvshmem': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done' });
    expect(r.cmake.some((l) => l.startsWith('build '))).toBe(true);
    expect(readFileSync(path.join(f.work, 'sources/nvshmem', TRANSFER_DEVICE), 'utf8')).toContain('// edited');
  });

  it("NVSHMEM's CMake package files rewritten by an install do not rebuild DeepEP; a reinstalled library does", () => {
    const f = fixture('copy');
    build(f);
    const targets = path.join(f.work, 'install/nvshmem/lib/cmake/nvshmem/NVSHMEMTargets.cmake');
    writeFileSync(targets, `${readFileSync(targets, 'utf8')}# rewritten by cmake --install\n`);
    expect(build(f).steps['build-deepep']).toBe(UP);
    appendFileSync(path.join(f.work, 'install/nvshmem/lib/libnvshmem_host.so'), 'relinked\n');
    const r = build(f);
    expect(r.steps['build-deepep']).toBe('done');
    expect(r.setup).toEqual([expect.stringMatching(/^after /)]);
  });
});
