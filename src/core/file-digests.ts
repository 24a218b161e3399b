import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { copyFile, readFile, rename, rm, stat, unlink, utimes } from 'node:fs/promises';
import path from 'node:path';
import { makeDirs } from './make-dirs.ts';
import { skipDirsNamed, walkTree } from './walk-tree.ts';

/**
 * sha256 of every regular file under `root`, by path relative to it ('/'-separated); {} when root is missing.
 * Links are not followed and not listed; directories named in `skipDirs` (at any depth) are left out.
 */
export async function fileDigests(root: string, skipDirs: readonly string[] = []): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  await walkTree(
    root,
    async (e) => {
      if (e.type === 'file') out[e.rel] = createHash('sha256').update(await readFile(e.abs)).digest('hex');
    },
    {
      skip: [skipDirsNamed(...skipDirs)],
      onUnreadable(rel, err) {
        if (rel === '' && (err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      },
    },
  );
  return out;
}

/** How `actual` differs from `expected`, one line per file, sorted; [] when they are the same set with the same bytes. */
export function digestDifferences(expected: Record<string, string>, actual: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [f, h] of Object.entries(expected)) {
    if (!(f in actual)) out.push(`${f}: not installed`);
    else if (actual[f] !== h) out.push(`${f}: changed`);
  }
  for (const f of Object.keys(actual)) if (!(f in expected)) out.push(`${f}: new`);
  return out.sort();
}

/**
 * Copies a file and gives the copy the original's times, as `cmake --install` does: a later install of the
 * same file then leaves it alone, and ninja does not see a header that is newer than the objects built on it.
 */
export async function copyKeepingTimes(from: string, to: string): Promise<void> {
  await makeDirs(path.dirname(to));
  // Through a fresh temporary sibling (O_EXCL) renamed into place: a link at `to` is replaced, never written through.
  const tmp = `${to}.nvshmem-efa-tmp-${process.pid}`;
  await unlink(tmp).catch(() => undefined);
  try {
    await copyFile(from, tmp, constants.COPYFILE_EXCL);
    const s = await stat(from);
    await utimes(tmp, s.atime, s.mtime);
    await rename(tmp, to);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}
