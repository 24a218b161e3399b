import { existsSync } from 'node:fs';
import { chmod, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { writeFileAtomic } from '../../core/fs-atomic.ts';
import type { FileChange } from './plan.ts';
import { makeDirs } from '../../core/make-dirs.ts';

/** A `git diff`-style patch for one change: `git apply` accepts it, new files included. */
export function renderFileDiff(c: FileChange): string {
  const isNew = c.before === null;
  const body = createTwoFilesPatch(
    isNew ? '/dev/null' : `a/${c.file}`,
    `b/${c.file}`,
    c.before ?? '',
    c.after,
    undefined,
    undefined,
    { context: 3 },
  );
  // Drop diff's "Index:"/"====" preamble; keep from the --- line on.
  const hunks = body.slice(body.indexOf('--- '));
  const header = [`diff --git a/${c.file} b/${c.file}`, ...(isNew ? ['new file mode 100644'] : [])];
  return `${header.join('\n')}\n${hunks}`;
}

export function renderDiff(changes: readonly FileChange[]): string {
  return changes.map(renderFileDiff).join('');
}

const STAGED = '.nvshmem-efa-new';

/** The top-most directory `mkdir -p dir` would create, or undefined when `dir` exists. */
function firstMissingDir(dir: string): string | undefined {
  let missing: string | undefined;
  for (let d = dir; !existsSync(d); d = path.dirname(d)) missing = d;
  return missing;
}

/**
 * Writes every change as one transaction, so a tree (the user's, with --in-place) is never left half
 * patched: all new contents are first staged next to their files (the abort signal is checked between
 * them; any failure removes what was staged), then renamed into place. If a rename fails, the files
 * already replaced get their previous content back and the files and directories created are removed.
 */
export async function writeChanges(root: string, changes: readonly FileChange[], signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  const createdDirs: string[] = [];
  const staged: { change: FileChange; file: string; tmp: string }[] = [];
  const unstage = async () => {
    for (const s of staged) await rm(s.tmp, { force: true });
    for (const d of createdDirs.reverse()) await rm(d, { recursive: true, force: true });
  };
  try {
    for (const change of changes) {
      signal?.throwIfAborted();
      const file = path.join(root, change.file);
      const made = firstMissingDir(path.dirname(file));
      if (made) {
        await makeDirs(path.dirname(file));
        createdDirs.push(made);
      }
      const tmp = file + STAGED;
      staged.push({ change, file, tmp });
      await writeFile(tmp, change.after);
      if (change.before !== null) await chmod(tmp, (await stat(file)).mode);
    }
    signal?.throwIfAborted();
  } catch (e) {
    await unstage();
    throw e;
  }
  // Renames only from here: milliseconds, not interrupted (an abort is honoured when the step returns).
  const done: (typeof staged)[number][] = [];
  try {
    for (const s of staged) {
      await rename(s.tmp, s.file);
      done.push(s);
    }
  } catch (e) {
    for (const s of done.reverse()) {
      if (s.change.before === null) await rm(s.file, { force: true });
      else await writeFileAtomic(s.file, s.change.before);
    }
    await unstage();
    throw e;
  }
}

/** One numbered `.patch` per changed file, in plan order, plus a `series` file listing them. */
export async function exportPatches(dir: string, changes: readonly FileChange[]): Promise<string[]> {
  const names: string[] = [];
  for (const [i, c] of changes.entries()) {
    const name = `${String(i + 1).padStart(4, '0')}-${c.file.replace(/[^A-Za-z0-9._-]+/g, '-')}.patch`;
    await writeFileAtomic(path.join(dir, name), renderFileDiff(c));
    names.push(name);
  }
  await writeFileAtomic(path.join(dir, 'series'), names.join('\n') + '\n');
  return names;
}
