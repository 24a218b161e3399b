import { z } from 'zod';

/** The document native/probe prints (schema nvshmem-efa-probe/1); the CLI validates it before using it. */
export const ProbeCheckSchema = z.object({
  id: z.string().min(1),
  title: z.string().min(1),
  status: z.enum(['pass', 'warn', 'fail', 'skip']),
  evidence: z.string(),
  fix: z.string(),
});

export const ProbeReportSchema = z.object({
  schema: z.literal('nvshmem-efa-probe/1'),
  host: z.string(),
  root: z.string(),
  checks: z.array(ProbeCheckSchema).min(1),
  /** Each GPU (PCI order) and its nearest EFA device by PCIe path, for launchers that pin ranks. */
  topology: z.array(z.object({ gpu: z.string(), gpuNuma: z.string(), nic: z.string(), nicNuma: z.string() })).optional(),
  summary: z.object({ pass: z.number().int(), warn: z.number().int(), fail: z.number().int(), skip: z.number().int() }),
  verdict: z.string().min(1),
});
export type ProbeReport = z.infer<typeof ProbeReportSchema>;
export type ProbeCheck = z.infer<typeof ProbeCheckSchema>;

/** The table `nvshmem-efa probe` and `doctor` print: status, check, evidence, and the fix under it. */
export function renderChecks(checks: readonly ProbeCheck[], verdict: string): string {
  const w = Math.max(5, ...checks.map((c) => c.title.length));
  const lines: string[] = [];
  for (const c of checks) {
    lines.push(`${c.status.padEnd(4)}  ${c.title.padEnd(w)}  ${c.evidence}`);
    if (c.fix && (c.status === 'fail' || c.status === 'warn')) lines.push(`${''.padEnd(4)}  ${''.padEnd(w)}  fix: ${c.fix}`);
  }
  const n = (s: ProbeCheck['status']) => checks.filter((c) => c.status === s).length;
  lines.push('', `${n('pass')} pass, ${n('warn')} warn, ${n('fail')} fail, ${n('skip')} skip`, `verdict: ${verdict}`);
  return lines.join('\n');
}
