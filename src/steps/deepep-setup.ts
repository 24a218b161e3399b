import { existsSync } from 'node:fs';
import path from 'node:path';
import { hashTree, sourceTreeSkips } from '../core/hash.ts';
import { walkTree } from '../core/walk-tree.ts';
import type { Ctx } from './types.ts';

/** How DeepEP's setup.py is run, shared by its build and by its compile beside NVSHMEM (same environment, same objects). */
export const python = () => process.env.PYTHON ?? 'python3';

export const SETUP_ARGS = ['setup.py', 'build_ext', '--inplace'] as const;

/**
 * What setup.py build_ext --inplace and Python write into a DeepEP tree: the extension modules (*.so, at the
 * root), byte code (__pycache__, wherever a module was imported from: the import check, DeepEP's tests) and
 * egg-info; build/ holds the objects and is never hashed (core/hash.ts). None is source. Looked for with the
 * hash's own skip rules: what the hash never reads holds no output to leave out.
 */
async function deepEpBuildOutputs(root: string, notWalked: readonly string[]): Promise<{ skip: string[]; generated: string[] }> {
  const skip: string[] = [];
  const generated: string[] = [];
  await walkTree(
    root,
    (e) => {
      const atRoot = !e.rel.includes('/');
      if (e.type === 'dir' && (e.name === '__pycache__' || (atRoot && e.name.endsWith('.egg-info')))) {
        skip.push(e.abs);
        return 'skip';
      }
      if (e.type !== 'dir' && atRoot && e.name.endsWith('.so')) generated.push(e.rel);
    },
    { skip: sourceTreeSkips(notWalked) },
  );
  return { skip, generated };
}

/**
 * The hash of a DeepEP tree's sources, its build outputs left out: the input of the DeepEP steps' stamps. The
 * build writes its module into the tree it builds; hashed, that would make every build look like an edit
 * of DeepEP, and the next run would patch and build it again. `skip`: absolute paths also left out.
 */
export async function hashDeepEpSources(root: string, skip: readonly string[] = []): Promise<string> {
  const outputs = await deepEpBuildOutputs(root, skip);
  return hashTree(root, { skip: [...skip, ...outputs.skip], generated: outputs.generated });
}

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
