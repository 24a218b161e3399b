import { createHash } from 'node:crypto';
import { lstat, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as z from 'zod';
import { PatchRefusedError, WorkDirBusyError } from '../../core/errors.ts';
import { writeDurable } from '../../core/fs-atomic.ts';
import { processStartTime } from '../../core/proc.ts';
import type { Owner } from '../../core/owner.ts';

/**
 * The journal of a commit (apply.ts): SIGKILL, a crash or a power loss between the renames of a patch cannot be
 * caught, so before the first staged file is written the commit records, at the root of the tree it patches,
 * every file it will replace (with the hash and bytes it had, and the hash it will have) and every directory it
 * will create. The next run on that tree completes the commit when every staged file is whole, or else rolls it
 * back, and removes what the commit left; `doctor` reports it. The journal sits in the tree, not in a work dir,
 * because an --in-place tree may next be patched with another work dir.
 */
export const JOURNAL = '.nvshmem-efa-journal.json';
/** Suffix of the staged copy of each file, renamed over the file when the commit goes through. */
export const STAGED = '.nvshmem-efa-new';
const JOURNAL_TMP = `${JOURNAL}.tmp`;
/** A rollback's copy of the original bytes, renamed over the file (left only by a crash during a rollback). */
const RESTORING = '.nvshmem-efa-old';

const Sha = z.string().regex(/^[0-9a-f]{64}$/);
const Entry = z.object({
  /** Relative to the tree root, forward slashes. */
  file: z.string(),
  staged: z.string(),
  /** The file as it was (null: the commit creates it). Its bytes are here so a rollback needs nothing else. */
  before: z
    .object({
      sha256: Sha,
      mode: z.number().int().nonnegative(),
      /** Owner and group it had (absent in journals of earlier versions): a rollback gives them back. */
      uid: z.number().int().nonnegative().optional(),
      gid: z.number().int().nonnegative().optional(),
      base64: z.string(),
    })
    .nullable(),
  after: Sha,
});
const JournalSchema = z.object({
  schema: z.literal('nvshmem-efa-journal/1'),
  pid: z.number().int().positive(),
  procStart: z.string().nullable(),
  host: z.string(),
  startedAt: z.string(),
  files: z.array(Entry).min(1),
  /** The top-most directories the commit creates (removed again, when empty, by a rollback). */
  createdDirs: z.array(z.string()),
});
export type Journal = z.infer<typeof JournalSchema>;
export type JournalEntry = z.infer<typeof Entry>;


export const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');


/**
 * Flushes a directory's entries (the renames and creations in it). Best effort: some filesystems refuse fsync
 * on a directory (EINVAL, EISDIR); there the rename is as durable as the filesystem makes it.
 */
export async function syncDir(dir: string): Promise<void> {
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    /* not supported here */
  }
}

export async function syncDirs(dirs: Iterable<string>): Promise<void> {
  for (const d of new Set(dirs)) await syncDir(d);
}

/** `dir` and every directory above it up to `root`: where a created directory's own entry lives. */
export function dirsUpTo(root: string, dir: string): string[] {
  const out: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    out.push(d);
    if (d === root || path.dirname(d) === d || !d.startsWith(root)) break;
  }
  return out;
}

/** Records the commit: temporary file, fsync, rename, fsync of the root. */
export async function writeJournal(root: string, j: Omit<Journal, 'schema' | 'pid' | 'procStart' | 'host' | 'startedAt'>): Promise<void> {
  const full: Journal = {
    schema: 'nvshmem-efa-journal/1',
    pid: process.pid,
    procStart: processStartTime(process.pid),
    host: os.hostname(),
    startedAt: new Date().toISOString(),
    ...j,
  };
  const tmp = path.join(root, JOURNAL_TMP);
  try {
    await writeDurable(tmp, JSON.stringify(full));
    await rename(tmp, path.join(root, JOURNAL));
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  await syncDir(root);
}

/** Removes the journal once the commit is whole (or undone): the last step of a commit. */
export async function removeJournal(root: string): Promise<void> {
  await rm(path.join(root, JOURNAL), { force: true });
  await rm(path.join(root, JOURNAL_TMP), { force: true });
  await syncDir(root);
}

function unreadable(root: string, why: string): PatchRefusedError {
  const j = path.join(root, JOURNAL);
  return new PatchRefusedError(
    `${j} is not a patch journal this version of nvshmem-efa can act on (${why}); nothing was changed`,
    `if no nvshmem-efa run is patching ${root}, check the tree (git status; files ending in ${STAGED} are staged copies of a patch), restore what is half patched, and remove ${j}`,
    [],
  );
}

/** A relative path that stays inside the root as written: no `..`, not absolute, already normal. */
function confinedRel(rel: string): boolean {
  return rel !== '' && !rel.includes('\0') && !path.posix.isAbsolute(rel) && path.posix.normalize(rel) === rel && !rel.split('/').includes('..') && rel !== '.';
}

/** No symbolic link between the root and `rel`'s parent (a planted link must not lead a rollback out of the tree). */
async function noLinkOnTheWay(root: string, rel: string): Promise<boolean> {
  const parts = rel.split('/').slice(0, -1);
  for (let i = 1; i <= parts.length; i++) {
    const st = await lstat(path.join(root, ...parts.slice(0, i))).catch(() => undefined);
    if (!st) return true; // not there (yet, or any more): nothing below it is either
    if (st.isSymbolicLink() || !st.isDirectory()) return false;
  }
  return true;
}

/** The journal of `root`, validated as untrusted input, or undefined when there is none. */
export async function readJournal(root: string): Promise<Journal | undefined> {
  let raw: string;
  try {
    raw = await readFile(path.join(root, JOURNAL), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let j: Journal;
  try {
    j = JournalSchema.parse(JSON.parse(raw));
  } catch (e) {
    throw unreadable(root, e instanceof SyntaxError ? 'not JSON' : 'not in the journal format');
  }
  for (const rel of [...j.files.flatMap((f) => [f.file, f.staged]), ...j.createdDirs]) {
    if (!confinedRel(rel) || !(await noLinkOnTheWay(root, rel))) throw unreadable(root, `it names ${JSON.stringify(rel)}, a path outside the tree or through a link`);
  }
  for (const f of j.files) if (f.staged !== f.file + STAGED) throw unreadable(root, `the staged copy of ${f.file} is not ${f.file}${STAGED}`);
  return j;
}

async function bytes(file: string): Promise<Buffer | null> {
  try {
    const st = await lstat(file);
    return st.isFile() ? await readFile(file) : null;
  } catch {
    return null;
  }
}

/** Each file of the commit as found now: replaced (`done`), as it was (`untouched`), or neither. */
export interface EntryState {
  entry: JournalEntry;
  done: boolean;
  untouched: boolean;
  /** The staged copy is there, whole. */
  staged: boolean;
}

export interface JournalState {
  journal: Journal;
  entries: EntryState[];
  /** What the next run does: complete the commit (every file replaced or staged whole), roll it back, or neither. */
  action: 'complete' | 'roll back' | 'conflict';
  /** Files that are neither as the commit found them nor as it left them (changed since): nothing is done. */
  conflicts: string[];
  replaced: number;
}

export async function journalState(root: string, journal: Journal): Promise<JournalState> {
  const entries: EntryState[] = [];
  for (const entry of journal.files) {
    const cur = await bytes(path.join(root, entry.file));
    const staged = await bytes(path.join(root, entry.staged));
    const done = cur !== null && sha256(cur) === entry.after;
    const untouched = entry.before === null ? cur === null : cur !== null && sha256(cur) === entry.before.sha256;
    entries.push({ entry, done, untouched, staged: staged !== null && sha256(staged) === entry.after });
  }
  const conflicts = entries.filter((e) => !e.done && !e.untouched).map((e) => e.entry.file);
  const action = conflicts.length ? 'conflict' : entries.every((e) => e.done || e.staged) ? 'complete' : 'roll back';
  return { journal, entries, action, conflicts, replaced: entries.filter((e) => e.done && !e.untouched).length };
}

/**
 * Puts `bytes` back as `file` (mode, owner and group included), durable before it replaces the file: a crash
 * during a rollback leaves the journal, and the next run does it again.
 */
export async function restoreBytes(file: string, bytes: Uint8Array, mode: number, owner?: Owner): Promise<void> {
  const tmp = file + RESTORING;
  await writeDurable(tmp, bytes, { mode, ...(owner ? { owner } : {}) });
  await rename(tmp, file);
}

/** Whether the run that wrote the journal may still be committing (then it is not ours to finish). */
function ownerMayBeRunning(j: Journal, journalAgeMs: number): boolean {
  if (j.host !== os.hostname()) return journalAgeMs < 10 * 60_000; // another node on a shared filesystem: no way to ask
  if (j.pid === process.pid) return false;
  try {
    process.kill(j.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const start = processStartTime(j.pid);
  return j.procStart === null || start === j.procStart;
}

export function describeJournal(root: string, s: JournalState): string {
  const j = s.journal;
  return `an interrupted nvshmem-efa patch of ${root} (pid ${j.pid}${j.host !== os.hostname() ? ` on ${j.host}` : ''}, ${j.startedAt}): ${s.replaced} of ${j.files.length} files replaced`;
}

export interface Recovery {
  action: 'completed' | 'rolled back';
  message: string;
}

/** Removes the directories a rolled-back commit created, when nothing else was put in them. */
async function removeCreatedDirs(root: string, dirs: readonly string[]): Promise<void> {
  const prune = async (abs: string): Promise<void> => {
    const st = await lstat(abs).catch(() => undefined);
    if (!st?.isDirectory()) return;
    for (const e of await readdir(abs, { withFileTypes: true })) if (e.isDirectory()) await prune(path.join(abs, e.name));
    await rmdir(abs).catch(() => undefined); // not empty: someone's files, kept
  };
  for (const d of dirs) await prune(path.join(root, d));
}

/**
 * Finishes what a killed commit left in `root`: completes it when every file is replaced or staged whole, else
 * puts back the content every replaced file had; then removes the staged copies and the journal. Undefined
 * when there is no journal. Refuses (exit 3) when a listed file changed since, and (exit 7) when the run that
 * wrote the journal is still there.
 */
export async function recoverJournal(root: string): Promise<Recovery | undefined> {
  const journal = await readJournal(root);
  if (!journal) {
    // A run killed while writing its journal had staged nothing yet.
    await rm(path.join(root, JOURNAL_TMP), { force: true });
    return undefined;
  }
  const age = Date.now() - (await stat(path.join(root, JOURNAL))).mtimeMs;
  if (ownerMayBeRunning(journal, age)) {
    throw new WorkDirBusyError(
      `nvshmem-efa run pid ${journal.pid}${journal.host !== os.hostname() ? ` on ${journal.host}` : ''} is writing its patch into ${root} (${JOURNAL}, started ${journal.startedAt})`,
      'wait for it to finish (a commit takes seconds), then rerun',
    );
  }
  const s = await journalState(root, journal);
  const what = describeJournal(root, s);
  if (s.action === 'conflict') {
    throw new PatchRefusedError(
      `${what}, and ${s.conflicts.join(', ')} changed since (neither as before the patch nor as after it); nothing was changed`,
      `restore ${s.conflicts.join(' ')} (git checkout -- ${s.conflicts.join(' ')}), remove ${path.join(root, JOURNAL)} and the ${STAGED} files beside them, and rerun`,
      s.conflicts.map((f) => `${f}: changed since the interrupted patch`),
    );
  }
  const dirs = new Set<string>([root]);
  let message: string;
  if (s.action === 'complete') {
    for (const e of s.entries) {
      if (e.done) continue;
      await rename(path.join(root, e.entry.staged), path.join(root, e.entry.file));
      dirs.add(path.dirname(path.join(root, e.entry.file)));
    }
    message = `${what}: completed it (the other ${journal.files.length - s.replaced} renamed into place) and removed its staged files`;
  } else {
    for (const e of s.entries) {
      if (!e.done || e.untouched) continue;
      const file = path.join(root, e.entry.file);
      dirs.add(path.dirname(file));
      const before = e.entry.before;
      if (before === null) await rm(file, { force: true });
      else {
        // The original bytes, durable before they replace the file: a crash here leaves the journal to redo it.
        const owner = before.uid !== undefined && before.gid !== undefined ? { uid: before.uid, gid: before.gid } : undefined;
        await restoreBytes(file, Buffer.from(before.base64, 'base64'), before.mode, owner);
      }
    }
    const missing = s.entries.filter((e) => !e.done && !e.staged).length;
    message = `${what} and ${missing} staged file(s) missing or cut short: rolled it back (the ${s.replaced} replaced file(s) have their content from before again) and removed its staged files`;
  }
  for (const e of s.entries) {
    await rm(path.join(root, e.entry.staged), { force: true });
    await rm(path.join(root, e.entry.file + RESTORING), { force: true });
  }
  if (s.action === 'roll back') await removeCreatedDirs(root, journal.createdDirs);
  await syncDirs(dirs);
  await removeJournal(root);
  return { action: s.action === 'complete' ? 'completed' : 'rolled back', message };
}
