import picocolors from 'picocolors';
import { asTypedError, exitCodeOf, formatError, InterruptedError } from '../core/errors.ts';
import { acquireLock, describeHolder } from '../core/lock.ts';
import { exportLines, writeReport } from '../core/report.ts';
import { StateStore } from '../core/state.ts';
import { claimWorkDir } from '../core/work-dir.ts';
import type { Options } from '../options.ts';
import { chooseRenderer, runSteps } from '../pipeline.ts';
import { stopDeepEpBeside } from '../steps/deepep-beside.ts';
import { layoutLine } from '../patchers/nvshmem/layout.ts';
import { workPaths } from '../steps/index.ts';
import type { Ctx, Step } from '../steps/types.ts';
import { assembleReport } from './assemble-report.ts';
import { preflight } from './preflight.ts';
import { makeDirs } from '../core/make-dirs.ts';

const pc = picocolors.createColors(!!process.stdout.isTTY && !process.env.NO_COLOR);

/**
 * Turns SIGINT/SIGTERM into a clean stop for the duration of `fn`: the running step sees the abort signal,
 * its commands' process trees are stopped, the unfinished step keeps no stamp, and the exit code is 130.
 * A second signal exits at once (the lock is still released by its exit handler).
 */
export async function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (abort.signal.aborted) process.exit(130);
    process.stderr.write(`\n${sig}: stopping (the next run resumes from the unfinished step)\n`);
    abort.abort(new InterruptedError(`interrupted by ${sig}`, 'rerun the same command; finished steps are skipped'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await fn(abort.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * Checks everything checkable first (nothing is written until then), claims the work dir, takes its lock,
 * runs the steps, and writes the report whatever happened.
 */
export async function runPipelineCommand(opts: Options, steps: readonly Step[], out: (s: string) => void): Promise<number> {
  const found = await preflight(opts);
  const paths = workPaths(opts.workDir);
  return withInterrupts(async (signal) => {
    await claimWorkDir(opts.workDir);
    const lock = await acquireLock(opts.workDir);
    try {
      if (lock.tookOverFrom) {
        const stopped = lock.stoppedLeftovers ? `; stopped the commands it left running (pid ${lock.stoppedLeftovers.join(', ')})` : '';
        process.stderr.write(`note: took over the lock of a run that is gone: ${describeHolder(lock.tookOverFrom)}${stopped}\n`);
      }
      await makeDirs(paths.logs);
      const ctx: Ctx = { opts, paths, state: await StateStore.open(opts.workDir), signal, envFixes: found.envFixes, ...(found.env ? { env: found.env } : {}) };
      const { outcomes, error: raw } = await runSteps(steps, ctx, chooseRenderer(opts));
      // A DeepEP compile begun beside NVSHMEM outlives no run (build-deepep failed early or was up to date).
      await stopDeepEpBeside(ctx);
      const error = asTypedError(signal.aborted && raw ? signal.reason : raw);
      const report = assembleReport(ctx, outcomes, error);
      await writeReport(paths.report, report);
      if (opts.json) out(JSON.stringify(report, null, 2));
      else {
        const applied = report.fixes.filter((f) => f.status !== 'already-present');
        if (applied.length) {
          out(pc.bold('fixes:'));
          for (const f of applied) out(`  ${f.status.padEnd(9)} ${f.id}${f.file ? ` (${f.file})` : ''}${f.detail ? `: ${f.detail}` : ''}`);
        }
        if (report.nvshmem.layout) out(layoutLine(report.nvshmem.layout));
        out(`EFA GDA: ${report.gda.status}: ${report.gda.reason}`);
        if (Object.keys(report.runtimeEnv).length) {
          out(pc.bold('run-time environment:'));
          for (const line of exportLines(report.runtimeEnv)) out(`  ${line}`);
        }
        out(`report: ${paths.report}/report.md`);
      }
      if (error) {
        process.stderr.write(formatError(error) + '\n');
        return exitCodeOf(error);
      }
      return 0;
    } finally {
      await lock.release();
    }
  });
}
