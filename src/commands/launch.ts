import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { openFreshSync } from '../core/fs-atomic.ts';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { childEnded, childStarted, killTree } from '../core/kill-tree.ts';
import { shellQuote } from '../core/shell-quote.ts';
import { startPmiServer, type PmiEnd } from '../core/simple-pmi.ts';

/**
 * `nvshmem-efa launch -n N -- CMD ARGS...`: N copies of an NVSHMEM program on this host, bootstrapped by
 * NVSHMEM's default PMI-1 ("simple PMI") through core/simple-pmi.ts. For programs that call nvshmem_init() (NVSHMEM's
 * perftests and examples) on a host without hydra, srun or MPI.
 *
 * A failure ends the job, it never hangs it: once a rank fails (non-zero exit, a signal, a PMI abort, or a rank gone
 * before finalize), the others get `graceSec` to end on their own, then their process trees are stopped; --timeout
 * bounds the whole job (exit 124). The exit status is the first failure's, else 0.
 */
export interface LaunchOptions {
  ranks: number;
  command: string[];
  /** Seconds for the whole job; 0: none. */
  timeoutSec: number;
  /** CUDA_VISIBLE_DEVICES=<rank> for each rank (each sees only its own GPU). */
  oneGpuEach: boolean;
  /** Each rank's output to DIR/rank<r>.log instead of the terminal with a "[r] " prefix. */
  outputDir?: string;
  graceSec?: number;
  dryRun?: boolean;
  json?: boolean;
  /** Extra environment for every rank (tests). */
  env?: NodeJS.ProcessEnv;
}

export interface RankOutcome {
  rank: number;
  /** Exit status; a signal as 128 + n. */
  code: number;
  signal?: string;
  seconds: number;
  /** Stopped by the launcher (another rank failed, or the timeout). */
  stopped: boolean;
}

export interface LaunchResult {
  code: number;
  ranks: RankOutcome[];
  pmi: PmiEnd | { kind: 'unused' };
  timedOut: boolean;
  reason?: string;
}

export function rankEnv(o: LaunchOptions, rank: number, pmi: Record<string, string>): Record<string, string> {
  return { ...pmi, ...(o.oneGpuEach ? { CUDA_VISIBLE_DEVICES: String(rank) } : {}) };
}

export async function launch(o: LaunchOptions, out: (s: string) => void, err: (s: string) => void): Promise<LaunchResult> {
  const pmi = await startPmiServer(o.ranks);
  const grace = (o.graceSec ?? 15) * 1000;
  const start = Date.now();
  const outcomes: (RankOutcome | undefined)[] = new Array(o.ranks).fill(undefined);
  const pids: number[] = [];
  const logs: WriteStream[] = [];
  let firstFailure: { code: number; reason: string } | undefined;
  let timedOut = false;
  const stopping = new Set<number>();
  let finished!: () => void;
  const allDone = new Promise<void>((r) => (finished = r));
  let left = o.ranks;

  // Every rank still running, stopped as a tree (and marked, so its end is not taken for a failure of its own).
  const stopRunning = () => {
    for (let r = 0; r < o.ranks; r++) {
      if (outcomes[r] || stopping.has(r)) continue;
      stopping.add(r);
      void killTree(pids[r]!, 2000);
    }
  };
  const stopOthers = (why: string, graceMs: number, code = 1) => {
    if (!firstFailure) firstFailure = { code, reason: why };
    setTimeout(stopRunning, graceMs).unref();
  };

  if (o.outputDir) mkdirSync(o.outputDir, { recursive: true });
  for (let r = 0; r < o.ranks; r++) {
    const child = spawn(o.command[0]!, o.command.slice(1), {
      env: { ...process.env, ...o.env, ...rankEnv(o, r, pmi.env(r)) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: stopped as a tree, never by a Ctrl-C meant for us alone
    });
    child.on('error', (e) => {
      if (!firstFailure) firstFailure = { code: 127, reason: `rank ${r}: cannot start ${o.command[0]}: ${e.message}` };
    });
    if (child.pid) {
      pids[r] = child.pid;
      childStarted(child.pid);
    }
    if (o.outputDir) {
      // A fresh file: a link left at the name (to a user's file) is replaced, never written through.
      const log = createWriteStream('', { fd: openFreshSync(path.join(o.outputDir, `rank${r}.log`)) });
      logs.push(log);
      child.stdout!.pipe(log, { end: false });
      child.stderr!.pipe(log, { end: false });
    } else {
      readline.createInterface({ input: child.stdout! }).on('line', (l) => out(`[${r}] ${l}`));
      readline.createInterface({ input: child.stderr! }).on('line', (l) => err(`[${r}] ${l}`));
    }
    child.on('close', (code, signal) => {
      if (child.pid) childEnded(child.pid);
      const c = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
      outcomes[r] = { rank: r, code: c, ...(signal ? { signal } : {}), seconds: (Date.now() - start) / 1000, stopped: stopping.has(r) };
      if (c !== 0 && !stopping.has(r) && !timedOut) {
        const why = `rank ${r} ${signal ? `was killed by ${signal}` : `exited with ${c}`}`;
        if (!firstFailure) firstFailure = { code: c, reason: why };
        stopOthers(why, grace);
      }
      if (--left === 0) finished();
    });
  }

  void pmi.ended.then((e) => {
    if (e.kind === 'abort') stopOthers(`a rank called PMI abort (exit code ${e.exitcode})`, grace, e.exitcode > 0 && e.exitcode < 256 ? e.exitcode : 1);
    else if (e.kind === 'protocol-error') stopOthers(`PMI: ${e.detail}`, 0);
    // 'lost': the rank's own exit status says what happened (a rank may also close the socket and exit 0).
  });

  const timer =
    o.timeoutSec > 0
      ? setTimeout(() => {
          timedOut = true;
          if (!firstFailure) firstFailure = { code: 124, reason: `the job ran past --timeout ${o.timeoutSec}s` };
          stopRunning();
        }, o.timeoutSec * 1000)
      : undefined;
  // A terminating signal (core/signals.ts) kills every rank's tree at once (they are registered children) and
  // exits 130, saying so.
  try {
    await allDone;
  } finally {
    if (timer) clearTimeout(timer);
    await Promise.all(logs.map((l) => new Promise((r) => l.end(r))));
    await pmi.close();
  }
  const ended = await Promise.race([pmi.ended, Promise.resolve({ kind: 'unused' } as const)]);
  const ranks = outcomes as RankOutcome[];
  const code = firstFailure?.code ?? 0;
  return { code, ranks, pmi: ended, timedOut, ...(firstFailure ? { reason: firstFailure.reason } : {}) };
}

/** The schema of `launch --json` (with --dry-run too: `dryRun: true` and each rank's environment and command). */
export const LAUNCH_JSON = 'nvshmem-efa-launch/1';

export async function launchCommand(o: LaunchOptions, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  if (o.dryRun) {
    const planned = Array.from({ length: o.ranks }, (_, r) => ({
      rank: r,
      env: rankEnv(o, r, { PMI_PORT: '127.0.0.1:<port>', PMI_RANK: String(r), PMI_SIZE: String(o.ranks) }),
      command: o.command,
      ...(o.outputDir ? { log: path.join(o.outputDir, `rank${r}.log`) } : {}),
    }));
    if (o.json) out(JSON.stringify({ schema: LAUNCH_JSON, dryRun: true, ranks: planned }, null, 2));
    else for (const p of planned) out(`${Object.entries(p.env).map(([k, v]) => `${k}=${v}`).join(' ')} ${o.command.map(shellQuote).join(' ')}${p.log ? ` > ${p.log} 2>&1` : ''}`);
    return 0;
  }
  const r = await launch(o, o.json ? err : out, err);
  if (o.json) out(JSON.stringify({ schema: LAUNCH_JSON, ...r }, null, 2));
  else {
    const line = r.ranks.map((x) => `rank ${x.rank}: ${x.signal ? x.signal : `exit ${x.code}`}${x.stopped ? ' (stopped)' : ''} after ${x.seconds.toFixed(1)}s`).join('; ');
    err(r.code === 0 ? `launch: ${o.ranks} ranks finished: ${line}` : `error: launch: ${r.reason}; ${line}\nfix: ${r.timedOut ? 'raise --timeout, or look at the ranks\' output for where they waited' : 'look at the failing rank\'s output above (or in --output-dir)'}`);
  }
  return r.code;
}
