import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { writeFileAtomic } from '../../core/fs-atomic.ts';
import type { FileChange } from './plan.ts';

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

/** Writes every change; each file is replaced atomically. */
export async function writeChanges(root: string, changes: readonly FileChange[]): Promise<void> {
  for (const c of changes) await writeFileAtomic(path.join(root, c.file), c.after);
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
