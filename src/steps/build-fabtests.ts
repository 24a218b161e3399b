import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, run } from '../core/exec.ts';
import { fabricOrigin, fabricPin, fabtestsPin, loadFabricLock, type FabricPin } from '../core/fabric-lock.ts';
import { fabricPrefixes } from '../core/fabric-plan.ts';
import { mergedInstall, obtainSource, outsidePrefixFixes, type FabricSource } from '../core/fabric-source.ts';
import { makeDirs } from '../core/make-dirs.ts';
import { toolVersion } from '../core/paths.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Ctx, FabtestsResult, Step } from './types.ts';

/**
 * libfabric's fabtests (fi_rdm_pingpong, fi_rma_bw, ...) built against the libfabric this run built and installed
 * into its bin/, where `selftest` runs them. The release tarball of libfabric has no fabtests: they come from the
 * release's own fabtests tarball (pinned beside libfabric's in third_party/libfabric/lock.json), or from the
 * fabtests/ folder of a libfabric git mirror (NVSHMEM_EFA_LIBFABRIC_GIT), whose commit the libfabric step verified.
 */

/** The programs selftest needs; their absence after the install is an error, not a quiet success. */
export const FABTESTS_NEEDED = ['fi_rdm_pingpong', 'fi_rma_bw'] as const;

const plan = (ctx: Ctx) => ctx.env?.fabric;
const libfabricRef = (ctx: Ctx) => (plan(ctx)!.libfabric as { ref: string }).ref;

async function pins(ctx: Ctx): Promise<{ libfabric: FabricPin; fabtests: FabricPin | undefined }> {
  const libfabric = fabricPin(await loadFabricLock(), 'libfabric', libfabricRef(ctx));
  return { libfabric, fabtests: fabtestsPin(libfabric) };
}

/** fabtests' configure: the libfabric it links (and finds at run time) is the one just built. */
export function fabtestsConfigureArgs(libfabricPrefix: string, ccache: string | undefined): string[] {
  return [`--prefix=${libfabricPrefix}`, `--with-libfabric=${libfabricPrefix}`, `LDFLAGS=-Wl,-rpath,${libfabricPrefix}/lib`, ...(ccache ? [`CC=${ccache} cc`] : [])];
}

export const buildFabtestsStep: Step = {
  id: 'fabtests',
  title: "Build libfabric's fabtests against it (selftest runs them)",
  enabled(ctx) {
    if (ctx.opts.command !== 'build') return 'only the build needs it';
    if (plan(ctx)?.libfabric.action !== 'build') return 'fabtests are built only with a libfabric this tool builds (a libfabric you give brings its own, or none)';
    if (process.env.NVSHMEM_EFA_FABTESTS === '0') return 'turned off by NVSHMEM_EFA_FABTESTS=0: selftest skips its fabtests check';
    // A lock whose pin names no fabtests archive is found in run() (enabled() cannot read the lock): a warned fix.
    return true;
  },
  async stamp(ctx) {
    const p = await pins(ctx);
    // A rebuilt libfabric replaces its whole prefix, fabtests included: its stamp is part of this one.
    return { pin: p.fabtests ?? null, origin: p.fabtests ? fabricOrigin('fabtests', p.fabtests) : null, libfabric: ctx.state.get('libfabric')?.stamp ?? null, tool: toolVersion() };
  },
  async run(ctx, io) {
    const p = await pins(ctx);
    const prefix = fabricPrefixes(ctx.paths.workDir).libfabric;
    if (!p.fabtests) {
      const fixes: FixRecord[] = [{ id: 'fabtests', anchor: `libfabric ${p.libfabric.ref}`, why: "selftest's fabtests check runs libfabric's fabtests", status: 'warned', detail: `the fabric lock names no fabtests archive for libfabric ${p.libfabric.ref}: not built, and selftest will skip its fabtests check (add "fabtests" to that pin)` }];
      return record(ctx, { built: false, prefix, fixes });
    }
    const origin = fabricOrigin('fabtests', p.fabtests);
    let source: FabricSource;
    if (origin.kind === 'git') {
      // The libfabric step cloned and verified this commit; its fabtests/ folder is the same release's fabtests.
      const dir = path.join(ctx.paths.sources, `libfabric-${p.libfabric.ref}`, 'fabtests');
      source = { dir, kind: 'git', origin: origin.url, verified: `commit ${p.libfabric.commit}` };
    } else {
      source = await obtainSource('fabtests', p.fabtests, origin, {
        downloads: ctx.paths.downloads, sources: ctx.paths.sources, offline: ctx.opts.offline, signal: ctx.signal, logPath: io.logPath, progress: io.progress,
      });
    }
    const build = path.join(ctx.paths.workDir, 'build', 'fabtests');
    const log = await openLog(io.logPath);
    const common = { log, logPath: io.logPath, signal: ctx.signal };
    let clashes: string[];
    let outside: string[];
    try {
      if (!existsSync(path.join(source.dir, 'configure'))) {
        io.progress('generating configure (autogen.sh)');
        await run('sh', ['autogen.sh'], { ...common, cwd: source.dir, fix: `read the autoreconf error above (${io.logPath}); fabtests from git need autoconf, automake and libtool` });
      }
      // Like libfabric: every run starts clean, so another source never links against the last one's objects.
      await rm(build, { recursive: true, force: true });
      await makeDirs(build);
      io.progress('configuring fabtests');
      await run(path.join(source.dir, 'configure'), fabtestsConfigureArgs(prefix, ctx.env?.ccache), { ...common, cwd: build, fix: `read the configure error above and ${build}/config.log (fabtests need the libfabric headers in ${prefix}/include)` });
      let compiled = 0;
      await run('make', ['-j', String(ctx.opts.jobs)], {
        ...common,
        cwd: build,
        fix: 'read the compiler error above; fix the environment and rerun',
        onLine(line) {
          if (/^\s+CC(LD)?\s+\S/.test(line)) io.progress(`fabtests: ${++compiled} files compiled`);
        },
      });
      io.progress('installing fabtests into the libfabric prefix');
      // Merged into libfabric's prefix (selftest looks in its bin/), never over a file libfabric installed.
      ({ clashes, outside } = await mergedInstall(prefix, path.join(ctx.paths.workDir, 'build', 'fabtests-stage'), async (destdir) => {
        await run('make', ['install', `DESTDIR=${destdir}`], { ...common, cwd: build, fix: `check that ${ctx.paths.workDir} is writable` });
      }));
    } finally {
      await log.end();
    }
    const missing = FABTESTS_NEEDED.filter((t) => !existsSync(path.join(prefix, 'bin', t)));
    if (missing.length) {
      throw new EnvironmentError(`fabtests installed into ${prefix}, but bin/ lacks ${missing.join(', ')}`, `read ${io.logPath}`);
    }
    const fixes: FixRecord[] = [
      {
        id: 'fabtests',
        anchor: `fabtests ${p.fabtests.ref}`,
        why: "the libfabric release tarball has no fabtests, and selftest's fabtests check runs them against the libfabric it tests",
        status: 'applied',
        detail: `built from ${source.origin} (${source.verified}) against ${prefix} and installed into ${prefix}/bin (${FABTESTS_NEEDED.join(', ')} and the rest)${clashes.length ? `; not installed over libfabric's own: ${clashes.slice(0, 6).join(', ')}` : ''}`,
      },
    ];
    fixes.push(...outsidePrefixFixes('fabtests', prefix, outside));
    return record(ctx, { built: true, prefix, fixes });
  },
  restore(ctx, result) {
    const r = result as FabtestsResult;
    if (r.built && !FABTESTS_NEEDED.every((t) => existsSync(path.join(r.prefix, 'bin', t)))) return false;
    record(ctx, r);
    return true;
  },
};

function record(ctx: Ctx, r: FabtestsResult): FabtestsResult {
  ctx.fabtests = r;
  return r;
}
