import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FilesystemError, WorkDirBusyError } from '../../src/core/errors.ts';
import { acquireLock, describeHolder, LOCK_FILE, lockHolder } from '../../src/core/lock.ts';
import { processStartTime } from '../../src/core/proc.ts';

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
    const info = JSON.parse(readFileSync(path.join(d, LOCK_FILE), 'utf8'));
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

  it('an unreadable lock naming a live pid of this host is waited on while it is fresh, then taken over', async () => {
    const d = tmp();
    const file = path.join(d, LOCK_FILE);
    writeFileSync(file, `{"pid": ${process.pid}, "host": "${os.hostname()}"`);
    const n = notes();
    const t0 = Date.now();
    await (await acquireLock(d, process.argv, { note: n.note })).release();
    // Five seconds (UNREADABLE_STALE_MS) from its write: it may have been a live writer's.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4500);
    expect(n.got).toHaveLength(1);
    expect(n.got[0]).toMatch(/it was unreadable \(not a lock this version can read\) and (last written 5 s ago|unchanged for 5 s)$/);
  });

  it('a directory or a link where the lock goes is refused, never taken over or followed', async () => {
    const d = tmp();
    mkdirSync(path.join(d, LOCK_FILE));
    await expect(acquireLock(d)).rejects.toBeInstanceOf(FilesystemError);
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
