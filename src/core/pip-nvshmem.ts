import { tracked } from './kill-tree.ts';
import { EnvironmentError } from './errors.ts';
import { queryTool } from './exec.ts';

/**
 * A pip `nvidia-nvshmem-cu*` package beside the NVSHMEM nvshmem-efa builds: where it is, whether torch requires it,
 * and the fix to give (doctor, the DeepEP build, the preflight).
 *
 * Why it matters: both libraries have one soname, libnvshmem_host.so.3. torch, imported first, loads the pip one
 * through its rpath, and the loader hands that same library to DeepEP's module, so the build's NVSHMEM never runs
 * (on the GPU hosts the pip transport then crashed in fi_dupinfo: bench/results/efaemu-gpu-h200x2.md).
 *
 * Why uninstalling is not always the fix: torch 2.11+cu130 links libnvshmem_host.so.3, and with the package removed
 * `import torch` failed (bench/results/device-api-gpu.md, call 12). Where torch's metadata requires the package, the
 * fix is to keep it and preload the build's library, which is what selftest's DeepEP checks do and what passed there.
 */

export interface PipNvshmem {
  /** The package's directory (site-packages/nvidia/nvshmem), or undefined when it is not installed. */
  dir?: string;
  /** torch's requirement on it as its metadata states it (e.g. "nvidia-nvshmem-cu13==3.4.5"), if any. */
  torchRequires?: string;
}

// Metadata only: nothing is imported (torch takes seconds, and may be the thing that fails to import).
const PROBE = [
  'import importlib.util as u, importlib.metadata as m, json',
  'try:',
  "    s = u.find_spec('nvidia.nvshmem')",
  'except Exception:',
  '    s = None',
  'try:',
  "    req = [r.split(';')[0].strip() for r in (m.requires('torch') or []) if r.lower().startswith('nvidia-nvshmem')]",
  'except Exception:',
  '    req = []',
  "print(json.dumps({'dir': s.submodule_search_locations[0] if s and s.submodule_search_locations else '', 'req': req[0] if req else ''}))",
].join('\n');

export async function findPipNvshmem(py: string): Promise<PipNvshmem> {
  const out = await queryTool(py, ['-c', PROBE]);
  try {
    const j = JSON.parse(out ?? '{}') as { dir?: string; req?: string };
    return { ...(j.dir ? { dir: j.dir } : {}), ...(j.req ? { torchRequires: j.req } : {}) };
  } catch {
    return {};
  }
}

/** The library a job preloads so that the build's NVSHMEM is the one loaded. */
function preloadLine(nvshmemLib: string): string {
  return `LD_PRELOAD=${nvshmemLib}/libnvshmem_host.so.3`;
}

/** The fix for a pip NVSHMEM that can shadow the build's; `nvshmemLib` is the build's lib directory (or a placeholder). */
export function pipNvshmemFix(p: PipNvshmem, nvshmemLib: string): string {
  if (p.torchRequires) {
    return `keep it: torch requires ${p.torchRequires} and cannot be imported without it. Start the job's Python processes with ${preloadLine(nvshmemLib)}, so that this NVSHMEM is the one loaded`;
  }
  return 'pip uninstall nvidia-nvshmem-cu12 nvidia-nvshmem-cu13 (and drop it from LD_LIBRARY_PATH) in the environment that runs the job';
}

/**
 * Refuses, with the reason, a Python that cannot import torch (DeepEP's setup.py builds with it). An import that
 * fails for want of libnvshmem_host gets its own message: the pip package torch requires is missing, and reinstalling
 * torch, the generic advice, is not the fix. Returns what it printed (`printed`, Python expressions).
 */
export async function requireTorch(py: string, orElse = '', printed = 'torch.__version__'): Promise<string> {
  const { execa } = await import('execa'); // loaded on first use (core/exec.ts says why)
  const r = await tracked(execa(py, ['-c', `import torch; print(${printed})`], { reject: false, stdin: 'ignore', timeout: 60_000 })).catch(() => undefined);
  if (r && r.exitCode === 0) return String(r.stdout).trim();
  const err = String(r?.stderr ?? '');
  const lib = /(libnvshmem_host\.so[.\d]*)/.exec(err)?.[1];
  if (lib) {
    const req = (await findPipNvshmem(py)).torchRequires;
    throw new EnvironmentError(
      `${py} cannot import torch: it needs ${lib}, from its pip package ${req ?? 'nvidia-nvshmem-cu*'}, which this environment lacks`,
      `${req ? `${py} -m pip install '${req}'` : `${py} -m pip install the nvidia-nvshmem-cu* package your torch was built with (pip show torch lists it)`} and keep it (torch links it); nvshmem-efa's DeepEP still runs on the NVSHMEM it builds when the job preloads that (nvshmem-efa doctor says how)`,
    );
  }
  throw new EnvironmentError(`${py} cannot import torch, which DeepEP's setup.py builds with`, `install PyTorch for your CUDA (pip install torch) or set PYTHON to an interpreter that has it${orElse}`);
}
