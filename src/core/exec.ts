import type { WriteStream } from 'node:fs';
import path from 'node:path';
import { CommandFailedError, filesystemFault, InterruptedError } from './errors.ts';
import { childEnded, childStarted, killTree, tracked } from './kill-tree.ts';
import { RERUN_RESUMES } from './signals.ts';
import { runToken, TOKEN_VAR } from './run-token.ts';
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
  /** A command that prints nothing for this long has stopped (a clone from a server that went quiet): it is
   * stopped and fails with that reason. Off by default: one compile may be silent for many minutes. */
  quietLimitMs?: number;
}

/** A line longer than this reaches the terminal (the failure's last lines, progress) cut, and the log whole: a
 * 27 MB line of cmake output was printed whole (issue 36, class 6). checks.sh's result lines are under 2 KiB. */
export const SHOWN_LINE_MAX = 4096;
/** A line without an end is written to the log in pieces of this size, so that memory stays bounded too. */
const PARTIAL_MAX = 1 << 20;

/** `line` as the terminal gets it: at most SHOWN_LINE_MAX characters, and how much more there was. */
export function shownLine(line: string, length = line.length): string {
  return length <= SHOWN_LINE_MAX ? line : `${line.slice(0, SHOWN_LINE_MAX)}… (${length - SHOWN_LINE_MAX} more characters in the log)`;
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
/** How long the output pipe may stay open after the command exited (its last lines are read meanwhile). */
const STREAM_GRACE_MS = 2000;

/**
 * Runs a command, streaming its output lines (split on \n and \r, so progress bars count) to the log and
 * `onLine`. On abort the command's whole process tree is stopped (see kill-tree.ts) and the run ends
 * within seconds, whatever the command's children do with the output pipe.
 */
/** What rerunning an interrupted build does: its pipeline resumes (a command without steps says its own). */
export { RERUN_RESUMES } from './signals.ts';

export async function run(cmd: string, args: readonly string[], o: RunOptions): Promise<string[]> {
  // execa (with its dependencies, about a quarter of a megabyte) is loaded by the first command run, not by every
  // module that may run one: `patch --dry-run` runs none.
  const { execa } = await import('execa');
  o.signal?.throwIfAborted();
  const lines: string[] = [];
  o.log?.write(`$ ${[cmd, ...args].join(' ')}\n`);
  const sub = execa(cmd, args, {
    cwd: o.cwd,
    // The run's secret (run-token.ts): what lets the take-over of this run's lock, should it be killed outright,
    // prove that a process it names is one this run started. Last, so that no inherited value replaces it.
    env: { ...o.env, [TOKEN_VAR]: runToken() },
    all: true,
    buffer: false,
    reject: false,
    stdin: 'ignore',
    // A process group of its own: a Ctrl-C to ours reaches only us, and we stop the command's whole tree
    // (kill-tree.ts) before any part of it can die and orphan the rest. The registry stops it if we exit.
    detached: true,
  });
  if (sub.pid !== undefined) childStarted(sub.pid);
  // The line being read: its start (for the terminal), and its length so far (the rest is in the log already).
  let partial = '';
  let partialHead: string | undefined;
  let partialLength = 0;
  let lastOutput = Date.now();
  const take = (rest: string) => {
    const length = partialLength + rest.length;
    const shown = shownLine(partialHead !== undefined ? partialHead : rest, partialHead !== undefined ? length : rest.length);
    partialHead = undefined;
    partialLength = 0;
    lines.push(shown);
    if (lines.length > 5000) lines.splice(0, 1000);
    o.log?.write(rest + '\n');
    o.onLine?.(shown);
  };
  sub.all?.setEncoding('utf8');
  sub.all?.on('data', (chunk: string) => {
    lastOutput = Date.now();
    const parts = (partial + chunk).split(/\r\n|\r|\n/);
    partial = parts.pop()!;
    for (const l of parts) take(l);
    if (partial.length > PARTIAL_MAX) {
      // A line with no end in sight: into the log now, its start kept for the terminal.
      partialHead ??= partial.slice(0, SHOWN_LINE_MAX);
      partialLength += partial.length;
      o.log?.write(partial);
      partial = '';
    }
  });
  // The command's exit, not its streams' end: a background child that keeps the output pipe open (a compiler
  // cache server) must not keep the run waiting. Output still in the pipe gets STREAM_GRACE_MS.
  const exited = new Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    sub.once('exit', (exitCode, signal) => resolve({ exitCode, signal }));
  });
  // Whichever comes first: execa's result (streams ended; also a command that could not start, which never
  // exits), or the exit plus the grace, after which the pipe is let go.
  const viaExeca = sub.then((r) => ({ failed: r.failed, why: r.exitCode !== undefined ? `exit code ${r.exitCode}` : (r.originalMessage ?? r.shortMessage) }));
  const viaExit = exited.then(
    (x) =>
      new Promise<{ failed: boolean; why: string }>((resolve) => {
        setTimeout(() => {
          sub.all?.destroy();
          resolve({ failed: x.exitCode !== 0, why: x.exitCode !== null ? `exit code ${x.exitCode}` : `killed by ${x.signal}` });
        }, STREAM_GRACE_MS).unref();
      }),
  );
  const settled = Promise.race([viaExeca, viaExit]);
  // A command that went quiet for longer than its limit is stopped like an interrupted one, and fails.
  let quiet = false;
  const quietTimer = o.quietLimitMs
    ? setInterval(() => {
        if (Date.now() - lastOutput < o.quietLimitMs!) return;
        quiet = true;
        clearInterval(quietTimer);
        if (sub.pid !== undefined) void killTree(sub.pid, STOP_GRACE_MS);
      }, Math.min(1000, o.quietLimitMs)).unref()
    : undefined;
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
    const r = await Promise.race([settled, aborted]);
    if (r === 'aborted' || o.signal?.aborted) {
      sub.all?.destroy();
      o.log?.write(`[interrupted: ${path.basename(cmd)} and its children were stopped]\n`);
      // The interrupt's own fix (withInterrupts: what a rerun of this command does), else the build's.
      const fix = o.signal?.reason instanceof InterruptedError ? o.signal.reason.fix : RERUN_RESUMES;
      throw new InterruptedError(`interrupted while running ${path.basename(cmd)}`, fix, o.logPath);
    }
    if (partial || partialHead !== undefined) take(partial);
    o.log?.check();
    if (quiet) {
      const s = Math.round(o.quietLimitMs! / 1000);
      o.log?.write(`[stopped: ${path.basename(cmd)} printed nothing for ${s} s]\n`);
      throw new CommandFailedError(`${path.basename(cmd)} printed nothing for ${s} s and was stopped`, o.fix, o.logPath, relevantTail(lines));
    }
    if (r.failed) throw new CommandFailedError(`${path.basename(cmd)} failed (${r.why})`, o.fix, o.logPath, relevantTail(lines));
    return lines;
  } finally {
    if (quietTimer) clearInterval(quietTimer);
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
    const { execa } = await import('execa'); // loaded on first use, as in run()
    const r = await tracked(execa(cmd, args, { reject: false, stdin: 'ignore', timeout: 20_000, env }));
    return r.exitCode === 0 ? String(r.stdout) : undefined;
  } catch {
    return undefined;
  }
}
