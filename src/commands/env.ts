import { existsSync } from 'node:fs';
import path from 'node:path';
import { NoBuildError, NvshmemEfaError } from '../core/errors.ts';
import { exportLines, REPORT_MD } from '../core/report.ts';
import { readBackReport } from './read-report.ts';

export interface EnvOptions {
  workDir: string;
  json: boolean;
  keepSet: boolean;
}

/** `LD_LIBRARY_PATH: "/a:/b:$LD_LIBRARY_PATH"` -> set: {}, prepend: { LD_LIBRARY_PATH: ['/a', '/b'] }. */
export function splitRuntimeEnv(runtimeEnv: Record<string, string>): { set: Record<string, string>; prepend: Record<string, string[]> } {
  const set: Record<string, string> = {};
  const prepend: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(runtimeEnv)) {
    const suffix = `:$${k}`;
    if (v.endsWith(suffix)) prepend[k] = v.slice(0, -suffix.length).split(':').filter(Boolean);
    else set[k] = v;
  }
  return { set, prepend };
}

/**
 * `nvshmem-efa env`: the run-time exports of the last build, the block its report holds, for entrypoints
 * and launchers (`eval "$(nvshmem-efa env)"`). Refuses when there is no build or what it installed is gone
 * (NoBuildError, exit 4) or it failed (exit 1): a job must not start on half an environment.
 */
export async function envCommand(opts: EnvOptions, out: (s: string) => void): Promise<number> {
  const report = await readBackReport(opts.workDir);
  const md = path.join(opts.workDir, REPORT_MD);
  if (!report) throw new NoBuildError(`no report in ${opts.workDir}`, 'run nvshmem-efa build first, or pass the --work-dir it used');
  if (report.command !== 'build') throw new NoBuildError(`the last run in ${opts.workDir} was \`${report.command}\`, which builds nothing`, 'run nvshmem-efa build');
  if (!report.ok) throw new NvshmemEfaError(`the last build in ${opts.workDir} failed: ${report.error?.message ?? 'see its report'} (report: ${md})`, report.error?.fix ?? `read ${md}, fix the cause and rerun nvshmem-efa build`);
  const { set, prepend } = splitRuntimeEnv(report.runtimeEnv);
  if (Object.keys(set).length === 0) throw new NvshmemEfaError(`the last build in ${opts.workDir} has no run-time environment (report: ${md})`, 'rerun nvshmem-efa build');
  // What the build made (under the work dir) must still be there; other paths are the host's business.
  const inside = (d: string) => path.resolve(d).startsWith(path.resolve(opts.workDir) + path.sep);
  const gone = Object.values(prepend).flat().filter((d) => inside(d) && !existsSync(d));
  if (gone.length) throw new NoBuildError(`the build in ${opts.workDir} is incomplete: ${gone.join(', ')} no longer exist`, 'rerun nvshmem-efa build (it rebuilds what is missing)');
  if (opts.json) {
    out(JSON.stringify({ schema: 'nvshmem-efa-env/1', workDir: opts.workDir, builtAt: report.createdAt, gda: report.gda.status, set, prepend, runtimeEnv: report.runtimeEnv }, null, 2));
  } else {
    out(exportLines(report.runtimeEnv, opts.keepSet).join('\n'));
  }
  return 0;
}
