import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { replaceWithCopy, reuseTimes, snapshotTree, type TreeSnapshot } from '../core/copy-tree.ts';
import { EnvironmentError, UsageError, VerificationError } from '../core/errors.ts';
import { cloneRepo, readHeadCommit, resetCloneTo } from '../core/git.ts';
import { hashJson, hashTree } from '../core/hash.ts';
import { NVSHMEM_BUILD_OUTPUTS, nvshmemVersion, versionWarning } from '../core/nvshmem-tree.ts';
import { toolVersion } from '../core/paths.ts';
import { loadTemplate } from '../patchers/nvshmem/template.ts';
import { NVSHMEM_GIT_URL, NVSHMEM_PINS, type Pin } from '../pins.ts';
import { verifiedSource } from './source-check.ts';
import type { Ctx, SourceResult, Step, WorkPaths } from './types.ts';

export function pinFor(ref: string, pins: readonly Pin[] = NVSHMEM_PINS): Pin {
  const pin = pins.find((p) => p.ref === ref);
  if (!pin) {
    throw new UsageError(
      `NVSHMEM ref '${ref}' is not pinned (pinned: ${pins.map((p) => p.ref).join(', ')})`,
      'use a pinned --nvshmem-ref, or check out the ref yourself and pass --nvshmem-src DIR',
    );
  }
  return pin;
}

/** Where the verified clone of a pinned ref lives in the work dir. */
export const nvshmemCloneDir = (paths: WorkPaths, pin: Pin) => path.join(paths.sources, `nvshmem-${pin.ref}`);

/** Clones `pin.ref` into `dest` (through a temporary sibling) and checks HEAD is the pinned commit. */
export async function fetchPinned(url: string, pin: Pin, dest: string, signal: AbortSignal, logPath: string, onProgress: (s: string) => void): Promise<void> {
  const tmp = `${dest}.partial`;
  await cloneRepo(url, ['--depth', '1', '--branch', pin.ref, '--single-branch'], tmp, `NVSHMEM ${pin.ref}`, 'check network access, or clone NVSHMEM yourself and pass --nvshmem-src DIR (or set NVSHMEM_EFA_NVSHMEM_URL to a mirror)', signal, logPath, onProgress);
  const head = await readHeadCommit(tmp);
  if (head !== pin.commit) {
    await rm(tmp, { recursive: true, force: true });
    throw new VerificationError(`${url} ${pin.ref} resolved to ${head}, but the pin says ${pin.commit}`, 'the tag moved or the mirror is not genuine; use a trusted mirror (NVSHMEM_EFA_NVSHMEM_URL) or pass --nvshmem-src DIR');
  }
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

export const getNvshmemStep: Step = {
  id: 'get-nvshmem',
  title: 'Get NVSHMEM sources',
  enabled: () => true,
  async stamp(ctx) {
    const o = ctx.opts;
    if (o.nvshmemSrc) {
      if (!existsSync(o.nvshmemSrc)) throw new UsageError(`--nvshmem-src ${o.nvshmemSrc} does not exist`, 'pass the root of an NVSHMEM source tree');
      // In place, the tree is also the patch step's output; its content is that step's business.
      if (o.inPlace) return { src: o.nvshmemSrc, inPlace: true };
      return { src: o.nvshmemSrc, tree: await hashTree(o.nvshmemSrc, { skip: [ctx.paths.workDir], generated: NVSHMEM_BUILD_OUTPUTS }), patches: await patchesIdentity(o.nvshmemDeviceApi) };
    }
    const pin = pinFor(o.nvshmemRef);
    return { ref: pin.ref, commit: pin.commit, url: gitUrl(), patches: await patchesIdentity(o.nvshmemDeviceApi) };
  },
  async run(ctx, io) {
    const o = ctx.opts;
    let result: SourceResult;
    if (o.nvshmemSrc && o.inPlace) {
      result = { kind: 'local', dir: o.nvshmemSrc, origin: o.nvshmemSrc };
    } else if (o.nvshmemSrc) {
      const dest = path.join(ctx.paths.sources, 'nvshmem');
      io.progress(`copying ${o.nvshmemSrc}`);
      const snap = await snapshotTree(dest, NVSHMEM_BUILD_OUTPUTS);
      await replaceWithCopy(o.nvshmemSrc, dest, [ctx.paths.workDir], ctx.signal);
      await keepTimes(ctx, snap);
      result = { kind: 'local', dir: dest, origin: o.nvshmemSrc };
    } else {
      const pin = pinFor(o.nvshmemRef);
      const dest = nvshmemCloneDir(ctx.paths, pin);
      const cached = (await readHeadCommit(dest)) === pin.commit;
      if (!cached) {
        if (o.offline) {
          throw new EnvironmentError(`--offline and no verified clone of NVSHMEM ${pin.ref} in ${dest}`, 'run once with network access to fill the cache, or pass --nvshmem-src DIR');
        }
        await fetchPinned(gitUrl(), pin, dest, ctx.signal, io.logPath, (s) => io.progress(s));
      } else {
        io.progress(`resetting the cached clone to ${pin.commit.slice(0, 12)}`);
        const snap = await snapshotTree(dest, NVSHMEM_BUILD_OUTPUTS);
        await resetCloneTo(dest, pin.commit);
        await keepTimes(ctx, snap);
      }
      result = { kind: 'git', dir: dest, origin: gitUrl(), ref: pin.ref, commit: pin.commit };
    }
    const version = await nvshmemVersion(result.dir);
    if (version) result.version = version;
    ctx.source = result;
    noteVersion(ctx, version);
    return result;
  },
  restore(ctx, result) {
    const o = ctx.opts;
    const expect = o.nvshmemSrc
      ? { kind: 'local' as const, dir: o.inPlace ? o.nvshmemSrc : path.join(ctx.paths.sources, 'nvshmem'), inPlace: o.inPlace }
      : { kind: 'git' as const, dir: nvshmemCloneDir(ctx.paths, pinFor(o.nvshmemRef)), inPlace: false };
    const r = verifiedSource(ctx, result, expect);
    if (!r) return false;
    ctx.source = r;
    noteVersion(ctx, r.version);
    return true;
  },
};

/**
 * The refreshed copy keeps the time stamps of what did not change and the files the last build generated in
 * it; the patch step then does the same for the files it rewrites (ctx.treeSnapshot).
 */
async function keepTimes(ctx: Ctx, snap: TreeSnapshot | undefined): Promise<void> {
  await reuseTimes(snap);
  if (snap) ctx.treeSnapshot = snap;
}

/** A tree outside the tested versions is patched when its anchors are found, with a warning in the report. */
function noteVersion(ctx: Ctx, version: string | undefined): void {
  const w = versionWarning(version);
  ctx.envFixes = [...ctx.envFixes.filter((f) => f.id !== 'nvshmem-version'), ...(w ? [w] : [])];
}

/**
 * What the patch step will write. Part of this step's stamp so that a new template or tool version, or turning
 * the device API hooks on or off (--no-device-api), starts from a fresh copy instead of finding another run's blocks in the work dir's tree.
 */
async function patchesIdentity(nvshmemDeviceApi: boolean): Promise<string> {
  return hashJson({ tool: toolVersion(), template: (await loadTemplate()).files, nvshmemDeviceApi });
}

function gitUrl(): string {
  return process.env.NVSHMEM_EFA_NVSHMEM_URL ?? NVSHMEM_GIT_URL;
}

export function requireSource(ctx: Ctx): SourceResult {
  if (!ctx.source) throw new Error('internal: NVSHMEM source not resolved');
  return ctx.source;
}
