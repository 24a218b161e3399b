import { existsSync } from 'node:fs';
import path from 'node:path';
import { gdrcopyPrefix } from '../core/environment.ts';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, run } from '../core/exec.ts';
import { fabricOrigin, GDRCOPY_SWITCH, gdrcopyPin, gdrcopyTurnedOff, loadGdrcopyLock } from '../core/fabric-lock.ts';
import { obtainSource, outsidePrefixFixes, stagedInstall } from '../core/fabric-source.ts';
import { toolVersion } from '../core/paths.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Ctx, GdrcopyBuildResult, Step } from './types.ts';

/**
 * GDRCopy's user library, built from its pinned source (third_party/gdrcopy/lock.json) when the host has none:
 * NVSHMEM's EFA provider refuses to start without GDRCopy ("EFA Provider requires GDRCopy, but it was disabled at
 * compile time"), so a build without it is not one an EFA job can use. Only libgdrapi and its headers are built
 * (gdrcopy's `make lib` / `make lib_install`: no CUDA, no kernel headers); the gdrdrv kernel module is the host's
 * to load, which `doctor` checks on a host with EFA devices.
 */

/** What NVSHMEM's and libfabric's builds look for in a GDRCopy prefix; a prefix without them is rebuilt. */
export const GDRCOPY_FILES = ['lib/libgdrapi.so', 'include/gdrapi.h'] as const;

/**
 * The variables of gdrcopy's top-level Makefile, which are lowercase (`prefix`, not `PREFIX`, which it ignores:
 * the install would then go to /usr/local). libdir is named too: its default follows exec_prefix, and NVSHMEM's
 * and libfabric's builds look in <prefix>/lib.
 */
export function gdrcopyMakeArgs(prefix: string, ccache: string | undefined): string[] {
  return [`prefix=${prefix}`, `libdir=${prefix}/lib`, `includedir=${prefix}/include`, ...(ccache ? [`CC=${ccache} cc`] : [])];
}

/**
 * Whether the step runs: detection planned it (no GDRCopy found or named, and not turned off), or why not. The
 * plan already points the later builds at the work dir's prefix, so a dry run shows what the build will use.
 */
function planned(ctx: Ctx): true | string {
  const g = ctx.env?.gdrcopy;
  if (g?.build) return true;
  if (g) {
    // The option wins over the variable, as in environment.ts.
    if (ctx.opts.gdrcopyHome) return `--gdrcopy-home ${ctx.opts.gdrcopyHome} is used`;
    if (process.env.GDRCOPY_HOME) return `GDRCOPY_HOME=${process.env.GDRCOPY_HOME} is used`;
    return `the host's GDRCopy at ${g.home} is used`;
  }
  return gdrcopyTurnedOff()
    ? `turned off by ${GDRCOPY_SWITCH}=0: NVSHMEM is built without GDRCopy, and its EFA provider will refuse to start ("EFA Provider requires GDRCopy, but it was disabled at compile time")`
    : 'no GDRCopy is used';
}

/** The built GDRCopy is the one the libfabric and NVSHMEM builds use (--with-gdrcopy, GDRCOPY_HOME). */
function record(ctx: Ctx, r: GdrcopyBuildResult): GdrcopyBuildResult {
  ctx.gdrcopy = r;
  if (ctx.env) ctx.env = { ...ctx.env, gdrcopy: { home: r.prefix, build: true } };
  return r;
}

export const buildGdrcopyStep: Step = {
  id: 'gdrcopy',
  title: "Build GDRCopy's library (libgdrapi) from pinned sources",
  enabled(ctx) {
    if (ctx.opts.command !== 'build') return 'only the build needs it';
    return planned(ctx);
  },
  async stamp(ctx) {
    const pin = gdrcopyPin(await loadGdrcopyLock());
    return { pin, origin: fabricOrigin('gdrcopy', pin), args: gdrcopyMakeArgs(gdrcopyPrefix(ctx.paths.workDir), ctx.env?.ccache), tool: toolVersion() };
  },
  async run(ctx, io) {
    const pin = gdrcopyPin(await loadGdrcopyLock());
    // Unpacked afresh (or the clone reset and cleaned) every time: make never finds another source's objects.
    const source = await obtainSource('gdrcopy', pin, fabricOrigin('gdrcopy', pin), {
      downloads: ctx.paths.downloads, sources: ctx.paths.sources, offline: ctx.opts.offline, signal: ctx.signal, logPath: io.logPath, progress: io.progress,
    });
    const prefix = gdrcopyPrefix(ctx.paths.workDir);
    const args = gdrcopyMakeArgs(prefix, ctx.env?.ccache);
    const log = await openLog(io.logPath);
    // gdrcopy's src/Makefile runs `ldconfig -n $(PWD)`: PWD must be the tree it builds, never the caller's folder.
    const common = { log, logPath: io.logPath, signal: ctx.signal, cwd: source.dir, env: { PWD: source.dir } };
    let outside: string[];
    try {
      io.progress(`building libgdrapi ${pin.version} (make lib)`);
      await run('make', ['-j', String(ctx.opts.jobs), 'lib', ...args], { ...common, fix: `read the compiler error above (${io.logPath}); libgdrapi needs make and gcc, not CUDA` });
      io.progress('installing libgdrapi (make lib_install)');
      ({ outside } = await stagedInstall(prefix, path.join(ctx.paths.workDir, 'build', 'gdrcopy-stage'), async (destdir) => {
        await run('make', ['lib_install', ...args, `DESTDIR=${destdir}`], { ...common, fix: `check that ${ctx.paths.workDir} is writable` });
      }));
    } finally {
      await log.end();
    }
    const missing = GDRCOPY_FILES.filter((f) => !existsSync(path.join(prefix, f)));
    if (missing.length) throw new EnvironmentError(`gdrcopy ${pin.version} installed into ${prefix}, but ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} missing`, `read ${io.logPath}; the lock's source must be a GDRCopy release whose \`make lib_install\` installs them`);
    const fixes: FixRecord[] = [{
      id: 'gdrcopy-source',
      anchor: `gdrcopy ${pin.ref} (${pin.commit.slice(0, 12)})`,
      why: 'NVSHMEM\'s EFA provider refuses to start without GDRCopy ("EFA Provider requires GDRCopy, but it was disabled at compile time"), and this host has none (no include/gdrapi.h)',
      status: 'applied',
      detail: `built GDRCopy ${pin.version}'s libgdrapi from ${source.origin} (${source.verified}) into ${prefix}: NVSHMEM and a libfabric built here are built with it, and jobs load ${prefix}/lib (LD_LIBRARY_PATH). The gdrdrv kernel module (/dev/gdrdrv) is not built: the host must load it (nvshmem-efa doctor checks it on EFA hosts)`,
    }];
    fixes.push(...outsidePrefixFixes('gdrcopy', prefix, outside));
    return record(ctx, { prefix, ref: pin.ref, version: pin.version, origin: source.origin, verified: source.verified, fixes });
  },
  restore(ctx, result) {
    const r = result as GdrcopyBuildResult;
    if (!r.prefix || !GDRCOPY_FILES.every((f) => existsSync(path.join(r.prefix, f)))) return false;
    record(ctx, r);
    return true;
  },
};
