import { existsSync } from 'node:fs';
import { readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { createTwoFilesPatch, formatPatch, type StructuredPatch } from 'diff';
import { writeFileAtomic } from '../../core/fs-atomic.ts';
import type { FileChange } from './plan.ts';
import { makeDirs } from '../../core/make-dirs.ts';
import { writeDurable } from '../../core/fs-atomic.ts';
import { dirsUpTo, removeJournal, restoreBytes, sha256, STAGED, syncDirs, writeJournal } from './journal.ts';
import { byteString, toBytes, utf8Bytes } from './bytes.ts';
import { FilesystemError, PatchRefusedError } from '../../core/errors.ts';
import { chownLike, ownerOf, type Owner } from '../../core/owner.ts';

/**
 * The patch of a file created whole, as jsdiff's structuredPatch('/dev/null', newName, '', text) makes it, without
 * its diff: every line added, in one hunk. A dry run of NVSHMEM 3.4.5 prints about 0.4 MB of new template files,
 * and running the line diff (tokenising, Myers' search, hunk assembly) on them cost about 40 ms of its CPU
 * (issue 38 item 3); jsdiff still formats the patch, so names and hunk headers are written as before.
 */
export function newFilePatch(newName: string, text: string): StructuredPatch {
  const base = { oldFileName: '/dev/null', newFileName: newName, oldHeader: undefined, newHeader: undefined };
  if (text === '') return { ...base, hunks: [] };
  const lines = text.split('\n');
  const ended = text.endsWith('\n');
  if (ended) lines.pop(); // the empty string after the last newline is no line
  const added = lines.map((l) => `+${l}`);
  if (!ended) added.push('\\ No newline at end of file');
  return { ...base, hunks: [{ oldStart: 1, oldLines: 0, newStart: 1, newLines: lines.length, lines: added }] };
}

/**
 * A `git diff`-style patch for one change: `git apply` accepts it, new files included. A byte string (bytes.ts):
 * the context and removed lines carry the file's exact bytes, so the patch applies to a file that is no UTF-8.
 */
export function renderFileDiff(c: FileChange): string {
  const isNew = c.before === null;
  const name = utf8Bytes(c.file);
  const body = isNew
    ? formatPatch(newFilePatch(`b/${name}`, c.after))
    : createTwoFilesPatch(`a/${name}`, `b/${name}`, c.before!, c.after, undefined, undefined, { context: 3 });
  // Drop diff's "Index:"/"====" preamble; keep from the --- line on.
  const hunks = body.slice(body.indexOf('--- '));
  const header = [`diff --git a/${name} b/${name}`, ...(isNew ? ['new file mode 100644'] : [])];
  return `${header.join('\n')}\n${hunks}`;
}

/** Every change's patch, one byte string (bytes.ts `display` decodes it for a terminal). */
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
 * `mkdir -p dir`, each directory it creates given `owner`: as root in a user's tree, what the patch creates
 * belongs to the user who owns the directory it is created in, not to root.
 */
async function makeOwnedDirs(dir: string, owner: Owner): Promise<void> {
  const top = firstMissingDir(dir);
  await makeDirs(dir);
  if (top === undefined) return;
  for (let d = dir; ; d = path.dirname(d)) {
    await chownLike(d, owner);
    if (d === top || path.dirname(d) === d) break;
  }
}

/** The owner of the nearest directory of `dir` that exists: who a file created there belongs to. */
async function ownerAbove(dir: string): Promise<Owner> {
  let d = dir;
  while (!existsSync(d) && path.dirname(d) !== d) d = path.dirname(d);
  return ownerOf(d);
}

/**
 * Test hook, read by test/integration/patch-journal.test.ts only: NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES=N makes
 * the process SIGKILL itself after the Nth rename of a commit (0: once everything is staged, before the first
 * rename), the way `kill -9`, the OOM killer or a crash would stop it. Nothing else sets it.
 */
// Stryker disable all: a mutant here kills the test runner itself (SIGKILL), not a test; patch-journal's tests guard it.
function killForTest(renames: number): void {
  const n = process.env.NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES;
  if (n !== undefined && n !== '' && Number(n) === renames) process.kill(process.pid, 'SIGKILL');
}
// Stryker restore all

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
  // The bytes to write, checked before anything is: a byte string that is not all bytes is a bug, not a file.
  const after = new Map(items.map((i) => [i.file, toBytes(i.change.after, i.change.file)]));
  const before = new Map<string, { bytes: Buffer; mode: number; owner: Owner }>();
  // Who each file belongs to once written: a replaced file keeps its owner, group and mode; a new one gets the
  // owner and group of the directory it is created in (its mode is the default one).
  const owners = new Map<string, Owner>();
  for (const i of items) {
    if (i.change.before === null) {
      owners.set(i.file, await ownerAbove(i.dir));
      continue;
    }
    const bytes = await readFile(i.file);
    const st = await stat(i.file);
    // The round trip, checked: the file is still, byte for byte, what the patch was planned against.
    if (byteString(bytes) !== i.change.before) {
      throw new PatchRefusedError(
        `${i.file} changed while nvshmem-efa was patching it (it is no longer the file the patch was planned against); nothing was changed`,
        'rerun once nothing else is writing to the tree',
        [],
      );
    }
    const owner = { uid: st.uid, gid: st.gid };
    before.set(i.file, { bytes, mode: st.mode & 0o7777, owner });
    owners.set(i.file, owner);
  }
  const rel = (abs: string) => path.relative(root, abs).split(path.sep).join('/');
  await writeJournal(root, {
    files: items.map((i) => {
      const b = before.get(i.file);
      return {
        file: i.change.file,
        staged: i.change.file + STAGED,
        before: b ? { sha256: sha256(b.bytes), mode: b.mode, uid: b.owner.uid, gid: b.owner.gid, base64: b.bytes.toString('base64') } : null,
        after: sha256(after.get(i.file)!),
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
      await makeOwnedDirs(i.dir, owners.get(i.file)!);
      staged.push(i);
      const b = before.get(i.file);
      const bytes = after.get(i.file)!;
      await writeDurable(i.tmp, bytes, { owner: owners.get(i.file)!, ...(b ? { mode: b.mode } : {}) });
      // Read back: what is staged is exactly the planned bytes, or nothing is renamed.
      if (sha256(await readFile(i.tmp)) !== sha256(bytes)) {
        throw new FilesystemError(`${i.tmp}, staged for ${i.change.file}, reads back different from what was written; nothing was changed`, `check the disk holding ${root} (dmesg, fsck), then rerun`, i.tmp, 'EIO');
      }
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
      else await restoreBytes(s.file, b.bytes, b.mode, b.owner);
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
  // Written as bytes: the patch of a file that is no UTF-8 carries its bytes.
  for (const [i, c] of changes.entries()) await writeFileAtomic(path.join(dir, names[i]!), toBytes(renderFileDiff(c), names[i]!));
  await writeFileAtomic(path.join(dir, 'series'), names.join('\n') + '\n');
  return names;
}
