import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { NvshmemEfaError } from '../core/errors.ts';
import { readReport, REPORT_MD } from '../core/report.ts';
import type { Options } from '../options.ts';

export async function reportCommand(opts: Options, out: (s: string) => void): Promise<number> {
  const report = await readReport(opts.workDir);
  if (!report) throw new NvshmemEfaError(`no report in ${opts.workDir}`, 'run nvshmem-efa build (or patch) first, or pass the --work-dir it used');
  out(opts.json ? JSON.stringify(report, null, 2) : (await readFile(path.join(opts.workDir, REPORT_MD), 'utf8')).trimEnd());
  return report.ok ? 0 : 1;
}
