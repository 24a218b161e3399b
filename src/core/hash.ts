import { createHash } from 'node:crypto';
import { readFile, readlink, stat } from 'node:fs/promises';
import { skipBuildDirs, skipDirsAt, skipDirsNamed, walkTree, type SkipRule } from './walk-tree.ts';
import { DEFAULT_WORK_DIR } from './work-dir-default.ts';

export function hashJson(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

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
 * What a source tree's hash leaves out: VCS and tool folders and any directory named build/ at any depth, the
 * directories at `skip` (absolute), and in-tree build directories. A file of one of those names is hashed.
 */
export function sourceTreeSkips(skip: readonly string[] = []): SkipRule[] {
  return [skipDirsNamed('.git', 'node_modules', 'build', DEFAULT_WORK_DIR), skipDirsAt(skip), skipBuildDirs];
}

/**
 * Content hash of a source tree (paths and bytes), skipping VCS and build folders. ~30 ms for NVSHMEM.
 * A symbolic link to a file counts as that file's content (a copy holds the content); other links as
 * their target text.
 */
export async function hashTree(root: string, { skip = [], generated = [] }: HashOptions = {}): Promise<string> {
  const h = createHash('sha256');
  await walkTree(
    root,
    async (e) => {
      if (e.type === 'dir' || generated.includes(e.rel)) return;
      if (e.type === 'file' || (e.type === 'symlink' && (await stat(e.abs).catch(() => undefined))?.isFile())) {
        h.update(`${e.rel}\0`);
        h.update(await readFile(e.abs));
        h.update('\0');
      } else if (e.type === 'symlink') {
        h.update(`${e.rel}\0->${await readlink(e.abs)}\0`);
      }
    },
    { skip: sourceTreeSkips(skip), sorted: true },
  );
  return h.digest('hex');
}
