import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { link, open, readFile, rename, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { WorkDirBusyError } from './errors.ts';
import { isRunning, killTree, observeChildren } from './kill-tree.ts';

/**
 * One run per work dir: two runs copying, patching or building into the same tree corrupt it and then stamp
 * the damage as done. The lock is a file created with O_EXCL holding the holder's pid, the start time of
 * that pid (so a recycled pid is not mistaken for the holder) and its command line (for the message).
 */
export const LOCK_FILE = '.nvshmem-efa.lock';

const Proc = z.object({ pid: z.number().int(), procStart: z.string().nullable() });
const LockInfo = z.object({
  pid: z.number().int(),
  host: z.string(),
  procStart: z.string().nullable(),
  command: z.string(),
  startedAt: z.string(),
  /** The commands the holder is running (cmake, git, setup.py): stopped by whoever takes over a stale lock. */
  children: z.array(Proc).default([]),
});
type LockInfo = z.infer<typeof LockInfo>;

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where /proc is not there. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "(comm)": state is field 3, so starttime (field 22) is index 22 - 3.
    if (fields[0] === 'Z') return null;
    return fields[22 - 3] ?? null;
  } catch {
    return null;
  }
}

function alive(info: { pid: number; procStart: string | null }): boolean {
  try {
    process.kill(info.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const start = processStartTime(info.pid);
  // A zombie or a pid reused by another process is not the holder.
  if (info.procStart !== null && start !== info.procStart) return false;
  return true;
}

const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);

export interface HeldLock {
  file: string;
  /** Set when a lock of a dead run was replaced; the caller tells the user. */
  tookOverFrom?: LockInfo;
  /** Commands the dead run had left running, stopped on take-over. */
  stoppedLeftovers?: number[];
  release(): Promise<void>;
}

async function readLock(file: string): Promise<{ raw: string; info?: LockInfo } | undefined> {
  let raw: string;
  try {
    raw = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    return { raw, info: LockInfo.parse(JSON.parse(raw)) };
  } catch {
    return { raw };
  }
}

export function describeHolder(info: LockInfo): string {
  return `pid ${info.pid}${info.host !== os.hostname() ? ` on host ${info.host}` : ''} (${info.command}), started ${info.startedAt}`;
}

/** Takes the lock of `dir` (which must exist) or throws WorkDirBusyError naming the holder. */
export async function acquireLock(dir: string, argv: readonly string[] = process.argv): Promise<HeldLock> {
  const file = path.join(dir, LOCK_FILE);
  const me: LockInfo = {
    pid: process.pid,
    host: os.hostname(),
    procStart: processStartTime(process.pid),
    command: ['nvshmem-efa', ...argv.slice(2)].map(quote).join(' '),
    startedAt: new Date().toISOString(),
    children: [],
  };
  let mine = JSON.stringify(me) + '\n';
  let tookOverFrom: LockInfo | undefined;
  const stoppedLeftovers: number[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const fh = await open(file, 'wx');
      try {
        await fh.writeFile(mine);
      } finally {
        await fh.close();
      }
      let released = false;
      const releaseSync = () => {
        if (released) return;
        released = true;
        try {
          if (readFileSync(file, 'utf8') === mine) unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
      // A second Ctrl-C ends the process with process.exit(): the lock must not outlive it.
      process.once('exit', releaseSync);
      // Keep the running commands in the lock (written through a rename: a reader never sees half of it).
      observeChildren((pids) => {
        if (released) return;
        const next = JSON.stringify({ ...me, children: pids.map((pid) => ({ pid, procStart: processStartTime(pid) })) }) + '\n';
        try {
          writeFileSync(`${file}.${process.pid}.tmp`, next);
          renameSync(`${file}.${process.pid}.tmp`, file);
          mine = next;
        } catch {
          /* the lock still names us; only the leftover stop of a later run loses this detail */
        }
      });
      return {
        file,
        ...(tookOverFrom ? { tookOverFrom } : {}),
        ...(stoppedLeftovers.length ? { stoppedLeftovers } : {}),
        async release() {
          observeChildren(undefined);
          process.off('exit', releaseSync);
          releaseSync();
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const held = await readLock(file);
    if (!held) continue;
    // An unreadable lock is someone's half-written one: treat it as held (it is at most a moment old).
    if (!held.info) {
      await new Promise((r) => setTimeout(r, 100));
      const again = await readLock(file);
      if (again && again.raw === held.raw) {
        throw new WorkDirBusyError(`work dir ${dir} is locked (${file} is not a lock this version can read)`, `if no other nvshmem-efa run uses ${dir}, delete ${file} and rerun`);
      }
      continue;
    }
    if (held.info.host !== me.host) {
      throw new WorkDirBusyError(
        `work dir ${dir} is in use by another nvshmem-efa run: ${describeHolder(held.info)}`,
        `wait for it to finish, or pass another --work-dir; if that run is gone, delete ${file}`,
      );
    }
    if (alive(held.info)) {
      throw new WorkDirBusyError(
        `work dir ${dir} is in use by another nvshmem-efa run: ${describeHolder(held.info)}`,
        `wait for it to finish (or stop it: kill ${held.info.pid}), or pass another --work-dir`,
      );
    }
    // Stale: its process is gone. Move it aside under a name of our own; only one taker can succeed.
    const aside = `${file}.stale-${process.pid}`;
    try {
      await rename(file, aside);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw e;
    }
    const moved = await readFile(aside, 'utf8').catch(() => '');
    if (moved !== held.raw) {
      // Another taker replaced the stale lock between our read and our rename: put its live lock back.
      await link(aside, file).catch(() => undefined);
    } else {
      tookOverFrom = held.info;
      // A run killed outright (SIGKILL) cannot stop its commands; they would build into this work dir
      // alongside us. Stop those still running (same pid and start time as recorded).
      for (const c of held.info.children.filter(alive)) {
        if (!isRunning(c.pid)) continue;
        await killTree(c.pid);
        stoppedLeftovers.push(c.pid);
      }
    }
    await unlink(aside).catch(() => undefined);
  }
  throw new WorkDirBusyError(`could not take the lock of work dir ${dir}`, `another run keeps taking it; wait for it to finish, or pass another --work-dir`);
}

/** The holder of the lock, if a live run holds it (for `clean`). */
export async function lockHolder(dir: string): Promise<LockInfo | undefined> {
  const held = await readLock(path.join(dir, LOCK_FILE));
  if (!held?.info) return undefined;
  return held.info.host !== os.hostname() || alive(held.info) ? held.info : undefined;
}
