import { mkdir } from 'node:fs/promises';
import picocolors from 'picocolors';

const pc = picocolors.createColors(!!process.stdout.isTTY && !process.env.NO_COLOR);
import { formatError, InterruptedError, NvshmemEfaError } from '../core/errors.ts';
import { writeReport } from '../core/report.ts';
import { StateStore } from '../core/state.ts';
import type { Options } from '../options.ts';
import { chooseRenderer, runSteps } from '../pipeline.ts';
import { workPaths } from '../steps/index.ts';
import type { Ctx, Step } from '../steps/types.ts';
import { assembleReport } from './assemble-report.ts';

/**
 * Runs a step list with Ctrl-C/SIGTERM turned into a clean stop: the running command is killed, the
 * unfinished step keeps no stamp, the report says what happened, and the exit code is 130.
 */
export async function runPipelineCommand(opts: Options, steps: readonly Step[], out: (s: string) => void): Promise<number> {
  const paths = workPaths(opts.workDir);
  await mkdir(paths.logs, { recursive: true });
  const abort = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (abort.signal.aborted) process.exit(130);
    process.stderr.write(`\n${sig}: stopping (the next run resumes from the unfinished step)\n`);
    abort.abort(new InterruptedError(`interrupted by ${sig}`, 'rerun the same command; finished steps are skipped'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const ctx: Ctx = { opts, paths, state: await StateStore.open(opts.workDir), signal: abort.signal, envFixes: [] };
  try {
    const { outcomes, error: raw } = await runSteps(steps, ctx, chooseRenderer(opts));
    const error = abort.signal.aborted && raw ? abort.signal.reason : raw;
    const report = assembleReport(ctx, outcomes, error);
    await writeReport(paths.report, report);
    if (opts.json) out(JSON.stringify(report, null, 2));
    else {
      const applied = report.fixes.filter((f) => f.status !== 'already-present');
      if (applied.length) {
        out(pc.bold('fixes:'));
        for (const f of applied) out(`  ${f.status.padEnd(9)} ${f.id}${f.file ? ` (${f.file})` : ''}${f.detail ? `: ${f.detail}` : ''}`);
      }
      out(`EFA GDA: ${report.gda.status}: ${report.gda.reason}`);
      if (Object.keys(report.runtimeEnv).length) {
        out(pc.bold('run-time environment:'));
        for (const [k, v] of Object.entries(report.runtimeEnv)) out(`  export ${k}=${v}`);
      }
      out(`report: ${paths.report}/report.md`);
    }
    if (error) {
      process.stderr.write(formatError(error) + '\n');
      return error instanceof NvshmemEfaError ? error.exitCode : 1;
    }
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
