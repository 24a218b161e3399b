import path from 'node:path';
import { NvshmemEfaError } from '../core/errors.ts';
import { toolVersion } from '../core/paths.ts';
import { REPORT_SCHEMA, type Report } from '../core/report.ts';
import type { StepOutcome } from '../pipeline.ts';
import { pinFor } from '../steps/get-nvshmem.ts';
import type { Ctx, FabricBuildResult } from '../steps/types.ts';

function gdaStatus(ctx: Ctx): Report['gda'] {
  const lf = ctx.env?.libfabric;
  if (ctx.patch?.templateStage === 'not-implemented') return { status: 'not-implemented', reason: ctx.patch.templateNote };
  // The device API is what kernels use: a build without it is "built, GDA device API unavailable", never success.
  const api = ctx.build?.deviceApi;
  const noApi = api && !api.available && api.reason ? `GDA device API unavailable: ${api.reason} (fix: ${api.fix})` : undefined;
  if (lf && !lf.gda.available) return { status: 'unavailable', reason: noApi ? `${lf.gda.reason}; ${noApi}` : lf.gda.reason };
  if (noApi) return { status: 'unavailable', reason: `built, ${noApi}` };
  if (lf && ctx.patch) {
    const headers = ctx.patch.deviceHeaders === 'without-efa-io-defs' && !ctx.build ? '; the device headers lack efa_io_defs.h (see the vendor-efa-io-defs fix)' : '';
    return {
      status: 'available',
      reason: `${lf.gda.reason}; compiled into the libfabric transport, active at run time with ${ctx.patch.gdaEnv}=1 on an efa-direct NIC that maps its SQ for the GPU${headers}`,
    };
  }
  if (ctx.opts.command === 'patch' && ctx.patch) return { status: 'unknown', reason: '`patch` does not look at libfabric; `build` reports whether GDA can be compiled in' };
  return { status: 'unknown', reason: 'the run stopped before this was known' };
}

/** Whether NVSHMEM's own device API takes the GDA path (its hooks, unless --no-device-api), and what decides it at run time. */
export function nvshmemDeviceApiStatus(ctx: Ctx): Report['nvshmemDeviceApi'] {
  if (!ctx.patch) return undefined;
  if (!ctx.patch.nvshmemDeviceApi) {
    return { status: 'off', reason: "--no-device-api: NVSHMEM's device API (nvshmem_put*, p/g, signals, quiet, fence) reaches remote PEs through NVSHMEM's CPU proxy; only kernels that call efa_gda_* (and DeepEP through its shim) use GDA" };
  }
  // Its header (efa_io_defs.h) could not be had: only --offline gets this far without it (issue 39), never "on".
  if (ctx.vendorMissing) {
    return { status: 'off', reason: `${ctx.vendorMissing}: the GDA device headers include efa_io_defs.h, which this build lacks, so no NVSHMEM device API call takes GDA; pass --efa-io-defs PATH (or run without --offline) to build it` };
  }
  const gda = gdaStatus(ctx).status;
  const hooks = 'hooks at every call of NVSHMEM\'s nvshmemi_transfer_* functions (applications built against this install) route remote put/get (all scopes), p/g, put-with-signal and signal_op SET, quiet and fence over GDA; atomics and SIGNAL_ADD stay on the proxy, ordered after the GDA data they follow (docs/device-api.md)';
  const when = `on at run time where GDA is active (${ctx.patch.gdaEnv}=1); NVSHMEM_EFA_GDA_DEVICE_API=0 keeps the proxy path in the same build`;
  return { status: 'on', reason: gda === 'available' || gda === 'unknown' ? `${hooks}; ${when}` : `${hooks}; but GDA is ${gda} in this build, so every call takes the proxy path` };
}

/** Environment variables a job needs to run on the result; printed and stored in the report. */
export function runtimeEnv(ctx: Ctx): Record<string, string> {
  if (!ctx.build) return {};
  const gdaOn = gdaStatus(ctx).status === 'available';
  // The rdma-core built here must win over the host's older one, whoever loads libibverbs first. NVSHMEM and
  // libfabric (--enable-gdrcopy-dlopen) load libgdrapi by name: a GDRCopy built here, or named off the default
  // paths (an image's /opt/gdrcopy), must be on the path; /usr and /usr/local already are.
  const gdrHome = ctx.gdrcopy?.prefix ?? ctx.env?.gdrcopy?.home;
  const libDirs = [
    path.join(ctx.build.prefix, 'lib'),
    ...(ctx.env ? [path.join(ctx.env.libfabric.home, 'lib')] : []),
    ...(ctx.rdmaCore?.prefix ? [path.join(ctx.rdmaCore.prefix, 'lib')] : []),
    ...(gdrHome && !['/usr', '/usr/local'].includes(path.resolve(gdrHome)) ? [path.join(gdrHome, 'lib')] : []),
  ];
  return {
    NVSHMEM_REMOTE_TRANSPORT: 'libfabric',
    NVSHMEM_LIBFABRIC_PROVIDER: 'efa',
    FI_EFA_ENABLE_SHM_TRANSFER: '0',
    [ctx.patch?.gdaEnv ?? 'NVSHMEM_EFA_GDA_ENABLE']: gdaOn ? '1' : '0',
    LD_LIBRARY_PATH: `${libDirs.join(':')}:$LD_LIBRARY_PATH`,
    // DeepEP is built in place (build_ext --inplace): its tree is what `import deep_ep` needs.
    ...(ctx.deepepBuild && ctx.deepep ? { PYTHONPATH: `${ctx.deepep.dir}:$PYTHONPATH` } : {}),
  };
}

/** What the report says about the libfabric (and rdma-core) under the build. */
function fabricSection(ctx: Ctx): Report['fabric'] {
  const plan = ctx.env?.fabric;
  if (!plan) return undefined;
  const strip = ({ fixes: _f, ...r }: FabricBuildResult) => r;
  const out: NonNullable<Report['fabric']> = [];
  if (ctx.rdmaCore) out.push(strip(ctx.rdmaCore));
  else if (plan.rdmaCore?.action === 'use') out.push({ package: 'rdma-core', action: 'host', version: plan.rdmaCore.version ?? 'unknown', ...(plan.rdmaCore.prefix ? { prefix: plan.rdmaCore.prefix } : {}), why: plan.rdmaCore.why });
  if (ctx.libfabric) out.push(strip(ctx.libfabric));
  else if (plan.libfabric.action === 'use') {
    const installer = plan.efaInstaller && ctx.env && path.resolve(ctx.env.libfabric.home) === path.resolve(plan.efaInstaller.dir) ? `; EFA installer ${plan.efaInstaller.version ?? '(version unknown)'}` : '';
    out.push({ package: 'libfabric', action: 'host', version: plan.libfabric.version, prefix: plan.libfabric.home, why: `${plan.libfabric.why}${installer}` });
  }
  return out;
}

export function assembleReport(ctx: Ctx, outcomes: StepOutcome[], error: unknown): Report {
  const src = ctx.source;
  let pin: Report['nvshmem']['pin'];
  if (src?.kind === 'git' && src.ref) {
    const p = pinFor(src.ref);
    pin = { ref: p.ref, commit: p.commit };
  }
  const err = error instanceof NvshmemEfaError ? error : error ? new NvshmemEfaError(String((error as Error).message ?? error), 'rerun with --verbose; if it persists, report it with the log') : undefined;
  return {
    schema: REPORT_SCHEMA,
    schemaVersion: 1,
    tool: { name: 'nvshmem-efa', version: toolVersion() },
    command: ctx.opts.command,
    createdAt: new Date().toISOString(),
    ok: !error,
    ...(err ? { error: { message: err.message, fix: err.fix, ...(err.logPath ? { log: err.logPath } : {}) } } : {}),
    nvshmem: {
      ...(src ? { source: src } : {}),
      ...(pin ? { pin } : {}),
      ...(ctx.patch?.layout ? { layout: ctx.patch.layout } : {}),
      ...(ctx.build ? { installPrefix: ctx.build.prefix } : {}),
      libraries: ctx.build?.libraries ?? [],
      cmakeArgs: ctx.build?.cmakeArgs ?? [],
    },
    ...(ctx.deepep
      ? {
          deepep: {
            source: { kind: ctx.deepep.kind, dir: ctx.deepep.dir, origin: ctx.deepep.origin, ...(ctx.deepep.ref ? { ref: ctx.deepep.ref, commit: ctx.deepep.commit } : {}) },
            ...(ctx.deepepPatch ? { layout: ctx.deepepPatch.layout } : {}),
            ...(ctx.deepepBuild ? { module: ctx.deepepBuild.module, check: ctx.deepepBuild.check } : {}),
          },
        }
      : {}),
    ...(ctx.probeReport
      ? {
          probe: {
            verdict: ctx.probeReport.verdict,
            summary: ctx.probeReport.summary,
            problems: ctx.probeReport.checks.filter((c) => c.status === 'fail' || c.status === 'warn').map((c) => `${c.status} ${c.id}: ${c.evidence}`),
          },
        }
      : {}),
    ...(ctx.env?.fabric ? { fabric: fabricSection(ctx) } : {}),
    ...(ctx.env ? { environment: ctx.env as unknown as Record<string, unknown> } : {}),
    gda: gdaStatus(ctx),
    nvshmemDeviceApi: nvshmemDeviceApiStatus(ctx),
    fixes: [
      ...ctx.envFixes,
      ...(ctx.gdrcopy?.fixes ?? []),
      ...(ctx.rdmaCore?.fixes ?? []),
      ...(ctx.libfabric?.fixes ?? []),
      ...(ctx.fabtests?.fixes ?? []),
      ...(ctx.patch?.fixes ?? []),
      ...(ctx.build?.fixes ?? []),
      ...(ctx.deepepPatch?.fixes ?? []),
      ...(ctx.deepepBuild?.fixes ?? []),
      ...(ctx.refusals ?? []),
    ],
    steps: outcomes,
    runtimeEnv: runtimeEnv(ctx),
  };
}
