import * as z from 'zod';

/**
 * One check of a host, as `doctor` makes them and as the probe (native/probe) prints them in its report: what
 * was checked, pass/warn/fail/skip, what was seen, and the fix.
 */
export const HostCheckSchema = z.object({
  id: z.string().min(1),
  title: z.string().min(1),
  status: z.enum(['pass', 'warn', 'fail', 'skip']),
  evidence: z.string(),
  fix: z.string(),
});
export type HostCheck = z.infer<typeof HostCheckSchema>;

/** What a list of checks adds up to, as a value a script compares (doctor's and probe's `verdict`): any failure, else any warning, else ok. */
export const HostVerdictSchema = z.enum(['ok', 'warn', 'fail']);
export type HostVerdict = z.infer<typeof HostVerdictSchema>;

export function hostVerdict(checks: readonly HostCheck[]): HostVerdict {
  if (checks.some((c) => c.status === 'fail')) return 'fail';
  if (checks.some((c) => c.status === 'warn')) return 'warn';
  return 'ok';
}

/** The table `nvshmem-efa probe` and `doctor` print: status, check, evidence, and the fix under it. */
export function renderChecks(checks: readonly HostCheck[], verdict: string): string {
  const w = Math.max(5, ...checks.map((c) => c.title.length));
  const lines: string[] = [];
  for (const c of checks) {
    lines.push(`${c.status.padEnd(4)}  ${c.title.padEnd(w)}  ${c.evidence}`);
    if (c.fix && (c.status === 'fail' || c.status === 'warn')) lines.push(`${''.padEnd(4)}  ${''.padEnd(w)}  fix: ${c.fix}`);
  }
  const n = (s: HostCheck['status']) => checks.filter((c) => c.status === s).length;
  lines.push('', `${n('pass')} pass, ${n('warn')} warn, ${n('fail')} fail, ${n('skip')} skip`, `verdict: ${verdict}`);
  return lines.join('\n');
}
