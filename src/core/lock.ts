import { lstatSync, statSync, unlinkSync } from 'node:fs';
import { link, open, rename, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as z from 'zod';
import { WorkDirBusyError } from './errors.ts';
import { isRunning, killTree, observeChildren } from './kill-tree.ts';
import { processCmdline, processStartTime } from './proc.ts';
import { carriesProof, proofOf, runToken, type ProofScope } from './run-token.ts';
import { writeDurable, writeFileAtomicSync } from './fs-atomic.ts';
import { readSmallFile, refuseOddOwnFiles } from './untrusted.ts';
import { beginClaim, settleClaim } from './work-dir.ts';
import { LOCK_FILE } from './work-dir-names.ts';
import { shellQuote } from './shell-quote.ts';

/**
 * One run per work dir: two runs copying, patching or building into the same tree corrupt it and then stamp
 * the damage as done. The lock holds the holder's pid, the start time of that pid (so a recycled pid is not
 * mistaken for the holder), its command line (for the message), the commands it runs, and the proof that lets a
 * later run stop those commands should this one be killed outright (run-token.ts). It is written whole into a file of its
 * own and then linked into place (link() fails with EEXIST while another run holds it), so a full disk or a
 * crash leaves no lock or a whole one, never an empty or half-written one that blocks every later run.
 */
export { LOCK_FILE };

/** An unreadable lock this old is a dead run's (this version writes whole locks; an older one took microseconds). */
const UNREADABLE_STALE_MS = 5000;

/** A command the holder runs: stopped on take-over only if it proves it is that run's (run-token.ts). */
const Proc = z.object({ pid: z.number().int().positive(), procStart: z.string().nullable(), cmdline: z.array(z.string()).optional() });
type Proc = z.infer<typeof Proc>;
const LockInfo = z.object({
  // Positive: process.kill(0 or -n) would reach whole process groups.
  pid: z.number().int().positive(),
  host: z.string(),
  procStart: z.string().nullable(),
  command: z.string(),
  startedAt: z.string(),
  /** The commands the holder is running (cmake, git, setup.py): stopped by whoever takes over a stale lock. */
  children: z.array(Proc).default([]),
  /**
   * A hash of the run's secret, bound to this work dir and holder (run-token.ts): a command named above is stopped
   * only if its environment carries the secret. Absent (an earlier version's lock, or a forged one): none is.
   */
  proof: z.string().optional(),
});
type LockInfo = z.infer<typeof LockInfo>;



/**
 * Why a command recorded in a dead run's lock is not provably that run's, or undefined when it is: its environment
 * carries the run's secret (run-token.ts). Pid, start time and command line prove nothing: anyone who can write the
 * work dir can copy them from /proc into a lock. What fails the proof is left running.
 */
function notProvedOurs(c: Proc, holder: LockInfo, workDir: string): string | undefined {
  if (c.pid <= 1 || c.pid === process.pid) return 'it is not a command a run starts';
  if (!holder.proof) return 'the lock carries no proof of which processes that run started (an earlier version wrote it, or it was edited)';
  if (!carriesProof(c.pid, holder.proof, { workDir, pid: holder.pid, procStart: holder.procStart })) return "its environment does not carry that run's secret";
  return undefined;
}

/** The work dir as the proof names it: device and inode, which a lock copied to another work dir does not share. */
function dirIdentity(dir: string): string {
  const st = statSync(dir);
  return `${st.dev}:${st.ino}`;
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


export interface HeldLock {
  file: string;
  /** Set when a lock of a dead run was replaced; the caller tells the user. */
  tookOverFrom?: LockInfo;
  /** Commands the dead run had left running, stopped on take-over. */
  stoppedLeftovers?: number[];
  release(): Promise<void>;
}

/** The lock as found: `info` when it is one this version can read, else why not. */
type Found = { key: string; mtimeMs: number; info?: LockInfo; why?: string; raw?: string };

/** Reads the lock without following a link or reading more than a lock's size (a link to /dev/zero). */
function readLock(file: string): Found | undefined {
  const got = readSmallFile(file, 64 * 1024);
  if (got.kind === 'missing') return undefined;
  if (got.kind === 'bad') return { key: `bad:${got.why}`, mtimeMs: lstatMtime(file), why: got.why };
  const key = `ok:${got.text}`;
  try {
    return { key, mtimeMs: got.mtimeMs, raw: got.text, info: LockInfo.parse(JSON.parse(got.text)) };
  } catch {
    return { key, mtimeMs: got.mtimeMs, raw: got.text, why: got.text === '' ? 'empty' : 'not a lock this version can read' };
  }
}

function lstatMtime(file: string): number {
  try {
    return lstatSync(file).mtimeMs;
  } catch {
    return Date.now();
  }
}

/**
 * Whether an unreadable lock belongs to a run that is gone: it names a pid of this host that no longer
 * exists, or it is older than any lock write takes. Null while it may still be a live writer's.
 */
function unreadableIsStale(found: Found, host: string): string | null {
  const pid = /"pid"\s*:\s*(\d+)/.exec(found.raw ?? '')?.[1];
  const itsHost = /"host"\s*:\s*"([^"]*)"/.exec(found.raw ?? '')?.[1];
  if (pid && (itsHost === undefined || itsHost === host) && !pidExists(Number(pid))) return `its pid ${pid} is gone`;
  const age = Date.now() - found.mtimeMs;
  if (age >= UNREADABLE_STALE_MS) return `last written ${Math.round(age / 1000)} s ago`;
  return null;
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function describeHolder(info: LockInfo): string {
  return `pid ${info.pid}${info.host !== os.hostname() ? ` on host ${info.host}` : ''} (${info.command}), started ${info.startedAt}`;
}

/**
 * Puts `content` at `file` only if there is no file there, all or nothing: written whole (and synced, so a
 * full disk says so now) under a name of our own, then hard-linked into place (EEXIST while held). A file
 * system without hard links (EPERM, ENOTSUP) gets O_EXCL instead, and the file is removed again if writing
 * it fails: only a crash in between could leave it short, and that one is taken over as unreadable.
 */
async function createWhole(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await writeDurable(tmp, content);
    await link(tmp, file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw e;
    const fh = await open(file, 'wx');
    try {
      await fh.writeFile(content);
      await fh.sync();
    } catch (w) {
      await unlink(file).catch(() => undefined);
      throw w;
    } finally {
      await fh.close();
    }
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

export interface LockOptions {
  /** Where notes go (take-over of an unreadable lock, commands left running): stderr by default. */
  note?: (s: string) => void;
}

/** Takes the lock of `dir` (which must exist) or throws WorkDirBusyError naming the holder. */
export async function acquireLock(dir: string, argv: readonly string[] = process.argv, o: LockOptions = {}): Promise<HeldLock> {
  const note = o.note ?? ((s: string) => process.stderr.write(`note: ${s}\n`));
  const file = path.join(dir, LOCK_FILE);
  const workDirId = dirIdentity(dir);
  const holder: ProofScope = { workDir: workDirId, pid: process.pid, procStart: processStartTime(process.pid) };
  const me: LockInfo = {
    pid: holder.pid,
    host: os.hostname(),
    procStart: holder.procStart,
    command: ['nvshmem-efa', ...argv.slice(2)].map(shellQuote).join(' '),
    startedAt: new Date().toISOString(),
    children: [],
    proof: proofOf(runToken(), holder),
  };
  let mine = JSON.stringify(me) + '\n';
  let tookOverFrom: LockInfo | undefined;
  const stoppedLeftovers: number[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await createWhole(file, mine);
      let released = false;
      const releaseSync = () => {
        if (released) return;
        released = true;
        // What this run created in the work dir is recorded before the lock goes (work-dir.ts).
        try {
          settleClaim(dir, { final: true });
        } catch {
          /* unrecorded entries are only kept by clean, never lost */
        }
        const now = readSmallFile(file, 64 * 1024);
        if (now.kind === 'ok' && now.text === mine) unlinkSync(file);
      };
      // A second Ctrl-C ends the process with process.exit(): the lock must not outlive it.
      process.once('exit', releaseSync);
      try {
        // Now that no other run can be at work here: what this run will create is noted (work-dir.ts).
        beginClaim(dir, note);
      } catch (e) {
        process.off('exit', releaseSync);
        releaseSync();
        throw e;
      }
      // Keep the running commands in the lock (written through a rename: a reader never sees half of it).
      observeChildren((pids) => {
        if (released) return;
        const children = pids.map((pid) => ({ pid, procStart: processStartTime(pid), cmdline: processCmdline(pid) ?? [] }));
        const next = JSON.stringify({ ...me, children }) + '\n';
        try {
          writeFileAtomicSync(file, next);
          mine = next;
        } catch {
          // The lock still names us; only the leftover stop of a later run loses this detail.
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
    // A directory, FIFO, socket or link where the lock goes is not a lock of a run that is gone: someone's.
    refuseOddOwnFiles(dir, [LOCK_FILE], `take over the lock of ${dir}`);
    const held = readLock(file);
    if (!held) continue;
    let unreadable: string | undefined;
    if (!held.info) {
      // Maybe an earlier version's run between its create and its write (this version writes whole locks):
      // give it until the lock is a few seconds old; a lock that changes meanwhile is looked at again.
      const since = Date.now();
      let stale = unreadableIsStale(held, me.host);
      while (!stale) {
        await new Promise((r) => setTimeout(r, 100));
        if (readLock(file)?.key !== held.key) break;
        stale = unreadableIsStale(held, me.host) ?? (Date.now() - since >= UNREADABLE_STALE_MS ? `unchanged for ${UNREADABLE_STALE_MS / 1000} s` : null);
      }
      if (!stale) continue;
      unreadable = `it was unreadable (${held.why}) and ${stale}`;
    } else if (held.info.host !== me.host) {
      throw new WorkDirBusyError(
        `work dir ${dir} is in use by another nvshmem-efa run: ${describeHolder(held.info)}`,
        `wait for it to finish, or pass another --work-dir; if that run is gone, delete ${file}`,
      );
    } else if (alive(held.info)) {
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
    if (readLock(aside)?.key !== held.key) {
      // Another taker replaced the stale lock between our read and our rename: put its live lock back.
      await link(aside, file).catch(() => undefined);
    } else if (unreadable) {
      note(`took over ${file}: ${unreadable}`);
    } else {
      tookOverFrom = held.info!;
      // A run killed outright (SIGKILL) cannot stop its commands; they would build into this work dir
      // alongside us. Stop those still running that are provably those commands.
      for (const c of held.info!.children) {
        if (!isRunning(c.pid)) continue;
        const why = notProvedOurs(c, held.info!, workDirId);
        if (why) {
          note(`left pid ${c.pid} running (${(processCmdline(c.pid) ?? c.cmdline ?? []).join(' ').slice(0, 80)}): the lock of the run that is gone names it, but nothing proves that run started it: ${why}`);
          continue;
        }
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
  const held = readLock(path.join(dir, LOCK_FILE));
  if (!held?.info) return undefined;
  return held.info.host !== os.hostname() || alive(held.info) ? held.info : undefined;
}
