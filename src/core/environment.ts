import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError, UsageError } from './errors.ts';
import { queryTool } from './exec.ts';
import { readUserFile } from './small-file.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { GDRCOPY_SWITCH, gdrcopyTurnedOff, loadFabricLock } from './fabric-lock.ts';
import { fabricPrefixes, planFabric, type FabricPlan } from './fabric-plan.ts';
import { GDRCOPY_PREFIXES } from './gdrcopy-prefixes.ts';

/** What the build will use, found on this host. Everything a later step needs comes from here. */
export interface DetectedEnv {
  cuda: { home: string; nvcc: string; version: string };
  cmake: { path: string; version: string };
  ninja?: string;
  /** ccache on PATH: the compiler launcher of the CMake builds (NVSHMEM_EFA_NO_CCACHE=1: not used). */
  ccache?: string;
  gpus: string[];
  cudaArch: string;
  libfabric: { home: string; version: string; gda: { available: boolean; reason: string } };
  /**
   * The libfabric found on the host (or named), whatever the plan: where a pinned one is to be built, `libfabric`
   * names that prefix before it exists, and this is what a program built now links (the probe; issue 39).
   */
  libfabricFound?: DetectedEnv['libfabric'];
  /**
   * The GDRCopy the builds use: found or named, or (`build`) the work dir's, which the gdrcopy step builds from
   * pinned sources because the host has none (as libfabric's home is the work dir's when it is built).
   */
  gdrcopy?: { home: string; build?: true };
  /** How CMake's CUDA::cuda_driver will be satisfied. */
  libcuda: { kind: 'system' | 'toolkit-stub' | 'none'; path?: string };
  nvml?: string;
  /** Whether libfabric (and rdma-core) are the host's or built by this run from pinned sources, and why. */
  fabric?: FabricPlan;
}

export interface DetectInput {
  cudaHome?: string;
  libfabricHome?: string;
  gdrcopyHome?: string;
  cudaArch?: string;
  /** --libfabric-ref: build this pinned libfabric instead of looking for one. */
  libfabricRef?: string;
  /** Where a libfabric built by this run is installed (build); doctor has none. */
  workDir?: string;
  env: NodeJS.ProcessEnv;
}

const MIN_GDA_LIBFABRIC = [2, 3, 0] as const;

/** Where the work dir's GDRCopy is installed when the build builds it (the gdrcopy step). */
export const gdrcopyPrefix = (workDir: string) => path.join(workDir, 'install', 'gdrcopy');

async function which(cmd: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env.PATH ?? '').split(':')) {
    const p = path.join(dir, cmd);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

export function parseCudaArch(list: string): string {
  const parts = list.split(/[;,\s]+/).filter(Boolean);
  if (parts.length === 0 || !parts.every((p) => /^\d{2,3}[af]?$/.test(p))) {
    throw new UsageError(`invalid --cuda-arch '${list}'`, 'pass CUDA architectures as numbers, e.g. --cuda-arch 90 or --cuda-arch "90;100"');
  }
  return parts.join(';');
}

/** `9.0` -> `90`; deduplicated, in first-seen order. */
export function archFromComputeCaps(out: string): string[] {
  const caps = out.split('\n').map((l) => l.trim()).filter((l) => /^\d+\.\d+$/.test(l));
  return [...new Set(caps.map((c) => c.replace('.', '')))];
}

/** The lowest sm_XX each CUDA major release can target, for an nvcc whose --list-gpu-arch says nothing (a wrapper, CUDA < 11). */
const MIN_ARCH_BY_CUDA_MAJOR: Record<number, number> = { 11: 35, 12: 50, 13: 75 };

/** What an nvcc can target: its own list (`nvcc --list-gpu-arch`), else the floor of its CUDA release, else unknown. */
export type ArchSupport = { list: string[] } | { min: number; cuda: string };

export async function nvccArchSupport(nvcc: string, cudaVersion: string): Promise<ArchSupport | undefined> {
  const out = (await queryTool(nvcc, ['--list-gpu-arch'])) ?? '';
  const list = [...new Set([...out.matchAll(/\bcompute_(\d+)/g)].map((m) => m[1]!))].sort((a, b) => Number(a) - Number(b));
  if (list.length) return { list };
  const min = MIN_ARCH_BY_CUDA_MAJOR[Number(cudaVersion.split('.')[0])];
  return min ? { min, cuda: cudaVersion } : undefined;
}

/** The architectures of `cudaArch` ("90;100a") that `support` rules out. */
export function unsupportedArchs(cudaArch: string, support: ArchSupport): string[] {
  return cudaArch.split(';').filter((a) => {
    const n = /^\d+/.exec(a)?.[0] ?? a;
    return 'list' in support ? !support.list.includes(n) : Number(n) < support.min;
  });
}

export const describeArchSupport = (s: ArchSupport) => ('list' in s ? s.list.join(', ') : `${s.min} and newer`);

/**
 * --cuda-arch checked against the toolkit that will compile (exit 2, with what it supports): CMake would
 * otherwise fail minutes later with "nvcc fatal: Unsupported gpu architecture".
 */
export async function checkCudaArchOption(cudaArch: string, cuda: { nvcc: string; version: string }): Promise<void> {
  const support = await nvccArchSupport(cuda.nvcc, cuda.version);
  const bad = support ? unsupportedArchs(cudaArch, support) : [];
  if (!support || bad.length === 0) return;
  const ok = 'list' in support ? support.list.at(-1)! : String(Math.max(support.min, 90));
  throw new UsageError(
    `--cuda-arch ${cudaArch}: ${cuda.nvcc} (CUDA ${cuda.version}) cannot target ${bad.join(', ')} (it supports ${describeArchSupport(support)})`,
    `pass architectures this toolkit supports (e.g. --cuda-arch ${ok}), or --cuda-home DIR with a CUDA toolkit that still targets ${bad.join(', ')}`,
  );
}

/** A libfabric header of a home the user names: a FIFO or device there is refused (exit 6), not read forever. */
async function readFabricHeader(file: string): Promise<string> {
  return (await readUserFile(file, file, 'point LIBFABRIC_HOME (or --libfabric-home) at a libfabric install whose headers are regular files', 16 << 20)).toString('utf8');
}

export async function libfabricVersion(fabricH: string): Promise<string | undefined> {
  const src = await readFabricHeader(fabricH);
  const get = (n: string) => new RegExp(`#define\\s+FI_${n}_VERSION\\s+(\\d+)`).exec(src)?.[1];
  const [ma, mi, re] = [get('MAJOR'), get('MINOR'), get('REVISION')];
  return ma && mi ? `${ma}.${mi}.${re ?? 0}` : undefined;
}

export function versionAtLeast(v: string, min: readonly number[]): boolean {
  const parts = v.split('.').map(Number);
  for (let i = 0; i < min.length; i++) {
    const a = parts[i] ?? 0;
    if (a !== min[i]) return a > min[i]!;
  }
  return true;
}

/** GDA needs libfabric >= 2.3.0 whose rdma/fi_ext_efa.h declares FI_EFA_GDA_OPS. */
export async function gdaSupport(home: string, version: string): Promise<{ available: boolean; reason: string }> {
  const ext = path.join(home, 'include', 'rdma', 'fi_ext_efa.h');
  if (!existsSync(ext)) return { available: false, reason: `libfabric ${version} at ${home} has no rdma/fi_ext_efa.h (GDA needs libfabric >= 2.3.0 built with EFA)` };
  const declares = /#define\s+FI_EFA_GDA_OPS\b/.test(await readFabricHeader(ext));
  if (!declares) return { available: false, reason: `${ext} does not declare FI_EFA_GDA_OPS (libfabric ${version}; GDA needs >= 2.3.0)` };
  if (!versionAtLeast(version, MIN_GDA_LIBFABRIC)) return { available: false, reason: `libfabric ${version} is older than 2.3.0, whose fi_efa_ops_gda ABI the transport uses` };
  return { available: true, reason: `libfabric ${version} declares FI_EFA_GDA_OPS` };
}

export async function findLibfabric(candidates: readonly string[]): Promise<DetectedEnv['libfabric'] | undefined> {
  for (const home of candidates) {
    const fabricH = path.join(home, 'include', 'rdma', 'fabric.h');
    if (!existsSync(fabricH)) continue;
    const version = (await libfabricVersion(fabricH)) ?? 'unknown';
    return { home, version, gda: await gdaSupport(home, version) };
  }
  return undefined;
}

export function findFirst(paths: readonly string[]): string | undefined {
  return paths.find((p) => existsSync(p));
}

/** Something that stops the build: what is wrong and what to do. `doctor` lists them all, `build` stops at them. */
export interface Blocker {
  id: string;
  message: string;
  fix: string;
}

export interface Survey {
  /** Complete only when there is no blocker. */
  env?: DetectedEnv;
  /** What was found, blockers or not (doctor shows each part). */
  parts: Partial<DetectedEnv>;
  fixes: FixRecord[];
  blockers: Blocker[];
}

async function findCompiler(envVar: string | undefined, names: readonly string[], e: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (envVar) return envVar.includes('/') ? (existsSync(envVar) ? envVar : undefined) : which(envVar, e);
  for (const n of names) {
    const p = await which(n, e);
    if (p) return p;
  }
  return undefined;
}

/** The CUDA toolkit the user named: --cuda-home, else CUDA_HOME, else CUDA_PATH (set and not empty). */
export function cudaHomeSource(input: { cudaHome?: string }, e: NodeJS.ProcessEnv): { from: '--cuda-home' | 'CUDA_HOME' | 'CUDA_PATH'; dir: string } | undefined {
  if (input.cudaHome) return { from: '--cuda-home', dir: input.cudaHome };
  if (e.CUDA_HOME) return { from: 'CUDA_HOME', dir: e.CUDA_HOME };
  if (e.CUDA_PATH) return { from: 'CUDA_PATH', dir: e.CUDA_PATH };
  return undefined;
}

/**
 * Looks at everything the build needs, without stopping at the first missing piece: `doctor` reports every
 * blocker, and `build` checks them all before its first long step. `requireNvml`: the tree includes nvml.h
 * (NVIDIA NVSHMEM 3.x does: src/include/internal/host/nvmlwrap.h and its users).
 */
export async function surveyEnvironment(input: DetectInput & { requireNvml?: boolean }): Promise<Survey> {
  const e = input.env;
  const fixes: FixRecord[] = [];
  const blockers: Blocker[] = [];
  const parts: Partial<DetectedEnv> = {};
  // /usr/local/bin/nvcc is often a symlink into the toolkit: the toolkit is where the link points.
  const nvccLink = await which('nvcc', e);
  const nvccOnPath = nvccLink ? realpathSync(nvccLink) : undefined;
  // A toolkit is a folder with bin/nvcc and include/cuda.h; the nvcc on PATH may be a wrapper script
  // elsewhere (e.g. /usr/local/bin/nvcc), so fall back to the usual install location.
  const isToolkit = (d: string) => existsSync(path.join(d, 'bin', 'nvcc')) && existsSync(path.join(d, 'include', 'cuda.h'));
  // A CUDA_HOME (or CUDA_PATH) that is set is the user's choice, as --cuda-home is: used or refused by name,
  // never passed over for another toolkit without a word.
  const cudaFrom = cudaHomeSource(input, e);
  const candidates = cudaFrom
    ? [cudaFrom.dir]
    : [nvccOnPath ? path.dirname(path.dirname(nvccOnPath)) : undefined, '/usr/local/cuda'].filter((x): x is string => !!x);
  const cudaHome = candidates.find(isToolkit) ?? candidates[0]!;
  const named = cudaFrom && cudaFrom.from !== '--cuda-home' ? `${cudaFrom.from}=${cudaFrom.dir}: ` : '';
  const nvcc = path.join(cudaHome, 'bin', 'nvcc');
  const nvccOut = existsSync(nvcc) ? await queryTool(nvcc, ['--version']) : undefined;
  if (!nvccOut) {
    blockers.push({ id: 'cuda', message: `${named}no working nvcc at ${nvcc}`, fix: named ? `set ${cudaFrom!.from} to the CUDA toolkit that holds bin/nvcc, or unset it (or pass --cuda-home DIR)` : 'install the CUDA toolkit, or pass --cuda-home DIR (or set CUDA_HOME) to the toolkit that holds bin/nvcc' });
  } else if (!existsSync(path.join(cudaHome, 'include', 'cuda.h'))) {
    blockers.push({ id: 'cuda', message: `${named}the CUDA toolkit ${cudaHome} has no include/cuda.h`, fix: named ? `set ${cudaFrom!.from} to a complete CUDA toolkit (bin/nvcc and include/cuda.h), or pass --cuda-home DIR` : 'pass --cuda-home DIR to a complete CUDA toolkit (bin/nvcc and include/cuda.h)' });
  } else {
    parts.cuda = { home: cudaHome, nvcc, version: /release (\d+\.\d+)/.exec(nvccOut)?.[1] ?? 'unknown' };
  }

  const cmakePath = await which('cmake', e);
  const cmakeOut = cmakePath ? await queryTool(cmakePath, ['--version']) : undefined;
  const cmakeVersion = /cmake version (\S+)/.exec(cmakeOut ?? '')?.[1] ?? 'unknown';
  if (!cmakePath || !cmakeOut) blockers.push({ id: 'cmake', message: 'cmake not found on PATH', fix: 'install cmake >= 3.19 (apt-get install cmake, or pip install cmake)' });
  else if (!versionAtLeast(cmakeVersion, [3, 19])) blockers.push({ id: 'cmake', message: `cmake ${cmakeVersion} is older than 3.19, which NVSHMEM requires`, fix: 'install a newer cmake (pip install cmake)' });
  else parts.cmake = { path: cmakePath, version: cmakeVersion };
  const ninja = await which('ninja', e);
  if (ninja) parts.ninja = ninja;
  const ccache = e.NVSHMEM_EFA_NO_CCACHE === '1' ? undefined : await which('ccache', e);
  if (ccache) parts.ccache = ccache;

  const cxx = await findCompiler(e.CXX, ['c++', 'g++', 'clang++'], e);
  const cc = await findCompiler(e.CC, ['cc', 'gcc', 'clang'], e);
  if (!cxx || !cc) {
    blockers.push({ id: 'compiler', message: `no host ${!cxx ? 'C++' : 'C'} compiler (${!cxx ? (e.CXX ?? 'c++, g++, clang++') : (e.CC ?? 'cc, gcc, clang')} not found)`, fix: 'install one: apt-get install g++ (or set CC/CXX to the compilers to use)' });
  }

  const smi = await queryTool('nvidia-smi', ['--query-gpu=compute_cap', '--format=csv,noheader'], e);
  const gpus = smi ? archFromComputeCaps(smi) : [];
  parts.gpus = gpus;
  if (input.cudaArch) parts.cudaArch = parseCudaArch(input.cudaArch);
  else if (gpus.length) parts.cudaArch = gpus.join(';');
  else {
    parts.cudaArch = '90';
    fixes.push({ id: 'cuda-arch-default', anchor: 'nvidia-smi', status: 'warned', why: 'kernels must be compiled for the GPUs they run on', detail: 'no GPU visible: building for sm_90 (H100/H200); pass --cuda-arch 100 for B200' });
  }

  // GPUs this toolkit cannot compile for (an old GPU with a new CUDA): the configure would fail much later.
  // An explicit --cuda-arch is checked by the caller (a command-line mistake, exit 2; see checkCudaArchOption).
  if (parts.cuda && !input.cudaArch && gpus.length) {
    const support = await nvccArchSupport(parts.cuda.nvcc, parts.cuda.version);
    const bad = support ? unsupportedArchs(parts.cudaArch, support) : [];
    if (support && bad.length) {
      blockers.push({ id: 'cuda-arch', message: `the GPUs here are sm_${bad.join(', sm_')}, which ${parts.cuda.nvcc} (CUDA ${parts.cuda.version}) cannot target (it supports ${describeArchSupport(support)})`, fix: `use a CUDA toolkit that targets them (--cuda-home DIR), or build for other GPUs with --cuda-arch` });
    }
  }

  const pkgPrefix = (await queryTool('pkg-config', ['--variable=prefix', 'libfabric'], e))?.trim();
  // NVSHMEM_EFA_SYSROOT: where /opt/amazon and the host's rdma-core are looked for (tests).
  const sysroot = e.NVSHMEM_EFA_SYSROOT ?? '/';
  const explicitHome = input.libfabricRef ? undefined : (input.libfabricHome ?? e.LIBFABRIC_HOME);
  const explicitFrom = input.libfabricHome ? '--libfabric-home' : 'LIBFABRIC_HOME';
  const lfCandidates = explicitHome ? [explicitHome] : [path.join(sysroot, 'opt/amazon/efa'), '/usr/local/libfabric', pkgPrefix, '/usr'].filter((x): x is string => !!x);
  const found = input.libfabricRef ? undefined : await findLibfabric(lfCandidates);
  const lock = await loadFabricLock(e);
  const plan = planFabric({ explicitHome, explicitFrom, ref: input.libfabricRef, found, lock, sysroot });
  parts.fabric = plan;
  if (found) parts.libfabricFound = found;
  if (plan.libfabric.action === 'use' && !found) {
    blockers.push({
      id: 'libfabric',
      message: `libfabric headers (include/rdma/fabric.h) not found in ${lfCandidates.join(', ')}`,
      fix: `check ${explicitFrom} ${explicitHome}: it must hold include/rdma/fabric.h and lib/libfabric.so (or leave it unset: nvshmem-efa then builds a pinned libfabric)`,
    });
  } else if (plan.libfabric.action === 'use' && found) {
    parts.libfabric = found;
    fixes.push({
      id: 'libfabric-gda-ops',
      anchor: `${found.home}/include/rdma/fi_ext_efa.h`,
      why: 'EFA GDA needs FI_EFA_GDA_OPS (libfabric >= 2.3.0) on an efa-direct domain',
      status: found.gda.available ? 'already-present' : 'warned',
      detail: found.gda.available
        ? `${found.gda.reason} (${plan.libfabric.why})`
        : `GDA unavailable: ${found.gda.reason}; NVSHMEM builds with the proxy path only (${plan.libfabric.why}). Fix: leave --libfabric-home and LIBFABRIC_HOME unset (nvshmem-efa then builds a pinned libfabric with GDA), or pass --libfabric-ref ${lock.libfabric.default}`,
    });
  } else if (plan.libfabric.action === 'build') {
    const prefixes = fabricPrefixes(input.workDir ?? '<work-dir>');
    parts.libfabric = { home: prefixes.libfabric, version: plan.libfabric.version, gda: { available: false, reason: `libfabric ${plan.libfabric.version} is built from pinned sources by this run (${plan.libfabric.why})` } };
    // What building them takes beyond the NVSHMEM build's tools.
    const needs: [string, string][] = [['make', 'make'], ['tar', 'tar'], ['bzip2', 'bzip2']];
    if (plan.rdmaCore?.action === 'build') needs.push(['pkg-config', 'pkg-config']);
    for (const [cmd, pkg] of needs) {
      if (!(await which(cmd, e))) {
        blockers.push({ id: 'fabric-tools', message: `${cmd} not found on PATH, and building libfabric ${plan.libfabric.version}${plan.rdmaCore?.action === 'build' ? ` and rdma-core ${plan.rdmaCore.version}` : ''} from pinned sources needs it (${plan.libfabric.why})`, fix: `install it (apt-get install ${pkg}), or pass --libfabric-home DIR to use a libfabric you built (GDA needs >= 2.3.0)` });
      }
    }
  }

  // --gdrcopy-home, else a GDRCOPY_HOME that is set, is used or refused by name; only then the usual prefixes.
  const gdrNamed = input.gdrcopyHome ? { from: '--gdrcopy-home', dir: input.gdrcopyHome } : e.GDRCOPY_HOME ? { from: 'GDRCOPY_HOME', dir: e.GDRCOPY_HOME } : undefined;
  const gdrHome = gdrNamed ? gdrNamed.dir : GDRCOPY_PREFIXES.find((h) => existsSync(path.join(h, 'include', 'gdrapi.h')));
  if (gdrNamed && !existsSync(path.join(gdrNamed.dir, 'include', 'gdrapi.h'))) {
    const label = gdrNamed.from === '--gdrcopy-home' ? `--gdrcopy-home ${gdrNamed.dir}` : `GDRCOPY_HOME=${gdrNamed.dir}`;
    blockers.push({ id: 'gdrcopy', message: `${label} has no include/gdrapi.h`, fix: gdrNamed.from === '--gdrcopy-home' ? 'point --gdrcopy-home at a GDRCopy install prefix (holding include/gdrapi.h and lib/libgdrapi.so)' : 'set GDRCOPY_HOME to a GDRCopy install prefix (holding include/gdrapi.h and lib/libgdrapi.so), or unset it' });
  } else if (!gdrHome && gdrcopyTurnedOff(e)) {
    // Without the switch the gdrcopy step builds libgdrapi from its pinned source (and reports that instead).
    fixes.push({ id: 'gdrcopy-missing', anchor: 'include/gdrapi.h', status: 'warned', why: "NVSHMEM's EFA provider needs GDRCopy at build time", detail: `GDRCopy not found and ${GDRCOPY_SWITCH}=0: building with NVSHMEM_USE_GDRCOPY=OFF, and NVSHMEM's EFA provider will refuse to start ("EFA Provider requires GDRCopy, but it was disabled at compile time"). Fix: unset ${GDRCOPY_SWITCH} (the build then builds libgdrapi from pinned sources), or install GDRCopy (gdrdrv + libgdrapi, e.g. from the EFA/Deep Learning AMI or github.com/NVIDIA/gdrcopy) and pass --gdrcopy-home DIR` });
  } else if (!gdrHome) {
    // Built from pinned sources into the work dir (the gdrcopy step), and used from there by the later builds.
    parts.gdrcopy = { home: gdrcopyPrefix(input.workDir ?? '<work-dir>'), build: true };
    // What building libgdrapi takes beyond the compilers checked above (gdrcopy's config_arch calls gcc by name).
    for (const [cmd, pkg] of [['make', 'make'], ['tar', 'tar'], ['gzip', 'gzip'], ['gcc', 'gcc']] as const) {
      if (!(await which(cmd, e))) {
        blockers.push({ id: 'gdrcopy-tools', message: `${cmd} not found on PATH, and building GDRCopy's libgdrapi from pinned sources needs it (no GDRCopy on this host: no include/gdrapi.h in ${GDRCOPY_PREFIXES.join(', ')})`, fix: `install it (apt-get install ${pkg}), or pass --gdrcopy-home DIR to use a GDRCopy you have, or set ${GDRCOPY_SWITCH}=0 to build without it (NVSHMEM's EFA provider then refuses to start)` });
      }
    }
  } else {
    parts.gdrcopy = { home: gdrHome };
  }

  const arch = process.arch === 'arm64' ? 'sbsa-linux' : 'x86_64-linux';
  const system = findFirst(['/usr/lib/x86_64-linux-gnu/libcuda.so', '/usr/lib64/libcuda.so', '/usr/lib/aarch64-linux-gnu/libcuda.so', '/usr/lib/x86_64-linux-gnu/libcuda.so.1', '/usr/lib64/libcuda.so.1']);
  const stub = findFirst([path.join(cudaHome, 'lib64', 'stubs', 'libcuda.so'), path.join(cudaHome, 'targets', arch, 'lib', 'stubs', 'libcuda.so')]);
  parts.libcuda = system ? { kind: 'system', path: system } : stub ? { kind: 'toolkit-stub', path: stub } : { kind: 'none' };
  const nvml = findFirst([path.join(cudaHome, 'include', 'nvml.h'), path.join(cudaHome, 'targets', arch, 'include', 'nvml.h'), '/usr/include/nvml.h', '/usr/local/include/nvml.h']);
  if (nvml) parts.nvml = nvml;
  else if (input.requireNvml) {
    blockers.push({
      id: 'nvml',
      message: `nvml.h not found (in ${cudaHome}/include, /usr/include, /usr/local/include), and NVSHMEM includes it`,
      fix: 'install the NVML headers: apt-get install libnvidia-ml-dev (Debian: add the contrib and non-free components first; Ubuntu: multiverse), or cuda-nvml-dev-<ver> from the CUDA repository',
    });
  }

  const env: DetectedEnv | undefined =
    blockers.length === 0 && parts.cuda && parts.cmake && parts.libfabric
      ? {
          cuda: parts.cuda,
          cmake: parts.cmake,
          ...(ninja ? { ninja } : {}),
          ...(ccache ? { ccache } : {}),
          gpus,
          cudaArch: parts.cudaArch,
          libfabric: parts.libfabric,
          ...(parts.libfabricFound ? { libfabricFound: parts.libfabricFound } : {}),
          ...(parts.gdrcopy ? { gdrcopy: parts.gdrcopy } : {}),
          libcuda: parts.libcuda,
          ...(nvml ? { nvml } : {}),
          ...(parts.fabric ? { fabric: parts.fabric } : {}),
        }
      : undefined;
  return { ...(env ? { env } : {}), parts, fixes, blockers };
}

/**
 * What the host shows of EFA devices and of GDRCopy's kernel module, read from files only (doctor). `sysroot`
 * prefixes every path (tests; NVSHMEM_EFA_SYSROOT).
 */
export interface GdrdrvFacts {
  /** The EFA devices in /sys/class/infiniband. */
  efaDevices: string[];
  /** Whether /dev/gdrdrv exists (the module loaded and its node created). */
  dev: boolean;
  /** /sys/module/gdrdrv/version: the loaded module's MODULE_VERSION ("2.5"). */
  version?: string;
}

/**
 * An EFA device: its device's driver is efa, or (no driver link to read, as in some containers) its name is one
 * the efa driver gives, rdmap<bus>s<slot>, which the probe (native/probe) counts too.
 */
function isEfaDevice(classDir: string, name: string): boolean {
  try {
    return path.basename(readlinkSync(path.join(classDir, name, 'device', 'driver'))) === 'efa';
  } catch {
    return name.startsWith('rdmap');
  }
}

export function detectGdrdrv(sysroot = '/'): GdrdrvFacts {
  const classDir = path.join(sysroot, 'sys/class/infiniband');
  let names: string[] = [];
  try {
    names = readdirSync(classDir).sort();
  } catch {
    /* no RDMA devices at all */
  }
  let version: string | undefined;
  try {
    version = readFileSync(path.join(sysroot, 'sys/module/gdrdrv/version'), 'utf8').trim() || undefined;
  } catch {
    /* not loaded, or built without a version */
  }
  return { efaDevices: names.filter((n) => isEfaDevice(classDir, n)), dev: existsSync(path.join(sysroot, 'dev/gdrdrv')), ...(version ? { version } : {}) };
}

/** One error for the blockers: the first in full, the count of the others (doctor lists them all). */
export function blockersError(blockers: readonly Blocker[]): EnvironmentError {
  const [first, ...rest] = blockers;
  const more = rest.length ? ` (and ${rest.length} more: ${rest.map((b) => b.message).join('; ')}; run nvshmem-efa doctor for the fixes)` : '';
  return new EnvironmentError(`${first!.message}${more}`, first!.fix);
}

/** The environment the build uses, or an EnvironmentError (exit 4) naming what is missing. */
export async function detectEnvironment(input: DetectInput & { requireNvml?: boolean }): Promise<{ env: DetectedEnv; fixes: FixRecord[] }> {
  const s = await surveyEnvironment(input);
  if (!s.env) throw blockersError(s.blockers);
  return { env: s.env, fixes: s.fixes };
}
