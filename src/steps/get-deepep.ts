import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { replaceWithCopy } from '../core/copy-tree.ts';
import { CommandFailedError, EnvironmentError, UsageError, VerificationError } from '../core/errors.ts';
import { checkoutCommit, cloneRepo, readHeadCommit, resetCloneTo } from '../core/git.ts';
import { DEEPEP_GIT_URL, DEEPEP_PINS, type Pin } from '../pins.ts';
import { hashDeepEpSources } from './deepep-setup.ts';
import { verifiedSource } from './source-check.ts';
import type { Ctx, SourceResult, Step, WorkPaths } from './types.ts';

export function deepEpPinFor(ref: string): Pin {
  const pin = DEEPEP_PINS.find((p) => p.ref === ref || p.commit === ref);
  if (!pin) {
    throw new UsageError(
      `DeepEP ref '${ref}' is not pinned (pinned: ${DEEPEP_PINS.map((p) => `${p.ref} = ${p.commit}`).join(', ')})`,
      'use a pinned --deepep-ref, or check the ref out yourself and pass --deepep-src DIR (the layout is checked either way)',
    );
  }
  return pin;
}

const gitUrl = () => process.env.NVSHMEM_EFA_DEEPEP_URL ?? DEEPEP_GIT_URL;

/** Where the verified clone of a pinned DeepEP commit lives in the work dir. */
export const deepEpCloneDir = (paths: WorkPaths, pin: Pin) => path.join(paths.sources, `deepep-${pin.ref}`);

/** Fetches exactly the pinned commit and verifies HEAD; git's output goes to the step's log. */
async function fetchCommit(url: string, pin: Pin, dest: string, signal: AbortSignal, logPath: string, onProgress: (s: string) => void): Promise<void> {
  const tmp = `${dest}.partial`;
  const fix = 'check network access, or clone DeepEP yourself and pass --deepep-src DIR (or set NVSHMEM_EFA_DEEPEP_URL to a mirror)';
  await cloneRepo(url, ['--no-checkout'], tmp, `DeepEP ${pin.ref}`, fix, signal, logPath, onProgress);
  try {
    await checkoutCommit(tmp, pin.commit, fix, logPath);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    const why = e instanceof CommandFailedError ? (e.tail.find((l) => /fatal:|error:/i.test(l)) ?? e.message) : (e as Error).message;
    throw new EnvironmentError(`cannot check out DeepEP ${pin.commit} from ${url}: ${why.trim()}`, fix, logPath);
  }
  const head = await readHeadCommit(tmp);
  if (head !== pin.commit) {
    await rm(tmp, { recursive: true, force: true });
    throw new VerificationError(`${url} ${pin.ref} resolved to ${head}, but the pin says ${pin.commit}`, 'use a trusted mirror (NVSHMEM_EFA_DEEPEP_URL) or pass --deepep-src DIR');
  }
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

export const wantsDeepEp = (ctx: Ctx): true | string =>
  ctx.opts.deepepSrc || ctx.opts.deepepRef ? true : 'no --deepep-src / --deepep-ref given';

export const getDeepEpStep: Step = {
  id: 'get-deepep',
  title: 'Get DeepEP sources',
  enabled: wantsDeepEp,
  // The sources only. Not the patch set: patch-deepep's stamp has it, and it re-patches the tree it patched
  // before (the patcher knows its own hooks and brings them up to date). A fresh copy for a new shim would
  // drop build/, DeepEP's objects, and make a shim change a full DeepEP compile. Not the build outputs either
  // (a checkout the user also builds or tests in): copying leaves build/ out, the rest is not source.
  async stamp(ctx) {
    const o = ctx.opts;
    if (o.deepepSrc) {
      if (!existsSync(o.deepepSrc)) throw new UsageError(`--deepep-src ${o.deepepSrc} does not exist`, 'pass the root of a DeepEP checkout');
      if (o.inPlace) return { src: o.deepepSrc, inPlace: true };
      return { src: o.deepepSrc, tree: await hashDeepEpSources(o.deepepSrc, [ctx.paths.workDir]) };
    }
    const pin = deepEpPinFor(o.deepepRef!);
    return { ref: pin.ref, commit: pin.commit, url: gitUrl() };
  },
  async run(ctx, io) {
    const o = ctx.opts;
    let result: SourceResult;
    if (o.deepepSrc && o.inPlace) {
      result = { kind: 'local', dir: o.deepepSrc, origin: o.deepepSrc };
    } else if (o.deepepSrc) {
      const dest = path.join(ctx.paths.sources, 'deepep');
      io.progress(`copying ${o.deepepSrc}`);
      await replaceWithCopy(o.deepepSrc, dest, [ctx.paths.workDir], ctx.signal);
      result = { kind: 'local', dir: dest, origin: o.deepepSrc };
    } else {
      const pin = deepEpPinFor(o.deepepRef!);
      const dest = deepEpCloneDir(ctx.paths, pin);
      if ((await readHeadCommit(dest)) === pin.commit) {
        io.progress(`resetting the cached clone to ${pin.commit.slice(0, 12)}`);
        await resetCloneTo(dest, pin.commit);
      } else {
        if (o.offline) throw new EnvironmentError(`--offline and no verified clone of DeepEP ${pin.ref} in ${dest}`, 'run once with network access, or pass --deepep-src DIR');
        await fetchCommit(gitUrl(), pin, dest, ctx.signal, io.logPath, (s) => io.progress(s));
      }
      result = { kind: 'git', dir: dest, origin: gitUrl(), ref: pin.ref, commit: pin.commit };
    }
    ctx.deepep = result;
    return result;
  },
  restore(ctx, result) {
    const o = ctx.opts;
    const expect = o.deepepSrc
      ? { kind: 'local' as const, dir: o.inPlace ? o.deepepSrc : path.join(ctx.paths.sources, 'deepep'), inPlace: o.inPlace }
      : { kind: 'git' as const, dir: deepEpCloneDir(ctx.paths, deepEpPinFor(o.deepepRef!)), inPlace: false };
    const r = verifiedSource(ctx, result, expect);
    if (!r) return false;
    ctx.deepep = r;
    return true;
  },
};

export function requireDeepEp(ctx: Ctx): SourceResult {
  if (!ctx.deepep) throw new Error('internal: DeepEP source not resolved');
  return ctx.deepep;
}
