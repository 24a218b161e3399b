import { existsSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError, UsageError } from './errors.ts';
import { probe } from './exec.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';

/** What the build will use, found on this host. Everything a later step needs comes from here. */
export interface DetectedEnv {
  cuda: { home: string; nvcc: string; version: string };
  cmake: { path: string; version: string };
  ninja?: string;
  gpus: string[];
  cudaArch: string;
  libfabric: { home: string; version: string; gda: { available: boolean; reason: string } };
  gdrcopy?: { home: string };
  /** How CMake's CUDA::cuda_driver will be satisfied. */
  libcuda: { kind: 'system' | 'toolkit-stub' | 'none'; path?: string };
  nvml?: string;
}

export interface DetectInput {
  cudaHome?: string;
  libfabricHome?: string;
  gdrcopyHome?: string;
  cudaArch?: string;
  env: NodeJS.ProcessEnv;
}

const MIN_GDA_LIBFABRIC = [2, 3, 0] as const;

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

export async function libfabricVersion(fabricH: string): Promise<string | undefined> {
  const src = await readFile(fabricH, 'utf8');
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
  const declares = /#define\s+FI_EFA_GDA_OPS\b/.test(await readFile(ext, 'utf8'));
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
  const candidates = input.cudaHome
    ? [input.cudaHome]
    : [e.CUDA_HOME, e.CUDA_PATH, nvccOnPath ? path.dirname(path.dirname(nvccOnPath)) : undefined, '/usr/local/cuda'].filter((x): x is string => !!x);
  const cudaHome = candidates.find(isToolkit) ?? candidates[0]!;
  const nvcc = path.join(cudaHome, 'bin', 'nvcc');
  const nvccOut = existsSync(nvcc) ? await probe(nvcc, ['--version']) : undefined;
  if (!nvccOut) {
    blockers.push({ id: 'cuda', message: `no working nvcc at ${nvcc}`, fix: 'install the CUDA toolkit, or pass --cuda-home DIR (or set CUDA_HOME) to the toolkit that holds bin/nvcc' });
  } else if (!existsSync(path.join(cudaHome, 'include', 'cuda.h'))) {
    blockers.push({ id: 'cuda', message: `the CUDA toolkit ${cudaHome} has no include/cuda.h`, fix: 'pass --cuda-home DIR to a complete CUDA toolkit (bin/nvcc and include/cuda.h)' });
  } else {
    parts.cuda = { home: cudaHome, nvcc, version: /release (\d+\.\d+)/.exec(nvccOut)?.[1] ?? 'unknown' };
  }

  const cmakePath = await which('cmake', e);
  const cmakeOut = cmakePath ? await probe(cmakePath, ['--version']) : undefined;
  const cmakeVersion = /cmake version (\S+)/.exec(cmakeOut ?? '')?.[1] ?? 'unknown';
  if (!cmakePath || !cmakeOut) blockers.push({ id: 'cmake', message: 'cmake not found on PATH', fix: 'install cmake >= 3.19 (apt-get install cmake, or pip install cmake)' });
  else if (!versionAtLeast(cmakeVersion, [3, 19])) blockers.push({ id: 'cmake', message: `cmake ${cmakeVersion} is older than 3.19, which NVSHMEM requires`, fix: 'install a newer cmake (pip install cmake)' });
  else parts.cmake = { path: cmakePath, version: cmakeVersion };
  const ninja = await which('ninja', e);
  if (ninja) parts.ninja = ninja;

  const cxx = await findCompiler(e.CXX, ['c++', 'g++', 'clang++'], e);
  const cc = await findCompiler(e.CC, ['cc', 'gcc', 'clang'], e);
  if (!cxx || !cc) {
    blockers.push({ id: 'compiler', message: `no host ${!cxx ? 'C++' : 'C'} compiler (${!cxx ? (e.CXX ?? 'c++, g++, clang++') : (e.CC ?? 'cc, gcc, clang')} not found)`, fix: 'install one: apt-get install g++ (or set CC/CXX to the compilers to use)' });
  }

  const smi = await probe('nvidia-smi', ['--query-gpu=compute_cap', '--format=csv,noheader'], e);
  const gpus = smi ? archFromComputeCaps(smi) : [];
  parts.gpus = gpus;
  if (input.cudaArch) parts.cudaArch = parseCudaArch(input.cudaArch);
  else if (gpus.length) parts.cudaArch = gpus.join(';');
  else {
    parts.cudaArch = '90';
    fixes.push({ id: 'cuda-arch-default', anchor: 'nvidia-smi', status: 'warned', why: 'kernels must be compiled for the GPUs they run on', detail: 'no GPU visible: building for sm_90 (H100/H200); pass --cuda-arch 100 for B200' });
  }

  const pkgPrefix = (await probe('pkg-config', ['--variable=prefix', 'libfabric'], e))?.trim();
  const lfCandidates = input.libfabricHome
    ? [input.libfabricHome]
    : [e.LIBFABRIC_HOME, '/opt/amazon/efa', '/usr/local/libfabric', pkgPrefix, '/usr'].filter((x): x is string => !!x);
  const libfabric = await findLibfabric(lfCandidates);
  if (!libfabric) {
    blockers.push({
      id: 'libfabric',
      message: `libfabric headers (include/rdma/fabric.h) not found in ${lfCandidates.join(', ')}`,
      fix: input.libfabricHome ? `check --libfabric-home ${input.libfabricHome}: it must hold include/rdma/fabric.h and lib/libfabric.so` : 'install the EFA installer (/opt/amazon/efa) or libfabric-dev, or pass --libfabric-home DIR',
    });
  } else {
    parts.libfabric = libfabric;
    fixes.push({
      id: 'libfabric-gda-ops',
      anchor: `${libfabric.home}/include/rdma/fi_ext_efa.h`,
      why: 'EFA GDA needs FI_EFA_GDA_OPS (libfabric >= 2.3.0) on an efa-direct domain',
      status: libfabric.gda.available ? 'already-present' : 'warned',
      detail: libfabric.gda.available ? libfabric.gda.reason : `GDA unavailable: ${libfabric.gda.reason}; NVSHMEM builds with the proxy path only. Fix: install the EFA installer >= 1.43 or libfabric >= 2.3.0 and pass --libfabric-home`,
    });
  }

  const gdrHome = input.gdrcopyHome
    ? input.gdrcopyHome
    : [e.GDRCOPY_HOME, '/usr/local/gdrdrv', '/opt/gdrcopy', '/usr/local', '/usr'].find((h) => h && existsSync(path.join(h, 'include', 'gdrapi.h')));
  if (input.gdrcopyHome && !existsSync(path.join(input.gdrcopyHome, 'include', 'gdrapi.h'))) {
    blockers.push({ id: 'gdrcopy', message: `--gdrcopy-home ${input.gdrcopyHome} has no include/gdrapi.h`, fix: 'point --gdrcopy-home at a GDRCopy install prefix (holding include/gdrapi.h and lib/libgdrapi.so)' });
  } else if (!gdrHome) {
    fixes.push({ id: 'gdrcopy-missing', anchor: 'include/gdrapi.h', status: 'warned', why: "NVSHMEM's EFA provider needs GDRCopy at build time", detail: 'GDRCopy not found: building with NVSHMEM_USE_GDRCOPY=OFF, and NVSHMEM will refuse the EFA provider at run time ("EFA Provider requires GDRCopy"). Fix: install GDRCopy (gdrdrv + libgdrapi, e.g. from the EFA/Deep Learning AMI or github.com/NVIDIA/gdrcopy) and pass --gdrcopy-home DIR' });
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
          gpus,
          cudaArch: parts.cudaArch,
          libfabric: parts.libfabric,
          ...(parts.gdrcopy ? { gdrcopy: parts.gdrcopy } : {}),
          libcuda: parts.libcuda,
          ...(nvml ? { nvml } : {}),
        }
      : undefined;
  return { ...(env ? { env } : {}), parts, fixes, blockers };
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
