import { InterruptedError } from './errors.ts';
import { stopChildrenNow } from './kill-tree.ts';

/**
 * Every signal that ends a command ends it the same way, whenever it comes (docs/reliability.md, the signal table):
 * the commands it started are stopped, the work-dir lock is released (its 'exit' handler, lock.ts), and it exits 130
 * with an `error:` line naming the signal and a `fix:` line saying how to resume. Without a handler Node ends the
 * process with the signal's own status (143, 129, 131) and no word, leaving the lock and a build in groups of
 * their own running: SIGHUP is an ssh connection dropping under a build.
 *
 * Two ways to stop, by what is running:
 *   - inside `interruptScope` (a pipeline's steps, a probe or efaemu build, selftest's checks) the scope's abort
 *     signal is raised: the running command's process tree is stopped, the unfinished step keeps no stamp, the
 *     report is written, and the command ends 130 on its own;
 *   - anywhere else (loading, checks before the first step, clean, patch --export, doctor, launch), at once: the
 *     registered children are killed and the process exits. What those do is safe against SIGKILL at any point
 *     (writes are whole-or-nothing, clean's marker goes last, an export is replaced whole), so stopping there
 *     leaves the same consistent state, and the rerun named in the fix line finishes the job.
 * A second signal, or a scope that has not stopped 20 s after the first, exits at once too.
 *
 * SIGQUIT (Ctrl-\) is one of them: it means "stop", and a core dump of the CLI helps nobody. SIGPIPE is not: Node
 * ignores it, and a closed output stream is handled where it is written (cli.ts).
 */
export const TERMINATING: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

/** What rerunning an interrupted build or patch does: its pipeline resumes. */
export const RERUN_RESUMES = 'rerun the same command: it resumes from the first unfinished step';

/** How long a scope may take to stop after the first signal before the process exits regardless. */
const SCOPE_STOP_MS = 20_000;

export interface Rerun {
  /** Said when the signal comes: what stopping keeps. */
  stopping: string;
  /** The interrupted command's fix line: what running it again does. */
  fix: string;
}

interface Scope {
  abort: AbortController;
  rerun: Rerun;
}

const scopes: Scope[] = [];
let first: NodeJS.Signals | undefined;
/** The fix line of an interrupt outside any scope; the command sets it once known (cli.ts). */
let resume = 'rerun the same command (nothing had been started)';

export function setResume(fix: string): void {
  resume = fix;
}

/** Installs the handlers; first thing in the CLI's main, replacing the interim ones of bin/nvshmem-efa.js. */
export function installSignalHandlers(): void {
  for (const sig of TERMINATING) {
    process.removeAllListeners(sig);
    process.on(sig, onSignal);
  }
}

function onSignal(sig: NodeJS.Signals): void {
  const scope = scopes.at(-1);
  if (first !== undefined) return exitNow(sig, 'a second signal');
  first = sig;
  if (!scope) return exitNow(sig);
  process.stderr.write(`\n${sig}: stopping (${scope.rerun.stopping})\n`);
  scope.abort.abort(new InterruptedError(`interrupted by ${sig}`, scope.rerun.fix));
  setTimeout(() => exitNow(sig, `not stopped ${SCOPE_STOP_MS / 1000} s after it`), SCOPE_STOP_MS).unref();
}

function exitNow(sig: NodeJS.Signals, why?: string): never {
  const fix = scopes.at(-1)?.rerun.fix ?? resume;
  process.stderr.write(`${why ? '' : '\n'}error: interrupted by ${sig}${why ? ` (${why}: stopped at once)` : ''}\nfix: ${fix}\n`);
  // The children first, then the lock (process 'exit' handlers): no later run may start beside them.
  stopChildrenNow();
  process.exit(130);
}

/**
 * Runs `fn` with an abort signal that a terminating signal raises. A signal that came while `fn` ran ends the
 * command 130 even where `fn` finished regardless (its last step done as the signal came): a signal is never
 * answered with 0. `fn` returning 130 has said so itself.
 */
export async function interruptScope<T>(fn: (signal: AbortSignal) => Promise<T>, rerun: Rerun): Promise<T> {
  const scope: Scope = { abort: new AbortController(), rerun };
  scopes.push(scope);
  try {
    const v = await fn(scope.abort.signal);
    if (scope.abort.signal.aborted && (v as unknown) !== 130) throw scope.abort.signal.reason;
    return v;
  } catch (e) {
    // Whatever a stopped command failed with (a child killed mid-write), the signal is the reason.
    if (scope.abort.signal.aborted && !(e instanceof InterruptedError)) throw scope.abort.signal.reason;
    throw e;
  } finally {
    scopes.splice(scopes.indexOf(scope), 1);
  }
}
