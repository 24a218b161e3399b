import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { isRunning } from '../../src/core/kill-tree.ts';
import { LOCK_FILE } from '../../src/core/lock.ts';
import { cli, ENV, killGroup, spawnCli, tmp, waitFor, type Running } from '../helpers/cli.ts';
import { fakeToolchain, hungPids, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Issue 9, items 4 and 5, with real processes: a signal to the CLI's pid, or to its process group, during
 * any step stops every child within seconds, keeps the stamps of finished steps, drops the unfinished one's
 * and exits 130; and two runs never share a work dir. Builds run on the fake toolchain, whose cmake and
 * python hang on demand with a child and a grandchild in a session of its own (as ninja's compilers are).
 */
const stamps = (work: string): string[] =>
  existsSync(path.join(work, 'state.json')) ? Object.keys(JSON.parse(readFileSync(path.join(work, 'state.json'), 'utf8')).steps).sort() : [];
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';

async function interrupt(r: Running, how: 'pid' | 'group', sig: NodeJS.Signals): Promise<number> {
  const t0 = Date.now();
  process.kill(how === 'group' ? -r.child.pid! : r.child.pid!, sig);
  const timeout = new Promise<{ code: number; at: number }>((resolve) => setTimeout(() => resolve({ code: -1, at: Date.now() }), 20_000));
  const { code, at } = await Promise.race([r.exited, timeout]);
  if (code === -1) killGroup(r);
  expect(code, `exit status after ${sig} (stderr: ${r.stderr().slice(-800)})`).toBe(130);
  return (at - t0) / 1000;
}

function buildArgs(t: FakeToolchain, src: string, work: string, extra: string[] = []): string[] {
  return ['build', '--nvshmem-src', src, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline', ...extra];
}

async function hangingBuild(phase: 'configure' | 'build' | 'setup', extra: string[] = []) {
  const t = fakeToolchain();
  const work = tmp();
  const r = spawnCli(buildArgs(t, materialize('v3.4-like'), work, extra), { ...ENV, ...t.env, FAKE_HANG: phase });
  await waitFor(`the fake ${phase} to hang (three pids written)`, () => hungPids(t).length === 3, 120_000);
  const pids = hungPids(t);
  expect(pids).toHaveLength(3);
  return { t, work, r, pids };
}

describe('stops are stops (item 5)', () => {
  it('SIGTERM to the pid alone during the NVSHMEM build stops cmake, its child and a grandchild in another session, and exits 130 within seconds', async () => {
    const { work, r, pids } = await hangingBuild('build');
    try {
      const s = await interrupt(r, 'pid', 'SIGTERM');
      expect(s).toBeLessThan(10);
      expect(pids.filter(isRunning)).toEqual([]);
      expect(stamps(work)).toEqual(['get-nvshmem', 'patch-nvshmem', 'vendor-efa-io-defs']);
      expect(existsSync(path.join(work, LOCK_FILE))).toBe(false);
      expect(r.stderr()).toMatch(/^error: interrupted by SIGTERM$/m);
    } finally {
      killGroup(r);
    }
  });

  it('SIGINT to the process group during configure: the same', async () => {
    const { work, r, pids } = await hangingBuild('configure');
    try {
      expect(await interrupt(r, 'group', 'SIGINT')).toBeLessThan(10);
      expect(pids.filter(isRunning)).toEqual([]);
      expect(stamps(work)).toEqual(['get-nvshmem', 'patch-nvshmem', 'vendor-efa-io-defs']);
    } finally {
      killGroup(r);
    }
  });

  it('SIGTERM during the DeepEP build: NVSHMEM, the probe and the DeepEP patch stay stamped, the DeepEP build does not', async () => {
    const { work, r, pids } = await hangingBuild('setup', ['--deepep-src', materialize('v1', GOLDEN_DEEPEP)]);
    try {
      expect(await interrupt(r, 'pid', 'SIGTERM')).toBeLessThan(10);
      expect(pids.filter(isRunning)).toEqual([]);
      expect(stamps(work)).toEqual(['build-nvshmem', 'get-deepep', 'get-nvshmem', 'patch-deepep', 'patch-nvshmem', 'probe', 'vendor-efa-io-defs']);
    } finally {
      killGroup(r);
    }
  });

  it('SIGINT during the copy stops it: exit 130, no half copy, the step unstamped', async () => {
    const src = materialize('v3.4-like');
    // Enough files that the copy takes a while on any machine.
    for (let d = 0; d < 100; d++) {
      mkdirSync(path.join(src, `docs/gen/${d}`), { recursive: true });
      for (let f = 0; f < 200; f++) writeFileSync(path.join(src, `docs/gen/${d}/${f}.txt`), `${d}/${f}\n`);
    }
    const work = tmp();
    const r = spawnCli(['patch', '--nvshmem-src', src, '--work-dir', work, '--offline']);
    try {
      await waitFor('the copy to start', () => existsSync(path.join(work, 'sources/nvshmem.partial')));
      expect(await interrupt(r, 'pid', 'SIGINT')).toBeLessThan(10);
      expect(existsSync(path.join(work, 'sources/nvshmem'))).toBe(false);
      expect(existsSync(path.join(work, 'sources/nvshmem.partial'))).toBe(false);
      expect(stamps(work)).toEqual([]);
    } finally {
      killGroup(r);
    }
  });

  it('SIGTERM during the in-place patch: exit 130, and the user tree is either untouched and the step unstamped, or whole and stamped', async () => {
    const src = materialize('v3.4-like');
    const before = await hashTree(src);
    const work = tmp();
    const r = spawnCli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--offline']);
    try {
      await waitFor('the patch step to start', () => r.stderr().includes('❯ Patch NVSHMEM'));
      await interrupt(r, 'pid', 'SIGTERM');
      const stamped = stamps(work).includes('patch-nvshmem');
      const text = readFileSync(path.join(src, LIBFABRIC_CPP), 'utf8');
      if (stamped) {
        for (const id of ['efa-gda-include', 'efa-gda-init', 'efa-gda-register-region', 'efa-gda-release-region', 'efa-gda-fini']) expect(text).toContain(`nvshmem-efa:end ${id}`);
      } else {
        expect(await hashTree(src)).toBe(before);
      }
      expect(existsSync(path.join(src, `${LIBFABRIC_CPP}.nvshmem-efa-new`))).toBe(false);
    } finally {
      killGroup(r);
    }
  });
});

describe('one run per work dir (item 4)', () => {
  it('a second run is refused (exit 7) naming the holder; once the first is gone, the work dir is free', async () => {
    const { t, work, r } = await hangingBuild('build');
    try {
      const second = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']);
      expect(second.code).toBe(7);
      expect(second.stderr).toContain(`work dir ${work} is in use by another nvshmem-efa run: pid ${r.child.pid} (nvshmem-efa build --nvshmem-src`);
      expect(second.stderr).toMatch(/^fix: wait for it to finish \(or stop it: kill \d+\), or pass another --work-dir/m);
      // The refused run touched nothing: the holder's stamps are intact.
      expect(stamps(work)).toEqual(['get-nvshmem', 'patch-nvshmem', 'vendor-efa-io-defs']);
      expect(cli(['clean', '--work-dir', work]).code).toBe(7);
      await interrupt(r, 'pid', 'SIGTERM');
      const again = cli(buildArgs(t, materialize('v3.4-like'), work), { ...ENV, ...t.env });
      expect(again.stderr).not.toMatch(/error:/);
      expect(again.code).toBe(0);
    } finally {
      killGroup(r);
    }
  });

  it('a run killed outright (SIGKILL) leaves its build running; the next run takes the lock over and stops it first', async () => {
    const { t, work, r, pids } = await hangingBuild('build');
    try {
      // The lock names the running commands once the CLI's child observer has written them: on a loaded host the fake
      // build's pids can appear first, and a kill before that leaves a lock naming none (CI of 832f6eb).
      await waitFor('the lock to name the running commands', () => {
        try {
          return JSON.parse(readFileSync(path.join(work, LOCK_FILE), 'utf8')).children.length > 0;
        } catch {
          return false;
        }
      }, 30_000);
      process.kill(r.child.pid!, 'SIGKILL');
      await r.exited;
      // Nothing could stop the build's processes: they are still running, in groups of their own.
      expect(pids.filter(isRunning)).toEqual(pids);
      const next = cli(buildArgs(t, materialize('v3.4-like'), work), { ...ENV, ...t.env });
      expect(next.stderr).toMatch(new RegExp(`note: took over the lock of a run that is gone: pid ${r.child.pid} .*; stopped the commands it left running`));
      expect(next.code).toBe(0);
      expect(pids.filter(isRunning)).toEqual([]);
    } finally {
      killGroup(r);
      for (const p of pids) if (isRunning(p)) process.kill(p, 'SIGKILL');
    }
  });

  it('a lock left by a run that died is taken over, with a note', () => {
    const work = tmp();
    // The pid of a process that has exited (and been reaped).
    const dead = spawnSync('true').pid!;
    writeFileSync(path.join(work, LOCK_FILE), JSON.stringify({ pid: dead, host: os.hostname(), procStart: '1', command: 'nvshmem-efa build --nvshmem-src /x', startedAt: '2026-01-01T00:00:00.000Z' }) + '\n');
    writeFileSync(path.join(work, '.nvshmem-efa-workdir.json'), JSON.stringify({ schema: 'nvshmem-efa-workdir/1', createdDir: false, created: ['logs', 'sources', 'build', 'install', 'stubs', 'vendor', 'state.json', 'report.json', 'report.md', LOCK_FILE] }));
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`note: took over the lock of a run that is gone: pid ${dead}`);
    expect(existsSync(path.join(work, LOCK_FILE))).toBe(false);
  });
});
