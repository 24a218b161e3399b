import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import { writeFileAtomic } from './fs-atomic.ts';

const Fix = z.object({
  id: z.string(),
  file: z.string().optional(),
  anchor: z.string(),
  why: z.string(),
  status: z.enum(['applied', 'already-present', 'refused', 'warned']),
  detail: z.string().optional(),
});

/** The schema name every JSON document of the CLI carries (issue 39, item 6); report.json's, with schemaVersion 1. */
export const REPORT_SCHEMA = 'nvshmem-efa-report/1';

export const ReportSchema = z.object({
  // Optional: reports written before issue 39 have only schemaVersion (`report --json` prints them with it).
  schema: z.literal(REPORT_SCHEMA).optional(),
  schemaVersion: z.literal(1),
  tool: z.object({ name: z.literal('nvshmem-efa'), version: z.string() }),
  command: z.string(),
  createdAt: z.string(),
  ok: z.boolean(),
  error: z.object({ message: z.string(), fix: z.string(), log: z.string().optional() }).optional(),
  nvshmem: z.object({
    source: z.object({ kind: z.enum(['local', 'git']), dir: z.string(), origin: z.string(), ref: z.string().optional(), commit: z.string().optional(), version: z.string().optional() }).optional(),
    pin: z.object({ ref: z.string(), commit: z.string() }).optional(),
    /** The libfabric transport layout the patch was made for. */
    layout: z.object({ id: z.enum(['single-rail', 'multi-rail']), summary: z.string() }).optional(),
    installPrefix: z.string().optional(),
    libraries: z.array(z.string()),
    cmakeArgs: z.array(z.string()),
  }),
  deepep: z
    .object({
      source: z.object({ kind: z.enum(['local', 'git']), dir: z.string(), origin: z.string(), ref: z.string().optional(), commit: z.string().optional() }),
      layout: z.enum(['v1', 'epv2']).optional(),
      module: z.string().optional(),
      check: z.enum(['import', 'link']).optional(),
    })
    .optional(),
  probe: z
    .object({ verdict: z.string(), summary: z.object({ pass: z.number(), warn: z.number(), fail: z.number(), skip: z.number() }), problems: z.array(z.string()) })
    .optional(),
  /** The libfabric and rdma-core under the build: built here from pinned sources, or the host's, and why. */
  fabric: z
    .array(
      z.object({
        package: z.enum(['libfabric', 'rdma-core']),
        action: z.enum(['built', 'host']),
        version: z.string(),
        prefix: z.string().optional(),
        ref: z.string().optional(),
        origin: z.string().optional(),
        verified: z.string().optional(),
        features: z.record(z.string(), z.boolean()).optional(),
        why: z.string(),
      }),
    )
    .optional(),
  environment: z.record(z.string(), z.unknown()).optional(),
  gda: z.object({ status: z.enum(['available', 'not-implemented', 'unavailable', 'unknown']), reason: z.string() }),
  /** NVSHMEM's own device API over GDA (on unless --no-device-api; issue 23). Absent in reports of older versions. */
  nvshmemDeviceApi: z.object({ status: z.enum(['on', 'off']), reason: z.string() }).optional(),
  fixes: z.array(Fix),
  steps: z.array(z.object({ id: z.string(), title: z.string(), status: z.enum(['done', 'skipped', 'failed', 'not-run']), reason: z.string().optional(), ms: z.number() })),
  runtimeEnv: z.record(z.string(), z.string()),
});
export type Report = z.infer<typeof ReportSchema>;

export const REPORT_JSON = 'report.json';
export const REPORT_MD = 'report.md';

const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderMarkdown(r: Report): string {
  const L: string[] = [];
  L.push(`# nvshmem-efa ${r.command} report`, '');
  L.push(`- result: **${r.ok ? 'success' : 'FAILED'}** (${r.createdAt}, nvshmem-efa ${r.tool.version})`);
  if (r.error) L.push(`- error: ${r.error.message}`, `- fix: ${r.error.fix}`, ...(r.error.log ? [`- log: ${r.error.log}`] : []));
  const s = r.nvshmem.source;
  if (s) L.push(`- NVSHMEM: ${s.version ?? 'unknown version'} from ${s.origin}${s.ref ? ` (${s.ref} @ ${s.commit})` : ''}, tree ${s.dir}`);
  if (r.nvshmem.layout) L.push(`- NVSHMEM libfabric layout: ${r.nvshmem.layout.summary}`);
  if (r.nvshmem.installPrefix) L.push(`- install prefix: ${r.nvshmem.installPrefix}`);
  if (r.deepep) {
    const d = r.deepep;
    L.push(`- DeepEP: ${d.source.origin}${d.source.ref ? ` (${d.source.ref} @ ${d.source.commit})` : ''}, ${d.layout ?? 'layout unknown'} layout, tree ${d.source.dir}`);
    if (d.module) L.push(`- DeepEP module: ${d.module} (${d.check} check passed; run with PYTHONPATH=${d.source.dir})`);
  }
  for (const f of r.fabric ?? []) {
    const on = f.features ? Object.entries(f.features).filter(([, v]) => v).map(([k]) => k) : [];
    L.push(f.action === 'built'
      ? `- ${f.package}: ${f.version} built from ${f.origin} (${f.verified}) into ${f.prefix}${on.length ? `; ${on.join(', ')}` : ''} (${f.why})`
      : `- ${f.package}: ${f.version}${f.prefix ? ` at ${f.prefix}` : ''}, the host's (${f.why})`);
  }
  L.push(`- EFA GDA: ${r.gda.status}: ${r.gda.reason}`);
  if (r.nvshmemDeviceApi) L.push(`- NVSHMEM device API over GDA: ${r.nvshmemDeviceApi.status}: ${r.nvshmemDeviceApi.reason}`);
  if (r.probe) {
    const p = r.probe.summary;
    L.push(`- probe: ${r.probe.verdict} (${p.pass} pass, ${p.warn} warn, ${p.fail} fail, ${p.skip} skip)`, ...r.probe.problems.map((x) => `  - ${x}`));
  }
  L.push('');
  L.push('## Fixes', '', '| status | id | where | why | detail |', '|---|---|---|---|---|');
  for (const f of r.fixes) L.push(`| ${f.status} | ${f.id} | ${esc(f.file ? `${f.file}: ${f.anchor}` : f.anchor)} | ${esc(f.why)} | ${esc(f.detail ?? '')} |`);
  L.push('', '## Steps', '', '| step | status | time |', '|---|---|---|');
  for (const st of r.steps) L.push(`| ${st.title} | ${st.status}${st.reason ? ` (${esc(st.reason)})` : ''} | ${(st.ms / 1000).toFixed(1)} s |`);
  if (r.environment) {
    L.push('', '## Environment', '', '```json', JSON.stringify(r.environment, null, 2), '```');
  }
  if (r.nvshmem.cmakeArgs.length) L.push('', '## CMake arguments', '', '```', ...r.nvshmem.cmakeArgs, '```');
  if (Object.keys(r.runtimeEnv).length) {
    L.push('', '## Run-time environment', '', '```sh', ...exportLines(r.runtimeEnv), '```');
  }
  return L.join('\n') + '\n';
}

/**
 * The run-time environment as shell lines, the one block the report, `build` and `env` print. A value that
 * ends in `:$NAME` prepends to that variable (without an empty entry when it is unset); everything else is
 * quoted literally. `keepSet`: a variable the caller's environment already sets keeps its value.
 */
export function exportLines(runtimeEnv: Record<string, string>, keepSet = false): string[] {
  const escaped = (s: string) => s.replace(/(["\\$`])/g, '\\$1');
  // Plain words stay plain (the block reads like the README's); anything else is double-quoted.
  const q = (s: string) => (/^[\w./:=+,@%-]+$/.test(s) ? s : `"${escaped(s)}"`);
  return Object.entries(runtimeEnv).map(([k, v]) => {
    const pre = new RegExp(`^(.*):\\$${k}$`).exec(v);
    if (pre) return `export ${k}=${q(pre[1]!)}"\${${k}:+:\$${k}}"`;
    return keepSet ? `export ${k}="\${${k}-${escaped(v).replace(/}/g, '\\}')}}"` : `export ${k}=${q(v)}`;
  });
}

export async function writeReport(dir: string, r: Report): Promise<void> {
  const valid = ReportSchema.parse(r);
  await writeFileAtomic(path.join(dir, REPORT_JSON), JSON.stringify(valid, null, 2) + '\n');
  await writeFileAtomic(path.join(dir, REPORT_MD), renderMarkdown(valid));
}

export async function readReport(dir: string): Promise<Report | undefined> {
  try {
    return ReportSchema.parse(JSON.parse(await readFile(path.join(dir, REPORT_JSON), 'utf8')));
  } catch {
    return undefined;
  }
}
