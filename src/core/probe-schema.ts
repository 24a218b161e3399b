import * as z from 'zod';
import { HostCheckSchema, HostVerdictSchema } from './host-check.ts';

/** The probe's report: the document native/probe prints (schema nvshmem-efa-probe/1); the CLI validates it before using it. */
export const ProbeReportSchema = z.object({
  schema: z.literal('nvshmem-efa-probe/1'),
  host: z.string(),
  root: z.string(),
  checks: z.array(HostCheckSchema).min(1),
  /** Each GPU (PCI order) and its nearest EFA device by PCIe path, for launchers that pin ranks. */
  topology: z.array(z.object({ gpu: z.string(), gpuNuma: z.string(), nic: z.string(), nicNuma: z.string() })).optional(),
  /** The libfabric the probe loaded: fi_version() and the shared object's real path ('' when linked statically). Absent from probes before issue 39. */
  libfabric: z.object({ version: z.string(), path: z.string() }).optional(),
  summary: z.object({ pass: z.number().int(), warn: z.number().int(), fail: z.number().int(), skip: z.number().int() }),
  verdict: z.string().min(1),
});
export type ProbeReport = z.infer<typeof ProbeReportSchema>;

/**
 * `probe --json`'s document (src/commands/probe.ts makes it from the probe's own): `verdict` a value as doctor's, the
 * probe's prose verdict as `summary` and its counts as `counts` (issue 39, item 6: verdicts are values).
 */
export const ProbeJsonSchema = ProbeReportSchema.omit({ schema: true, summary: true, verdict: true }).extend({
  schema: z.literal('nvshmem-efa-probe/2'),
  verdict: HostVerdictSchema,
  summary: z.string().min(1),
  counts: ProbeReportSchema.shape.summary,
});
export type ProbeJson = z.infer<typeof ProbeJsonSchema>;
