import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { CommandFailedError, EnvironmentError, InterruptedError } from './errors.ts';
import { openLog, run } from './exec.ts';

/*
 * The git operations behind every pinned clone (NVSHMEM, DeepEP, libfabric, rdma-core, GDRCopy): clone into a
 * temporary directory, read what HEAD is (to verify it against the pin, or to reuse a cached clone), and put
 * a cached clone back to the pinned commit.
 */

/** The commit HEAD names in the clone at `dir`; undefined when there is no clone there (or git cannot read it). */
export async function readHeadCommit(dir: string): Promise<string | undefined> {
  if (!existsSync(dir)) return undefined;
  try {
    // Through run(), like every command: a child the run registers, so a signal stops it (issue 36, class 5).
    const out = await run('git', ['-C', dir, 'rev-parse', 'HEAD'], { fix: `delete ${dir} and rerun` });
    return out.find((l) => /^[0-9a-f]{40,64}$/.test(l.trim()))?.trim();
  } catch {
    return undefined;
  }
}

/**
 * git --progress reports every percent; five minutes without a line is a server that stopped sending.
 * NVSHMEM_EFA_CLONE_QUIET_S changes it (a slow link, or a test).
 */
export function cloneQuietMs(): number {
  const s = Number(process.env.NVSHMEM_EFA_CLONE_QUIET_S);
  return Number.isFinite(s) && s > 0 ? s * 1000 : 5 * 60_000;
}

/**
 * Runs `git clone ...` into `tmp` with its whole output in `logPath`; a failure keeps git's own reason (the
 * `fatal:` line) in the message. Interrupts stop git and its helpers like any command.
 */
export async function cloneRepo(url: string, cloneArgs: readonly string[], tmp: string, what: string, fix: string, signal: AbortSignal, logPath: string, onProgress: (s: string) => void): Promise<void> {
  await rm(tmp, { recursive: true, force: true });
  const log = await openLog(logPath);
  try {
    onProgress(`cloning ${url}`);
    await run('git', ['clone', '--progress', ...cloneArgs, url, tmp], {
      log,
      logPath,
      signal,
      fix,
      // Nothing waits forever (issue 36, class 7): git never asks for a password (it would wait on the terminal of a
      // run that may have none), and a clone that printed no progress for CLONE_QUIET_MS has stopped.
      env: { GIT_TERMINAL_PROMPT: '0', GIT_SSH_COMMAND: process.env.GIT_SSH_COMMAND ?? 'ssh -o BatchMode=yes' },
      quietLimitMs: cloneQuietMs(),
      onLine(line) {
        const m = /^(Receiving objects|Resolving deltas|Updating files):\s+(\d+%)/.exec(line);
        if (m) onProgress(`git: ${m[1]} ${m[2]}`);
      },
    });
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    if (e instanceof InterruptedError || !(e instanceof CommandFailedError)) throw e;
    // git's own reason, else what stopped it (a clone gone quiet), else its last line.
    const reason = e.tail.find((l) => /fatal:|error:/i.test(l)) ?? (/printed nothing/.test(e.message) ? e.message : undefined) ?? e.tail[e.tail.length - 1] ?? e.message;
    throw new EnvironmentError(`cannot clone ${what} from ${url}: ${reason.trim()}`, fix, logPath);
  } finally {
    await log.end();
  }
}

/** A cached clone carries the previous run's patches and build outputs: check out `commit` by force and remove everything untracked. */
export async function resetCloneTo(dir: string, commit: string): Promise<void> {
  const fix = `delete ${dir} and rerun (the clone is made again)`;
  await run('git', ['-C', dir, 'checkout', '-qf', commit], { fix });
  await run('git', ['-C', dir, 'clean', '-qfdx'], { fix });
}

/** Checks out `commit` in the clone at `dir` (a clone made with --no-checkout); git's output goes to `logPath`. */
export async function checkoutCommit(dir: string, commit: string, fix: string, logPath: string): Promise<void> {
  const log = await openLog(logPath);
  try {
    await run('git', ['-C', dir, 'checkout', '-q', commit], { log, logPath, fix });
  } finally {
    await log.end();
  }
}
