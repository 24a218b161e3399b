import { lstatSync, readdirSync, readlinkSync, realpathSync, unlinkSync } from 'node:fs';
import { readdir, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import { FilesystemError, UsageError } from './errors.ts';
import { writeFileAtomicSync } from './fs-atomic.ts';
import { makeDirs } from './make-dirs.ts';
import { REPORT_JSON, REPORT_MD } from './report.ts';
import { isStateFile, STATE_FILE } from './state.ts';
import { mountsAtOrBelow, readMounts } from './mounts.ts';
import { entryKind, isPlainName, readSmallFile, refuseOddOwnFiles } from './untrusted.ts';
import { LOCK_FILE, MARKER_FILE } from './work-dir-names.ts';

/**
 * A run writes only into a work dir that is new, empty, or already ours, because `clean` deletes and runs
 * overwrite: a home directory or a source tree passed as --work-dir must never be either. The marker says the
 * directory is ours and records what nvshmem-efa created there, when it created it, which is all `clean` ever
 * removes:
 * - `created`: top-level directories only nvshmem-efa writes into (logs, sources, build, stubs, vendor),
 *   removed whole. An earlier version reads this list too (and only it), so downloads/ and install/ are
 *   never in it.
 * - `shared`: downloads/ and install/, where the user may put files beside ours (the README sends --offline
 *   users to downloads/): the directories nvshmem-efa made, and file by file what it put in them (an archive
 *   it downloaded, with its inode and size so that one the user put in its place is not taken for it; an
 *   install prefix).
 * - `pending`: what did not exist yet when the running (or last, killed) run claimed the directory; whatever
 *   of it exists when the run ends was made by that run and moves to `created`/`shared`.
 * - `legacy`: top-level directories of an earlier version's work dir (its state.json, no marker) that existed
 *   when this version adopted it. That version recorded nothing of what it made in them, so `clean` removes
 *   there only the names nvshmem-efa makes, each only if it is of the kind nvshmem-efa makes (LEGACY_OURS), and
 *   keeps and names everything else.
 * The files every run rewrites (state.json, report.*, the lock) are ours by name, when they are regular files.
 */
export { MARKER_FILE };

/** Directories only nvshmem-efa writes into. */
const TOOL_DIRS = ['logs', 'sources', 'build', 'stubs', 'vendor'] as const;
/** Directories the user may add files to: ours file by file. */
const SHARED = ['downloads', 'install'] as const;
/** The prefixes the builds install under install/ (build-nvshmem, fabricPrefixes). */
const INSTALL_PREFIXES = ['nvshmem', 'libfabric', 'rdma-core', 'gdrcopy'];
/** Files every run rewrites. */
const RUN_FILES = [STATE_FILE, REPORT_JSON, REPORT_MD, LOCK_FILE];
/** Directories whose own entries are only ever nvshmem-efa's directories (never links: it makes none). */
const NO_LINKS_BELOW = ['sources', 'build', 'install', 'stubs', 'vendor'];

/** The files nvshmem-efa reads back from a work dir: one of another kind there is refused (refuseOddOwnFiles). */
const OWN_FILES = [MARKER_FILE, STATE_FILE, LOCK_FILE];

/**
 * What nvshmem-efa makes in each of its directories (step by step: logs/<step>.log, sources/<tree>[-<ref>],
 * build/<package>[-stage], stubs/libcuda.so and its sources, vendor/efa_gda), with the kind it makes: in an
 * earlier version's directory, which recorded nothing, only these are taken for ours.
 */
const LEGACY_OURS: Record<(typeof TOOL_DIRS)[number], { name: RegExp; kind: 'dir' | 'file' }[]> = {
  logs: [{ name: /^[\w.-]+\.log$/, kind: 'file' }],
  sources: [
    { name: /^(nvshmem|deepep)(-[\w.+-]+)?(\.partial|\.keep)?$/, kind: 'dir' },
    { name: /^(libfabric|rdma-core|gdrcopy|fabtests)-[\w.+-]+(\.partial)?$/, kind: 'dir' },
  ],
  build: [{ name: /^(nvshmem|nvshmem-tests|probe|deepep|libfabric|rdma-core|gdrcopy|fabtests)(-stage)?$/, kind: 'dir' }],
  stubs: [{ name: /^(libcuda\.so(\.tmp)?|libcuda_stub\.c|include_cuda_h\.c)$/, kind: 'file' }],
  vendor: [{ name: /^efa_gda$/, kind: 'dir' }],
};

/** Top-level names of the work-dir layout (what `workPaths` and the report write), besides the marker. */
export const LAYOUT_NAMES = [...TOOL_DIRS, ...SHARED, ...RUN_FILES] as const;

const isSharedChild = (p: string) => {
  const [top, name, ...rest] = p.split('/');
  return (SHARED as readonly string[]).includes(top!) && isPlainName(name) && rest.length === 0;
};
const isPendingPath = (p: string) => (TOOL_DIRS as readonly string[]).includes(p) || (SHARED as readonly string[]).includes(p) || (p.startsWith('install/') && INSTALL_PREFIXES.includes(p.slice(8)));

// Entries are checked one by one after parsing (sanitize): one that is not a path of the layout is ignored
// with a note, since `clean` only ever removes what it finds in the directory and the marker lists.
const Entry = z.object({ path: z.string(), ino: z.number().optional(), size: z.number().optional() });
const Marker = z.object({
  schema: z.literal('nvshmem-efa-workdir/1'),
  /** True when nvshmem-efa made the directory itself; only then may `clean` remove it (once empty). */
  createdDir: z.boolean(),
  created: z.array(z.string()),
  shared: z
    .object({
      dirs: z.array(z.string()),
      entries: z.array(Entry),
      /** Migrated from an earlier version's marker, which did not record its downloads. */
      unrecordedDownloads: z.boolean().optional(),
    })
    .optional(),
  pending: z.array(z.string()).optional(),
  /** An earlier version's directories, adopted without a record of what is in them (see LEGACY_OURS). */
  legacy: z.array(z.string()).optional(),
});
type Marker = z.infer<typeof Marker>;
type Shared = Omit<NonNullable<Marker['shared']>, 'dirs'> & { dirs: (typeof SHARED)[number][] };
type Current = Omit<Marker, 'shared'> & { shared: Shared };

/** Temporary files of writeFileAtomic and the lock: ours by name. */
const isOurTemp = (name: string) => /\.nvshmem-efa-tmp-\d+$/.test(name) || name.startsWith(`${LOCK_FILE}.`);

type Read = { kind: 'none' } | { kind: 'bad'; why: string } | { kind: 'ok'; marker: Marker; ignored: string[] };

function readMarker(dir: string): Read {
  const got = readSmallFile(path.join(dir, MARKER_FILE));
  if (got.kind === 'missing') return { kind: 'none' };
  if (got.kind === 'bad') return { kind: 'bad', why: got.why };
  let json: unknown;
  try {
    json = JSON.parse(got.text);
  } catch {
    return { kind: 'bad', why: 'not JSON' };
  }
  const parsed = Marker.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { kind: 'bad', why: `${issue.path.join('.') || 'schema'}: ${issue.message}` };
  }
  return sanitize(parsed.data);
}

/** Drops (and names) every entry that is not a path of the layout: `../x`, `/etc`, `.`, `downloads/a/b`. */
function sanitize(m: Marker): Read {
  const ignored: string[] = [];
  const keep = <T>(xs: T[], ok: (x: T) => boolean, show: (x: T) => string) => xs.filter((x) => ok(x) || (ignored.push(show(x)), false));
  const marker: Marker = {
    ...m,
    created: keep(m.created, isPlainName, String),
    ...(m.shared
      ? { shared: { ...m.shared, dirs: keep(m.shared.dirs, (d) => (SHARED as readonly string[]).includes(d), String), entries: keep(m.shared.entries, (e) => isSharedChild(e.path), (e) => e.path) } }
      : {}),
    ...(m.pending ? { pending: keep(m.pending, isPendingPath, String) } : {}),
    ...(m.legacy ? { legacy: keep(m.legacy, (d) => (TOOL_DIRS as readonly string[]).includes(d), String) } : {}),
  };
  return { kind: 'ok', marker, ignored };
}

const ignoredNote = (dir: string, ignored: readonly string[]) =>
  `ignored ${ignored.map((x) => JSON.stringify(x)).join(', ')} in ${path.join(dir, MARKER_FILE)}: not ${ignored.length === 1 ? 'a path' : 'paths'} of the work dir's layout`;

function badMarker(dir: string, why: string): UsageError {
  const file = path.join(dir, MARKER_FILE);
  return new UsageError(
    `${file} is not a work-dir marker nvshmem-efa wrote (${why}); refusing to write into or delete anything in ${dir}`,
    `pass a new or empty --work-dir, or delete what you need from ${dir} yourself`,
  );
}

/**
 * An earlier version's marker claimed every layout name at once, whether it made it or not: its claim stands
 * for the directories only nvshmem-efa writes into, install/ keeps only the prefixes the builds install, and no
 * archive in downloads/ is taken for one it downloaded. Its state.json alone (no marker) recorded nothing of
 * what it made: its directories are `legacy`, where only what nvshmem-efa makes is taken for ours.
 */
function upgrade(dir: string, m: Marker | undefined): Current {
  if (m?.shared) return m as Current;
  const claimed = m?.created ?? LAYOUT_NAMES;
  const dirs = SHARED.filter((n) => claimed.includes(n));
  const entries = dirs.includes('install') ? INSTALL_PREFIXES.filter((p) => entryKind(dir, `install/${p}`) === 'dir').map((p) => ({ path: `install/${p}` })) : [];
  return {
    schema: 'nvshmem-efa-workdir/1',
    createdDir: m?.createdDir ?? false,
    created: m ? TOOL_DIRS.filter((n) => claimed.includes(n)) : [],
    ...(m ? {} : { legacy: TOOL_DIRS.filter((n) => entryKind(dir, n) === 'dir') }),
    shared: { dirs, entries, ...(dirs.includes('downloads') ? { unrecordedDownloads: true } : {}) },
    ...(m?.pending ? { pending: m.pending } : {}),
  };
}

/** What a run that claimed the directory has made of `pending` since: recorded as created (final: the run ends). */
function settle(dir: string, m: Current, final: boolean): Current {
  const still: string[] = [];
  const created = [...m.created];
  const shared: Shared = { ...m.shared, dirs: [...m.shared.dirs], entries: [...m.shared.entries] };
  for (const p of m.pending ?? []) {
    if (entryKind(dir, p) !== 'dir') {
      still.push(p);
      continue;
    }
    if ((TOOL_DIRS as readonly string[]).includes(p)) {
      if (!created.includes(p)) created.push(p);
    } else if ((SHARED as readonly string[]).includes(p)) {
      if (!shared.dirs.includes(p as (typeof SHARED)[number])) shared.dirs.push(p as (typeof SHARED)[number]);
    } else if (!shared.entries.some((e) => e.path === p)) shared.entries.push({ path: p });
  }
  const { pending: _, ...rest } = m;
  return { ...rest, created, shared, ...(!final && still.length ? { pending: still } : {}) };
}

/** Written through a temporary sibling and a rename (synchronously: the lock's exit handler records too). */
function writeMarker(dir: string, m: Marker): void {
  writeFileAtomicSync(path.join(dir, MARKER_FILE), JSON.stringify(m, null, 2) + '\n');
}

/**
 * Records what the run that claimed `dir` made there (called when its lock is released, and by the next
 * claim or `clean` for a run that was killed). A directory without our marker records nothing.
 */
export function settleClaim(dir: string, o: { final: boolean }): void {
  const got = readMarker(dir);
  if (got.kind !== 'ok' || !got.marker.pending) return;
  writeMarker(dir, settle(dir, upgrade(dir, got.marker), o.final));
}

/**
 * Records an archive nvshmem-efa has just downloaded into <work-dir>/downloads as its own (with its inode and
 * size: a file the user puts in its place later is theirs). Outside a work dir of ours there is nothing to record.
 */
export function recordDownload(file: string): void {
  const downloads = path.dirname(file);
  const dir = path.dirname(downloads);
  if (path.basename(downloads) !== 'downloads') return;
  const got = readMarker(dir);
  if (got.kind !== 'ok') return;
  const m = upgrade(dir, got.marker);
  const rel = `downloads/${path.basename(file)}`;
  const st = lstatSync(file);
  const entries = [...m.shared.entries.filter((e) => e.path !== rel), { path: rel, ino: st.ino, size: st.size }];
  writeMarker(dir, { ...m, shared: { ...m.shared, entries } });
}

function notADirectory(dir: string): FilesystemError {
  return new FilesystemError(`--work-dir ${dir} exists and is not a directory`, `pass a directory path (a new one is created), or move ${dir} away`, dir, 'ENOTDIR');
}

/**
 * nvshmem-efa makes no symbolic links in its directories: one there was put by someone else, and a run would
 * write (a copy, a build, an install) through it into whatever it points to. One in place of a layout
 * directory (sources -> elsewhere: maybe a deliberate move to another disk) is refused before anything is
 * written; one in place of an entry of those directories (sources/nvshmem -> the user's tree) is where the
 * run puts its own copy, build or install: the link itself is removed, with a note, and what it pointed to
 * is not touched.
 */
function refuseLinkedFolders(dir: string): void {
  for (const n of [...TOOL_DIRS, ...SHARED]) {
    if (entryKind(dir, n) !== 'symlink') continue;
    const p = path.join(dir, n);
    throw new UsageError(
      `${p} is a symbolic link (to ${linkTarget(p)}); nvshmem-efa makes none in its work dir and would write through it`,
      `remove the link (rm ${p}; what it points to is not touched) and rerun, or pass another --work-dir (on the other disk, if that is why the link is there)`,
    );
  }
}

function dropLinks(dir: string, note: (s: string) => void): void {
  for (const n of NO_LINKS_BELOW) {
    if (entryKind(dir, n) !== 'dir') continue;
    for (const e of readdirSync(path.join(dir, n), { withFileTypes: true })) {
      if (!e.isSymbolicLink()) continue;
      const link = path.join(dir, n, e.name);
      const to = linkTarget(link);
      unlinkSync(link);
      note(`removed the symbolic link ${link} (to ${to}): nvshmem-efa makes no links in its work dir and would have written through it; ${to} is untouched`);
    }
  }
}

function linkTarget(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return '?';
  }
}

/** The layout paths that do not exist yet: whichever of them exists when the run ends, the run made. */
function absent(dir: string): string[] {
  return [...TOOL_DIRS, ...SHARED, ...INSTALL_PREFIXES.map((p) => `install/${p}`)].filter((p) => entryKind(dir, p) === 'missing');
}

async function statOrUndefined(p: string) {
  try {
    return await stat(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

const stderrNote = (s: string) => process.stderr.write(`note: ${s}\n`);

/**
 * Makes `dir` this tool's work dir, or refuses (exit 2) a non-empty directory that is not one. Called before
 * the run takes the lock, so it writes only where no run of this version can be at work (a new, empty or
 * marker-less directory); what a run records in an existing work dir it records under the lock (beginClaim).
 */
export async function claimWorkDir(dir: string, note: (s: string) => void = stderrNote): Promise<void> {
  const st = await statOrUndefined(dir);
  // A new claim notes what does not exist yet as pending at once, as beginClaim does under the lock.
  const fresh = (createdDir: boolean): Marker => ({ schema: 'nvshmem-efa-workdir/1', createdDir, created: [], shared: { dirs: [], entries: [] }, pending: absent(dir) });
  if (!st) {
    await makeDirs(dir);
    return writeMarker(dir, fresh(true));
  }
  if (!st.isDirectory()) throw notADirectory(dir);
  refuseOddOwnFiles(dir, OWN_FILES, `write into ${dir}`);
  const got = readMarker(dir);
  if (got.kind === 'bad') throw badMarker(dir, got.why);
  refuseLinkedFolders(dir);
  if (got.kind === 'ok') {
    if (got.ignored.length) note(ignoredNote(dir, got.ignored));
    return;
  }
  const entries = (await readdir(dir)).filter((n) => n !== MARKER_FILE);
  if (entries.length === 0) return writeMarker(dir, fresh(false));
  // Made by an earlier nvshmem-efa without the marker: its layout entries are ours, anything else stays the user's.
  if (isLegacyWorkDir(dir)) return writeMarker(dir, { ...upgrade(dir, undefined), pending: absent(dir) });
  const shown = entries.slice(0, 5).join(', ') + (entries.length > 5 ? `, … (${entries.length} entries)` : '');
  throw new UsageError(
    `--work-dir ${dir} is not empty and is not an nvshmem-efa work dir (it holds ${shown}); refusing to write into it`,
    `pass a new or empty directory, e.g. --work-dir ${path.join(dir, 'nvshmem-efa-work')}`,
  );
}

/**
 * The run now holding the lock of `dir` starts: what a killed run left of its pending paths is recorded as
 * that run's, links planted in place of the work dir's copies, builds and installs are removed, and what does
 * not exist yet is noted as pending, to be recorded as this run's when it ends (settleClaim). A directory
 * without our marker (acquireLock outside a run) is left as it is.
 */
export function beginClaim(dir: string, note: (s: string) => void = stderrNote): void {
  const got = readMarker(dir);
  if (got.kind !== 'ok') return;
  const marker = settle(dir, upgrade(dir, got.marker), true);
  dropLinks(dir, note);
  const pending = absent(dir);
  writeMarker(dir, { ...marker, ...(pending.length ? { pending } : {}) });
}

/** A work dir made by an nvshmem-efa without the marker: its state.json is ours. */
function isLegacyWorkDir(dir: string): boolean {
  const got = readSmallFile(path.join(dir, STATE_FILE), 64 << 20);
  if (got.kind !== 'ok') return false;
  try {
    return isStateFile(JSON.parse(got.text));
  } catch {
    return false;
  }
}

export interface CleanPlan {
  /** Entries to remove (absolute paths), all created by nvshmem-efa. */
  remove: string[];
  /** Entries left alone because nvshmem-efa did not create them. */
  keep: string[];
  /** Entries left alone for a reason worth saying (an archive replaced since it was downloaded, ...). */
  notes: { path: string; why: string }[];
  /** Whether the directory itself goes too (made by nvshmem-efa, and empty afterwards). */
  removeDir: boolean;
  /** What the marker listed that is not a path of the layout (ignored), in words; empty when none. */
  ignored: string;
}

/** What `clean` may delete in `dir`: only what this tool created; refuses a directory that is not ours. */
export async function planClean(dir: string): Promise<CleanPlan | undefined> {
  const st = await statOrUndefined(dir);
  if (!st) return undefined;
  if (!st.isDirectory()) throw notADirectory(dir);
  refuseOddOwnFiles(dir, OWN_FILES, `delete anything in ${dir}`);
  const names = await readdir(dir);
  const got = readMarker(dir);
  if (got.kind === 'bad') throw badMarker(dir, got.why);
  let m: Current;
  if (got.kind === 'ok') m = upgrade(dir, got.marker);
  else if (isLegacyWorkDir(dir)) m = upgrade(dir, undefined);
  else if (names.length === 0) return undefined;
  else {
    throw new UsageError(
      `${dir} is not an nvshmem-efa work directory (no ${MARKER_FILE} or ${STATE_FILE} of ours); refusing to delete anything in it`,
      'pass the --work-dir a build used, or delete the folder yourself',
    );
  }
  // What a killed run left of its pending paths is its own (the caller refuses while a live run holds the lock).
  m = settle(dir, m, true);
  const plan: CleanPlan = { remove: [], keep: [], notes: [], removeDir: false, ignored: got.kind === 'ok' && got.ignored.length ? ignoredNote(dir, got.ignored) : '' };
  const at = (rel: string) => path.join(dir, rel);
  for (const n of names) {
    const kind = entryKind(dir, n);
    if (n === MARKER_FILE || isOurTemp(n) || (RUN_FILES.includes(n) && kind !== 'dir')) plan.remove.push(at(n));
    else if ((TOOL_DIRS as readonly string[]).includes(n) && m.created.includes(n)) {
      if (kind === 'dir') plan.remove.push(at(n));
      else plan.notes.push({ path: at(n), why: `a ${kind === 'symlink' ? 'symbolic link' : 'file'} where nvshmem-efa made a directory` });
    } else if ((TOOL_DIRS as readonly string[]).includes(n) && m.legacy?.includes(n) && kind === 'dir') planLegacy(dir, n as (typeof TOOL_DIRS)[number], plan);
    else if ((SHARED as readonly string[]).includes(n) && kind === 'dir') planShared(dir, n as (typeof SHARED)[number], m.shared, plan);
    else plan.keep.push(at(n));
  }
  keepMounted(dir, plan);
  plan.removeDir = m.createdDir && plan.keep.length === 0 && plan.notes.length === 0;
  return plan;
}

/**
 * A recursive delete crosses mount points: what is mounted at or below an entry to remove (a bind mount of
 * someone's tree inside build/) would go with it. Such an entry is kept, and said.
 */
function keepMounted(dir: string, plan: CleanPlan): void {
  const mounts = readMounts();
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return;
  }
  plan.remove = plan.remove.filter((p) => {
    const at = mountsAtOrBelow(path.join(real, path.relative(dir, p)), mounts);
    if (!at.length) return true;
    plan.notes.push({ path: p, why: `${at.join(', ')} ${at.length === 1 ? 'is a mount point' : 'are mount points'} (a bind mount or a file system), and clean does not delete across a mount; unmount it (umount ${at[0]}), then clean again` });
    return false;
  });
}

/**
 * A directory of an earlier version that recorded nothing: the names nvshmem-efa makes there, of the kind it
 * makes them, go; everything else is kept and named. The directory goes too when nothing is kept.
 */
function planLegacy(dir: string, n: (typeof TOOL_DIRS)[number], plan: CleanPlan): void {
  const ours: string[] = [];
  let kept = 0;
  for (const c of readdirSync(path.join(dir, n))) {
    const rel = `${n}/${c}`;
    const kind = entryKind(dir, rel);
    if ((kind === 'file' && isOurTemp(c)) || LEGACY_OURS[n].some((o) => o.kind === kind && o.name.test(c))) {
      ours.push(path.join(dir, rel));
      continue;
    }
    kept++;
    plan.notes.push({ path: path.join(dir, rel), why: `an earlier nvshmem-efa made ${n}/ without recording what it put there, and it makes no ${kind === 'dir' ? 'directory' : kind === 'symlink' ? 'link' : kind === 'file' ? 'file' : 'special file'} of this name there; delete it yourself if you do not need it` });
  }
  if (kept === 0) plan.remove.push(path.join(dir, n));
  else plan.remove.push(...ours);
}

/**
 * downloads/ or install/: what nvshmem-efa recorded putting there goes, the rest stays; the folder itself goes
 * only if nvshmem-efa made it and nothing else is in it.
 */
function planShared(dir: string, n: (typeof SHARED)[number], shared: Shared, plan: CleanPlan): void {
  const ours: string[] = [];
  let kept = 0;
  const keep = (p: string, why?: string) => {
    kept++;
    if (why) plan.notes.push({ path: p, why });
    else plan.keep.push(p);
  };
  for (const c of readdirSync(path.join(dir, n))) {
    const rel = `${n}/${c}`;
    const p = path.join(dir, rel);
    const rec = shared.entries.find((e) => e.path === rel);
    const kind = entryKind(dir, rel);
    if (n === 'downloads') {
      // The temporary file of a download nvshmem-efa recorded is its own (the next download overwrites it).
      const partialOf = c.endsWith('.partial') ? shared.entries.find((e) => e.path === rel.slice(0, -'.partial'.length)) : undefined;
      if (partialOf && kind === 'file') ours.push(p);
      else if (rec && kind === 'file' && isSameFile(p, rec)) ours.push(p);
      else if (rec) keep(p, 'not the archive nvshmem-efa downloaded there (replaced or copied since)');
      else if (shared.unrecordedDownloads) keep(p, 'an earlier nvshmem-efa did not record which archives it downloaded; delete it yourself if you do not need it');
      else keep(p);
    } else if (rec && kind === 'dir') ours.push(p);
    else keep(p);
  }
  if (kept === 0 && shared.dirs.includes(n)) plan.remove.push(path.join(dir, n));
  else if (kept === 0 && ours.length === 0) plan.keep.push(path.join(dir, n));
  else plan.remove.push(...ours);
}

function isSameFile(p: string, rec: { ino?: number; size?: number }): boolean {
  const st = lstatSync(p);
  return rec.ino !== undefined && st.ino === rec.ino && st.size === rec.size;
}

export async function applyClean(dir: string, plan: CleanPlan): Promise<void> {
  // The marker goes last: an interrupted clean can be rerun and still knows what is ours. rm() removes a
  // symbolic link itself, never what it points to.
  const marker = path.join(dir, MARKER_FILE);
  for (const p of plan.remove.filter((p) => p !== marker)) await rm(p, { recursive: true, force: true });
  await rm(marker, { force: true });
  if (plan.removeDir) await rmdir(dir);
}
