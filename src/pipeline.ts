import path from 'node:path';
import { Listr, ListrLogger, ProcessOutput, type ListrRendererValue } from 'listr2';
import { hashJson } from './core/hash.ts';
import { progressReporter } from './core/progress.ts';
import type { Ctx, Step } from './steps/types.ts';

export interface StepOutcome {
  id: string;
  title: string;
  status: 'done' | 'skipped' | 'failed' | 'not-run';
  reason?: string;
  ms: number;
}

export function chooseRenderer(opts: { json: boolean; verbose: boolean }, stream = process.stderr, env = process.env): ListrRendererValue {
  if (opts.json) return 'silent';
  if (opts.verbose) return 'verbose';
  // CI logs and pipes get one line per event; only an interactive terminal gets the live tree.
  return stream.isTTY && !env.CI ? 'default' : 'simple';
}

/**
 * Runs steps in order. A step whose stamp (hash of its inputs) matches the last finished run is skipped and
 * its saved result restored; `--force` reruns everything. Outcomes are returned even when a step fails
 * (the error is rethrown after `onSettled`), so the report always reflects what happened.
 */
export async function runSteps(steps: readonly Step[], ctx: Ctx, renderer: ListrRendererValue): Promise<{ outcomes: StepOutcome[]; error?: unknown }> {
  const outcomes: StepOutcome[] = steps.map((s) => ({ id: s.id, title: s.title, status: 'not-run', ms: 0 }));
  const live = renderer === 'default';
  const logger = new ListrLogger({ processOutput: new ProcessOutput(process.stderr, process.stderr) });
  const list = new Listr<Ctx, ListrRendererValue, ListrRendererValue>(
    steps.map((step, i) => ({
      title: step.title,
      task: async (_c, task) => {
        const outcome = outcomes[i]!;
        const t0 = Date.now();
        const settle = (status: StepOutcome['status'], reason?: string) => {
          outcome.status = status;
          outcome.ms = Date.now() - t0;
          if (reason) outcome.reason = reason;
        };
        // A signal during the previous step ends the run here, whether or not that step looked at it.
        ctx.signal.throwIfAborted();
        const enabled = step.enabled(ctx);
        if (enabled !== true) {
          settle('skipped', enabled);
          task.skip(live ? `${step.title} (${enabled})` : enabled);
          return;
        }
        let stamp: string | undefined;
        if (step.stamp) {
          stamp = hashJson([step.id, await step.stamp(ctx)]);
          const prev = ctx.state.get(step.id);
          if (!ctx.opts.force && prev?.stamp === stamp && (step.restore?.(ctx, prev.result) ?? true)) {
            settle('skipped', 'up to date');
            task.skip(live ? `${step.title} (up to date)` : 'up to date');
            return;
          }
        }
        await ctx.state.begin(step.id);
        const logPath = path.join(ctx.paths.logs, `${step.id}.log`);
        try {
          let note: string | undefined;
          const io = {
            progress: progressReporter((s) => (task.output = s), { live: live || ctx.opts.verbose }),
            note: (s: string) => {
              note = s;
              task.title = `${step.title} (${s})`;
            },
            logPath,
          };
          const result = await step.run(ctx, io);
          if (step.stamp) {
            if (step.restampAfterRun) stamp = hashJson([step.id, await step.stamp(ctx)]);
            await ctx.state.finish(step.id, stamp!, result);
          }
          settle('done', note);
        } catch (e) {
          settle('failed', (e as Error).message);
          throw e;
        }
      },
    })),
    {
      concurrent: false,
      exitOnError: true,
      renderer,
      fallbackRenderer: 'simple',
      registerSignalListeners: false,
      collectErrors: false,
      rendererOptions: { logger, persistentOutput: false, collapseErrors: true, showErrorMessage: false } as never,
      fallbackRendererOptions: { logger } as never,
    },
  );
  try {
    await list.run(ctx);
    return { outcomes };
  } catch (error) {
    return { outcomes, error };
  }
}
