import { createHash } from 'node:crypto';
import { readdir, readFile, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import { isBuildDir } from './copy-tree.ts';

export function hashJson(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

const SKIP_DIRS = new Set(['.git', 'node_modules', 'build', '.nvshmem-efa']);

export interface HashOptions {
  /** Absolute paths left out (a work dir inside the tree). */
  skip?: readonly string[];
  /**
   * Paths relative to the root that the build writes into the source tree (NVSHMEM's git_commit.txt and
   * version.txt): not inputs, so a build does not make its own tree look edited.
   */
  generated?: readonly string[];
}

/**
 * Content hash of a source tree (paths and bytes), skipping VCS and build folders. ~30 ms for NVSHMEM.
 * A symbolic link to a file counts as that file's content (a copy holds the content); other links as
 * their target text.
 */
export async function hashTree(root: string, { skip = [], generated = [] }: HashOptions = {}): Promise<string> {
  const h = createHash('sha256');
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      const abs = path.join(root, r);
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name) && !skip.includes(abs) && !isBuildDir(r, abs)) await walk(r);
      } else if (generated.includes(r)) {
        continue;
      } else if (e.isFile() || (e.isSymbolicLink() && (await stat(abs).catch(() => undefined))?.isFile())) {
        h.update(`${r}\0`);
        h.update(await readFile(abs));
        h.update('\0');
      } else if (e.isSymbolicLink()) {
        h.update(`${r}\0->${await readlink(abs)}\0`);
      }
    }
  };
  await walk('');
  return h.digest('hex');
}
