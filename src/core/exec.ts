import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { CommandFailedError, InterruptedError } from './errors.ts';

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Every output line is appended here (the step's log). */
  log?: WriteStream;
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

export async function openLog(logPath: string): Promise<WriteStream> {
  await mkdir(path.dirname(logPath), { recursive: true });
  return createWriteStream(logPath, { flags: 'a' });
}

export async function run(cmd: string, args: readonly string[], o: RunOptions): Promise<string[]> {
  const lines: string[] = [];
  o.log?.write(`$ ${[cmd, ...args].join(' ')}\n`);
  const sub = execa(cmd, args, {
    cwd: o.cwd,
    env: o.env,
    all: true,
    reject: false,
    stdin: 'ignore',
    cancelSignal: o.signal,
    forceKillAfterDelay: 3000,
    // Kill the child with us: a killed run must not leave a compiler behind writing into the build dir.
    cleanup: true,
  });
  for await (const line of sub.iterable({ from: 'all' })) {
    lines.push(line);
    if (lines.length > 5000) lines.splice(0, 1000);
    o.log?.write(line + '\n');
    o.onLine?.(line);
  }
  const r = await sub;
  if (r.isCanceled) throw new InterruptedError(`interrupted while running ${cmd}`, 'rerun the same command: it resumes from the first unfinished step', o.logPath);
  if (r.failed) {
    const why = r.exitCode !== undefined ? `exit code ${r.exitCode}` : (r.originalMessage ?? r.shortMessage);
    throw new CommandFailedError(`${path.basename(cmd)} failed (${why})`, o.fix, o.logPath, relevantTail(lines));
  }
  return lines;
}

/** Runs a command and returns its stdout, or undefined when it is missing or fails (for detection). */
export async function probe(cmd: string, args: readonly string[], env?: Record<string, string | undefined>): Promise<string | undefined> {
  try {
    const r = await execa(cmd, args, { reject: false, stdin: 'ignore', timeout: 20_000, env });
    return r.exitCode === 0 ? String(r.stdout) : undefined;
  } catch {
    return undefined;
  }
}
