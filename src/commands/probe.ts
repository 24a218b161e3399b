import { existsSync } from 'node:fs';
import path from 'node:path';
import { fabricPrefixes } from '../core/fabric-plan.ts';
import { detectEnvironment } from '../core/environment.ts';
import { acquireLock } from '../core/lock.ts';
import { buildProbe, runProbe } from '../core/probe-build.ts';
import { describeProbeLibfabric, probeLibfabric } from '../core/probe-libfabric.ts';
import { hostVerdict, renderChecks } from '../core/host-check.ts';
import type { ProbeJson, ProbeReport } from '../core/probe-schema.ts';
import { claimWorkDir } from '../core/work-dir.ts';
import { withInterrupts } from './run-pipeline.ts';
import { UsageError } from '../core/errors.ts';

export interface ProbeOptions {
  workDir: string;
  cudaHome?: string;
  libfabricHome?: string;
  json: boolean;
  root?: string;
}

/** The schema of `probe --json`; 2: `verdict` is a value, as doctor's (the probe's own prose is `summary`, its counts `counts`; issue 39, item 6). */
export const PROBE_JSON = 'nvshmem-efa-probe/2' satisfies ProbeJson['schema'];

/** `probe --json`'s document from the probe's own (nvshmem-efa-probe/1, which the build's report keeps as it is). */
export function probeJson(r: ProbeReport): ProbeJson {
  const { schema: _native, summary: counts, verdict: summary, ...rest } = r;
  return { schema: PROBE_JSON, verdict: hostVerdict(r.checks), summary, counts, ...rest };
}

/** `nvshmem-efa probe`: builds native/probe once per work dir (cmake reuses it), runs it, shows the result. */
export async function probeCommand(opts: ProbeOptions, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  // A --root that names nothing would read as a host with no devices at all: refused before anything is built.
  if (opts.root !== undefined && !existsSync(opts.root))
    throw new UsageError(`--root ${path.resolve(opts.root)} does not exist`, 'pass the prefix under which /sys, /proc and /dev are read, or leave --root out');
  // A libfabric the build built in this work dir is the one to probe with (unless another is named).
  const built = fabricPrefixes(opts.workDir).libfabric;
  const fromBuilt = !opts.libfabricHome && existsSync(path.join(built, 'include', 'rdma', 'fabric.h'));
  const libfabricHome = opts.libfabricHome ?? (fromBuilt ? built : undefined);
  const { env } = await detectEnvironment({ cudaHome: opts.cudaHome, libfabricHome, workDir: opts.workDir, env: process.env });
  const named = opts.libfabricHome ? '--libfabric-home' : fromBuilt ? `built by nvshmem-efa in ${opts.workDir}` : process.env.LIBFABRIC_HOME ? 'LIBFABRIC_HOME' : undefined;
  const fabric = probeLibfabric(env, opts.workDir, named);
  const buildDir = path.join(opts.workDir, 'build', 'probe');
  return withInterrupts(async (signal) => {
    // The probe builds into the work dir: the same ownership and one-run rules as build and patch.
    await claimWorkDir(opts.workDir);
    const lock = await acquireLock(opts.workDir);
    try {
      err(`building the probe in ${buildDir} against ${describeProbeLibfabric(fabric)}`);
      const bin = await buildProbe(env, fabric.home, buildDir, path.join(opts.workDir, 'logs', 'probe.log'), signal);
      const report = await runProbe(bin, opts.root);
      // What ran, from the probe itself: the shared object the loader picked, whatever the build linked.
      if (report.libfabric) err(`the probe loaded libfabric ${report.libfabric.version}${report.libfabric.path ? ` from ${report.libfabric.path}` : ' (linked statically)'}`);
      out(opts.json ? JSON.stringify(probeJson(report), null, 2) : `nvshmem-efa probe on ${report.host}${report.root ? `, root ${report.root}` : ''}\n\n${renderChecks(report.checks, report.verdict)}`);
      return report.summary.fail > 0 ? 1 : 0;
    } finally {
      await lock.release();
    }
  });
}
