import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { openLog, run, type StepLog } from '../core/exec.ts';
import { copyKeepingTimes, digestDifferences, fileDigests } from '../core/file-digests.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { loadTemplate } from '../patchers/nvshmem/template.ts';
import { deepEpEnv, NINJA_STEP, python, SETUP_ARGS, shimGdaCompiledIn } from './deepep-setup.ts';
import { requireDeepEp, wantsDeepEp } from './get-deepep.ts';
import { requireSource } from './get-nvshmem.ts';
import type { BesideRun, Ctx, StepIO } from './types.ts';

/*
 * DeepEP's compile beside NVSHMEM's build (a cold build's longest two jobs, both CPU-bound, one after the
 * other until now). DeepEP's kernels need only NVSHMEM's headers, and those exist once NVSHMEM is
 * configured: its CMake copies every header it installs into <build>/src/include, and our patch installs
 * the GDA device headers straight from the template directory. So, right after configure, the install's
 * include/ is staged from exactly those files and setup.py starts with NVSHMEM_DIR = the install prefix:
 * torch's ninja compiles every object while NVSHMEM builds and stops where NVSHMEM's libraries are needed
 * (the device link). After NVSHMEM's install, build-deepep reruns setup.py with the same environment and
 * the same prefix, so the same command lines: when the installed headers are the staged ones byte for byte,
 * ninja finds every object current and only links. Otherwise the objects are deleted, DeepEP compiles
 * again, and the report says why.
 */

export const BESIDE_FIX_ID = 'deepep-beside-nvshmem';
const WHY = "DeepEP's compile and NVSHMEM's build are a cold build's two longest jobs; DeepEP needs NVSHMEM's headers to compile and its libraries only to link";

/** Where NVSHMEM 3.x's CMake copies the headers it installs, at configure time (relative to the build dir). */
export const CONFIGURED_INCLUDE = path.join('src', 'include');

// No torch query here: the preflight checked it, and a cold first `import torch` can take longer than a query may run.
function whyNotBeside(ctx: Ctx, prefix: string): string | undefined {
  if (!ctx.opts.overlap) return '--no-overlap';
  if (!ctx.deepep || !ctx.deepepPatch) return 'DeepEP was not patched before NVSHMEM\'s build';
  if (existsSync(path.join(prefix, 'lib'))) {
    return `an earlier NVSHMEM install is in ${prefix}; it is left as it is until NVSHMEM's own install replaces it, so DeepEP compiles after that`;
  }
  if (!existsSync(path.join(ctx.paths.build, CONFIGURED_INCLUDE, 'nvshmem.h'))) {
    return `the configured NVSHMEM tree has no ${CONFIGURED_INCLUDE}/nvshmem.h (where NVSHMEM 3.x's CMake puts the headers it installs) to compile against before the install`;
  }
  return undefined;
}

/** Stages include/ in the (not yet installed) prefix as NVSHMEM's install will write it; returns its digests. */
async function stageHeaders(ctx: Ctx, prefix: string): Promise<Record<string, string>> {
  const include = path.join(prefix, 'include');
  // What is there is left from a staging whose NVSHMEM build failed (there is no lib/): not an install.
  await rm(include, { recursive: true, force: true });
  const configured = path.join(ctx.paths.build, CONFIGURED_INCLUDE);
  // NVSHMEM's install(DIRECTORY ... PATTERN "modules" EXCLUDE).
  for (const rel of Object.keys(await fileDigests(configured, ['modules']))) {
    await copyKeepingTimes(path.join(configured, rel), path.join(include, rel));
  }
  const { manifest } = await loadTemplate();
  // The patch's install(FILES ... OPTIONAL): efa_io_defs.h is there only when it could be vendored.
  for (const h of manifest.installHeaders) {
    const from = path.join(requireSource(ctx).dir, manifest.destination, h);
    if (existsSync(from)) await copyKeepingTimes(from, path.join(prefix, manifest.installDir, h));
  }
  return fileDigests(include);
}

/**
 * Called by build-nvshmem right after configure: starts DeepEP's compile when this run builds DeepEP, and
 * otherwise says why it compiles after NVSHMEM. Never fails the build: what goes wrong here is redone by
 * build-deepep.
 */
export async function startDeepEpBeside(ctx: Ctx, io: StepIO): Promise<void> {
  if (ctx.opts.command !== 'build' || wantsDeepEp(ctx) !== true) return;
  const prefix = ctx.paths.install;
  const why = whyNotBeside(ctx, prefix);
  if (why) {
    ctx.deepepBeside = { notStarted: why };
    return;
  }
  let headers: Record<string, string>;
  try {
    headers = await stageHeaders(ctx, prefix);
  } catch (e) {
    ctx.deepepBeside = { notStarted: `staging NVSHMEM's headers in ${prefix}/include failed: ${(e as Error).message}` };
    return;
  }
  const env = deepEpEnv(ctx, prefix, shimGdaCompiledIn(ctx, prefix));
  const logPath = path.join(ctx.paths.logs, `${BESIDE_FIX_ID}.log`);
  const abort = new AbortController();
  const signal = AbortSignal.any([ctx.signal, abort.signal]);
  const r: BesideRun = { prefix, env, headers, logPath, t0: Date.now(), abort, done: Promise.resolve() };
  r.done = (async () => {
    let steps = 0;
    let total: number | undefined;
    let log: StepLog | undefined;
    try {
      log = await openLog(logPath);
      log.write(`# DeepEP compiling beside NVSHMEM's build; ${Object.keys(headers).length} headers staged in ${prefix}/include; the link fails until NVSHMEM is installed\n`);
      await run(python(), [...SETUP_ARGS], {
        cwd: requireDeepEp(ctx).dir,
        env: { ...process.env, ...env },
        log,
        logPath,
        signal,
        fix: 'build-deepep reruns setup.py after the install',
        onLine(line) {
          const m = NINJA_STEP.exec(line);
          if (!m) return;
          steps += 1;
          total = Number(m[2]);
        },
      });
    } catch {
      // Expected: no NVSHMEM library to link yet. Anything else (its log too) shows again in build-deepep's own run.
    } finally {
      r.result = { ms: Date.now() - r.t0, stopped: signal.aborted, steps, ...(total ? { total } : {}) };
      await log?.end();
    }
  })();
  ctx.deepepBeside = { running: r };
  io.progress(`DeepEP compiles beside NVSHMEM (log ${logPath})`);
}

/** Stops a compile begun beside NVSHMEM that is still running and waits for it: run-pipeline calls it when the steps end, failed or not. */
export async function stopDeepEpBeside(ctx: Ctx): Promise<void> {
  const b = ctx.deepepBeside;
  if (!b || !('running' in b) || b.running.result) return;
  b.running.abort.abort(new Error('stopped: the compile beside NVSHMEM is no longer needed'));
  await b.running.done;
}

/**
 * Called by build-deepep before its setup.py: waits for the compile begun beside NVSHMEM, then keeps its
 * objects only if they were compiled against exactly the headers now installed, with the same environment.
 * Returns the report's record of it (none when NVSHMEM was not built by this run).
 */
export async function settleDeepEpBeside(ctx: Ctx, prefix: string, env: Record<string, string>, io: StepIO): Promise<FixRecord | undefined> {
  const b = ctx.deepepBeside;
  if (!b) return undefined;
  const record = (status: FixRecord['status'], detail: string): FixRecord => ({ id: BESIDE_FIX_ID, anchor: 'setup.py build_ext', status, why: WHY, detail });
  if ('notStarted' in b) return record('warned', `compiled after NVSHMEM, not beside it: ${b.notStarted}`);
  const r = b.running;
  if (!r.result) {
    io.progress("waiting for DeepEP's compile begun beside NVSHMEM");
    await r.done;
  }
  const res = r.result!;
  const ran = `ninja started ${res.steps}${res.total ? ` of its ${res.total}` : ''} steps in ${(res.ms / 1000).toFixed(1)} s beside NVSHMEM's build (log ${r.logPath})`;
  const changed = digestDifferences(r.headers, await fileDigests(path.join(prefix, 'include')));
  const reasons = [
    ...(res.stopped ? ['it was stopped before it finished'] : []),
    ...(prefix !== r.prefix ? [`NVSHMEM was installed in ${prefix}, not ${r.prefix}`] : []),
    ...(JSON.stringify(env) !== JSON.stringify(r.env) ? ['its environment differs from this one (GDA path or jobs)'] : []),
    ...(changed.length ? [`the installed headers are not the ones it compiled against (${changed.slice(0, 5).join('; ')}${changed.length > 5 ? `; ${changed.length - 5} more` : ''})`] : []),
  ];
  if (reasons.length) {
    // ninja decides by command line and time stamps, not content: objects built on other headers would pass as current.
    await rm(path.join(requireDeepEp(ctx).dir, 'build'), { recursive: true, force: true });
    return record('warned', `${ran}; its objects were deleted and DeepEP compiles again: ${reasons.join('; ')}`);
  }
  return record('applied', `${ran}; NVSHMEM installed the ${Object.keys(r.headers).length} staged headers byte for byte, so setup.py reuses those objects`);
}
