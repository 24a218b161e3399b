import { existsSync } from 'node:fs';
import path from 'node:path';
import { hashTree, sourceTreeSkips } from '../core/hash.ts';
import { walkTree } from '../core/walk-tree.ts';
import type { DeepEpGda } from '../options.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
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

/** Whether the NVSHMEM at `prefix` has GDA: its GDA device headers installed (efa_io_defs.h with them) and a libfabric with GDA. */
export function nvshmemHasGda(ctx: Ctx, prefix: string): boolean {
  return existsSync(path.join(prefix, 'include', 'nvshmem_efa', 'efa_io_defs.h')) && !!ctx.env?.libfabric.gda.available;
}

/**
 * The shim's own GDA path is compiled in (-DNVSHMEM_EFA_SHIM_GDA) when DeepEP takes it (--deepep-gda shim) and the
 * NVSHMEM it builds against has GDA. With --deepep-gda device-api it never is: the shim then turns each of
 * DeepEP's remote operations into an NVSHMEM device API call, which NVSHMEM's device API hooks route.
 */
export function shimGdaCompiledIn(ctx: Ctx, prefix: string): boolean {
  return ctx.opts.deepepGda === 'shim' && nvshmemHasGda(ctx, prefix);
}

/** What decides the path of DeepEP's remote operations: the choice, and whether what it needs is in this build. */
export interface DeepEpGdaFacts {
  deepepGda: DeepEpGda;
  /** The NVSHMEM DeepEP builds against has GDA (nvshmemHasGda). */
  nvshmemGda: boolean;
  /** NVSHMEM was patched with the device API hooks (the default; not with --no-device-api). */
  deviceApiHooks: boolean;
}

export const DEEPEP_GDA_PATH_FIX = 'deepep-gda-path';

/**
 * The report's record of the path DeepEP's remote operations take, and why (the dry run prints the same): never a
 * path chosen silently. With device-api, what the shim sends through NVSHMEM is, with NVSHMEM_EFA_SHIM_GDA undefined
 * (templates/deepep_efa/nvshmem_efa_shim.cuh at DeepEP 567632d's low-latency call sites): the token puts
 * nvshmemx_putmem_nbi_warp, the count and flag nvshmem_fence + nvshmem_int_atomic_add, the shrink barrier's write
 * nvshmem_fence + nvshmem_int_p, its quiet nvshmem_quiet, and the clean kernel's nvshmemx_barrier_all_block: each
 * reaches a remote PE through a hooked nvshmemi_transfer_* function. The adds are atomics there, which EFA cannot do
 * in the NIC, so they take NVSHMEM's proxy after their payload (docs/device-api.md).
 */
export function deepEpGdaPathFix(f: DeepEpGdaFacts): FixRecord {
  const why = "DeepEP's remote operations take one GDA path, chosen by --deepep-gda: the shim's own (shim, the default) or NVSHMEM's device API (device-api, with its hooks in NVSHMEM)";
  const record = (status: FixRecord['status'], detail: string): FixRecord => ({ id: DEEPEP_GDA_PATH_FIX, anchor: 'NVSHMEM_EFA_SHIM_GDA', status, why, detail });
  const noGda = 'this NVSHMEM has no GDA (see the EFA GDA line of the report)';
  if (f.deepepGda === 'shim') {
    return f.nvshmemGda
      ? record('applied', "compiled in (--deepep-gda shim): the shim posts DeepEP's puts, low-latency signals and barrier writes to the GDA queue itself, at run time when nvshmemx_efa_gda_status() says active")
      : record('warned', `not compiled in: ${noGda}; remote puts go through NVSHMEM's proxy`);
  }
  const calls = "not compiled in (--deepep-gda device-api): DeepEP's remote operations are NVSHMEM device API calls (nvshmemx_putmem_nbi_warp, nvshmem_int_p, nvshmem_fence, nvshmem_quiet, nvshmem_int_atomic_add, nvshmemx_barrier_all_block)";
  const blocker = !f.deviceApiHooks ? "NVSHMEM was patched without the device API hooks (rebuild without --no-device-api)" : !f.nvshmemGda ? noGda : undefined;
  if (blocker) return record('warned', `${calls}, but ${blocker}, so every one goes through NVSHMEM's proxy`);
  return record(
    'applied',
    `${calls}, which NVSHMEM's device API hooks send over GDA at run time where GDA is active and NVSHMEM_EFA_GDA_DEVICE_API is not 0; ` +
      "the low-latency count and flag are atomic adds there and take NVSHMEM's proxy after their payload (EFA has no RDMA atomics; the shim's own path writes them over GDA)",
  );
}

/** The environment DeepEP's setup.py runs with; `shimGda`: compile the shim's own GDA path in (shimGdaCompiledIn). */
export function deepEpEnv(ctx: Ctx, prefix: string, shimGda: boolean): Record<string, string> {
  const env = ctx.env!;
  return {
    NVSHMEM_DIR: prefix,
    TORCH_CUDA_ARCH_LIST: torchArchList(env.cudaArch),
    MAX_JOBS: String(ctx.opts.jobs),
    CUDA_HOME: env.cuda.home,
    ...(shimGda ? { NVCC_APPEND_FLAGS: `${process.env.NVCC_APPEND_FLAGS ?? ''} -DNVSHMEM_EFA_SHIM_GDA`.trim() } : {}),
  };
}

/** torch's ninja progress line, "[3/7] ..." */
export const NINJA_STEP = /^\[(\d+)\/(\d+)\]/;
