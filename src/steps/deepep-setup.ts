import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Ctx } from './types.ts';

/** How DeepEP's setup.py is run, shared by its build and by its compile beside NVSHMEM (same environment, same objects). */
export const python = () => process.env.PYTHON ?? 'python3';

export const SETUP_ARGS = ['setup.py', 'build_ext', '--inplace'] as const;

/** "90;100" -> "9.0;10.0", the form TORCH_CUDA_ARCH_LIST takes. */
export function torchArchList(cudaArch: string): string {
  return cudaArch
    .split(/[;,\s]+/)
    .filter(Boolean)
    .map((a) => {
      const m = /^(\d+)(\d)([a-z]?)$/.exec(a);
      return m ? `${m[1]}.${m[2]}${m[3] ?? ''}` : a;
    })
    .join(';');
}

/** The shim's GDA path is compiled in when the NVSHMEM at `prefix` has the device API and the libfabric has GDA. */
export function gdaCompiledIn(ctx: Ctx, prefix: string): boolean {
  return existsSync(path.join(prefix, 'include', 'nvshmem_efa', 'efa_io_defs.h')) && !!ctx.env?.libfabric.gda.available;
}

export function deepEpEnv(ctx: Ctx, prefix: string, gda: boolean): Record<string, string> {
  const env = ctx.env!;
  return {
    NVSHMEM_DIR: prefix,
    TORCH_CUDA_ARCH_LIST: torchArchList(env.cudaArch),
    MAX_JOBS: String(ctx.opts.jobs),
    CUDA_HOME: env.cuda.home,
    ...(gda ? { NVCC_APPEND_FLAGS: `${process.env.NVCC_APPEND_FLAGS ?? ''} -DNVSHMEM_EFA_SHIM_GDA`.trim() } : {}),
  };
}

/** torch's ninja progress line, "[3/7] ..." */
export const NINJA_STEP = /^\[(\d+)\/(\d+)\]/;
