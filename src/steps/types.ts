import type { TreeSnapshot } from '../core/copy-tree.ts';
import type { DetectedEnv } from '../core/environment.ts';
import type { ProbeReport } from '../core/probe-schema.ts';
import type { StateStore } from '../core/state.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Options } from '../options.ts';

/** Work-dir layout: one place that names every path the pipeline writes. */
export interface WorkPaths {
  workDir: string;
  logs: string;
  sources: string;
  build: string;
  install: string;
  stubs: string;
  vendor: string;
  report: string;
  /** Pinned libfabric / rdma-core / GDRCopy archives, kept across runs (what --offline reuses). */
  downloads: string;
}

/** A third-party file verified against its lock and stored in the work dir. */
export interface VendoredResult {
  file: string;
  path: string;
  origin: string;
  sha256: string;
}

export interface SourceResult {
  kind: 'local' | 'git';
  /** The tree the pipeline patches and builds. */
  dir: string;
  origin: string;
  ref?: string;
  commit?: string;
  version?: string;
}

export interface PatchResult {
  /** The libfabric transport layout the hooks were chosen for. */
  layout?: { id: 'single-rail' | 'multi-rail'; summary: string };
  changedFiles: string[];
  fixes: FixRecord[];
  templateStage: string;
  templateNote: string;
  gdaEnv: string;
  /** Whether the installed GDA device headers have the vendored efa_io_defs.h they include. */
  deviceHeaders?: 'complete' | 'without-efa-io-defs';
  /** Whether NVSHMEM's own device API was hooked to GDA (the default; not with --no-device-api). */
  nvshmemDeviceApi?: boolean;
}

export interface DeepEpPatchResult {
  layout: 'v1' | 'epv2';
  fixes: FixRecord[];
}

export interface DeepEpBuildResult {
  /** The built extension module (deep_ep_cpp*.so) and how it was checked. */
  module: string;
  check: 'import' | 'link';
  fixes: FixRecord[];
}

export interface BuildResult {
  prefix: string;
  cmakeArgs: string[];
  fixes: FixRecord[];
  libraries: string[];
  /** Whether the installed GDA device headers compile; when not, they were withdrawn (see build-nvshmem). */
  deviceApi?: { available: boolean; removed: string[]; reason?: string; fix?: string };
}

/** A libfabric or rdma-core this run built from pinned sources (or found usable on the host). */
export interface FabricBuildResult {
  package: 'libfabric' | 'rdma-core';
  action: 'built' | 'host';
  version: string;
  prefix?: string;
  ref?: string;
  origin?: string;
  /** "sha256 <hex>" of the archive or "commit <hex>" of the clone. */
  verified?: string;
  /** What the build has compiled in (libfabric: the configure results that make GDA). */
  features?: Record<string, boolean>;
  why: string;
  fixes: FixRecord[];
}

/** GDRCopy's user library (libgdrapi) this run built from its pinned source, the host having none. */
export interface GdrcopyBuildResult {
  prefix: string;
  ref: string;
  version: string;
  origin: string;
  /** "sha256 <hex>" of the archive or "commit <hex>" of the clone. */
  verified: string;
  fixes: FixRecord[];
}

/** The fabtests step: built into the libfabric prefix, or why not (in fixes). */
export interface FabtestsResult {
  built: boolean;
  prefix: string;
  fixes: FixRecord[];
}

/**
 * DeepEP's compile started beside NVSHMEM's build (deepep-beside.ts starts and settles it): what it was
 * started with, so that build-deepep can rerun setup.py the same way and tell whether the staged headers
 * are the installed ones.
 */
export interface BesideRun {
  prefix: string;
  env: Record<string, string>;
  /** sha256 of every staged header, by path under include/. */
  headers: Record<string, string>;
  logPath: string;
  t0: number;
  abort: AbortController;
  done: Promise<void>;
  result?: { ms: number; stopped: boolean; steps: number; total?: number };
}

/** DeepEP's compile beside NVSHMEM's build: running, or why it was not started. */
export type Beside = { running: BesideRun } | { notStarted: string };

export interface Ctx {
  opts: Options;
  paths: WorkPaths;
  state: StateStore;
  signal: AbortSignal;
  env?: DetectedEnv;
  envFixes: FixRecord[];
  source?: SourceResult;
  /** efa_io_defs.h, when it could be had (absent: offline without --efa-io-defs, or download failed). */
  vendored?: VendoredResult;
  /** Why efa_io_defs.h could not be had, when it could not. */
  vendorMissing?: string;
  patch?: PatchResult;
  build?: BuildResult;
  /** The rdma-core and libfabric steps' results (absent when the host's libfabric is used). */
  rdmaCore?: FabricBuildResult;
  libfabric?: FabricBuildResult;
  fabtests?: FabtestsResult;
  /** The gdrcopy step's result (absent when the host's or a named GDRCopy is used, or none). */
  gdrcopy?: GdrcopyBuildResult;
  deepep?: SourceResult;
  deepepPatch?: DeepEpPatchResult;
  deepepBuild?: DeepEpBuildResult;
  /** DeepEP's compile begun beside NVSHMEM's build, or why it was not (deepep-beside.ts). */
  deepepBeside?: Beside;
  /** The probe's report (the document native/probe prints), from the probe step. */
  probeReport?: ProbeReport;
  /** Patch refusals of this run, kept for the report. */
  refusals?: FixRecord[];
  /** The work-dir copy of NVSHMEM as it was before this run refreshed it (time stamps to keep). */
  treeSnapshot?: TreeSnapshot;
  /** Unified diff of the patch plan, for --dry-run. */
  diff?: string;
}

/** What a step may tell the user while it runs; the pipeline maps it onto listr2 (steps never see listr2). */
export interface StepIO {
  progress(text: string): void;
  /**
   * What the finished step's line says after its title, kept in the outcome (summary, report): for a step that
   * succeeded with less than it was for (the build goes on without the GDA device API).
   */
  note?(text: string): void;
  logPath: string;
}

export interface Step {
  id: string;
  title: string;
  /** true, or the reason the step does not apply to this run (shown as skipped). */
  enabled(ctx: Ctx): true | string;
  /** Inputs whose hash decides whether a finished step can be skipped; absent = always runs. */
  stamp?(ctx: Ctx): Promise<unknown>;
  /** Recompute the stamp after running (for steps that change their own inputs, like patching). */
  restampAfterRun?: boolean;
  run(ctx: Ctx, io: StepIO): Promise<unknown>;
  /** Puts a skipped step's saved result back into the context; false = the result is stale, rerun. */
  restore?(ctx: Ctx, result: unknown): boolean;
}
