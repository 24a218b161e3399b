import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FilesystemError, WorkDirBusyError } from '../../src/core/errors.ts';
import { acquireLock, describeHolder, LOCK_FILE, lockHolder } from '../../src/core/lock.ts';
import { childEnded, childStarted } from '../../src/core/kill-tree.ts';
import { processCmdline, processStartTime } from '../../src/core/proc.ts';
import { proofOf, TOKEN_VAR } from '../../src/core/run-token.ts';
import { claimWorkDir, MARKER_FILE } from '../../src/core/work-dir.ts';

/**
 * The work dir's lock (src/core/lock.ts) taken in this process: test/integration/lock-recovery.test.ts drives it
 * through the CLI, where a mutation test cannot see it (issue 37: pid reuse ignored by the take-over survived).
 */
const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'lock-'));

/** A pid that existed and is gone: a process that has exited and been reaped. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

function lockOf(o: { pid: number; host?: string; procStart?: string | null; command?: string }): string {
  return JSON.stringify({ pid: o.pid, host: o.host ?? os.hostname(), procStart: o.procStart === undefined ? processStartTime(o.pid) : o.procStart, command: o.command ?? 'nvshmem-efa build', startedAt: '2025-01-01T00:00:00.000Z' }) + '\n';
}

const notes = () => {
  const got: string[] = [];
  return { got, note: (s: string) => void got.push(s) };
};

describe('work dir lock', () => {
  it('writes a whole lock naming this run, refuses a second taker while held, and is gone once released', async () => {
    const d = tmp();
    const held = await acquireLock(d, ['node', 'cli', 'build', '--work-dir', 'a b']);
    const raw = readFileSync(path.join(d, LOCK_FILE), 'utf8');
    // One line, ended: what `cat` shows whole.
    expect(raw).toMatch(/^\{[^\n]*\}\n$/);
    const info = JSON.parse(raw);
    expect(info).toMatchObject({ pid: process.pid, host: os.hostname(), procStart: processStartTime(process.pid), command: "nvshmem-efa build --work-dir 'a b'", children: [] });
    expect(typeof info.proof).toBe('string');
    expect(held.tookOverFrom).toBeUndefined();
    expect(held.stoppedLeftovers).toBeUndefined();
    // The lock is linked into place from a file of its own; that one does not stay.
    expect(readdirSync(d)).toEqual([LOCK_FILE]);
    const busy = await acquireLock(d).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(WorkDirBusyError);
    expect((busy as Error).message).toBe(`work dir ${d} is in use by another nvshmem-efa run: pid ${process.pid} (nvshmem-efa build --work-dir 'a b'), started ${info.startedAt}`);
    expect((busy as WorkDirBusyError).fix).toContain(`kill ${process.pid}`);
    expect((await lockHolder(d))?.pid).toBe(process.pid);
    await held.release();
    expect(readdirSync(d)).toEqual([]);
    expect(await lockHolder(d)).toBeUndefined();
  });

  it('release leaves a lock that is no longer this run\'s', async () => {
    const d = tmp();
    const held = await acquireLock(d);
    const other = lockOf({ pid: deadPid(), procStart: null });
    writeFileSync(path.join(d, LOCK_FILE), other);
    await held.release();
    expect(readFileSync(path.join(d, LOCK_FILE), 'utf8')).toBe(other);
  });

  it('takes over the lock of a run that is gone, and says whose it was', async () => {
    const d = tmp();
    const pid = deadPid();
    writeFileSync(path.join(d, LOCK_FILE), lockOf({ pid, procStart: '12345', command: 'nvshmem-efa patch' }));
    expect(await lockHolder(d)).toBeUndefined();
    const held = await acquireLock(d);
    expect(held.tookOverFrom).toMatchObject({ pid, command: 'nvshmem-efa patch' });
    expect(JSON.parse(readFileSync(path.join(d, LOCK_FILE), 'utf8')).pid).toBe(process.pid);
    // The stale lock was moved aside under a name of our own, then removed.
    expect(readdirSync(d)).toEqual([LOCK_FILE]);
    await held.release();
  });

  it('a live pid with another start time is a reused pid, not the holder: the lock is taken over', async () => {
    const d = tmp();
    // This very process holds "the pid", but the lock says it started at another time: the holder is gone.
    writeFileSync(path.join(d, LOCK_FILE), lockOf({ pid: process.pid, procStart: '1' }));
    expect(await lockHolder(d)).toBeUndefined();
    const held = await acquireLock(d);
    expect(held.tookOverFrom?.pid).toBe(process.pid);
    await held.release();
    // The same pid with its own start time is the holder; without a start time to compare (no /proc), too.
    for (const procStart of [processStartTime(process.pid), null]) {
      writeFileSync(path.join(d, LOCK_FILE), lockOf({ pid: process.pid, procStart }));
      await expect(acquireLock(d)).rejects.toBeInstanceOf(WorkDirBusyError);
      expect((await lockHolder(d))?.pid).toBe(process.pid);
    }
  });

  it('a lock of another host is never taken over, whatever its pid', async () => {
    const d = tmp();
    writeFileSync(path.join(d, LOCK_FILE), lockOf({ pid: deadPid(), host: 'elsewhere', procStart: null }));
    const busy = await acquireLock(d).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(WorkDirBusyError);
    expect((busy as Error).message).toContain('on host elsewhere (nvshmem-efa build)');
    expect((busy as WorkDirBusyError).fix).toContain(`delete ${path.join(d, LOCK_FILE)}`);
    expect((await lockHolder(d))?.host).toBe('elsewhere');
  });

  it('an unreadable lock is taken over when its pid is gone or it is old, with a note saying which', async () => {
    const d = tmp();
    const file = path.join(d, LOCK_FILE);
    const pid = deadPid();
    writeFileSync(file, `{"pid": ${pid}, "host": "${os.hostname()}", "comm`);
    const a = notes();
    await (await acquireLock(d, process.argv, { note: a.note })).release();
    expect(a.got).toEqual([`took over ${file}: it was unreadable (not a lock this version can read) and its pid ${pid} is gone`]);
    writeFileSync(file, '');
    const old = (Date.now() - 60_000) / 1000;
    utimesSync(file, old, old);
    const b = notes();
    await (await acquireLock(d, process.argv, { note: b.note })).release();
    expect(b.got).toHaveLength(1);
    expect(b.got[0]).toMatch(new RegExp(`^took over ${file}: it was unreadable \\(empty\\) and last written (59|60|61) s ago$`));
    expect(readdirSync(d)).toEqual([]);
  });

  it('an unreadable lock naming a live pid of this host is waited on while it is unchanged, five seconds, then taken over', async () => {
    const d = tmp();
    const file = path.join(d, LOCK_FILE);
    writeFileSync(file, `{"pid": ${process.pid}, "host": "${os.hostname()}"`);
    // Written a minute ahead (a clock ahead of this one, as over NFS): its age never makes it stale, only the wait.
    const ahead = (Date.now() + 60_000) / 1000;
    utimesSync(file, ahead, ahead);
    const n = notes();
    const t0 = Date.now();
    await (await acquireLock(d, process.argv, { note: n.note })).release();
    // Five seconds (UNREADABLE_STALE_MS) from its write: it may have been a live writer's.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4500);
    expect(n.got).toHaveLength(1);
    expect(n.got).toEqual([`took over ${file}: it was unreadable (not a lock this version can read) and unchanged for 5 s`]);
  });

  it('a directory or a link where the lock goes is refused, never taken over or followed', async () => {
    const d = tmp();
    mkdirSync(path.join(d, LOCK_FILE));
    const dir = await acquireLock(d).catch((x: unknown) => x);
    expect(dir).toBeInstanceOf(FilesystemError);
    expect((dir as Error).message).toContain(`refusing to take over the lock of ${d} (nothing was changed`);
    const e = tmp();
    const victim = path.join(e, 'victim');
    writeFileSync(victim, 'theirs');
    symlinkSync(victim, path.join(e, LOCK_FILE));
    const refused = await acquireLock(e).catch((x: unknown) => x);
    expect(refused).toBeInstanceOf(FilesystemError);
    expect((refused as Error).message).toContain('is a symbolic link (to');
    expect(readFileSync(victim, 'utf8')).toBe('theirs');
    expect(readdirSync(e).sort()).toEqual([LOCK_FILE, 'victim']);
  });

  it('describeHolder names the host only when it is another', () => {
    const base = { pid: 42, procStart: null, command: 'nvshmem-efa build', startedAt: 'then', children: [] };
    expect(describeHolder({ ...base, host: os.hostname() })).toBe('pid 42 (nvshmem-efa build), started then');
    expect(describeHolder({ ...base, host: 'other' })).toBe('pid 42 on host other (nvshmem-efa build), started then');
  });
});

/** A child that sleeps, with the given environment; killed (if still there) when the test ends. */
function sleeper(env: NodeJS.ProcessEnv, pad = ''): ChildProcess {
  const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', ...(pad ? [pad] : [])], { env, stdio: 'ignore' });
  spawned.push(c);
  return c;
}
const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
const exited = (c: ChildProcess) => new Promise<string | null>((r) => (c.exitCode !== null || c.signalCode !== null ? r(c.signalCode) : c.once('exit', (_code, sig) => r(sig))));
const started = async (c: ChildProcess) => {
  // Until the child's own command line (and environment) are in /proc.
  for (let i = 0; i < 200 && processCmdline(c.pid!)?.[1] !== '-e'; i++) await new Promise((r) => setTimeout(r, 10));
};

describe('work dir lock: the commands a run that is gone left running', () => {
  it('stops those that carry its secret, and names the others it leaves running, with why', async () => {
    const d = tmp();
    const st = statSync(d);
    const holder = { workDir: `${st.dev}:${st.ino}`, pid: deadPid(), procStart: '12345' };
    const secret = 'a'.repeat(64);
    const ours = sleeper({ ...process.env, [TOKEN_VAR]: secret });
    const theirs = sleeper({ ...process.env, [TOKEN_VAR]: 'b'.repeat(64) }, 'x'.repeat(120));
    await Promise.all([started(ours), started(theirs)]);
    // Only children of this test: a mutant that stops the wrong process must not reach anything else (pid 1, this
    // process or a reused pid would stop the machine's processes or the test runner).
    const children = [ours.pid!, theirs.pid!].map((pid) => ({ pid, procStart: null, cmdline: ['recorded', 'cmd'] }));
    writeFileSync(path.join(d, LOCK_FILE), JSON.stringify({ ...JSON.parse(lockOf({ pid: holder.pid, procStart: holder.procStart })), children, proof: proofOf(secret, holder) }));
    const n = notes();
    const held = await acquireLock(d, process.argv, { note: n.note });
    expect(held.tookOverFrom?.pid).toBe(holder.pid);
    expect(held.stoppedLeftovers).toEqual([ours.pid]);
    expect(await exited(ours)).toMatch(/^SIG(TERM|KILL)$/);
    expect(theirs.exitCode === null && theirs.signalCode === null).toBe(true);
    const cmd = (pid: number) => (processCmdline(pid) ?? ['recorded', 'cmd']).join(' ').slice(0, 80);
    const why = 'the lock of the run that is gone names it, but nothing proves that run started it';
    expect(cmd(theirs.pid!)).toHaveLength(80);
    expect(n.got).toEqual([
      `left pid ${theirs.pid} running (${cmd(theirs.pid!)}): ${why}: its environment does not carry that run's secret`,
    ]);
    await held.release();
  });

  it('a lock without a proof stops nothing', async () => {
    const d = tmp();
    const secret = 'c'.repeat(64);
    const c = sleeper({ ...process.env, [TOKEN_VAR]: secret });
    await started(c);
    const pid = deadPid();
    writeFileSync(path.join(d, LOCK_FILE), JSON.stringify({ ...JSON.parse(lockOf({ pid, procStart: null })), children: [{ pid: c.pid, procStart: null }] }));
    const n = notes();
    const held = await acquireLock(d, process.argv, { note: n.note });
    expect(held.stoppedLeftovers).toBeUndefined();
    expect(n.got).toEqual([
      `left pid ${c.pid} running (${processCmdline(c.pid!)!.join(' ').slice(0, 80)}): the lock of the run that is gone names it, but nothing proves that run started it: the lock carries no proof of which processes that run started (an earlier version wrote it, or it was edited)`,
    ]);
    expect(c.exitCode === null && c.signalCode === null).toBe(true);
    await held.release();
  });
});

describe('work dir lock: what the holder records', () => {
  it('keeps the commands it runs in the lock, until it is released', async () => {
    const d = tmp();
    const file = path.join(d, LOCK_FILE);
    const held = await acquireLock(d);
    const before = JSON.parse(readFileSync(file, 'utf8'));
    childStarted(process.pid);
    try {
      const raw = readFileSync(file, 'utf8');
      expect(raw).toMatch(/^\{[^\n]*\}\n$/);
      const now = JSON.parse(raw);
      expect(now).toEqual({ ...before, children: [{ pid: process.pid, procStart: processStartTime(process.pid), cmdline: processCmdline(process.pid) }] });
    } finally {
      childEnded(process.pid);
    }
    expect(JSON.parse(readFileSync(file, 'utf8')).children).toEqual([]);
    // The lock rewritten with its commands is still this run's: release removes it.
    await held.release();
    expect(readdirSync(d)).toEqual([]);
    childStarted(process.pid);
    childEnded(process.pid);
    expect(readdirSync(d)).toEqual([]);
  });

  it('claims the work dir under the lock and records what the run made when it is released', async () => {
    const d = path.join(tmp(), 'w');
    await claimWorkDir(d);
    const victim = tmp();
    mkdirSync(path.join(d, 'sources'));
    symlinkSync(victim, path.join(d, 'sources', 'nvshmem'));
    const n = notes();
    const held = await acquireLock(d, process.argv, { note: n.note });
    expect(n.got).toEqual([`removed the symbolic link ${path.join(d, 'sources', 'nvshmem')} (to ${victim}): nvshmem-efa makes no links in its work dir and would have written through it; ${victim} is untouched`]);
    const marker = () => JSON.parse(readFileSync(path.join(d, MARKER_FILE), 'utf8'));
    expect(marker().pending).not.toContain('sources');
    expect(marker().created).toEqual(['sources']);
    mkdirSync(path.join(d, 'logs'));
    await held.release();
    expect(marker().created).toEqual(['sources', 'logs']);
    expect(marker().pending).toBeUndefined();
  });

  it('a claim that fails under the lock releases it and raises', async () => {
    const d = path.join(tmp(), 'w');
    await claimWorkDir(d);
    // The marker's temporary name taken by a directory: the marker cannot be written.
    const blocker = path.join(d, `${MARKER_FILE}.nvshmem-efa-tmp-${process.pid}`);
    mkdirSync(blocker);
    writeFileSync(path.join(blocker, 'x'), 'x');
    const exits = process.listenerCount('exit');
    const e = (await acquireLock(d).catch((x: unknown) => x)) as NodeJS.ErrnoException;
    expect(e.code).toMatch(/^(EISDIR|EPERM|ENOTEMPTY)$/);
    expect(existsSync(path.join(d, LOCK_FILE))).toBe(false);
    expect(process.listenerCount('exit')).toBe(exits);
  });

  it('lockHolder: none without a lock or with an unreadable one; a live holder of this host, any of another', async () => {
    const d = tmp();
    expect(await lockHolder(d)).toBeUndefined();
    writeFileSync(path.join(d, LOCK_FILE), '{"pid": 1');
    expect(await lockHolder(d)).toBeUndefined();
    writeFileSync(path.join(d, LOCK_FILE), lockOf({ pid: process.pid }));
    expect(await lockHolder(d)).toMatchObject({ pid: process.pid, host: os.hostname() });
  });
});
