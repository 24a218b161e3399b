import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRunning } from '../../src/core/kill-tree.ts';
import { cli, ENV, IO_DEFS, killGroup, LOCK, report, spawnCli, stepStatus, tmp, waitFor } from '../helpers/cli.ts';
import { fakeToolchain, hungPids, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * A cold build compiles DeepEP beside NVSHMEM's build (steps/deepep-beside.ts). On the fake toolchain:
 * NVSHMEM's configure writes <build>/src/include, its install copies it (and the GDA device headers) into the
 * prefix keeping their times; DeepEP's setup.py compiles into build/ when it finds the headers, fails its link
 * while NVSHMEM's libraries are missing, and reuses its object when it finds one. Each setup.py run writes a
 * line to setup.log: what it saw and with which environment.
 */
function buildArgs(t: FakeToolchain, work: string, extra: string[] = []): string[] {
  return ['build', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', materialize('v1', GOLDEN_DEEPEP), '--work-dir', work,
    '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS, '--jobs', '2', ...extra];
}
const setupLog = (t: FakeToolchain) => (existsSync(path.join(t.root, 'setup.log')) ? readFileSync(path.join(t.root, 'setup.log'), 'utf8').trim().split('\n') : []);
const beside = (work: string) => report(work).fixes.find((f) => f.id === 'deepep-beside-nvshmem');

/** A cold build on a fresh fake toolchain that must succeed. */
function coldBuild(extraArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): { t: FakeToolchain; work: string } {
  const t = fakeToolchain();
  const work = tmp();
  const r = cli(buildArgs(t, work, extraArgs), { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...extraEnv });
  expect(r.code, r.stderr).toBe(0);
  return { t, work };
}

describe('DeepEP compiles beside NVSHMEM on a cold build', () => {
  it('setup.py starts while NVSHMEM builds, against the staged headers; after the install it reuses the objects and only links', () => {
    const { t, work } = coldBuild([], { FAKE_WAIT_SETUP: '1' });
    const lines = setupLog(t);
    expect(lines[0]).toMatch(/^beside headers=yes flags=(\S+) jobs=2$/);
    expect(lines).toContain('nvshmem-build saw setup.py beside it');
    // The same environment both times: torch's ninja sees the same command lines.
    expect(lines.at(-1)).toBe(lines[0]!.replace(/^beside headers=yes/, 'after reused'));
    expect(lines.filter((l) => l.startsWith('after'))).toHaveLength(1);
    expect(beside(work)).toMatchObject({ status: 'applied', detail: expect.stringMatching(/ninja started 1 of its 2 steps in [\d.]+ s beside NVSHMEM's build.*staged headers byte for byte.*after NVSHMEM's install, ninja ran 1 step$/) });
    expect(stepStatus(work)).toMatchObject({ 'build-nvshmem': 'done', 'build-deepep': 'done' });
    // The staged include/ is what NVSHMEM installed (the configured headers and the GDA device headers).
    expect(existsSync(path.join(work, 'install/nvshmem/include/device/nvshmem_defines.h'))).toBe(true);
    expect(existsSync(path.join(work, 'install/nvshmem/include/nvshmem_efa/nvshmemx_efa_gda_device.cuh'))).toBe(true);
  });

  it('installed headers that differ from the staged ones: the objects are deleted, DeepEP compiles again, and the report says which header', () => {
    const { t, work } = coldBuild([], { FAKE_HEADER_DRIFT: '1' });
    const lines = setupLog(t);
    expect(lines[0]).toMatch(/^beside headers=yes/);
    expect(lines.at(-1)).toMatch(/^after compiled /);
    expect(beside(work)).toMatchObject({ status: 'warned', detail: expect.stringMatching(/objects were deleted and DeepEP compiles again: the installed headers are not the ones it compiled against \(nvshmem\.h: changed\).*after NVSHMEM's install, ninja ran 2 steps$/) });
    // The object DeepEP links is the one compiled on the installed header.
    expect(readFileSync(path.join(work, 'sources/deepep/build/temp/internode.o'), 'utf8')).toContain('changed by the build');
  });

  it('--no-overlap: setup.py runs once, after the install, and the report says why', () => {
    const { t, work } = coldBuild(['--no-overlap']);
    expect(setupLog(t)).toEqual([expect.stringMatching(/^after compiled /)]);
    expect(beside(work)).toMatchObject({ status: 'warned', detail: expect.stringMatching(/^compiled after NVSHMEM, not beside it: --no-overlap;/) });
  });

  it('a rebuild over an earlier install leaves it alone until NVSHMEM installs: DeepEP compiles after, and the report says why', () => {
    const { t, work } = coldBuild();
    const env = { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
    writeFileSync(path.join(t.root, 'setup.log'), '');
    const before = readFileSync(path.join(work, 'install/nvshmem/include/nvshmem.h'), 'utf8');
    const r = cli(buildArgs(t, work, ['--force']), env);
    expect(r.code, r.stderr).toBe(0);
    expect(setupLog(t).filter((l) => l.startsWith('beside'))).toEqual([]);
    expect(readFileSync(path.join(work, 'install/nvshmem/include/nvshmem.h'), 'utf8')).toBe(before);
    expect(beside(work)).toMatchObject({ status: 'warned', detail: expect.stringContaining('an earlier NVSHMEM install is in') });
  });

  // No fixed sleeps and no tight bounds: a loaded CI machine may take long to get here, so the test waits on
  // events (the three pids written, the CLI's exit) with generous bounds, and fails at once, with the CLI's
  // output, if the run ends before the compile beside NVSHMEM has hung.
  it('a failed NVSHMEM build stops the DeepEP compile beside it (its whole process tree) before the run exits', async () => {
    const t = fakeToolchain();
    const work = tmp();
    const r = spawnCli(buildArgs(t, work), { ...ENV, ...t.env, FAKE_HANG: 'setup-beside', FAKE_FAIL_BUILD: '1' });
    let exit: { code: number } | undefined;
    void r.exited.then((e) => (exit = e));
    try {
      // A pid file exists (empty) before its pid is written: wait for all three pids, or for the run's end.
      const written = () => hungPids(t).filter((p) => p > 0);
      await waitFor('setup.py beside NVSHMEM to hang (tool, child and grandchild pids)', () => written().length === 3 || exit !== undefined, 240_000);
      expect(written(), `the run ended before setup.py beside NVSHMEM hung:\n${r.stderr().slice(-1500)}`).toHaveLength(3);
      const pids = written();
      await waitFor('the failed run to exit', () => exit !== undefined, 240_000);
      expect(exit!.code, r.stderr().slice(-800)).not.toBe(0);
      expect(pids.filter(isRunning)).toEqual([]);
      expect(stepStatus(work)).toMatchObject({ 'build-nvshmem': 'failed', 'build-deepep': 'not-run' });
    } finally {
      killGroup(r);
    }
  }, 600_000);
});
