import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export function hashJson(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

const SKIP_DIRS = new Set(['.git', 'node_modules', 'build', '.nvshmem-efa']);

/** Content hash of a source tree (paths and bytes), skipping VCS and build folders. ~30 ms for NVSHMEM. */
export async function hashTree(root: string, skip: readonly string[] = []): Promise<string> {
  const h = createHash('sha256');
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name) && !skip.includes(path.join(root, r))) await walk(r);
      } else if (e.isFile()) {
        h.update(`${r}\0`);
        h.update(await readFile(path.join(root, r)));
        h.update('\0');
      }
    }
  };
  await walk('');
  return h.digest('hex');
}
