import { createHash } from 'node:crypto';
import { copyFile, readdir, readFile, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { makeDirs } from './make-dirs.ts';

/** sha256 of every regular file under `root`, by path relative to it ('/'-separated); {} when root is missing. */
export async function fileDigests(root: string, skipDirs: readonly string[] = []): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (rel: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(path.join(root, rel), { withFileTypes: true });
    } catch (e) {
      if (rel === '' && (e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (!skipDirs.includes(e.name)) await walk(r);
      } else if (e.isFile()) {
        out[r] = createHash('sha256').update(await readFile(path.join(root, r))).digest('hex');
      }
    }
  };
  await walk('');
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
  await copyFile(from, to);
  const s = await stat(from);
  await utimes(to, s.atime, s.mtime);
}
