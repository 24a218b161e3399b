import { copyFile, mkdir, readdir, readlink, rename, rm, stat, symlink, utimes } from 'node:fs/promises';
import path from 'node:path';

/**
 * Copies a source tree, leaving out VCS folders and any path in `skip` (absolute). Unlike fs.cp, it copes
 * with the work dir living inside the tree being copied (`nvshmem-efa build --nvshmem-src .`). Files keep
 * their modification times, so that after a fresh copy the incremental build recompiles only what the
 * patch step rewrote.
 */
export async function copyTree(src: string, dst: string, skip: readonly string[]): Promise<void> {
  await mkdir(dst, { recursive: true });
  for (const e of await readdir(src, { withFileTypes: true })) {
    const from = path.join(src, e.name);
    const to = path.join(dst, e.name);
    if (e.name === '.git' || skip.includes(from)) continue;
    if (e.isDirectory()) await copyTree(from, to, skip);
    else if (e.isSymbolicLink()) await symlink(await readlink(from), to);
    else if (e.isFile()) {
      await copyFile(from, to);
      const st = await stat(from);
      await utimes(to, st.atime, st.mtime);
    }
  }
}

/** Replaces `dest` with a fresh copy of `src`, through `dest.partial`, so a killed copy never looks finished. */
export async function replaceWithCopy(src: string, dest: string, skip: readonly string[]): Promise<void> {
  const tmp = `${dest}.partial`;
  await rm(tmp, { recursive: true, force: true });
  await copyTree(src, tmp, skip);
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}
