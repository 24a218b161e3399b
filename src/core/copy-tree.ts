import { createHash } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import { chmod, copyFile, readFile, realpath, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from './errors.ts';
import { makeDirs } from './make-dirs.ts';
import { entryKind } from './untrusted.ts';
import { refuseMountsInside } from './overlap.ts';
import { identityOf, skipAt, skipBuildDirs, skipDirsAt, skipDirsNamed, skipNamed, walkTree, type LinkProblem } from './walk-tree.ts';

/**
 * Copies a source tree, leaving out VCS folders (and a `.git` file), in-tree build directories and any path in
 * `skip` (absolute). Files keep their bytes, permission bits and modification times (so that after a fresh copy
 * the incremental build recompiles only what the patch step rewrote); the copy belongs to whoever runs the tool.
 *
 * Symbolic links are copied as what they point to, never as links: the patch step and NVSHMEM's own build
 * write into the copy, and a link would carry those writes into the user's tree (or anywhere else). A link
 * to a directory outside the tree, or a dangling one, is refused rather than followed.
 */
export async function copyTree(src: string, dst: string, skip: readonly string[], signal?: AbortSignal): Promise<void> {
  const inside = await realpath(src);
  await makeDirs(dst);
  // Whatever the overlap check concluded, a copy never walks into its own destination or the work dir: a
  // directory of the source with their device and inode (a bind mount of either inside the source) is refused.
  const fenced = new Map<string, string>();
  for (const d of [dst, ...skip]) if (existsSync(d)) fenced.set(await identityOf(d), d);
  const src0 = await identityOf(src);
  if (fenced.has(src0)) throw copyIntoItself(src, src, fenced.get(src0)!);
  await walkTree(
    src,
    async (e) => {
      const to = path.join(dst, e.rel);
      if (e.type === 'dir') {
        await makeDirs(to);
        // A private directory stays private in the copy; its owner (the runner) can always write in it (the patch, the build).
        await chmod(to, ((await stat(e.real)).mode & 0o777) | 0o700);
      } else if (e.type === 'file') {
        // COPYFILE_EXCL: created fresh (O_EXCL), never written through a link put into the copy meanwhile.
        await copyFile(e.real, to, constants.COPYFILE_EXCL);
        const st = await stat(e.real);
        // The permission bits, never set-user-ID or set-group-ID: run as root, the copy is root's.
        await chmod(to, st.mode & 0o777);
        await utimes(to, st.atime, st.mtime);
      }
      // Sockets, FIFOs and devices are not source; a link to one (/dev/zero) would never finish copying.
    },
    {
      // Not quite the source hash's rules (hash.ts sourceTreeSkips): node_modules, .nvshmem-efa and a build/
      // below the top without a CMakeCache.txt are copied though not hashed, and a .git file is not copied.
      skip: [skipNamed('.git'), skipAt(skip), skipBuildDirs, skipDirsAt(skip)],
      signal,
      links: { follow: true, inside, refuse: (p) => copyRefusal(src, p) },
      fence: { ids: new Set(fenced.keys()), refuse: (e, id) => copyIntoItself(src, path.join(src, e.rel), fenced.get(id)!) },
    },
  );
}

/** A copy that would walk into where it writes (or the work dir): nothing more is copied. */
function copyIntoItself(src: string, at: string, into: string): UsageError {
  return new UsageError(
    `${at} is the same directory as ${into} (a bind mount or a link), which the copy of ${src} writes into; copying would copy the copy`,
    `unmount it (umount ${at}) or pass a --work-dir that cannot be reached from inside ${src}, then rerun`,
  );
}

/** Why a tree with this link is not copied, and what to do about it. */
function copyRefusal(src: string, p: LinkProblem): UsageError {
  const at = path.join(src, p.entry.rel);
  switch (p.kind) {
    case 'dangling':
      return new UsageError(`${at} is a dangling symbolic link (to ${p.target}); refusing to copy a tree with it`, `remove or fix the link, then rerun`);
    case 'outside':
      return new UsageError(
        `${at} links to ${p.real}, outside the tree; copying would pull in whatever it holds`,
        'replace the link with the files it should contain, or remove it, then rerun',
      );
    case 'loop':
      return new UsageError(`${at} is a symbolic link loop (back to ${p.real})`, 'remove the link, then rerun');
  }
}

/** Replaces `dest` with a fresh copy of `src`, through `dest.partial`, so a killed copy never looks finished. */
export async function replaceWithCopy(src: string, dest: string, skip: readonly string[], signal?: AbortSignal): Promise<void> {
  const tmp = `${dest}.partial`;
  refuseMountsInside([dest, tmp], 'this step deletes and copies anew');
  await rm(tmp, { recursive: true, force: true });
  try {
    await copyTree(src, tmp, skip, signal);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

/**
 * What a work-dir copy of a tree looked like before it is refreshed (a new copy, or a clone reset): the hash
 * and times of each file, and the files its build generated into it (`keep`, moved aside). `reuseTimes` then
 * gives every file whose content did not change its old time stamps back and returns the generated files, so
 * the incremental build recompiles only what really changed instead of everything a fresh time stamp touches.
 */
export interface TreeSnapshot {
  dir: string;
  files: Map<string, { sha: string; atime: Date; mtime: Date }>;
  /** Where the generated files wait while the tree is refreshed. */
  stash: string;
  kept: string[];
}

async function sha256Of(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

/** The files a snapshot keeps times for: regular files, not in .git or an in-tree build directory (links are not files). */
async function listFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  await walkTree(root, (e) => {
    if (e.type === 'file') out.push(e.rel);
  }, { skip: [skipDirsNamed('.git'), skipBuildDirs] });
  return out;
}

export async function snapshotTree(dir: string, keep: readonly string[]): Promise<TreeSnapshot | undefined> {
  if (!existsSync(dir)) return undefined;
  const files = new Map<string, { sha: string; atime: Date; mtime: Date }>();
  for (const r of await listFiles(dir)) {
    const st = await stat(path.join(dir, r));
    files.set(r, { sha: await sha256Of(path.join(dir, r)), atime: st.atime, mtime: st.mtime });
  }
  const stash = `${dir}.keep`;
  await rm(stash, { recursive: true, force: true });
  const kept: string[] = [];
  for (const k of keep) {
    // Only what is there through no link: a link planted in the copy must not move a file out of the tree it points to.
    const kind = entryKind(dir, k);
    if (kind === 'missing' || kind === 'symlink') continue;
    await makeDirs(path.dirname(path.join(stash, k)));
    await rename(path.join(dir, k), path.join(stash, k));
    kept.push(k);
  }
  return { dir, files, stash, kept };
}

/**
 * After a refresh (or a patch that rewrote `only` these files): old time stamps back on unchanged content, and
 * the generated files back where the refreshed tree lacks them. Returns how many files kept their times.
 */
export async function reuseTimes(snap: TreeSnapshot | undefined, only?: readonly string[]): Promise<number> {
  if (!snap) return 0;
  if (!only) {
    for (const k of snap.kept) {
      const to = path.join(snap.dir, k);
      if (!existsSync(to) && existsSync(path.join(snap.stash, k))) {
        await makeDirs(path.dirname(to));
        await rename(path.join(snap.stash, k), to);
      }
    }
    await rm(snap.stash, { recursive: true, force: true });
  }
  let reused = 0;
  for (const r of only ?? (await listFiles(snap.dir))) {
    const old = snap.files.get(r);
    const f = path.join(snap.dir, r);
    if (!old || !existsSync(f)) continue;
    if ((await sha256Of(f)) !== old.sha) continue;
    await utimes(f, old.atime, old.mtime);
    reused++;
  }
  return reused;
}
