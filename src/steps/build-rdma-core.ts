import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DetectedEnv } from '../core/environment.ts';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, run } from '../core/exec.ts';
import { fabricOrigin, fabricPin, loadFabricLock } from '../core/fabric-lock.ts';
import { fabricPrefixes } from '../core/fabric-plan.ts';
import { obtainSource, outsidePrefixFixes, stagedInstall } from '../core/fabric-source.ts';
import { toolVersion } from '../core/paths.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Ctx, FabricBuildResult, Step } from './types.ts';

/**
 * rdma-core's CMake build, kept inside the prefix: its defaults install systemd units, udev rules and
 * /etc files by absolute path, which a work-dir build must never write. Only the libraries and headers
 * libfabric's EFA provider needs matter; pyverbs, man pages, libnl neighbour resolution are off.
 */
export function rdmaCoreCmakeArgs(src: string, build: string, prefix: string, env: DetectedEnv): string[] {
  return [
    '-S', src,
    '-B', build,
    ...(env.ninja ? ['-G', 'Ninja'] : []),
    '-DCMAKE_BUILD_TYPE=Release',
    `-DCMAKE_INSTALL_PREFIX=${prefix}`,
    '-DCMAKE_INSTALL_LIBDIR=lib',
    `-DCMAKE_INSTALL_SYSCONFDIR=${prefix}/etc`,
    `-DCMAKE_INSTALL_SYSTEMD_SERVICEDIR=${prefix}/lib/systemd/system`,
    `-DCMAKE_INSTALL_SYSTEMD_BINDIR=${prefix}/lib/systemd`,
    `-DCMAKE_INSTALL_UDEV_RULESDIR=${prefix}/lib/udev/rules.d`,
    '-DNO_PYVERBS=1',
    '-DNO_MAN_PAGES=1',
    '-DENABLE_RESOLVE_NEIGH=0',
    '-DENABLE_VALGRIND=0',
    '-DCMAKE_DISABLE_FIND_PACKAGE_UDev=ON',
    '-DCMAKE_DISABLE_FIND_PACKAGE_Systemd=ON',
    ...(env.ccache ? [`-DCMAKE_C_COMPILER_LAUNCHER=${env.ccache}`] : []),
  ];
}

const plan = (ctx: Ctx) => ctx.env?.fabric;

/** Puts the result into the context: the report lists it, libfabric builds against it. */
function record(ctx: Ctx, r: FabricBuildResult): FabricBuildResult {
  ctx.rdmaCore = r;
  return r;
}

export const buildRdmaCoreStep: Step = {
  id: 'rdma-core',
  title: 'Build rdma-core from pinned sources',
  enabled(ctx) {
    if (ctx.opts.command !== 'build') return 'only the build needs it';
    const p = plan(ctx);
    if (p?.libfabric.action !== 'build') return 'the libfabric used is not built here';
    if (p.rdmaCore?.action !== 'build') return p.rdmaCore?.why ?? 'the host rdma-core is used';
    return true;
  },
  async stamp(ctx) {
    const lock = await loadFabricLock();
    const pin = fabricPin(lock, 'rdma-core', plan(ctx)!.rdmaCore!.action === 'build' ? (plan(ctx)!.rdmaCore as { ref: string }).ref : undefined);
    const prefix = fabricPrefixes(ctx.paths.workDir).rdmaCore;
    return { pin, origin: fabricOrigin('rdma-core', pin), args: rdmaCoreCmakeArgs('src', 'build', prefix, ctx.env!), cmake: ctx.env!.cmake.version, tool: toolVersion() };
  },
  async run(ctx, io) {
    const env = ctx.env!;
    const choice = plan(ctx)!.rdmaCore as { ref: string; why: string };
    const pin = fabricPin(await loadFabricLock(), 'rdma-core', choice.ref);
    const source = await obtainSource('rdma-core', pin, fabricOrigin('rdma-core', pin), {
      downloads: ctx.paths.downloads, sources: ctx.paths.sources, offline: ctx.opts.offline, signal: ctx.signal, logPath: io.logPath, progress: io.progress,
    });
    const prefix = fabricPrefixes(ctx.paths.workDir).rdmaCore;
    const build = path.join(ctx.paths.workDir, 'build', 'rdma-core');
    const log = await openLog(io.logPath);
    const common = { log, logPath: io.logPath, signal: ctx.signal };
    let outside: string[];
    try {
      // Built from a fresh tree each time the step runs: the last source's objects (or CMake cache) must not be reused.
      await rm(build, { recursive: true, force: true });
      io.progress('configuring rdma-core');
      await run(env.cmake.path, rdmaCoreCmakeArgs(source.dir, build, prefix, env), { ...common, fix: `read the CMake error above (rdma-core needs a C compiler, pkg-config and cmake >= 3.18); the log is ${io.logPath}` });
      await run(env.cmake.path, ['--build', build, '--parallel', String(ctx.opts.jobs)], {
        ...common,
        fix: 'read the compiler error above; fix the environment and rerun (the build resumes)',
        onLine(line) {
          const m = /^\[(\d+)\/(\d+)\]/.exec(line) ?? /^\[\s*(\d+)%\]/.exec(line);
          if (m) io.progress(`rdma-core ${m[2] ? `[${m[1]}/${m[2]}]` : `${m[1]}%`}`);
        },
      });
      io.progress('installing rdma-core');
      ({ outside } = await stagedInstall(prefix, path.join(ctx.paths.workDir, 'build', 'rdma-core-stage'), async (destdir) => {
        await run(env.cmake.path, ['--install', build], { ...common, env: { DESTDIR: destdir }, fix: `check that ${ctx.paths.workDir} is writable` });
      }));
    } finally {
      await log.end();
    }
    const efadv = path.join(prefix, 'include', 'infiniband', 'efadv.h');
    const h = existsSync(efadv) ? await readFile(efadv, 'utf8') : '';
    const features = {
      efadv_query_qp_wqs: /\befadv_query_qp_wqs\s*\(/.test(h),
      efadv_query_cq: /\befadv_query_cq\s*\(/.test(h),
      libefa: existsSync(path.join(prefix, 'lib', 'libefa.so')),
    };
    if (!features.efadv_query_qp_wqs || !features.efadv_query_cq || !features.libefa) {
      throw new EnvironmentError(`rdma-core ${pin.version} built, but ${!features.libefa ? `${prefix}/lib/libefa.so is missing` : `${efadv} lacks efadv_query_qp_wqs / efadv_query_cq`}`, `read ${io.logPath}; the pin in third_party/libfabric/lock.json must be rdma-core >= 59`);
    }
    const fixes: FixRecord[] = [{
      id: 'rdma-core-source',
      anchor: `rdma-core ${pin.ref} (${pin.commit.slice(0, 12)})`,
      why: 'libfabric\'s EFA GDA ops call efadv_query_qp_wqs / efadv_query_cq and CQs in external memory, which need rdma-core >= 59',
      status: 'applied',
      detail: `${choice.why}: built rdma-core ${pin.version} from ${source.origin} (${source.verified}) into ${prefix}`,
    }];
    fixes.push(...outsidePrefixFixes('rdma-core', prefix, outside));
    return record(ctx, { package: 'rdma-core', action: 'built', version: pin.version, prefix, ref: pin.ref, origin: source.origin, verified: source.verified, features, why: choice.why, fixes });
  },
  restore(ctx, result) {
    const r = result as FabricBuildResult;
    if (!r.prefix || !existsSync(path.join(r.prefix, 'lib', 'libefa.so'))) return false;
    record(ctx, r);
    return true;
  },
};
