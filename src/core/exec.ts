import type { WriteStream } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { CommandFailedError, filesystemFault, InterruptedError } from './errors.ts';
import { childEnded, childStarted, killTree } from './kill-tree.ts';
import { makeDirs } from './make-dirs.ts';
import { openForAppend } from './fs-atomic.ts';

/**
 * A step's log. A write error (full disk, a log path that is a device) is kept and raised by `check()`
 * instead of crashing the process through an unhandled 'error' event.
 */
export interface StepLog {
  write(text: string): void;
  /** Throws the first write error, as a FilesystemError naming the log. */
  check(): void;
  end(): Promise<void>;
  path: string;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Every output line is appended here (the step's log). */
  log?: StepLog;
  logPath?: string;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
  /** What to tell the user if the command fails. */
  fix: string;
}

const RELEVANT = /error|fatal|failed|undefined reference|not found|No such file|CMake Error/i;

/** Lines worth showing when a command fails: the last matching ones, else the plain tail. */
export function relevantTail(lines: readonly string[], max = 15): string[] {
  const hits = lines.filter((l) => RELEVANT.test(l));
  return (hits.length ? hits : lines).slice(-max);
}

/**
 * A step's log, appended to while its commands run. Opened by openForAppend: a link, a hard link to a user's
 * file or a FIFO put in its place is replaced by a fresh file, never written through (or waited on).
 */
export async function openLog(logPath: string): Promise<StepLog> {
  await makeDirs(path.dirname(logPath));
  let fh;
  try {
    fh = await openForAppend(logPath);
  } catch (e) {
    (e as NodeJS.ErrnoException).path ??= logPath;
    throw filesystemFault(e) ?? e;
  }
  const stream: WriteStream = fh.createWriteStream();
  let failure: unknown;
  stream.on('error', (e: NodeJS.ErrnoException) => {
    e.path ??= logPath;
    failure ??= e;
  });
  const check = () => {
    if (failure) throw filesystemFault(failure) ?? failure;
  };
  return {
    path: logPath,
    write(text) {
      if (!failure && !stream.destroyed) stream.write(text);
    },
    check,
    end: () =>
      new Promise<void>((resolve) => {
        if (stream.destroyed) resolve();
        else stream.end(() => resolve());
      }),
  };
}

/** How long a command gets to die after an interrupt before the run stops waiting for its output. */
const STOP_GRACE_MS = 2000;

/**
 * Runs a command, streaming its output lines (split on \n and \r, so progress bars count) to the log and
 * `onLine`. On abort the command's whole process tree is stopped (see kill-tree.ts) and the run ends
 * within seconds, whatever the command's children do with the output pipe.
 */
/** What rerunning an interrupted build does: its pipeline resumes (a command without steps says its own). */
export const RERUN_RESUMES = 'rerun the same command: it resumes from the first unfinished step';

export async function run(cmd: string, args: readonly string[], o: RunOptions): Promise<string[]> {
  o.signal?.throwIfAborted();
  const lines: string[] = [];
  o.log?.write(`$ ${[cmd, ...args].join(' ')}\n`);
  const sub = execa(cmd, args, {
    cwd: o.cwd,
    env: o.env,
    all: true,
    buffer: false,
    reject: false,
    stdin: 'ignore',
    // A process group of its own: a Ctrl-C to ours reaches only us, and we stop the command's whole tree
    // (kill-tree.ts) before any part of it can die and orphan the rest. The registry stops it if we exit.
    detached: true,
  });
  if (sub.pid !== undefined) childStarted(sub.pid);
  let partial = '';
  const take = (line: string) => {
    lines.push(line);
    if (lines.length > 5000) lines.splice(0, 1000);
    o.log?.write(line + '\n');
    o.onLine?.(line);
  };
  sub.all?.setEncoding('utf8');
  sub.all?.on('data', (chunk: string) => {
    const parts = (partial + chunk).split(/\r\n|\r|\n/);
    partial = parts.pop()!;
    for (const l of parts) take(l);
  });
  // On abort: stop the tree, then give the output pipe a moment to close; a process that escaped the tree
  // (a daemon holding the pipe) must not keep the run waiting.
  let onAbort = () => {};
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => {
      void (sub.pid !== undefined ? killTree(sub.pid, STOP_GRACE_MS) : Promise.resolve()).then(() => setTimeout(() => resolve('aborted'), 1000).unref());
    };
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const r = await Promise.race([sub, aborted]);
    if (r === 'aborted' || o.signal?.aborted) {
      sub.all?.destroy();
      o.log?.write(`[interrupted: ${path.basename(cmd)} and its children were stopped]\n`);
      // The interrupt's own fix (withInterrupts: what a rerun of this command does), else the build's.
      const fix = o.signal?.reason instanceof InterruptedError ? o.signal.reason.fix : RERUN_RESUMES;
      throw new InterruptedError(`interrupted while running ${path.basename(cmd)}`, fix, o.logPath);
    }
    if (partial) take(partial);
    o.log?.check();
    if (r.failed) {
      const why = r.exitCode !== undefined ? `exit code ${r.exitCode}` : (r.originalMessage ?? r.shortMessage);
      throw new CommandFailedError(`${path.basename(cmd)} failed (${why})`, o.fix, o.logPath, relevantTail(lines));
    }
    return lines;
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    if (sub.pid !== undefined) childEnded(sub.pid);
  }
}

/**
 * Queries a tool: runs it quietly (20 s at most) and returns its stdout, or undefined when it is missing or fails.
 * For detection: a version, whether a Python module imports, what a library links.
 */
export async function queryTool(cmd: string, args: readonly string[], env?: Record<string, string | undefined>): Promise<string | undefined> {
  try {
    const r = await execa(cmd, args, { reject: false, stdin: 'ignore', timeout: 20_000, env });
    return r.exitCode === 0 ? String(r.stdout) : undefined;
  } catch {
    return undefined;
  }
}
