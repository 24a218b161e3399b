import path from 'node:path';
import { NoBuildError, WorkDirBusyError } from '../core/errors.ts';
import { describeHolder, lockHolder } from '../core/lock.ts';
import { REPORT_MD, REPORT_SCHEMA } from '../core/report.ts';
import type { Options } from '../options.ts';
import { readBackMarkdown, readBackReport } from './read-report.ts';

export async function reportCommand(opts: Options, out: (s: string) => void): Promise<number> {
  const report = await readBackReport(opts.workDir);
  const running = await lockHolder(opts.workDir);
  // A first run still going has written no report yet: say so, not "run build first" (exit 7: in use).
  if (running && !report) throw new WorkDirBusyError(`no report in ${opts.workDir} yet: a run is in progress there, ${describeHolder(running)}`, `its report is written when it ends: run nvshmem-efa report again then (its logs are in ${path.join(opts.workDir, 'logs')} meanwhile)`);
  if (!report) throw new NoBuildError(`no report in ${opts.workDir}`, 'run nvshmem-efa build (or patch) first, or pass the --work-dir it used');
  // A later run still going: the report shown is the one before it, and the reader must know.
  if (running) process.stderr.write(`note: a run is in progress in ${opts.workDir} (${describeHolder(running)}); this is the report of the run before it, replaced when it ends\n`);
  // An older report has no schema name: printed with it, as every JSON document of the CLI has one.
  out(opts.json ? JSON.stringify({ schema: REPORT_SCHEMA, ...report }, null, 2) : readBackMarkdown(opts.workDir, path.join(opts.workDir, REPORT_MD)).trimEnd());
  // Exit 1 for a run that failed, said as every failure is (an error: and a fix: line on stderr), after the report.
  if (!report.ok) process.stderr.write(`error: the last ${report.command} in ${opts.workDir} failed: ${report.error?.message ?? 'see its report'}\nfix: ${report.error?.fix ?? `read ${path.join(opts.workDir, REPORT_MD)}, fix the cause and rerun nvshmem-efa ${report.command}`}\n`);
  return report.ok ? 0 : 1;
}
