import path from 'node:path';
import { hashTree } from '../core/hash.ts';
import { packageRoot, toolVersion } from '../core/paths.ts';
import { buildProbe, runProbe } from '../core/probe-build.ts';
import type { ProbeReport } from '../core/probe-schema.ts';
import type { Step } from './types.ts';

/**
 * Builds and runs native/probe against the libfabric the build used. Failed checks do not fail the build (a
 * build host often has no EFA); the verdict and every failed or warned check go into the report.
 */
export const probeStep: Step = {
  id: 'probe',
  title: 'Probe this host for EFA and GDA readiness',
  enabled: (ctx) => (ctx.opts.command === 'build' ? true : 'patch only'),
  // Run again when the probe's sources, the libfabric or the tool change; `nvshmem-efa probe` runs it on demand.
  async stamp(ctx) {
    return { probe: await hashTree(path.join(packageRoot(), 'native', 'probe')), libfabric: ctx.env?.libfabric, cuda: ctx.env?.cuda.home, tool: toolVersion() };
  },
  async run(ctx, io) {
    const bin = await buildProbe(ctx.env!, ctx.env!.libfabric.home, path.join(ctx.paths.workDir, 'build', 'probe'), io.logPath, ctx.signal);
    const report = await runProbe(bin);
    ctx.probeReport = report;
    io.progress(`${report.summary.pass} pass, ${report.summary.warn} warn, ${report.summary.fail} fail: ${report.verdict}`);
    return report;
  },
  restore(ctx, result) {
    ctx.probeReport = result as ProbeReport;
    return true;
  },
};
