import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { InterruptedError, NoBuildError, UsageError, WorkDirBusyError } from '../core/errors.ts';
import { describeHolder, lockHolder } from '../core/lock.ts';
import { openLog, queryTool, run } from '../core/exec.ts';
import { packageRoot } from '../core/paths.ts';
import { withInterrupts } from './run-pipeline.ts';
import { shellQuote } from '../core/shell-quote.ts';
import { buildEfaemu, efaemuBuildIn, isEfaemuBuild } from './efaemu-build.ts';
import { modesEnv, parseEfaemuModes, type ModeRun } from './selftest-modes.ts';
import { SELFTEST_CHECKS, type Need } from './selftest-checks.ts';
import { describePlacement, parsePesPerGpu, place, type Placement } from './selftest-placement.ts';
import { workPaths } from '../steps/work-paths.ts';

/**
 * `nvshmem-efa selftest`: validates a build (a work dir of `nvshmem-efa build`) on a host with one GPU or more
 * before it goes to an EFA cluster. Every check runs through efaemu, the emulated EFA NIC (native/efaemu),
 * driven by the real, unmodified product: NVSHMEM's libfabric transport, our GDA host and device code,
 * DeepEP's remote path. The checks themselves live in native/efaemu/gpu/checks.sh (one process per PE, each
 * seeing only its GPU; where a check needs more PEs than there are GPUs they share them, time-sliced, each PE a
 * host of its own: selftest-placement.ts); this command finds the build, the host's GPUs and tools, builds efaemu
 * and the test programs, runs the checks that can run, and says for each one that cannot why not. It proves the
 * protocol and the code paths, not EFA's speed.
 */

export interface SelftestOptions {
  workDir: string;
  checks?: string[];
  libfabricHome?: string;
  efaemuBuild?: string;
  peTest?: string;
  deepepDir?: string;
  results?: string;
  timeoutSec?: number;
  /** --efaemu-modes (see selftest-modes.ts): all (default), none, each, or a comma list */
  efaemuModes?: string;
  /** a directory with prebuilt deepep_pattern, deepep_pattern_no_quiet and deepep_pattern_other_rail */
  patternDir?: string;
  /** --pes-per-gpu: auto (default) or N (see selftest-placement.ts) */
  pesPerGpu?: string;
  /** --quick: QUICK_CHECKS under modes all, device_api on device_api_order alone */
  quick?: boolean;
  dryRun?: boolean;
  json: boolean;
}

/**
 * --quick: the GDA kernel test, DeepEP's low-latency test, one negative control and the device API's ordering program
 * on 2 and 4 PEs (device_api with DEVICE_API_PROGRAMS=QUICK_DEVICE_API_PROGRAMS: no NVSHMEM perftest to build), under
 * every unkind mode: a build's smoke test in minutes.
 */
export const QUICK_CHECKS = ['gda_kernel', 'deepep_ll', 'neg_no_quiet', 'device_api'] as const;
export const QUICK_DEVICE_API_PROGRAMS = 'device_api_order,device_api_order@4';

export type CheckResult = 'pass' | 'fail' | 'skip';
export interface SelftestRow {
  check: string;
  title: string;
  result: CheckResult;
  evidence: string;
  /** the efaemu modes it ran under: a run's modes ('none' without), a control's own, or '-' (no GDA traffic to be unkind to) */
  modes: string;
  /** wall seconds from the end of the check before it in the same checks.sh run (or its start) to its result */
  seconds?: number;
}

/** The column for a check that takes no modes: efaemu as it was (completion reordering where the check asks for it). */
const NO_MODES = '-';

/** The table's entry of a check. */
const checkOf = (id: string) => SELFTEST_CHECKS.find((c) => c.id === id);
/** What a check needs (none for an id not in the table). */
const needsOf = (id: string): readonly Need[] => checkOf(id)?.needs ?? [];

/** Whether a check takes the modes of each --efaemu-modes run (one row per run). */
export function takesRunModes(id: string): boolean {
  const m = checkOf(id)?.modes;
  return m === 'run' || m === 'run-unplaced';
}

/** The modes of the efaemu model of placement: a check marked 'run-unplaced' runs without them. */
const PLACEMENT_MODES: readonly string[] = ['place_order', 'defer', 'duplicate'];

/** What the host and the work dir offer: each need is either there (with what) or missing (with why). */
export interface Survey {
  have: Partial<Record<Need, string>>;
  missing: Partial<Record<Need, string>>;
  nvshmemHome?: string;
  libfabricHome?: string;
  cudaArch?: string;
  deepepDir?: string;
  /** The NVSHMEM source tree whose perftests and examples device_api builds. */
  nvshmemSource?: string;
  python: string;
  /** GPUs the host has (0 without a driver). */
  hostGpus: number;
  /** An MPS control daemon that answered (its server list), which the PEs are kept away from. */
  mps?: string;
  /** GPUs in a compute mode that allows one process (Exclusive_Process, Prohibited): no shared placement there. */
  exclusive?: string;
}

/** The build the work dir holds, as its state says (build-nvshmem and build-deepep results). */
export function readBuild(workDir: string): {
  prefix?: string;
  libfabricHome?: string;
  cudaArch?: string;
  deviceApi?: boolean;
  /** The build has NVSHMEM's device API hooked to GDA (built without --no-device-api). */
  nvshmemDeviceApi?: boolean;
  /** The NVSHMEM source tree it was built from (perftest/ and examples/ for device_api). */
  sourceDir?: string;
  deepepModule?: string;
  layout?: string;
  why?: string;
} {
  const file = path.join(workDir, 'state.json');
  if (!existsSync(file)) return { why: `${workDir} is not an nvshmem-efa work dir (no state.json): run nvshmem-efa build --work-dir ${workDir} first` };
  let steps: Record<string, { result?: unknown }> = {};
  try {
    steps = JSON.parse(readFileSync(file, 'utf8')).steps ?? {};
  } catch {
    return { why: `${file} is not readable JSON` };
  }
  const b = steps['build-nvshmem']?.result as { prefix?: string; cmakeArgs?: string[]; deviceApi?: { available?: boolean } } | undefined;
  if (!b?.prefix) return { why: `no finished NVSHMEM build in ${workDir}: run nvshmem-efa build --work-dir ${workDir}` };
  const arg = (name: string) => b.cmakeArgs?.find((a) => a.startsWith(`-D${name}=`))?.slice(name.length + 3);
  const d = steps['build-deepep']?.result as { module?: string } | undefined;
  const patch = steps['patch-nvshmem']?.result as { layout?: { id?: string }; nvshmemDeviceApi?: boolean } | undefined;
  const sourceDir = (steps['get-nvshmem']?.result as { dir?: string } | undefined)?.dir;
  return {
    prefix: b.prefix, libfabricHome: arg('LIBFABRIC_HOME'), cudaArch: arg('CMAKE_CUDA_ARCHITECTURES'), deviceApi: b.deviceApi?.available !== false,
    nvshmemDeviceApi: patch?.nvshmemDeviceApi === true, ...(sourceDir ? { sourceDir } : {}), deepepModule: d?.module, layout: patch?.layout?.id,
  };
}

/** What selftest asks the host (a test passes its own answers). */
export interface HostQueries {
  gpuCount(): Promise<number | undefined>;
  canUnshare(): Promise<boolean>;
  hasTorch(python: string): Promise<string | undefined>;
  nvcc(): Promise<string | undefined>;
  /** The answer of an MPS control daemon to get_server_list (with the caller's CUDA_MPS_PIPE_DIRECTORY), if one runs. */
  mpsDaemon(): Promise<string | undefined>;
  /** Each GPU's compute mode as nvidia-smi names it (Default, Exclusive_Process, Prohibited). */
  computeModes(): Promise<string[]>;
}

export const realHost: HostQueries = {
  async gpuCount() {
    const smi = await queryTool('nvidia-smi', ['-L']);
    if (smi !== undefined) return smi.split('\n').filter((l) => /^GPU \d+/.test(l)).length;
    try {
      return readdirSync('/proc/driver/nvidia/gpus').length;
    } catch {
      return undefined;
    }
  },
  async canUnshare() {
    return (await queryTool('unshare', ['--mount', 'true'])) !== undefined;
  },
  async hasTorch(python) {
    return (await queryTool(python, ['-c', 'import torch; print(torch.__version__)']))?.trim() || undefined;
  },
  async nvcc() {
    const home = process.env.CUDA_HOME;
    const candidates = [home && path.join(home, 'bin', 'nvcc'), '/usr/local/cuda/bin/nvcc'].filter(Boolean) as string[];
    for (const c of candidates) if (existsSync(c)) return c;
    return (await queryTool('sh', ['-c', 'command -v nvcc']))?.trim() || undefined;
  },
  async mpsDaemon() {
    // The control client only talks to a daemon (it never starts one without -d); without one it fails.
    const a = await queryTool('sh', ['-c', 'command -v nvidia-cuda-mps-control >/dev/null && echo get_server_list | nvidia-cuda-mps-control']);
    return a === undefined ? undefined : a.trim() || '(no server yet)';
  },
  async computeModes() {
    return ((await queryTool('nvidia-smi', ['--query-gpu=compute_mode', '--format=csv,noheader'])) ?? '').split('\n').map((l) => l.trim()).filter(Boolean);
  },
};

export async function survey(o: SelftestOptions, host: HostQueries): Promise<Survey> {
  const gpus = await host.gpuCount();
  const s: Survey = { have: {}, missing: {}, python: process.env.PYTHON ?? 'python3', hostGpus: gpus ?? 0 };
  if (gpus === undefined) s.missing.gpus = 'no NVIDIA driver here (nvidia-smi and /proc/driver/nvidia absent)';
  else if (gpus < 1) s.missing.gpus = 'the NVIDIA driver sees no GPU';
  else s.have.gpus = `${gpus} GPU${gpus === 1 ? '' : 's'}`;
  if (gpus) {
    s.mps = await host.mpsDaemon();
    const excl = (await host.computeModes()).map((m, i) => ({ m, i })).filter((x) => /exclusive|prohibited/i.test(x.m));
    if (excl.length) s.exclusive = excl.map((x) => `GPU ${x.i} ${x.m}`).join(', ');
  }
  if (await host.canUnshare()) s.have.unshare = 'unshare -m works';
  else s.missing.unshare = 'unshare --mount fails (needs root or CAP_SYS_ADMIN): the emulated NIC entries under /sys/class/infiniband live in a private mount namespace';
  const b = readBuild(o.workDir);
  s.libfabricHome = o.libfabricHome ?? b.libfabricHome;
  s.cudaArch = b.cudaArch;
  if (b.prefix && existsSync(path.join(b.prefix, 'lib'))) {
    s.nvshmemHome = b.prefix;
    s.have.nvshmem = b.prefix;
    if (b.deviceApi && existsSync(path.join(b.prefix, 'include', 'nvshmem_efa', 'nvshmemx_efa_gda_device.cuh'))) s.have.gda = 'GDA device API installed';
    else s.missing.gda = `${b.prefix} has no GDA device API (include/nvshmem_efa): the build's report says why`;
  } else {
    s.missing.nvshmem = b.why ?? `the NVSHMEM install ${b.prefix} is gone: rerun nvshmem-efa build --work-dir ${o.workDir}`;
    s.missing.gda = s.missing.nvshmem;
  }
  // The 2-rail checks show traffic on both NICs of a PE; a single-rail transport hands GDA one NIC, so DeepEP
  // there would only rerun deepep_ll slower (on 2x H200 it ran out its bound, rc 124, at 1 rail).
  if (b.layout === 'single-rail') s.missing.rails = "the build's NVSHMEM has the single-rail libfabric transport (NVSHMEM 3.2.5 .. 3.5.x), which gives GDA one NIC per PE: nothing for a 2-rail check to show (build a multi-rail NVSHMEM, e.g. AWS's 3.5.7 branch)";
  else s.have.rails = b.layout ? `${b.layout} libfabric transport` : 'layout not recorded: the 2-rail checks find out';
  if (!s.libfabricHome || !existsSync(path.join(s.libfabricHome, 'include', 'rdma', 'fabric.h'))) {
    s.missing.efaemu = `no libfabric to build efaemu against (${s.libfabricHome ?? 'the work dir names none'}): pass --libfabric-home`;
  } else if (o.efaemuBuild) {
    if (isEfaemuBuild(o.efaemuBuild)) s.have.efaemu = o.efaemuBuild;
    else s.missing.efaemu = `--efaemu-build ${o.efaemuBuild} has no prov/libefa-fi.so`;
  } else {
    s.have.efaemu = `to build against ${s.libfabricHome}`;
  }
  if (s.libfabricHome && existsSync(path.join(s.libfabricHome, 'bin', 'fi_rdm_pingpong')) && existsSync(path.join(s.libfabricHome, 'bin', 'fi_rma_bw'))) s.have.fabtests = path.join(s.libfabricHome, 'bin');
  else s.missing.fabtests = `libfabric's fabtests (fi_rdm_pingpong, fi_rma_bw) are not in ${s.libfabricHome ?? '?'}/bin: build them with that libfabric`;
  if (o.peTest) {
    if (existsSync(o.peTest)) s.have.pe_test = o.peTest;
    else s.missing.pe_test = `--pe-test ${o.peTest} does not exist`;
  } else if (!s.nvshmemHome) {
    s.missing.pe_test = 'needs the NVSHMEM build';
  } else {
    const nvcc = await host.nvcc();
    if (nvcc) s.have.pe_test = `to build with ${nvcc}`;
    else s.missing.pe_test = 'no nvcc (CUDA_HOME, /usr/local/cuda) to build the test program';
  }
  // deepep_pattern.cu includes the DeepEP shim with the GDA path: it needs the device API, and nvcc unless prebuilt.
  if (o.patternDir) {
    const absent = PATTERN_PROGRAMS.filter((p) => !existsSync(path.join(o.patternDir!, p)));
    if (absent.length) s.missing.pattern = `--pattern-dir ${o.patternDir} lacks ${absent.join(', ')} (build them with bench/efaemu/build-gpu-programs.sh)`;
    else s.have.pattern = o.patternDir;
  } else if (!s.have.gda) {
    s.missing.pattern = s.missing.gda ?? 'needs the GDA device API';
  } else {
    const nvcc = await host.nvcc();
    if (nvcc) s.have.pattern = `to build with ${nvcc}`;
    else s.missing.pattern = 'no nvcc (CUDA_HOME, /usr/local/cuda) to build deepep_pattern';
  }
  // NVSHMEM's own perftests and examples, built from the build's source against its install: they take the device
  // API path only in a build with the hooks (not --no-device-api), and need cmake and nvcc to build.
  if (!s.nvshmemHome) s.missing.nvshmem_tests = 'needs the NVSHMEM build';
  else if (!b.nvshmemDeviceApi) s.missing.nvshmem_tests = `the build in ${o.workDir} routes no NVSHMEM device API call over GDA (built with --no-device-api, or by an nvshmem-efa from before the hooks were the default): rebuild without --no-device-api (docs/device-api.md)`;
  else if (!b.sourceDir || !existsSync(path.join(b.sourceDir, 'perftest', 'CMakeLists.txt'))) s.missing.nvshmem_tests = `the build's NVSHMEM source ${b.sourceDir ?? '(not recorded)'} has no perftest/ to build NVSHMEM's perftests from`;
  else if (!(await host.nvcc())) s.missing.nvshmem_tests = "no nvcc (CUDA_HOME, /usr/local/cuda) to build NVSHMEM's perftests";
  else {
    s.nvshmemSource = b.sourceDir;
    s.have.nvshmem_tests = `perftests and examples of ${b.sourceDir}`;
  }
  // neg_device_api rebuilds the device library's transfer functions with one rule broken, with the command the
  // build used: its compile_commands.json (builds since CMAKE_EXPORT_COMPILE_COMMANDS was passed have one).
  const commands = path.join(workPaths(o.workDir).build, 'compile_commands.json');
  if (s.missing.nvshmem_tests) s.missing.neg_build = s.missing.nvshmem_tests;
  else if (!existsSync(commands)) s.missing.neg_build = `${commands} is missing (an NVSHMEM build from before nvshmem-efa exported its compile commands): rerun nvshmem-efa build --work-dir ${o.workDir}`;
  else s.have.neg_build = commands;
  const deepepDir = o.deepepDir ?? (b.deepepModule ? path.dirname(b.deepepModule) : undefined);
  if (!deepepDir) s.missing.deepep = `no DeepEP build in ${o.workDir} (build with --deepep-src or --deepep-ref, or pass --deepep-dir)`;
  else if (!existsSync(path.join(deepepDir, 'tests', 'test_low_latency.py'))) s.missing.deepep = `${deepepDir} has no tests/test_low_latency.py`;
  else {
    const torch = await host.hasTorch(s.python);
    if (!torch) s.missing.deepep = `${s.python} cannot import torch, which DeepEP's tests need (set PYTHON)`;
    else {
      s.deepepDir = deepepDir;
      s.have.deepep = `${deepepDir} (torch ${torch})`;
    }
  }
  return s;
}

/** Why a check cannot run here, or undefined when it can. */
export function skipReason(needs: readonly Need[], s: Survey): string | undefined {
  const why = needs.map((n) => s.missing[n]).filter(Boolean) as string[];
  return why.length ? [...new Set(why)].join('; ') : undefined;
}

/**
 * Our diagnosis of an NVSHMEM init that failed, from its output and environment: what went wrong and the fix.
 * The wrong-provider control passes only when this names the provider as the cause.
 */
export function diagnoseInitFailure(output: string, env: Record<string, string | undefined>): string | undefined {
  const prov = env.FI_PROVIDER;
  if (/No providers matched fi_getinfo query/.test(output)) {
    return prov && prov !== 'efa'
      ? `NVSHMEM's libfabric transport found no provider: FI_PROVIDER=${prov} restricts libfabric to '${prov}', which offers nothing for NVSHMEM_LIBFABRIC_PROVIDER=efa. Fix: unset FI_PROVIDER or set FI_PROVIDER=efa`
      : "NVSHMEM's libfabric transport found no provider matching its query: no EFA device (or no efa provider in this libfabric). Fix: check fi_info -p efa";
  }
  if (/libgdrapi|gdr_open|GDRCopy/i.test(output)) return 'NVSHMEM needs GDRCopy for the EFA provider and could not use it. Fix: load gdrdrv and put libgdrapi.so.2 on LD_LIBRARY_PATH';
  if (/Unable to open the .*transport/.test(output)) return "NVSHMEM could not load its libfabric transport plugin. Fix: put the build's lib/ on LD_LIBRARY_PATH";
  return undefined;
}

function anyPciDevice(): string | undefined {
  try {
    const d = readdirSync('/sys/bus/pci/devices')[0];
    return d ? `/sys/bus/pci/devices/${d}` : undefined;
  } catch {
    return undefined;
  }
}

/** "12 m 03 s", "41 s". */
export function formatDuration(seconds: number): string {
  const t = Math.round(seconds);
  return t >= 60 ? `${Math.floor(t / 60)} m ${String(t % 60).padStart(2, '0')} s` : `${t} s`;
}

export function renderTable(rows: readonly SelftestRow[], seconds?: number): string {
  const w = Math.max(5, ...rows.map((r) => r.check.length));
  const m = Math.max(12, ...rows.map((r) => r.modes.length));
  const time = (r: SelftestRow) => (r.seconds === undefined ? '-' : formatDuration(r.seconds));
  const t = Math.max(4, ...rows.map((r) => time(r).length));
  const lines = [`${'check'.padEnd(w)}  result  ${'time'.padEnd(t)}  ${'efaemu modes'.padEnd(m)}  evidence`, `${'-'.repeat(w)}  ------  ${'-'.repeat(t)}  ${'-'.repeat(m)}  --------`];
  for (const r of rows) lines.push(`${r.check.padEnd(w)}  ${r.result.toUpperCase().padEnd(6)}  ${time(r).padEnd(t)}  ${r.modes.padEnd(m)}  ${r.evidence}`);
  const n = (k: CheckResult) => rows.filter((r) => r.result === k).length;
  lines.push('', `${n('pass')} passed, ${n('fail')} failed, ${n('skip')} skipped${seconds === undefined ? '' : ` in ${formatDuration(seconds)}`}${n('skip') ? ' (each says why; a skipped check proves nothing)' : ''}`);
  return lines.join('\n');
}

/** RESULT<TAB>check<TAB>pass|fail|skip<TAB>evidence lines of checks.sh. */
export function parseResult(line: string): { check: string; result: CheckResult; evidence: string } | undefined {
  const m = /^RESULT\t([\w-]+)\t(pass|fail|skip)\t(.*)$/.exec(line);
  return m ? { check: m[1]!, result: m[2] as CheckResult, evidence: m[3]! } : undefined;
}

async function buildPeTest(nvcc: string, nvshmem: string, arch: string, gda: boolean, out: string, logPath: string, signal: AbortSignal): Promise<void> {
  const log = await openLog(logPath);
  try {
    const archs = arch.split(/[;,\s]+/).filter(Boolean).flatMap((a) => ['-gencode', `arch=compute_${a},code=sm_${a}`]);
    await run(nvcc, ['-O2', '-std=c++17', '-rdc=true', ...archs, ...(gda ? ['-DPE_TEST_GDA'] : []), '-I', path.join(nvshmem, 'include'),
      path.join(packageRoot(), 'native', 'efaemu', 'gpu', 'pe_test.cu'), '-o', out, '-L', path.join(nvshmem, 'lib'), '-lnvshmem_host', '-lnvshmem_device',
      '-ldl', `-Xlinker=-rpath,${path.join(nvshmem, 'lib')}`], { log, logPath, signal, fix: `read the nvcc error in ${logPath}` });
  } finally {
    await log.end();
  }
}

/** Where device_api's build of NVSHMEM's perftests and examples lives: in the work dir, so a second selftest reuses it. */
export function nvshmemTestsDir(workDir: string): string {
  return path.join(path.resolve(workDir), 'build', 'nvshmem-tests');
}

/** How checks.sh starts `nvshmem-efa launch`: this node and this tool's script (the standalone bundle's too). */
export function launchCommandLine(): string {
  const self = process.argv[1] && /nvshmem-efa(\.[cm]?js)?$/.test(process.argv[1]) ? process.argv[1] : path.join(packageRoot(), 'bin', 'nvshmem-efa.js');
  return `${process.execPath} ${self}`;
}

/**
 * Builds what device_api and neg_device_api run (checks.sh --device-api-targets, --neg-device-api-targets) with
 * build-nvshmem-tests.sh: NVSHMEM's perftests and examples, and our device_api_order with its negative controls
 * (those rebuild the device library's transfer functions from the NVSHMEM build in `nvshmemBuild`).
 */
async function buildNvshmemTests(checks: string[], src: string, prefix: string, nvshmemBuild: string, out: string, arch: string, logPath: string, signal: AbortSignal, env: Record<string, string> = {}): Promise<void> {
  const log = await openLog(logPath);
  try {
    const gpu = path.join(packageRoot(), 'native', 'efaemu', 'gpu');
    const ask = async (flag: string) => (await queryTool('bash', [path.join(gpu, 'checks.sh'), flag], env))?.split('\n').filter(Boolean) ?? [];
    const targets = [...new Set([
      ...(checks.includes('device_api') ? await ask('--device-api-targets') : []),
      ...(checks.includes('neg_device_api') ? await ask('--neg-device-api-targets') : []),
    ])];
    if (!targets.length) throw new Error(`checks.sh named no program to build for ${checks.join(', ')} (${gpu})`);
    const script = process.env.NVSHMEM_EFA_NVSHMEM_TESTS_BUILD ?? path.join(gpu, 'build-nvshmem-tests.sh');
    await run('bash', [script, src, prefix, out, arch, ...targets], { env: { ...process.env, ...env, NVSHMEM_BUILD: nvshmemBuild }, log, logPath, signal, fix: `read the build error in ${logPath}` });
  } finally {
    await log.end();
  }
}

/** The programs built from native/efaemu/gpu/deepep_pattern.cu: the product's shim and one build per negative control. */
export const PATTERN_PROGRAMS = ['deepep_pattern', 'deepep_pattern_no_quiet', 'deepep_pattern_other_rail'] as const;
const PATTERN_SWITCH: Record<(typeof PATTERN_PROGRAMS)[number], string[]> = {
  deepep_pattern: [],
  deepep_pattern_no_quiet: ['-DNVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL'],
  deepep_pattern_other_rail: ['-DNVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL'],
};

/** nvcc arguments for deepep_pattern.cu against an NVSHMEM install (the shim from this package's templates). */
export function patternNvccArgs(nvshmem: string, arch: string, program: (typeof PATTERN_PROGRAMS)[number], out: string): string[] {
  const archs = arch.split(/[;,\s]+/).filter(Boolean).flatMap((a) => ['-gencode', `arch=compute_${a},code=sm_${a}`]);
  const gpu = path.join(packageRoot(), 'native', 'efaemu', 'gpu');
  return ['-O2', '-std=c++17', '-rdc=true', ...archs, ...PATTERN_SWITCH[program], '-I', path.join(nvshmem, 'include'),
    '-I', path.join(packageRoot(), 'templates', 'deepep_efa'), path.join(gpu, 'deepep_pattern.cu'), '-o', out,
    '-L', path.join(nvshmem, 'lib'), '-lnvshmem_host', '-lnvshmem_device', '-ldl', `-Xlinker=-rpath,${path.join(nvshmem, 'lib')}`];
}

/**
 * The builds that take minutes (deepep_pattern's three programs, about 45 s; NVSHMEM's perftests and examples, 325 s
 * with 16 cores on one H200): they run beside the checks that do not need them. In this order their checks run after.
 */
export const BACKGROUND_BUILDS: readonly Need[] = ['pattern', 'nvshmem_tests'];
const BUILD_LOG_SUFFIX: Partial<Record<Need, string>> = { pattern: 'patterns', nvshmem_tests: 'device-api' };
const BUILD_LABEL: Partial<Record<Need, string>> = { pattern: "deepep_pattern's programs", nvshmem_tests: "NVSHMEM's perftests and examples" };

/**
 * A pass's checks as runs of checks.sh: first those that wait for none of the BUILDING builds, then those that wait
 * for the first build (and no later one), and so on. Each run names the builds it waits for and its log file.
 */
export function runsByBuild(checks: readonly string[], building: readonly Need[]): { waits: Need[]; checks: string[]; log: string }[] {
  const order = BACKGROUND_BUILDS.filter((n) => building.includes(n));
  const last = (c: string) => Math.max(-1, ...order.map((n, i) => (needsOf(c).includes(n) ? i : -1)));
  const runs: { waits: Need[]; checks: string[]; log: string }[] = [];
  for (let i = -1; i < order.length; i++) {
    const these = checks.filter((c) => last(c) === i);
    if (!these.length) continue;
    const waits = order.filter((n) => these.some((c) => needsOf(c).includes(n)));
    runs.push({ waits, checks: these, log: i < 0 ? 'checks.log' : `checks-${BUILD_LOG_SUFFIX[order[i]!] ?? order[i]}.log` });
  }
  return runs;
}

async function buildPatterns(nvcc: string, nvshmem: string, arch: string, dir: string, logPath: string, signal: AbortSignal): Promise<void> {
  const log = await openLog(logPath);
  try {
    await mkdir(dir, { recursive: true });
    await Promise.all(PATTERN_PROGRAMS.map((p) => run(nvcc, patternNvccArgs(nvshmem, arch, p, path.join(dir, p)), { log, logPath, signal, fix: `read the nvcc error in ${logPath}` })));
  } finally {
    await log.end();
  }
}

/**
 * The passes of checks.sh: the first runs every runnable check under the first mode run; each later one only the
 * checks that take the run's modes.
 */
export function planRuns(runnable: readonly string[], runs: readonly ModeRun[]): { run: ModeRun; checks: string[] }[] {
  return runs
    .map((run, i) => ({ run, checks: i === 0 ? [...runnable] : runnable.filter(takesRunModes) }))
    .filter((p) => p.checks.length);
}

/** The column of a check's row in a run. */
export function modesColumn(id: string, run: ModeRun): string {
  const m = checkOf(id)?.modes;
  if (m === 'run') return run.label;
  if (m === 'run-unplaced') {
    const kept = run.modes.filter((x) => !PLACEMENT_MODES.includes(x));
    return kept.length === run.modes.length ? run.label : kept.length ? kept.join(',') : 'none';
  }
  if (m === 'defer') return run.modes.includes('defer') ? run.label : run.modes.length ? `defer,${run.label}` : 'defer';
  return m ?? NO_MODES;
}

/** The schema of `selftest --json` (with --dry-run: `dryRun: true` and the plan). */
export const SELFTEST_JSON = 'nvshmem-efa-selftest/1';

/**
 * A --work-dir that names no directory (a typo), or one without the build the chosen checks validate: an error
 * with the fix (NoBuildError, exit 4, as report, env and bench), not a table of skipped checks that exits 0.
 */
export async function checkWorkDir(workDir: string, wanted: readonly string[]): Promise<void> {
  const fix = 'pass the --work-dir of a finished nvshmem-efa build (default: .nvshmem-efa in the current directory)';
  let dir: boolean;
  try {
    dir = statSync(workDir).isDirectory();
  } catch {
    // No work dir is no build there: one code for both (NoBuildError), as report, env and bench say it.
    throw new NoBuildError(`selftest --work-dir ${workDir} does not exist`, fix);
  }
  if (!dir) throw new UsageError(`selftest --work-dir ${workDir} is not a directory`, fix);
  // fi_info and fabtests need only a libfabric (--libfabric-home): they may run without a build.
  if (!SELFTEST_CHECKS.some((c) => wanted.includes(c.id) && c.needs.includes('nvshmem'))) return;
  const b = readBuild(workDir);
  if (b.prefix) return;
  const running = await lockHolder(workDir);
  if (running) throw new WorkDirBusyError(`${workDir} holds no NVSHMEM build yet: a run is in progress there, ${describeHolder(running)}`, 'wait for it to end, then rerun selftest');
  const state = path.join(workDir, 'state.json');
  const why = !existsSync(state) ? 'no state.json: not an nvshmem-efa work dir' : b.why?.includes('not readable JSON') ? `${state} is not readable JSON` : 'no run there finished building NVSHMEM';
  throw new NoBuildError(`${workDir} holds no NVSHMEM build (${why})`, `${fix}, or build one there: nvshmem-efa build --work-dir ${workDir} --nvshmem-src DIR (or --nvshmem-ref)`);
}

export async function selftestCommand(o: SelftestOptions, out: (s: string) => void, err: (s: string) => void, host: HostQueries = realHost): Promise<number> {
  const started = Date.now();
  const known = SELFTEST_CHECKS.map((c) => c.id);
  if (o.quick && o.checks?.length) throw new UsageError('--quick and --checks both choose the checks', 'drop one of them (--quick runs ' + QUICK_CHECKS.join(', ') + ')');
  const perGpu = parsePesPerGpu(o.pesPerGpu);
  const wanted = o.quick ? [...QUICK_CHECKS] : o.checks?.length ? o.checks : known;
  const unknown = wanted.filter((c) => !known.includes(c));
  if (unknown.length) throw new UsageError(`unknown check${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`, `choose from: ${known.join(', ')}`);
  const modeRuns = parseEfaemuModes(o.efaemuModes);
  await checkWorkDir(o.workDir, wanted);
  const results = path.resolve(o.results ?? path.join(o.workDir, 'selftest'));
  const script = process.env.NVSHMEM_EFA_SELFTEST_SCRIPT ?? path.join(packageRoot(), 'native', 'efaemu', 'gpu', 'checks.sh');
  const title = (id: string) => checkOf(id)!.title;
  // Rows of checks that take the run's modes are one per run (check@modes); the others one.
  const key = (id: string, run: ModeRun) => (takesRunModes(id) ? `${id}@${run.label}` : id);
  // One results dir per pass when there are several: every pass keeps its logs, and deepep_counters reads the
  // deepep_ll statistics of its own pass.
  const passDir = (i: number, run: ModeRun) => (modeRuns.length > 1 ? path.join(results, `modes-${i}-${run.label.replace(/,/g, '+')}`) : results);
  const order = (rows: Map<string, SelftestRow>) =>
    SELFTEST_CHECKS.flatMap((c) => modeRuns.map((r) => rows.get(key(c.id, r))).filter((r, i, a): r is SelftestRow => !!r && a.indexOf(r) === i));
  const s = await survey(o, host);
  const rows = new Map<string, SelftestRow>();
  const runnable: string[] = [];
  const placements = new Map<string, Placement>();
  for (const c of SELFTEST_CHECKS.filter((x) => wanted.includes(x.id))) {
    let why = skipReason(c.needs, s);
    if (!why && c.needs.includes('gpus')) {
      const p = place(c.pes ?? 2, s.hostGpus, perGpu);
      if ('why' in p) why = p.why;
      else if (p.shared && s.exclusive) why = `${s.exclusive}: a GPU in that compute mode takes one process, and this check shares ${describePlacement(p).replace(/ \(.*/, '')}; set it back with nvidia-smi -c DEFAULT (as root), or run on a host with a GPU per PE`;
      else placements.set(c.id, p);
    }
    if (!why) runnable.push(c.id);
    else for (const r of modeRuns) rows.set(key(c.id, r), { check: c.id, title: c.title, result: 'skip', evidence: why, modes: modesColumn(c.id, r) });
  }
  const passes = planRuns(runnable, modeRuns);
  // How the PEs are placed, by PE count: the table's header and the JSON report say it.
  const placed = [...new Set([...placements.values()].map((p) => p.pes))].sort((a, b) => a - b).map((n) => {
    const of = [...placements.entries()].filter(([, p]) => p.pes === n);
    return { ...of[0]![1], checks: of.map(([id]) => id) };
  });
  const noMps = path.join(results, 'no-mps');
  const header = [
    ...(placed.length ? [`PEs (host with ${s.hostGpus} GPU${s.hostGpus === 1 ? '' : 's'}, --pes-per-gpu ${perGpu}): ${placed.map((p) => `${describePlacement(p)} for ${p.checks.length > 3 ? `${p.checks.length} checks` : p.checks.join(', ')}`).join('; ')}`] : []),
    ...(placed.some((p) => p.shared) ? ["shared GPUs: each check's time is the GPU time-slicer's, not the product's (a wait for another PE can cost a timeslice)"] : []),
    ...(s.mps ? [`MPS: a control daemon answers here (${s.mps.split('\n').join(', ')}); no PE uses it (CUDA_MPS_PIPE_DIRECTORY=${noMps}, an empty directory): they are time-sliced as without MPS`] : []),
  ];
  const quickEnv: Record<string, string> = o.quick && !process.env.DEVICE_API_PROGRAMS ? { DEVICE_API_PROGRAMS: QUICK_DEVICE_API_PROGRAMS } : {};
  const needsBuilt = (n: Need) => runnable.some((c) => needsOf(c).includes(n));
  // The builds that run beside the checks (BACKGROUND_BUILDS) in this run.
  const building: Need[] = [...(needsBuilt('pattern') && !o.patternDir ? ['pattern' as const] : []), ...(needsBuilt('nvshmem_tests') ? ['nvshmem_tests' as const] : [])];
  if (o.dryRun) {
    const plan = {
      results,
      builds: [
        ...(runnable.length && !o.efaemuBuild ? [`efaemu against ${s.libfabricHome} into ${efaemuBuildIn(results).dir}`] : []),
        ...(needsBuilt('pe_test') && !o.peTest ? [`pe_test against ${s.nvshmemHome} into ${path.join(results, 'pe_test')}`] : []),
        ...(building.includes('pattern') ? [`${PATTERN_PROGRAMS.join(', ')} against ${s.nvshmemHome} into ${path.join(results, 'patterns')}, while the checks that do not need them run`] : []),
        ...(building.includes('nvshmem_tests') ? [`NVSHMEM's perftests and examples of ${s.nvshmemSource} against ${s.nvshmemHome} into ${nvshmemTestsDir(o.workDir)}, with half the cores, while the checks that do not need them run`] : []),
      ],
      // Per pass: the checks that need a background build run after the others, once it is built.
      runs: passes.flatMap((p) => runsByBuild(p.checks, building).map(({ checks, waits }) =>
        ({ modes: p.run.label, checks, ...(waits.length ? { after: waits } : {}), command: `EFAEMU_MODES=${modesEnv(p.run)} RESULTS=${shellQuote(passDir(modeRuns.indexOf(p.run), p.run))} bash ${shellQuote(script)} ${checks.join(' ')}` }))),
      skipped: order(rows),
      placement: placed,
    };
    if (o.json) out(JSON.stringify({ schema: SELFTEST_JSON, dryRun: true, ...plan }, null, 2));
    else
      out([...header, ...plan.builds.map((b) => `would build ${b}`), ...plan.runs.map((r) => `would run${'after' in r ? ` after building ${r.after!.map((n) => BUILD_LABEL[n] ?? n).join(' and ')}` : ''}: ${r.command}`),
        ...plan.skipped.map((r) => `would skip ${r.check}${takesRunModes(r.check) ? ` (modes ${r.modes})` : ''}: ${r.evidence}`)].join('\n') || 'nothing to run');
    return 0;
  }
  return withInterrupts(async (signal) => {
    let efaemu = o.efaemuBuild;
    let peTest = o.peTest;
    let patternDir = o.patternDir;
    if (runnable.length) await mkdir(results, { recursive: true });
    if (runnable.length && !efaemu) {
      const b = efaemuBuildIn(results);
      efaemu = b.dir;
      err(`building efaemu against ${s.libfabricHome} in ${efaemu}`);
      await buildEfaemu(s.libfabricHome!, efaemu, b.logPath, signal);
    }
    if (needsBuilt('pe_test') && !peTest) {
      peTest = path.join(results, 'pe_test');
      err(`building the test program ${peTest} against ${s.nvshmemHome}`);
      await buildPeTest((await host.nvcc())!, s.nvshmemHome!, s.cudaArch ?? '90', !!s.have.gda, peTest, path.join(results, 'pe_test-build.log'), signal);
    }
    // The builds that take minutes run while the checks that do not need them run; the checks that need one run once
    // it is built (runsByBuild). A failed build fails its checks alone, naming its log; the others keep their results.
    const built = new Map<Need, Promise<string | undefined>>();
    const beside = (need: Need, what: string, logPath: string, build: Promise<void>) => {
      const p = build.then(() => undefined, (e: unknown) => {
        if (signal.aborted) throw e;
        return `building ${what} failed (${e instanceof Error ? e.message.split('\n')[0] : String(e)}; ${logPath})`;
      });
      p.catch(() => {}); // an interrupt is rethrown where it is awaited, never left unhandled meanwhile
      built.set(need, p);
    };
    if (building.includes('pattern')) {
      patternDir = path.join(results, 'patterns');
      const logPath = path.join(results, 'patterns-build.log');
      err(`building ${PATTERN_PROGRAMS.join(', ')} in ${patternDir} against ${s.nvshmemHome}, beside the checks that do not need them`);
      beside('pattern', PATTERN_PROGRAMS.join(', '), logPath, buildPatterns((await host.nvcc())!, s.nvshmemHome!, s.cudaArch ?? '90', patternDir, logPath, signal));
    }
    // NVSHMEM's perftests and examples (325 s on one H200 with 16 cores) build with half the cores.
    let nvshmemTests: string | undefined;
    if (building.includes('nvshmem_tests')) {
      nvshmemTests = nvshmemTestsDir(o.workDir);
      const logPath = path.join(results, 'nvshmem-tests-build.log');
      err(`building NVSHMEM's perftests and examples of ${s.nvshmemSource} in ${nvshmemTests} against ${s.nvshmemHome}, beside the other checks`);
      const jobs = process.env.JOBS ?? String(Math.max(1, Math.floor(availableParallelism() / 2)));
      beside('nvshmem_tests', "NVSHMEM's perftests and examples", logPath,
        buildNvshmemTests(runnable, s.nvshmemSource!, s.nvshmemHome!, workPaths(o.workDir).build, nvshmemTests, s.cudaArch ?? '90', logPath, signal, { ...quickEnv, JOBS: jobs }));
    }
    const stuck: string[] = [];
    const runChecks = async (p: (typeof passes)[number], dir: string, checks: string[], logName: string) => {
      err(`running ${checks.join(', ')} under efaemu modes ${p.run.label} (logs in ${dir})`);
      const env: Record<string, string> = {
        ...(process.env as Record<string, string>),
        EFAEMU_BUILD: path.resolve(efaemu!),
        LIBFABRIC_HOME: s.libfabricHome!,
        RESULTS: dir,
        PYTHON: s.python,
        EFAEMU_MODES: modesEnv(p.run),
        ...(s.nvshmemHome ? { NVSHMEM_HOME: s.nvshmemHome } : {}),
        ...(peTest ? { PE_TEST: path.resolve(peTest) } : {}),
        ...(patternDir ? { PATTERN_DIR: path.resolve(patternDir) } : {}),
        ...(s.deepepDir ? { DEEPEP_DIR: path.resolve(s.deepepDir) } : {}),
        ...(nvshmemTests ? { NVSHMEM_TESTS: nvshmemTests, NVSHMEM_EFA_LAUNCH: process.env.NVSHMEM_EFA_LAUNCH ?? launchCommandLine() } : {}),
        ...(o.timeoutSec ? { CHECK_TIMEOUT: String(o.timeoutSec) } : {}),
        PE_GPUS: String(s.hostGpus),
        PES_PER_GPU: String(perGpu),
        // device_api's and neg_device_api's runs on 2 NICs per PE (device_api_order+rails, warp_rail, no_proxy_flush)
        // show something only where NVSHMEM gives GDA both NICs: left out, and said so, on a single-rail build.
        DEVICE_API_RAILS: s.missing.rails ? '0' : '1',
        NO_MPS_DIR: noMps,
        ...quickEnv,
        // Without GPUs (only fi_info and fabtests run) the NIC entries point at any PCI function.
        ...(!s.have.gpus && !process.env.NS_DEVICES ? { NS_DEVICES: anyPciDevice() ?? '' } : {}),
      };
      const logPath = path.join(dir, logName);
      const log = await openLog(logPath);
      // checks.sh runs its checks one after another: a check's time is from the result before it (or the start).
      let since = Date.now();
      try {
        await run('bash', [script, ...checks], {
          env, log, logPath, signal, fix: `read ${logPath}`,
          onLine(line) {
            if (line.startsWith('STUCK\t')) {
              stuck.push(line.slice(6));
              err(`warning: ${line.slice(6)}: outlived SIGKILL (the GPU driver holds it)`);
              return;
            }
            const r = parseResult(line);
            if (!r || !checks.includes(r.check)) return;
            const seconds = Math.round((Date.now() - since) / 1000);
            since = Date.now();
            rows.set(key(r.check, p.run), { title: title(r.check), ...r, modes: modesColumn(r.check, p.run), seconds });
            err(`${r.check} (efaemu modes ${modesColumn(r.check, p.run)}): ${r.result} in ${formatDuration(seconds)}`);
          },
        });
      } finally {
        await log.end();
      }
      for (const id of checks)
        if (!rows.has(key(id, p.run))) rows.set(key(id, p.run), { check: id, title: title(id), result: 'fail', evidence: `checks.sh reported nothing for it (see ${logPath})`, modes: modesColumn(id, p.run) });
      const neg = rows.get('neg_wrong_provider');
      if (neg?.result === 'pass' && checks.includes('neg_wrong_provider')) {
        const logs = ['0', '1'].map((r) => path.join(dir, `neg_wrong_provider.pe${r}.log`)).filter(existsSync).map((f) => readFileSync(f, 'utf8')).join('\n');
        const diagnosis = diagnoseInitFailure(logs, { FI_PROVIDER: process.env.WRONG_PROVIDER ?? 'efa_wrong' });
        if (diagnosis && /FI_PROVIDER=/.test(diagnosis)) neg.evidence += `. Diagnosis: ${diagnosis}`;
        else rows.set('neg_wrong_provider', { ...neg, result: 'fail', evidence: `${neg.evidence}; but nvshmem-efa could not diagnose why from the output (${diagnosis ?? 'no known message'})` });
      }
    };
    // Interrupted (SIGINT, SIGTERM): the checks that ended are reported, the others named as not run, then exit 130.
    let interrupted: InterruptedError | undefined;
    try {
      for (const p of passes) {
        const dir = passDir(modeRuns.indexOf(p.run), p.run);
        await mkdir(dir, { recursive: true });
        for (const r of runsByBuild(p.checks, building)) {
          const why = new Map<Need, string>();
          for (const n of r.waits) {
            const failed = await built.get(n);
            if (failed) why.set(n, failed);
          }
          // A check fails for a failed build it needs; the others of the run still run.
          const broken = (c: string) => [...why].filter(([n]) => needsOf(c).includes(n)).map(([, f]) => f);
          for (const id of r.checks.filter((c) => broken(c).length))
            rows.set(key(id, p.run), { check: id, title: title(id), result: 'fail', evidence: broken(id).join('; '), modes: modesColumn(id, p.run) });
          const go = r.checks.filter((c) => !broken(c).length);
          if (go.length) await runChecks(p, dir, go, r.log);
        }
      }
    } catch (e) {
      if (!(e instanceof InterruptedError)) throw e;
      interrupted = e;
    }
    const ordered = order(rows);
    const seconds = (Date.now() - started) / 1000;
    const notRun = [...new Set(passes.flatMap((p) => p.checks.filter((c) => !rows.has(key(c, p.run)))))];
    // A process that outlived SIGKILL is named, never hidden: it may hold its GPU for whatever runs next.
    const stuckLines = stuck.length ? [`processes that outlived SIGKILL (the GPU driver holds them; they may keep the GPU busy): ${stuck.join('; ')}`] : [];
    const stopLines = interrupted ? [`interrupted after ${formatDuration(seconds)}; not run: ${notRun.join(', ') || 'none'}`] : [];
    if (o.json) out(JSON.stringify({ schema: SELFTEST_JSON, results, efaemuModes: modeRuns.map((r) => r.label), placement: { hostGpus: s.hostGpus, pesPerGpu: perGpu, runs: placed }, ...(s.mps ? { mps: s.mps } : {}), seconds: Math.round(seconds), stuck, ...(interrupted ? { interrupted: true, notRun } : {}), checks: ordered }, null, 2));
    else out([`nvshmem-efa selftest of ${path.resolve(o.workDir)} through efaemu (an emulated EFA NIC: protocol and code paths, not EFA's speed)`, ...header, '', renderTable(ordered, seconds), ...stuckLines, ...stopLines, '', `logs: ${results}`].join('\n'));
    if (interrupted) throw interrupted;
    return ordered.some((r) => r.result === 'fail') ? 1 : 0;
  }, { stopping: 'the checks that ended are reported', fix: 'rerun selftest: its checks run again (--checks LIST runs those not run)' });
}
