import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { LOCK_FILE } from '../../src/core/lock.ts';
import { processStartTime } from '../../src/core/proc.ts';
import { cli, report, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 20, items 1 and 4: every file nvshmem-efa reads back (the export marker, the work-dir marker, state.json,
 * the lock, report.json) is input that anyone with write access to the folder may have changed. Each test plants
 * such a file or link and drives the real CLI: nothing outside the folder is touched, and the answer is an error
 * or a note, never a crash.
 */
const ls = (d: string) => readdirSync(d).sort();
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const EXPORT_MARKER = '.nvshmem-efa-export.json';
const noCrash = (s: string) => {
  expect(s).not.toMatch(/internal error/);
  expect(s).not.toMatch(/^\s+at .*:\d+:\d+\)?$/m);
};
const patchArgs = (src: string, work: string) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline'];

describe('the export marker is untrusted (issue 20 item 1)', () => {
  const exportWith = (files: unknown[]) => {
    const root = tmp('export-root-');
    const out = path.join(root, 'evil');
    mkdirSync(out);
    writeFileSync(path.join(out, EXPORT_MARKER), JSON.stringify({ schema: 'nvshmem-efa-export/1', files }) + '\n');
    return { root, out };
  };

  it.each([
    ['../victim.txt'],
    ['nvshmem/../../victim.txt'],
    ['ABSOLUTE'],
  ])('a marker listing %s outside the export dir is refused (exit 2) and nothing outside is deleted', (listed) => {
    const { root, out } = exportWith([]);
    const victim = path.join(root, 'victim.txt');
    writeFileSync(victim, 'precious\n');
    writeFileSync(path.join(out, EXPORT_MARKER), JSON.stringify({ schema: 'nvshmem-efa-export/1', files: [listed === 'ABSOLUTE' ? victim : listed] }) + '\n');
    const r = cli(['patch', '--export', out, '--nvshmem-src', materialize('v3.4-like'), '--work-dir', path.join(root, 'wd')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path.join(out, EXPORT_MARKER)} is not an export marker nvshmem-efa wrote`);
    expect(r.stderr).toMatch(/^fix: /m);
    noCrash(r.stderr);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });

  it('a listed entry that is a directory is refused (exit 2), not a crash, and left alone', () => {
    const { out, root } = exportWith(['nvshmem/0001-a.patch', 'nvshmem/keep']);
    mkdirSync(path.join(out, 'nvshmem/keep'), { recursive: true });
    writeFileSync(path.join(out, 'nvshmem/keep/thesis.tex'), 'mine\n');
    writeFileSync(path.join(out, 'nvshmem/0001-a.patch'), 'old patch\n');
    const r = cli(['patch', '--export', out, '--nvshmem-src', materialize('v3.4-like'), '--work-dir', path.join(root, 'wd')]);
    noCrash(r.stderr);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path.join(out, 'nvshmem/keep')}, listed in ${EXPORT_MARKER} as a patch an export wrote, is a directory`);
    expect(readFileSync(path.join(out, 'nvshmem/keep/thesis.tex'), 'utf8')).toBe('mine\n');
    expect(readFileSync(path.join(out, 'nvshmem/0001-a.patch'), 'utf8')).toBe('old patch\n');
  });

  it('a listed entry that is a symbolic link is refused (exit 2): neither it nor its target is touched', () => {
    const { out, root } = exportWith(['nvshmem/0001-a.patch']);
    const target = path.join(root, 'target.txt');
    writeFileSync(target, 'precious\n');
    mkdirSync(path.join(out, 'nvshmem'));
    symlinkSync(target, path.join(out, 'nvshmem/0001-a.patch'));
    const r = cli(['patch', '--export', out, '--nvshmem-src', materialize('v3.4-like'), '--work-dir', path.join(root, 'wd')]);
    noCrash(r.stderr);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path.join(out, 'nvshmem/0001-a.patch')}, listed in ${EXPORT_MARKER} as a patch an export wrote, is a symbolic link`);
    expect(lstatSync(path.join(out, 'nvshmem/0001-a.patch')).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('precious\n');
  });

  it('an export part folder that is a symbolic link out of the export dir is refused: nothing is written or deleted through it', () => {
    const { out, root } = exportWith(['nvshmem/0001-a.patch']);
    const elsewhere = path.join(root, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(path.join(elsewhere, '0001-a.patch'), 'precious\n');
    symlinkSync(elsewhere, path.join(out, 'nvshmem'));
    const r = cli(['patch', '--export', out, '--nvshmem-src', materialize('v3.4-like'), '--work-dir', path.join(root, 'wd')]);
    noCrash(r.stderr);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path.join(out, 'nvshmem')} is a symbolic link`);
    expect(ls(elsewhere)).toEqual(['0001-a.patch']);
    expect(readFileSync(path.join(elsewhere, '0001-a.patch'), 'utf8')).toBe('precious\n');
  });
});

describe('what the work dir records is verified before it is acted on (issue 20 item 4)', () => {
  it.each([
    ['and the source unchanged', false],
    ['and the source changed (the copy step runs)', true],
  ])('a symbolic link planted in place of the work-dir copy, to the user\'s tree, %s: the link goes with a note, the user tree is never touched', async (_, changed) => {
    const src = materialize('v3.4-like');
    const user = materialize('v3.4-like');
    const work = tmp();
    expect(cli(patchArgs(src, work)).code).toBe(0);
    rmSync(path.join(work, 'sources/nvshmem'), { recursive: true });
    symlinkSync(user, path.join(work, 'sources/nvshmem'));
    if (changed) writeFileSync(path.join(src, 'README.extra'), 'new\n');
    const before = await hashTree(user);
    const r = cli(patchArgs(src, work));
    noCrash(r.stderr);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`note: removed the symbolic link ${path.join(work, 'sources/nvshmem')} (to ${user})`);
    expect(await hashTree(user)).toBe(before);
    expect(readFileSync(path.join(user, LIBFABRIC_CPP), 'utf8')).not.toContain('nvshmem-efa:begin');
    // The copy was made again, as a directory of the work dir, and patched there.
    expect(lstatSync(path.join(work, 'sources/nvshmem')).isDirectory()).toBe(true);
    expect(readFileSync(path.join(work, 'sources/nvshmem', LIBFABRIC_CPP), 'utf8')).toContain('nvshmem-efa:begin');
  });

  it('a symbolic link planted inside the work-dir copy is not written through either', async () => {
    const src = materialize('v3.4-like');
    const user = materialize('v3.4-like');
    const work = tmp();
    expect(cli(patchArgs(src, work)).code).toBe(0);
    const dir = path.join(work, 'sources/nvshmem', path.dirname(LIBFABRIC_CPP));
    rmSync(dir, { recursive: true });
    symlinkSync(path.join(user, path.dirname(LIBFABRIC_CPP)), dir);
    const before = await hashTree(user);
    const r = cli(patchArgs(src, work));
    noCrash(r.stderr);
    expect(await hashTree(user)).toBe(before);
    expect(r.code).toBe(0);
    expect(lstatSync(dir).isDirectory()).toBe(true);
  });

  it('a work-dir directory replaced by a symbolic link (sources -> elsewhere) is refused (exit 2), nothing written there', () => {
    const src = materialize('v3.4-like');
    const work = tmp();
    expect(cli(patchArgs(src, work)).code).toBe(0);
    const elsewhere = tmp('elsewhere-');
    writeFileSync(path.join(elsewhere, 'mine.txt'), 'mine\n');
    mkdirSync(path.join(elsewhere, 'nvshmem'));
    writeFileSync(path.join(elsewhere, 'nvshmem/thesis.tex'), 'mine\n');
    rmSync(path.join(work, 'sources'), { recursive: true });
    symlinkSync(elsewhere, path.join(work, 'sources'));
    const r = cli([...patchArgs(src, work), '--force']);
    noCrash(r.stderr);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path.join(work, 'sources')} is a symbolic link`);
    expect(ls(elsewhere)).toEqual(['mine.txt', 'nvshmem']);
    expect(ls(path.join(elsewhere, 'nvshmem'))).toEqual(['thesis.tex']);
  });

  /** A work dir `patch` made, and a `cp -a` of it beside. */
  const copiedWorkDir = () => {
    const src = materialize('v3.4-like');
    const parent = tmp('copies-');
    const work = path.join(parent, 'wd');
    const copy = path.join(parent, 'wd-copy');
    expect(cli(patchArgs(src, work)).code).toBe(0);
    expect(spawnSync('cp', ['-a', work, copy]).status).toBe(0);
    return { src, work, copy };
  };

  it('a copied work dir (cp -a) works on its own trees, never on the original\'s', async () => {
    const { src, work, copy } = copiedWorkDir();
    const original = await hashTree(work);
    const r = cli(patchArgs(src, copy));
    noCrash(r.stderr);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`note: ${path.join(copy, 'state.json')} was written for the work dir ${work}`);
    expect(report(copy).nvshmem.source?.dir).toBe(path.join(copy, 'sources/nvshmem'));
    expect(await hashTree(work)).toBe(original);
  });

  it('a state.json of an earlier version (no work dir recorded) in a copied work dir: the original\'s trees are not used', () => {
    const { src, work, copy } = copiedWorkDir();
    const state = JSON.parse(readFileSync(path.join(copy, 'state.json'), 'utf8'));
    delete state.workDir;
    writeFileSync(path.join(copy, 'state.json'), JSON.stringify(state));
    const r = cli(patchArgs(src, copy));
    expect(r.code).toBe(0);
    expect(report(copy).nvshmem.source?.dir).toBe(path.join(copy, 'sources/nvshmem'));
  });
});

describe('a stale lock\'s recorded commands are stopped only with the run\'s proof (issue 20 item 4, issue 36 class 4)', () => {
  const running = (pid: number) => {
    try {
      process.kill(pid, 0);
      return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
    } catch {
      return false;
    }
  };
  const withLock = (children: (pid: number) => unknown[]) => {
    const work = tmp();
    writeFileSync(path.join(work, '.nvshmem-efa-workdir.json'), JSON.stringify({ schema: 'nvshmem-efa-workdir/1', createdDir: false, created: [] }));
    const sleeper = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
    const dead = spawnSync('true').pid!;
    const lock = { pid: dead, host: os.hostname(), procStart: '1', command: 'nvshmem-efa build', startedAt: '2026-01-01T00:00:00.000Z', children: children(sleeper.pid!) };
    writeFileSync(path.join(work, LOCK_FILE), JSON.stringify(lock) + '\n');
    return { work, sleeper };
  };

  it.each([
    ['without a start time', (pid: number) => [{ pid, procStart: null }]],
    ['with its start time but another command line', (pid: number) => [{ pid, procStart: processStartTime(pid), cmdline: ['cmake', '--build', '/w/build/nvshmem'] }]],
    ['with its start time but no command line (a lock of an earlier version)', (pid: number) => [{ pid, procStart: processStartTime(pid) }]],
  ])('a recorded pid %s is left running (it may be anyone\'s process now)', (_, children) => {
    const { work, sleeper } = withLock(children);
    try {
      const r = cli(patchArgs(materialize('v3.4-like'), work));
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('note: took over the lock of a run that is gone');
      expect(r.stderr).not.toContain('stopped the commands it left running');
      expect(running(sleeper.pid!)).toBe(true);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  // Pid, start time and command line are readable by anyone in /proc, so they prove nothing (issue 36, class 4):
  // without the run's proof (reliability item 4) the process is left running and the note says so. That a killed
  // run's own commands are still stopped is the fault campaign's `genuine-leftovers-stopped`.
  it('a recorded pid with the same start time and command line, but no proof the run started it, is left running', () => {
    const { work, sleeper } = withLock((pid) => [{ pid, procStart: processStartTime(pid), cmdline: ['sleep', '120'] }]);
    try {
      const r = cli(patchArgs(materialize('v3.4-like'), work));
      expect(r.code).toBe(0);
      expect(r.stderr).toContain(`note: left pid ${sleeper.pid} running (sleep 120)`);
      expect(r.stderr).toContain('nothing proves that run started it');
      expect(running(sleeper.pid!)).toBe(true);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });
});

describe('report.json and report.md are read as untrusted (issue 20 item 1)', () => {
  const built = () => {
    const work = tmp();
    expect(cli(patchArgs(materialize('v3.4-like'), work)).code).toBe(0);
    const rep = JSON.parse(readFileSync(path.join(work, 'report.json'), 'utf8'));
    return { work, rep };
  };

  it('env refuses a report whose run-time variable names are not names (no shell code reaches eval)', () => {
    const { work, rep } = built();
    writeFileSync(path.join(work, 'report.json'), JSON.stringify({ ...rep, command: 'build', ok: true, runtimeEnv: { NVSHMEM_HOME: '/x', 'X=1; touch /tmp/pwned; Y': 'v' } }));
    const r = cli(['env', '--work-dir', work]);
    noCrash(r.stderr);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`${path.join(work, 'report.json')} is not a report nvshmem-efa wrote`);
  });

  it('report does not print a report.md that is a symbolic link out of the work dir', () => {
    const { work } = built();
    const secret = path.join(tmp('secret-'), 'secret.txt');
    writeFileSync(secret, 'TOP SECRET\n');
    rmSync(path.join(work, 'report.md'));
    symlinkSync(secret, path.join(work, 'report.md'));
    const r = cli(['report', '--work-dir', work]);
    noCrash(r.stderr);
    expect(r.stdout).not.toContain('TOP SECRET');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${path.join(work, 'report.md')} is a symbolic link`);
  });
});
