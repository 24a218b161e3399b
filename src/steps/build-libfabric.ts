import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { gdaSupport, libfabricVersion, type DetectedEnv } from '../core/environment.ts';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, queryTool, run } from '../core/exec.ts';
import { fabricOrigin, fabricPin, loadFabricLock } from '../core/fabric-lock.ts';
import { fabricPrefixes } from '../core/fabric-plan.ts';
import { obtainSource, outsidePrefixFixes, stagedInstall } from '../core/fabric-source.ts';
import { makeDirs } from '../core/make-dirs.ts';
import { toolVersion } from '../core/paths.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Ctx, FabricBuildResult, Step } from './types.ts';

/**
 * The configure results that put libfabric's EFA GDA ops in (prov/efa: efa_domain.c's fi_efa_ops_gda is a set
 * of -FI_ENOSYS stubs without them). Read from the build's config.h after configure: the proof that GDA is
 * compiled in, not only declared by the installed header.
 */
export const GDA_DEFINES = ['HAVE_EFA', 'HAVE_EFADV_QUERY_QP_WQS', 'HAVE_EFADV_QUERY_CQ', 'HAVE_EFA_DATA_PATH_DIRECT', 'HAVE_CAPS_CQ_WITH_EXT_MEM_DMABUF', 'HAVE_EFADV_CQ_EX'] as const;
/** Also reported: GPU memory support (FI_HMEM_CUDA, dma-buf) that NVSHMEM's registrations need. */
export const HMEM_DEFINES = ['HAVE_CUDA', 'HAVE_CUDA_DMABUF'] as const;

export function configDefines(configH: string, names: readonly string[]): Record<string, boolean> {
  return Object.fromEntries(names.map((n) => [n, new RegExp(`^#define\\s+${n}\\s+1\\b`, 'm').test(configH)]));
}

/**
 * Only the EFA provider (and shm, for intra-node traffic when it is not switched off) is built, with CUDA
 * through dlopen (no libcudart dependency) and GDRCopy when the host has it. `rdmaPrefix`: the rdma-core
 * built by this run (also the library's run path); absent: the host's.
 */
export function libfabricConfigureArgs(prefix: string, env: DetectedEnv, rdmaPrefix: string | undefined): string[] {
  return [
    `--prefix=${prefix}`,
    '--disable-static',
    '--enable-only',
    `--enable-efa=${rdmaPrefix ?? 'yes'}`,
    '--enable-shm',
    `--with-cuda=${env.cuda.home}`,
    '--enable-cuda-dlopen',
    ...(env.gdrcopy ? [`--with-gdrcopy=${env.gdrcopy.home}`, '--enable-gdrcopy-dlopen'] : []),
    ...(rdmaPrefix ? [`LDFLAGS=-L${rdmaPrefix}/lib -Wl,-rpath,${rdmaPrefix}/lib`, `CPPFLAGS=-I${rdmaPrefix}/include`] : []),
    ...(env.ccache ? [`CC=${env.ccache} cc`] : []),
  ];
}

const plan = (ctx: Ctx) => ctx.env?.fabric;

/** The built libfabric becomes the one the rest of the build uses. */
function record(ctx: Ctx, r: FabricBuildResult, version: string, reason: string): FabricBuildResult {
  ctx.libfabric = r;
  if (ctx.env) ctx.env = { ...ctx.env, libfabric: { home: r.prefix!, version, gda: { available: true, reason } } };
  return r;
}

const gdaReason = (r: FabricBuildResult) => `libfabric ${r.version} built here from pinned sources (${r.verified}) with the EFA provider's GDA ops compiled in`;

export const buildLibfabricStep: Step = {
  id: 'libfabric',
  title: 'Build libfabric (EFA provider, GDA ops) from pinned sources',
  enabled(ctx) {
    if (ctx.opts.command !== 'build') return 'only the build needs it';
    const p = plan(ctx);
    if (p?.libfabric.action !== 'build') return p?.libfabric.why ?? 'the host libfabric is used';
    return true;
  },
  async stamp(ctx) {
    const pin = fabricPin(await loadFabricLock(), 'libfabric', (plan(ctx)!.libfabric as { ref: string }).ref);
    const prefixes = fabricPrefixes(ctx.paths.workDir);
    const rdma = plan(ctx)!.rdmaCore?.action === 'build' ? prefixes.rdmaCore : undefined;
    return {
      pin,
      origin: fabricOrigin('libfabric', pin),
      args: libfabricConfigureArgs(prefixes.libfabric, ctx.env!, rdma),
      // A rebuilt rdma-core rebuilds libfabric.
      rdmaCore: ctx.state.get('rdma-core')?.stamp ?? plan(ctx)!.rdmaCore,
      cuda: ctx.env!.cuda.version,
      tool: toolVersion(),
    };
  },
  async run(ctx, io) {
    const env = ctx.env!;
    const choice = plan(ctx)!.libfabric as { ref: string; why: string };
    const pin = fabricPin(await loadFabricLock(), 'libfabric', choice.ref);
    const prefixes = fabricPrefixes(ctx.paths.workDir);
    const rdmaPrefix = plan(ctx)!.rdmaCore?.action === 'build' ? prefixes.rdmaCore : undefined;
    const source = await obtainSource('libfabric', pin, fabricOrigin('libfabric', pin), {
      downloads: ctx.paths.downloads, sources: ctx.paths.sources, offline: ctx.opts.offline, signal: ctx.signal, logPath: io.logPath, progress: io.progress,
    });
    const build = path.join(ctx.paths.workDir, 'build', 'libfabric');
    const log = await openLog(io.logPath);
    const common = { log, logPath: io.logPath, signal: ctx.signal };
    const fixes: FixRecord[] = [];
    let outside: string[];
    let configH: string;
    try {
      // A git checkout (or a `git archive`) has configure.ac but no configure: generate it as upstream does.
      if (!existsSync(path.join(source.dir, 'configure'))) {
        if (!existsSync(path.join(source.dir, 'autogen.sh'))) throw new EnvironmentError(`${source.dir} has neither configure nor autogen.sh`, `check ${source.origin}: it must be a libfabric release archive or checkout`);
        const missing = [];
        for (const t of ['autoreconf', 'automake', 'libtoolize']) if (!(await queryTool(t, ['--version']))) missing.push(t);
        if (missing.length) throw new EnvironmentError(`${source.origin} is a source checkout without configure, and generating it needs ${missing.join(', ')}`, 'install autoconf, automake and libtool (apt-get install autoconf automake libtool), or use the release archive, which has configure');
        io.progress('generating configure (autogen.sh)');
        await run('sh', ['autogen.sh'], { ...common, cwd: source.dir, fix: `read the autoreconf error above (${io.logPath})` });
      }
      // A new source (another pin, archive or mirror) must not find the last one's objects, which make would
      // take as up to date (an unpacked archive's files are older than them): every run starts clean.
      await rm(build, { recursive: true, force: true });
      await makeDirs(build);
      io.progress('configuring libfabric');
      await run(path.join(source.dir, 'configure'), libfabricConfigureArgs(prefixes.libfabric, env, rdmaPrefix), {
        ...common,
        cwd: build,
        fix: `read the configure error above and ${build}/config.log (the EFA provider needs rdma-core >= 59 with its headers; CUDA needs cuda_runtime.h under ${env.cuda.home}/include)`,
      });
      configH = await readFile(path.join(build, 'config.h'), 'utf8');
      const gda = configDefines(configH, GDA_DEFINES);
      const off = GDA_DEFINES.filter((d) => !gda[d]);
      // Checked before compiling: a libfabric without the GDA ops is not what this step is for.
      if (off.length) {
        throw new EnvironmentError(
          `libfabric ${pin.version} configured without its EFA GDA ops: ${off.join(', ')} not set in ${build}/config.h`,
          `read ${build}/config.log around those checks: the rdma-core it builds against (${rdmaPrefix ?? 'the host\'s'}) must be >= 59 with infiniband/efadv.h`,
        );
      }
      let compiled = 0;
      await run('make', ['-j', String(ctx.opts.jobs)], {
        ...common,
        cwd: build,
        fix: 'read the compiler error above; fix the environment and rerun (make resumes)',
        onLine(line) {
          if (/^\s+CC(LD)?\s+\S/.test(line)) io.progress(`libfabric: ${++compiled} files compiled (${line.trim().split(/\s+/).pop()})`);
        },
      });
      io.progress('installing libfabric');
      ({ outside } = await stagedInstall(prefixes.libfabric, path.join(ctx.paths.workDir, 'build', 'libfabric-stage'), async (destdir) => {
        await run('make', ['install', `DESTDIR=${destdir}`], { ...common, cwd: build, fix: `check that ${ctx.paths.workDir} is writable` });
      }));
    } finally {
      await log.end();
    }
    const fabricH = path.join(prefixes.libfabric, 'include', 'rdma', 'fabric.h');
    const version = existsSync(fabricH) ? ((await libfabricVersion(fabricH)) ?? pin.version) : pin.version;
    const header = await gdaSupport(prefixes.libfabric, version);
    if (!header.available || !existsSync(path.join(prefixes.libfabric, 'lib', 'libfabric.so'))) {
      throw new EnvironmentError(`libfabric ${pin.version} installed into ${prefixes.libfabric}, but ${header.available ? 'lib/libfabric.so is missing' : header.reason}`, `read ${io.logPath}`);
    }
    const features: Record<string, boolean> = { ...configDefines(configH, GDA_DEFINES), ...configDefines(configH, HMEM_DEFINES), gdrcopy: !!env.gdrcopy };
    fixes.push({
      id: 'libfabric-source',
      anchor: `libfabric ${pin.ref} (${pin.commit.slice(0, 12)})`,
      why: 'EFA GDA needs libfabric >= 2.3.0 whose EFA provider has FI_EFA_GDA_OPS compiled in (rdma-core >= 59); distributions ship 1.17',
      status: 'applied',
      detail: `${choice.why}: built libfabric ${version} from ${source.origin} (${source.verified}) into ${prefixes.libfabric}: EFA provider with ${GDA_DEFINES.join(', ')}; CUDA ${features.HAVE_CUDA ? 'on (dlopen)' : 'off'}${features.HAVE_CUDA_DMABUF ? ', dma-buf' : ''}; GDRCopy ${env.gdrcopy ? `on (${env.gdrcopy.home})` : 'off (not found)'}; rdma-core ${rdmaPrefix ? `${ctx.rdmaCore?.version ?? ''} at ${rdmaPrefix}` : 'of the host'}`,
    });
    if (!features.HAVE_CUDA) fixes.push({ id: 'libfabric-cuda', anchor: `${build}/config.h`, why: 'NVSHMEM registers GPU memory with FI_HMEM_CUDA', status: 'warned', detail: `libfabric was configured without CUDA (cuda_runtime.h not found under ${env.cuda.home}/include): GPU memory registration will fail` });
    fixes.push(...outsidePrefixFixes('libfabric', prefixes.libfabric, outside));
    const result: FabricBuildResult = { package: 'libfabric', action: 'built', version, prefix: prefixes.libfabric, ref: pin.ref, origin: source.origin, verified: source.verified, features, why: choice.why, fixes };
    return record(ctx, result, version, gdaReason(result));
  },
  restore(ctx, result) {
    const r = result as FabricBuildResult;
    if (!r.prefix || !existsSync(path.join(r.prefix, 'lib', 'libfabric.so')) || !existsSync(path.join(r.prefix, 'include', 'rdma', 'fi_ext_efa.h'))) return false;
    record(ctx, r, r.version, gdaReason(r));
    return true;
  },
};
