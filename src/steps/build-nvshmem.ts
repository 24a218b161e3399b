import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { buildCudaLinkStub } from '../core/cuda-stub.ts';
import type { DetectedEnv } from '../core/environment.ts';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, run } from '../core/exec.ts';
import { hashTree } from '../core/hash.ts';
import { withdrawBrokenHeaders } from '../core/installed-headers.ts';
import { filesIncluding, NVSHMEM_BUILD_OUTPUTS } from '../core/nvshmem-tree.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { NO_STATIC_LIB_VAR, STATIC_LIB_WHY } from '../patchers/nvshmem/cmake.ts';
import { startDeepEpBeside } from './deepep-beside.ts';
import { requireSource } from './get-nvshmem.ts';
import type { BuildResult, Ctx, Step } from './types.ts';

/** Everything not needed for libfabric/EFA is off: half the build steps of the common recipe, no MPI/IB deps. */
export const LEAN_OPTIONS: Record<string, 'ON' | 'OFF'> = {
  NVSHMEM_LIBFABRIC_SUPPORT: 'ON',
  NVSHMEM_IBRC_SUPPORT: 'OFF',
  NVSHMEM_IBGDA_SUPPORT: 'OFF',
  NVSHMEM_IBDEVX_SUPPORT: 'OFF',
  NVSHMEM_UCX_SUPPORT: 'OFF',
  NVSHMEM_USE_MLX5DV: 'OFF',
  NVSHMEM_MPI_SUPPORT: 'OFF',
  NVSHMEM_SHMEM_SUPPORT: 'OFF',
  NVSHMEM_PMIX_SUPPORT: 'OFF',
  NVSHMEM_USE_NCCL: 'OFF',
  NVSHMEM_BUILD_TESTS: 'OFF',
  NVSHMEM_BUILD_EXAMPLES: 'OFF',
  NVSHMEM_BUILD_BITCODE_LIBRARY: 'OFF',
  NVSHMEM_BUILD_PYTHON_LIB: 'OFF',
  NVSHMEM_BUILD_HYDRA_LAUNCHER: 'OFF',
  NVSHMEM_BUILD_TXZ_PACKAGE: 'OFF',
  NVSHMEM_BUILD_PACKAGES: 'OFF',
};

/** With ccache on PATH, every compiler of a CMake build goes through it (rebuilds of new work dirs are cheap). */
export function ccacheArgs(env: DetectedEnv): string[] {
  return env.ccache ? ['C', 'CXX', 'CUDA'].map((l) => `-DCMAKE_${l}_COMPILER_LAUNCHER=${env.ccache}`) : [];
}

export function linkStubPath(ctx: Ctx): string {
  return path.join(ctx.paths.stubs, 'libcuda.so');
}

/** The patch put NVSHMEM 3.4's combined static library behind a switch (a tree without one, such as AWS's NVSHMEM 3.5.7 branch, has no switch). */
function hasStaticLibSwitch(ctx: Ctx): boolean {
  return !!ctx.patch?.fixes.some((f) => f.id === 'nvshmem-static-lib-switch' && f.status !== 'refused');
}

export function cmakeArgs(ctx: Ctx, env: DetectedEnv): string[] {
  const args = [
    '-S', requireSource(ctx).dir,
    '-B', ctx.paths.build,
    ...(env.ninja ? ['-G', 'Ninja'] : []),
    '-DCMAKE_BUILD_TYPE=Release',
    // compile_commands.json: selftest's neg_device_api recompiles the device library's transfer functions with one
    // ordering rule broken, exactly as this build compiled them (native/efaemu/gpu/build-device-api-order.sh).
    '-DCMAKE_EXPORT_COMPILE_COMMANDS=ON',
    `-DCMAKE_INSTALL_PREFIX=${ctx.paths.install}`,
    `-DCMAKE_CUDA_COMPILER=${env.cuda.nvcc}`,
    `-DCMAKE_CUDA_ARCHITECTURES=${env.cudaArch}`,
    `-DCUDA_HOME=${env.cuda.home}`,
    `-DLIBFABRIC_HOME=${env.libfabric.home}`,
    ...Object.entries(LEAN_OPTIONS).map(([k, v]) => `-D${k}=${v}`),
    env.gdrcopy ? '-DNVSHMEM_USE_GDRCOPY=ON' : '-DNVSHMEM_USE_GDRCOPY=OFF',
    ...(env.gdrcopy ? [`-DGDRCOPY_HOME=${env.gdrcopy.home}`] : []),
    ...(env.libcuda.kind === 'none' ? [`-DCUDA_cuda_driver_LIBRARY=${linkStubPath(ctx)}`] : []),
    ...ccacheArgs(env),
    // Always explicit: CMake's cache would otherwise keep an earlier run's value.
    ...(hasStaticLibSwitch(ctx) ? [`-D${NO_STATIC_LIB_VAR}=${ctx.opts.nvshmemStatic ? 'OFF' : 'ON'}`] : []),
  ];
  return args;
}

export async function installedLibraries(prefix: string): Promise<string[]> {
  try {
    return (await readdir(path.join(prefix, 'lib'))).sort();
  } catch {
    return [];
  }
}

/**
 * A build that reports success must be usable: installed GDA headers that cannot compile (the device API
 * without efa_io_defs.h) are withdrawn, and the report says the device API is unavailable, why, and the fix.
 */
async function checkDeviceApi(ctx: Ctx, fixes: FixRecord[]): Promise<BuildResult['deviceApi']> {
  const dir = path.join(ctx.paths.install, 'include', 'nvshmem_efa');
  const withdrawn = await withdrawBrokenHeaders(dir);
  if (withdrawn.length === 0) return { available: existsSync(dir), removed: [] };
  const missing = [...new Set(withdrawn.map((w) => w.missing))].join(', ');
  const why = ctx.vendorMissing ? `${missing} could not be had (${ctx.vendorMissing})` : `${missing} is not installed`;
  const fix = 'pass --efa-io-defs PATH (rdma-core providers/efa/efa_io_defs.h as pinned in third_party/efa_gda/lock.json), or rerun without --offline to download it';
  fixes.push({
    id: 'efa-gda-device-api',
    anchor: dir,
    status: 'warned',
    why: 'the GDA device headers include efa_io_defs.h; installed without it they fail to compile in the user\'s kernels',
    detail: `GDA device API unavailable: ${why}; not installed: ${withdrawn.map((w) => w.file).join(', ')}. Fix: ${fix}`,
  });
  return { available: false, removed: withdrawn.map((w) => w.file), reason: why, fix };
}

/** What the report says about libnvshmem.a: left out (and how to get it), built on request, or not there to build. */
function staticLibFixes(ctx: Ctx): FixRecord[] {
  const anchor = 'libnvshmem.a, nvshmem-info';
  const why = STATIC_LIB_WHY;
  if (!hasStaticLibSwitch(ctx)) {
    return ctx.opts.nvshmemStatic
      ? [{ id: 'nvshmem-static-lib', anchor, status: 'warned', why, detail: "--nvshmem-static: this NVSHMEM has no combined static library to build (as in AWS's NVSHMEM 3.5.7 branch); link libnvshmem_host.so and libnvshmem_device.a" }]
      : [];
  }
  return ctx.opts.nvshmemStatic
    ? [{ id: 'nvshmem-static-lib', anchor, status: 'already-present', why, detail: `built and installed as NVSHMEM does (--nvshmem-static, ${NO_STATIC_LIB_VAR}=OFF)` }]
    : [{ id: 'nvshmem-static-lib', anchor, status: 'applied', why, detail: `not built: lib/libnvshmem.a and bin/nvshmem-info (${NO_STATIC_LIB_VAR}=ON); link libnvshmem_host.so + libnvshmem_device.a, or rebuild with --nvshmem-static to have them` }];
}

export const buildNvshmemStep: Step = {
  id: 'build-nvshmem',
  title: 'Configure, build and install NVSHMEM',
  enabled: (ctx) => (ctx.opts.command === 'build' ? true : 'patch only'),
  async stamp(ctx) {
    const env = ctx.env!;
    return { tree: await hashTree(requireSource(ctx).dir, { generated: NVSHMEM_BUILD_OUTPUTS }), args: cmakeArgs(ctx, env), cuda: env.cuda.version, libfabric: env.libfabric.version, jobs: ctx.opts.jobs };
  },
  async run(ctx, io) {
    const env = ctx.env!;
    const dir = requireSource(ctx).dir;
    const fixes: FixRecord[] = [];
    const log = await openLog(io.logPath);
    const common = { log, logPath: io.logPath, signal: ctx.signal };
    try {
      const nvmlUsers = await filesIncluding(dir, 'nvml.h');
      if (nvmlUsers.length && !env.nvml) {
        throw new EnvironmentError(
          `nvml.h not found, and NVSHMEM includes it (${nvmlUsers.join(', ')})`,
          'install the NVML headers: apt-get install libnvidia-ml-dev (Debian: add the contrib and non-free components first; Ubuntu: multiverse), or cuda-nvml-dev-<ver> from the CUDA repository',
        );
      }
      if (nvmlUsers.length) {
        fixes.push({ id: 'nvml-header', anchor: env.nvml!, status: 'already-present', why: 'NVSHMEM includes <nvml.h>; trimmed CUDA toolkits lack it (error: nvml.h: No such file or directory)', detail: `using ${env.nvml}` });
      }
      if (env.libcuda.kind === 'none') {
        io.progress('generating a libcuda.so link stub');
        const stub = await buildCudaLinkStub(env.cuda.home, ctx.paths.stubs, io.logPath);
        fixes.push({ id: 'cuda-driver-link-stub', anchor: 'CUDA::cuda_driver', status: 'applied', why: 'no libcuda.so and no toolkit stubs/ on this host: CMake fails with target CUDA::cuda_driver not found (at nvshmem-info)', detail: `generated ${stub.path} (${stub.symbols} driver entry points from cuda.h) and passed -DCUDA_cuda_driver_LIBRARY; used to link only, the driver's libcuda.so.1 is loaded at run time` });
      } else if (env.libcuda.kind === 'toolkit-stub') {
        fixes.push({ id: 'cuda-driver-link-stub', anchor: 'CUDA::cuda_driver', status: 'already-present', why: 'no driver libcuda.so on this host', detail: `CMake links against the toolkit stub ${env.libcuda.path}` });
      }
      fixes.push(...staticLibFixes(ctx));
      const args = cmakeArgs(ctx, env);
      io.progress('configuring');
      await run(env.cmake.path, args, { ...common, fix: `read the CMake error above; configuration flags are in ${io.logPath}` });
      // DeepEP's compile runs beside the build below (a cold build's two longest jobs; see deepep-beside.ts). If this
      // step fails, the run stops it once the steps end (run-pipeline), as an interrupt does through ctx.signal.
      await startDeepEpBeside(ctx, io);
      await run(env.cmake.path, ['--build', ctx.paths.build, '--parallel', String(ctx.opts.jobs)], {
        ...common,
        fix: 'read the compiler error above; fix the environment and rerun (the build resumes where it stopped)',
        onLine(line) {
          const m = /^\[(\d+)\/(\d+)\]/.exec(line) ?? /^\[\s*(\d+)%\]/.exec(line);
          if (!m) return;
          io.progress(m[2] ? `[${m[1]}/${m[2]}] ${line.replace(/^\[\d+\/\d+\]\s*/, '').slice(0, 100)}` : line.slice(0, 110));
        },
      });
      io.progress('installing');
      await run(env.cmake.path, ['--install', ctx.paths.build], { ...common, fix: `check that ${ctx.paths.install} is writable` });
      // cmake --install never deletes: a libnvshmem.a from an earlier --nvshmem-static build would be stale.
      if (hasStaticLibSwitch(ctx) && !ctx.opts.nvshmemStatic) {
        for (const f of ['lib/libnvshmem.a', 'bin/nvshmem-info']) await rm(path.join(ctx.paths.install, f), { force: true });
      }
    } finally {
      await log.end();
    }
    const libraries = await installedLibraries(ctx.paths.install);
    const deviceApi = await checkDeviceApi(ctx, fixes);
    const result: BuildResult = { prefix: ctx.paths.install, cmakeArgs: cmakeArgs(ctx, env), fixes, libraries, deviceApi };
    ctx.build = result;
    return result;
  },
  restore(ctx, result) {
    const r = result as BuildResult;
    // A deleted install means the skip would lie; rebuild (ninja makes that cheap).
    if (!existsSync(path.join(r.prefix, 'lib'))) return false;
    ctx.build = r;
    return true;
  },
};
