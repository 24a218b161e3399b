import picocolors from 'picocolors';
import { formatDuration } from '../core/progress.ts';
import path from 'node:path';
import { amendError, asTypedError, exitCodeOf, faultContextOf, formatError, NvshmemEfaError, PatchRefusedError } from '../core/errors.ts';
import { interruptScope, type Rerun } from '../core/signals.ts';
import { acquireLock, describeHolder } from '../core/lock.ts';
import { RERUN_RESUMES } from '../core/exec.ts';
import { exportLines, writeReport } from '../core/report.ts';
import { StateStore } from '../core/state.ts';
import { claimWorkDir } from '../core/work-dir.ts';
import type { Options } from '../options.ts';
import { chooseRenderer, runSteps, type StepOutcome } from '../pipeline.ts';
import { stopDeepEpBeside } from '../steps/deepep-beside.ts';
import { layoutLine } from '../patchers/nvshmem/layout.ts';
import { workPaths } from '../steps/work-paths.ts';
import type { Ctx, Step } from '../steps/types.ts';
import { assembleReport } from './assemble-report.ts';
import { preflight } from './preflight.ts';
import { makeDirs } from '../core/make-dirs.ts';
import { shellQuote } from '../core/shell-quote.ts';

const pc = picocolors.createColors(!!process.stdout.isTTY && !process.env.NO_COLOR);

/** What a rerun does after an interrupt: the build's pipeline resumes; a command without steps says its own. */
const RESUMES = { stopping: 'the next run resumes from the unfinished step', fix: RERUN_RESUMES };

/**
 * Turns a terminating signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT; core/signals.ts) into a clean stop for the duration
 * of `fn`: the running step sees the abort signal, its commands' process trees are stopped, the unfinished step keeps
 * no stamp, and the exit code is 130. A second signal exits at once (the lock is still released by its exit handler).
 * `rerun` says what running the command again does (default: the build's, which resumes); the interrupted command's
 * error carries it as its fix.
 */
export function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>, rerun: Rerun = RESUMES): Promise<T> {
  return interruptScope(fn, rerun);
}

const inside = (p: string, dir: string) => p === dir || p.startsWith(dir + path.sep);

/**
 * What only the run knows about a failure, added to the step's message: that a refused tree is the work
 * dir's own copy (changed since an earlier run patched it: --force replaces it, a fresh checkout is not
 * needed), and that NVSHMEM was already patched in place when a DeepEP step failed.
 */
export function explainFailure(ctx: Ctx, outcomes: readonly StepOutcome[], error: unknown, patchedBefore: ReadonlySet<string>): unknown {
  if (!(error instanceof NvshmemEfaError)) return error;
  const status = (id: string) => outcomes.find((o) => o.id === id)?.status;
  const failed = outcomes.find((o) => o.status === 'failed')?.id;
  if (error instanceof PatchRefusedError) {
    for (const [tree, get, patch] of [[ctx.source, 'get-nvshmem', 'patch-nvshmem'], [ctx.deepep, 'get-deepep', 'patch-deepep']] as const) {
      // The copy was not refreshed by this run (its origin is unchanged) and an earlier run patched it: it
      // was changed since. A copy made by this run is refused for what its origin is, and keeps its fix.
      if (failed !== patch || !tree || !inside(tree.dir, ctx.paths.workDir) || status(get) !== 'skipped' || !patchedBefore.has(patch)) continue;
      const fresh = tree.kind === 'git' ? `resets the clone to the pinned commit ${tree.commit ?? tree.ref ?? ''}`.trim() : `copies ${tree.origin} again`;
      return amendError(error, {
        message: (m) => `${m} (the work dir's own copy, changed since an earlier run patched it)`,
        fix: () => `rerun with --force: ${tree.dir} is the work dir's copy of ${tree.origin}, which is unchanged; --force ${fresh} and patches it`,
      });
    }
  }
  const nvshmem = ctx.source?.dir;
  const files = ctx.patch?.changedFiles ?? [];
  if (ctx.opts.inPlace && nvshmem && files.length && status('patch-nvshmem') === 'done' && (failed === 'get-deepep' || failed === 'patch-deepep') && !/patched NVSHMEM in place/.test(error.message)) {
    return amendError(error, {
      message: (m) => `${m}; this run had already patched NVSHMEM in place in ${nvshmem}: ${files.join(', ')}`,
      fix: (f) => `${f}; NVSHMEM stays patched in ${nvshmem} (rerunning finishes the job; to undo it in a git checkout: git -C ${nvshmem} stash push --include-untracked -- ${files.join(' ')})`,
    });
  }
  return error;
}

/** How to build what `patch` made: the same trees and work dir (the patch is then up to date, not redone). */
export function buildCommand(opts: Options): string {
  const args = [
    ...(opts.nvshmemSrc ? ['--nvshmem-src', opts.nvshmemSrc, ...(opts.inPlace ? ['--in-place'] : [])] : ['--nvshmem-ref', opts.nvshmemRef]),
    ...(opts.deepepSrc ? ['--deepep-src', opts.deepepSrc] : opts.deepepRef ? ['--deepep-ref', opts.deepepRef] : []),
    '--work-dir', opts.workDir,
    ...(opts.efaIoDefs ? ['--efa-io-defs', opts.efaIoDefs] : []),
    ...(opts.offline ? ['--offline'] : []),
  ];
  return ['nvshmem-efa', 'build', ...args].map(shellQuote).join(' ');
}

/** Where `patch` left each patched tree, and how to build it. */
function patchedTreeLines(ctx: Ctx): string[] {
  const where = (name: string, t: { dir: string; origin: string; kind: string } | undefined) =>
    !t ? [] : [`patched ${name} tree: ${t.dir} (${t.dir === t.origin ? 'in place' : t.kind === 'git' ? `a clone of ${t.origin}` : `a copy of ${t.origin}, which is unchanged`})`];
  return [
    ...where('NVSHMEM', ctx.source),
    ...where('DeepEP', ctx.deepep),
    `build it: ${buildCommand(ctx.opts)} (it finds the patch up to date and builds; --dry-run prints its cmake command)`,
  ];
}

/**
 * Checks everything checkable first (nothing is written until then), claims the work dir, takes its lock,
 * runs the steps, and writes the report whatever happened.
 */
export async function runPipelineCommand(opts: Options, steps: readonly Step[], out: (s: string) => void): Promise<number> {
  // A file-system fault says which of the run's directories it hit and what the run does there.
  const faults = faultContextOf(opts);
  try {
    return await runPipeline(opts, steps, out);
  } catch (e) {
    throw asTypedError(e, faults);
  }
}

async function runPipeline(opts: Options, steps: readonly Step[], out: (s: string) => void): Promise<number> {
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
      // Which patch steps an earlier run finished, before this run's steps clear their stamps.
      const patchedBefore = new Set(['patch-nvshmem', 'patch-deepep'].filter((id) => ctx.state.get(id)));
      const { outcomes, error: raw } = await runSteps(steps, ctx, chooseRenderer(opts));
      // A DeepEP compile begun beside NVSHMEM outlives no run (build-deepep failed early or was up to date).
      await stopDeepEpBeside(ctx);
      const error = explainFailure(ctx, outcomes, asTypedError(signal.aborted && raw ? signal.reason : raw, faultContextOf(opts)), patchedBefore);
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
        if (report.nvshmemDeviceApi) out(`NVSHMEM device API over GDA: ${report.nvshmemDeviceApi.status}: ${report.nvshmemDeviceApi.reason}`);
        if (Object.keys(report.runtimeEnv).length) {
          out(pc.bold('run-time environment:'));
          for (const line of exportLines(report.runtimeEnv)) out(`  ${line}`);
        }
        if (opts.command === 'patch' && !error) for (const line of patchedTreeLines(ctx)) out(line);
        // Every step's duration, so a slow run says where its time went without opening the report.
        out(pc.bold('steps:'));
        for (const o of outcomes) out(`  ${o.status.padEnd(8)} ${formatDuration(o.ms).padStart(7)}  ${o.id}${o.status !== 'failed' && o.reason ? ` (${o.reason})` : ''}`);
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
