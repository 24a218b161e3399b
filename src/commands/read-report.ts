import path from 'node:path';
import { NvshmemEfaError } from '../core/errors.ts';
import { readReport, REPORT_JSON, type Report } from '../core/report.ts';
import { readSmallFile } from '../core/untrusted.ts';

/** What a run-time variable name may be: `env` prints `export NAME=...` lines that shells eval. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * report.json read back as untrusted input (for `report` and `env`): a regular file of the work dir, not a link
 * out of it, valid by schema, and its run-time variable names names, since `eval "$(nvshmem-efa env)"` runs
 * what env prints. Undefined when there is none (or it is not a report at all, as before).
 */
export async function readBackReport(workDir: string): Promise<Report | undefined> {
  const file = path.join(workDir, REPORT_JSON);
  const got = readSmallFile(file, 64 << 20);
  if (got.kind === 'bad') throw notOurs(file, got.why);
  const report = await readReport(workDir);
  const bad = Object.keys(report?.runtimeEnv ?? {}).find((k) => !ENV_NAME.test(k));
  if (bad !== undefined) throw notOurs(file, `run-time variable ${JSON.stringify(bad)} is not a variable name`);
  return report;
}

function notOurs(file: string, why: string): NvshmemEfaError {
  return new NvshmemEfaError(`${file} is not a report nvshmem-efa wrote (${why})`, `rerun the nvshmem-efa build or patch that uses this work dir; it writes a new report`);
}

/** The text of report.md, refused when it is a link or not a regular file (it would print what that points to). */
export function readBackMarkdown(workDir: string, md: string): string {
  const got = readSmallFile(md, 64 << 20);
  if (got.kind === 'ok') return got.text;
  const why = got.kind === 'bad' ? got.why : 'missing';
  throw new NvshmemEfaError(`${md} is ${why}, not the report nvshmem-efa wrote; not printing it`, `rerun the nvshmem-efa build or patch that uses ${workDir}, or print its report.json: nvshmem-efa report --json --work-dir ${workDir}`);
}
