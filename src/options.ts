import os from 'node:os';
import path from 'node:path';
import * as z from 'zod';
import { parseCudaArch } from './core/environment.ts';
import { UsageError } from './core/errors.ts';
import { defaultWorkDir } from './core/work-dir-default.ts';
import { DEFAULT_NVSHMEM_REF } from './pins.ts';

/** The most parallel jobs --jobs takes. */
export const MAX_JOBS = 4096;

export type Command = 'build' | 'patch' | 'report' | 'clean' | 'probe' | 'doctor' | 'env';

const Raw = z.object({
  nvshmemSrc: z.string().optional(),
  nvshmemRef: z.string().optional(),
  workDir: z.string().optional(),
  inPlace: z.boolean().default(false),
  dryRun: z.boolean().default(false),
  export: z.string().optional(),
  jobs: z.string().optional(),
  cudaArch: z.string().optional(),
  libfabricHome: z.string().optional(),
  libfabricRef: z.string().optional(),
  gdrcopyHome: z.string().optional(),
  cudaHome: z.string().optional(),
  efaIoDefs: z.string().optional(),
  deepepSrc: z.string().optional(),
  deepepRef: z.string().optional(),
  root: z.string().optional(),
  offline: z.boolean().default(false),
  force: z.boolean().default(false),
  json: z.boolean().default(false),
  verbose: z.boolean().default(false),
  keepSet: z.boolean().default(false),
  nvshmemStatic: z.boolean().default(false),
  // On unless --no-device-api (issue 23): every NVSHMEM program built against the install gets the GDA path.
  deviceApi: z.boolean().default(true),
  deepepGda: z.string().optional(),
  overlap: z.boolean().default(true),
});

/**
 * Which GDA path DeepEP's remote operations take (build --deepep-gda): `shim`, the shim's own (compiled in with
 * -DNVSHMEM_EFA_SHIM_GDA: its puts, signals and barrier writes post to the GDA queue themselves), or `device-api`,
 * none of its own (its remote operations are NVSHMEM device API calls, which NVSHMEM's device API hooks route).
 */
export const DEEPEP_GDA_PATHS = ['shim', 'device-api'] as const;
export type DeepEpGda = (typeof DEEPEP_GDA_PATHS)[number];
export const DEFAULT_DEEPEP_GDA: DeepEpGda = 'shim';

export interface Options {
  command: Command;
  nvshmemSrc?: string;
  nvshmemRef: string;
  /** True when the user named the ref (or the source) rather than taking the default pin. */
  refExplicit: boolean;
  workDir: string;
  inPlace: boolean;
  dryRun: boolean;
  exportDir?: string;
  jobs: number;
  cudaArch?: string;
  libfabricHome?: string;
  /** build: build this pinned libfabric (and rdma-core when the host's is too old) instead of the host's. */
  libfabricRef?: string;
  gdrcopyHome?: string;
  cudaHome?: string;
  efaIoDefs?: string;
  deepepSrc?: string;
  deepepRef?: string;
  /** probe: read /sys, /proc and /dev under this prefix. */
  root?: string;
  offline: boolean;
  force: boolean;
  json: boolean;
  verbose: boolean;
  /** env: variables already set keep their values. */
  keepSet: boolean;
  /** build: also build NVSHMEM 3.4's combined static library (libnvshmem.a) and nvshmem-info. */
  nvshmemStatic: boolean;
  /** build, patch: also route NVSHMEM's own device API over EFA GDA (issue 23; docs/device-api.md); off with --no-device-api. */
  nvshmemDeviceApi: boolean;
  /** build: the GDA path DeepEP's remote operations take (--deepep-gda; DEEPEP_GDA_PATHS). */
  deepepGda: DeepEpGda;
  /** build: compile DeepEP beside NVSHMEM's build on a cold build (--no-overlap: after it). */
  overlap: boolean;
}

const abs = (p: string | undefined, cwd: string) => (p === undefined ? undefined : path.resolve(cwd, p));

/** Validates what commander parsed; every rejection says what to pass instead. */
export function resolveOptions(command: Command, raw: unknown, cwd = process.cwd(), env: NodeJS.ProcessEnv = process.env): Options {
  const r = Raw.safeParse(raw);
  if (!r.success) throw new UsageError(`invalid options: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, 'see nvshmem-efa --help');
  const o = r.data;
  // An empty value would read as "not given" below (`--nvshmem-src ''` would start a clone): refused, as the CLI does.
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'string' && v.trim() === '') throw new UsageError(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is empty`, 'pass a value or leave the option out');
  }
  if (o.nvshmemSrc && o.nvshmemRef) {
    throw new UsageError('--nvshmem-src and --nvshmem-ref are mutually exclusive', 'pass --nvshmem-src DIR to use your tree, or --nvshmem-ref TAG to fetch a pinned release');
  }
  if (o.deepepSrc && o.deepepRef) {
    throw new UsageError('--deepep-src and --deepep-ref are mutually exclusive', 'pass --deepep-src DIR to use your checkout, or --deepep-ref 567632d to fetch the pinned commit');
  }
  if (o.libfabricHome && o.libfabricRef) {
    throw new UsageError('--libfabric-home and --libfabric-ref are mutually exclusive', 'pass --libfabric-home DIR to use a libfabric you have, or --libfabric-ref v2.3.0 to build a pinned one');
  }
  if (o.inPlace && !o.nvshmemSrc) throw new UsageError('--in-place needs --nvshmem-src', 'add --nvshmem-src DIR (the tree to patch in place)');
  if (o.export !== undefined && command !== 'patch') throw new UsageError('--export belongs to the patch command', 'run: nvshmem-efa patch --export DIR');
  let jobs = Math.max(1, os.availableParallelism());
  if (o.jobs !== undefined) {
    // Up to MAX_JOBS: a larger count is a typo, and handed to make and ninja as it is it would not be refused there.
    if (!/^[1-9]\d*$/.test(o.jobs) || Number(o.jobs) > MAX_JOBS) throw new UsageError(`--jobs must be an integer from 1 to ${MAX_JOBS}, got '${o.jobs}'`, 'pass e.g. --jobs 8');
    jobs = Number(o.jobs);
  }
  const deepepGda = resolveDeepEpGda(command, o);
  // Checked here, with the other command-line mistakes, rather than after the sources are fetched.
  const cudaArch = o.cudaArch !== undefined ? parseCudaArch(o.cudaArch) : undefined;
  return {
    command,
    ...(o.nvshmemSrc ? { nvshmemSrc: abs(o.nvshmemSrc, cwd)! } : {}),
    nvshmemRef: o.nvshmemRef ?? DEFAULT_NVSHMEM_REF,
    refExplicit: !!o.nvshmemRef,
    workDir: abs(o.workDir ?? defaultWorkDir(env), cwd)!,
    inPlace: o.inPlace,
    dryRun: o.dryRun,
    ...(o.export ? { exportDir: abs(o.export, cwd)! } : {}),
    jobs,
    ...(cudaArch ? { cudaArch } : {}),
    ...(o.libfabricHome ? { libfabricHome: abs(o.libfabricHome, cwd)! } : {}),
    ...(o.libfabricRef ? { libfabricRef: o.libfabricRef } : {}),
    ...(o.gdrcopyHome ? { gdrcopyHome: abs(o.gdrcopyHome, cwd)! } : {}),
    ...(o.cudaHome ? { cudaHome: abs(o.cudaHome, cwd)! } : {}),
    ...(o.efaIoDefs ? { efaIoDefs: abs(o.efaIoDefs, cwd)! } : {}),
    ...(o.deepepSrc ? { deepepSrc: abs(o.deepepSrc, cwd)! } : {}),
    ...(o.deepepRef ? { deepepRef: o.deepepRef } : {}),
    ...(o.root ? { root: abs(o.root, cwd)! } : {}),
    offline: o.offline,
    force: o.force,
    json: o.json,
    verbose: o.verbose,
    keepSet: o.keepSet,
    nvshmemStatic: o.nvshmemStatic,
    nvshmemDeviceApi: o.deviceApi,
    deepepGda,
    overlap: o.overlap,
  };
}

/**
 * --deepep-gda, refused where it could not mean what it says: device-api without the hooks that carry it (DeepEP
 * would then take NVSHMEM's proxy for every remote operation, while the command line asked for GDA), and the
 * option without a DeepEP to build or in a command that builds none (the choice is a compile flag only).
 */
function resolveDeepEpGda(command: Command, o: z.infer<typeof Raw>): DeepEpGda {
  if (o.deepepGda === undefined) return DEFAULT_DEEPEP_GDA;
  const paths = DEEPEP_GDA_PATHS.join(' or ');
  if (command !== 'build') throw new UsageError('--deepep-gda belongs to the build command (the choice is how DeepEP is compiled)', `run: nvshmem-efa build --deepep-gda ${o.deepepGda} ...`);
  const gda = DEEPEP_GDA_PATHS.find((p) => p === o.deepepGda);
  if (!gda) throw new UsageError(`--deepep-gda must be ${paths}, got '${o.deepepGda}'`, `pass --deepep-gda ${DEFAULT_DEEPEP_GDA} (the default: the shim's own GDA path) or --deepep-gda device-api (NVSHMEM's device API hooks)`);
  if (!o.deepepSrc && !o.deepepRef) throw new UsageError('--deepep-gda needs --deepep-src or --deepep-ref', 'add --deepep-ref 567632d (or --deepep-src DIR), or leave --deepep-gda out');
  if (gda === 'device-api' && !o.deviceApi) {
    throw new UsageError(
      "--deepep-gda device-api contradicts --no-device-api: without NVSHMEM's device API hooks DeepEP's remote operations would all take NVSHMEM's CPU proxy",
      "leave out --no-device-api (NVSHMEM's device API then carries DeepEP's remote operations over GDA), or leave out --deepep-gda for the shim's own GDA path",
    );
  }
  return gda;
}
