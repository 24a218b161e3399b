import { readFileSync, unlinkSync } from 'node:fs';
import { link, open, readFile, rename, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { WorkDirBusyError } from './errors.ts';

/**
 * One run per work dir: two runs copying, patching or building into the same tree corrupt it and then stamp
 * the damage as done. The lock is a file created with O_EXCL holding the holder's pid, the start time of
 * that pid (so a recycled pid is not mistaken for the holder) and its command line (for the message).
 */
export const LOCK_FILE = '.nvshmem-efa.lock';

const LockInfo = z.object({ pid: z.number().int(), host: z.string(), procStart: z.string().nullable(), command: z.string(), startedAt: z.string() });
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

function alive(info: LockInfo): boolean {
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
  };
  const mine = JSON.stringify(me) + '\n';
  let tookOverFrom: LockInfo | undefined;
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
      return {
        file,
        ...(tookOverFrom ? { tookOverFrom } : {}),
        async release() {
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
