import { existsSync } from 'node:fs';
import { chmod, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { writeFileAtomic } from '../../core/fs-atomic.ts';
import type { FileChange } from './plan.ts';
import { makeDirs } from '../../core/make-dirs.ts';
import { writeDurable } from '../../core/fs-atomic.ts';
import { dirsUpTo, removeJournal, restoreBytes, sha256, STAGED, syncDirs, writeJournal } from './journal.ts';

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

/** The top-most directory `mkdir -p dir` would create, or undefined when `dir` exists. */
function firstMissingDir(dir: string): string | undefined {
  let missing: string | undefined;
  for (let d = dir; !existsSync(d); d = path.dirname(d)) missing = d;
  return missing;
}

/**
 * Test hook, read by test/integration/patch-journal.test.ts only: NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES=N makes
 * the process SIGKILL itself after the Nth rename of a commit (0: once everything is staged, before the first
 * rename), the way `kill -9`, the OOM killer or a crash would stop it. Nothing else sets it.
 */
function killForTest(renames: number): void {
  const n = process.env.NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES;
  if (n !== undefined && n !== '' && Number(n) === renames) process.kill(process.pid, 'SIGKILL');
}

/**
 * Writes every change as one transaction, so a tree (the user's, with --in-place) is never left half patched:
 *  1. a journal (journal.ts) records each file's bytes before and hash after, and the directories to create;
 *  2. all new contents are staged next to their files (the abort signal is checked between them; any failure
 *     removes what was staged and the journal);
 *  3. the journal, the staged files and their directories are flushed to disk (fsync), then every staged file is
 *     renamed over its file; if a rename fails, the files already replaced get their previous bytes back;
 *  4. the directories are flushed again and the journal removed.
 * What a SIGKILL or a power loss interrupts after step 1, the next run finds in the journal and completes or
 * rolls back (recoverJournal); before step 1 nothing in the tree has changed.
 */
export async function writeChanges(root: string, changes: readonly FileChange[], signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  if (changes.length === 0) return;
  const items = changes.map((change) => {
    const file = path.join(root, change.file);
    return { change, file, tmp: file + STAGED, dir: path.dirname(file) };
  });
  // Created directories: the top-most missing one of each file; nested ones are inside it.
  const tops = [...new Set(items.map((i) => firstMissingDir(i.dir)).filter((d): d is string => d !== undefined))];
  const createdDirs = tops.filter((d) => !tops.some((o) => o !== d && d.startsWith(o + path.sep)));
  const before = new Map<string, { bytes: Buffer; mode: number }>();
  for (const i of items) {
    if (i.change.before === null) continue;
    before.set(i.file, { bytes: await readFile(i.file), mode: (await stat(i.file)).mode & 0o7777 });
  }
  const rel = (abs: string) => path.relative(root, abs).split(path.sep).join('/');
  await writeJournal(root, {
    files: items.map((i) => {
      const b = before.get(i.file);
      return {
        file: i.change.file,
        staged: i.change.file + STAGED,
        before: b ? { sha256: sha256(b.bytes), mode: b.mode, base64: b.bytes.toString('base64') } : null,
        after: sha256(i.change.after),
      };
    }),
    createdDirs: createdDirs.map(rel),
  });

  const staged: typeof items = [];
  const unstage = async () => {
    for (const s of staged) await rm(s.tmp, { force: true });
    for (const d of createdDirs) await rm(d, { recursive: true, force: true });
    await removeJournal(root);
  };
  try {
    for (const i of items) {
      signal?.throwIfAborted();
      await makeDirs(i.dir);
      staged.push(i);
      await writeDurable(i.tmp, i.change.after);
      const b = before.get(i.file);
      if (b) await chmod(i.tmp, b.mode);
    }
    signal?.throwIfAborted();
    await syncDirs(items.flatMap((i) => dirsUpTo(root, i.dir)));
  } catch (e) {
    await unstage();
    throw e;
  }
  // Renames only from here: milliseconds, not interrupted (an abort is honoured when the step returns).
  killForTest(0);
  const done: typeof items = [];
  try {
    for (const s of staged) {
      await rename(s.tmp, s.file);
      done.push(s);
      killForTest(done.length);
    }
  } catch (e) {
    for (const s of done.reverse()) {
      const b = before.get(s.file);
      if (!b) await rm(s.file, { force: true });
      else await restoreBytes(s.file, b.bytes, b.mode);
    }
    await syncDirs(items.map((i) => i.dir));
    await unstage();
    throw e;
  }
  await syncDirs(items.map((i) => i.dir));
  await removeJournal(root);
}

/** The file names an export of `changes` writes: one numbered `.patch` per changed file, in plan order. */
export function seriesNames(changes: readonly FileChange[]): string[] {
  return changes.map((c, i) => `${String(i + 1).padStart(4, '0')}-${c.file.replace(/[^A-Za-z0-9._-]+/g, '-')}.patch`);
}

/** One numbered `.patch` per changed file, in plan order, plus a `series` file listing them. */
export async function exportPatches(dir: string, changes: readonly FileChange[]): Promise<string[]> {
  const names = seriesNames(changes);
  for (const [i, c] of changes.entries()) await writeFileAtomic(path.join(dir, names[i]!), renderFileDiff(c));
  await writeFileAtomic(path.join(dir, 'series'), names.join('\n') + '\n');
  return names;
}
