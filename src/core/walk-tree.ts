import { existsSync, readdirSync, type Dirent } from 'node:fs';
import { readdir, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { PatchRefusedError } from './errors.ts';
import { relation } from './overlap.ts';

/*
 * The one directory-tree walker. Every caller that looks at a whole tree (hashing a source tree, copying it,
 * listing the files a snapshot keeps times for, digests of installed headers, finding files in NVSHMEM...)
 * walks it here and says what it leaves out with named skip rules, so the differences between callers are
 * written where they are called, not hidden in five copies of a recursive readdir.
 *
 * A walk is depth first: a directory is visited before what it holds, and its content is walked right after
 * it (unless the visit returns 'skip'), so the order of visits is the order of a recursive readdir.
 */

/** One thing found in the tree. */
export interface TreeEntry {
  name: string;
  /** Its path below the walk's root, '/'-separated (it begins with `start` when the walk has one). */
  rel: string;
  /** The directory it was read from, joined with its name. */
  abs: string;
  /** What to read or copy for it: `abs`, or where a followed link leads (links: follow). */
  real: string;
  /** What it is; a symbolic link is 'symlink' unless links are followed, then it is what the link leads to. */
  type: 'dir' | 'file' | 'symlink' | 'other';
  /** The link's text, when the entry is a followed link. */
  link?: string;
}

/** A skip rule names what a walk leaves out: such an entry is not visited, and a directory not walked. */
export type SkipRule = (e: TreeEntry) => boolean;

/**
 * An in-tree build directory: the top-level `build/` or any directory holding a CMakeCache.txt. Neither is
 * source; copying one drags gigabytes of objects along and hashing it makes every build look like an edit.
 */
export function isBuildDir(rel: string, abs: string): boolean {
  return rel === 'build' || existsSync(path.join(abs, 'CMakeCache.txt'));
}

/** Directories with one of these names, at any depth (a file of that name is kept). */
export const skipDirsNamed = (...names: string[]): SkipRule => (e) => e.type === 'dir' && names.includes(e.name);
/** Anything with one of these names: a directory, a file, a link. */
export const skipNamed = (...names: string[]): SkipRule => (e) => names.includes(e.name);
/** Directories (or, with links followed, what a link leads to) at one of these absolute paths. */
export const skipDirsAt = (paths: readonly string[]): SkipRule => (e) => e.type === 'dir' && paths.includes(e.real);
/** Anything at one of these absolute paths, as the walk reached it (before a link is followed). */
export const skipAt = (paths: readonly string[]): SkipRule => (e) => paths.includes(e.abs);
/** Directories whose name starts with a dot (.git, .github, .cache...). */
export const skipHiddenDirs: SkipRule = (e) => e.type === 'dir' && e.name.startsWith('.');
/** In-tree build directories (isBuildDir). */
export const skipBuildDirs: SkipRule = (e) => e.type === 'dir' && isBuildDir(e.rel, e.real);

/** A link the walk will not follow; `refuse` turns it into the caller's error. */
export type LinkProblem =
  /** It leads nowhere (or somewhere this user cannot look). */
  | { kind: 'dangling'; entry: TreeEntry; target: string }
  /** It leads to a directory neither inside the tree nor holding it. */
  | { kind: 'outside'; entry: TreeEntry; real: string }
  /** It leads back to a directory the walk is already in. */
  | { kind: 'loop'; entry: TreeEntry; real: string };

/**
 * How symbolic links are walked. 'entries' (the default): a link is an entry of its own, of type 'symlink',
 * and nothing behind it is read. 'follow': a link is visited as what it leads to (`real`), a directory is
 * walked there; a link that dangles, or leads to a directory outside `inside` (the tree's real path), or
 * back into a directory being walked, is refused.
 */
export type LinkPolicy = 'entries' | { follow: true; inside: string; refuse: (problem: LinkProblem) => Error };

/** What a visit tells the walk: 'skip' a directory's content, 'stop' the whole walk, or go on (nothing). */
export type Verdict = 'skip' | 'stop' | void;

export interface WalkOptions {
  /** The directory to start from, relative to the root (default: the root itself). */
  start?: string;
  /** What is left out (see the rules above), checked in this order. */
  skip?: readonly SkipRule[];
  /** Each directory's entries in name order (by UTF-16 code unit); otherwise as the file system lists them. */
  sorted?: boolean;
  /** Directories more than this many levels below the start are not walked (they are still visited). */
  maxDepth?: number;
  /**
   * A directory that cannot be read (`rel`: '' or `start` for the first): called instead of failing the walk,
   * and the directory counts as empty. It may throw to fail the walk after all. Without it, the walk fails.
   */
  onUnreadable?: (rel: string, err: unknown) => void;
  /** Checked before each entry: an abort ends the walk with the signal's reason. */
  signal?: AbortSignal;
  links?: LinkPolicy;
  /**
   * Directories the walk must never enter, by identity (device:inode, see identityOf): a walk of a tree that
   * reaches one of them (its own destination, through a bind mount a path check cannot see) throws `refuse`.
   */
  fence?: { ids: ReadonlySet<string>; refuse: (e: TreeEntry, id: string) => Error };
}

/** A directory's identity, device and inode, as a fence holds it. */
export async function identityOf(p: string): Promise<string> {
  const st = await stat(p, { bigint: true });
  return `${st.dev}:${st.ino}`;
}

/**
 * A name the file system holds as bytes that are not UTF-8 (Latin-1 `\xe9`): Node reads it with U+FFFD in their
 * place, a name no call can open, so every caller failed later with "does not exist" (issue 36, class 9). The walk
 * refuses the tree at once, naming the bytes; the fix renames them.
 */
export class NonUtf8NameError extends PatchRefusedError {}

function checkNames(dir: string, dirents: readonly Dirent[], raw: () => Buffer[]): void {
  if (!dirents.some((d) => d.name.includes('\uFFFD'))) return;
  for (const b of raw()) {
    if (Buffer.from(b.toString('utf8')).equals(b)) continue;
    const shown = [...b].map((c) => (c >= 0x20 && c < 0x7f && c !== 0x5c ? String.fromCharCode(c) : `\\x${c.toString(16).padStart(2, '0')}`)).join('');
    throw new NonUtf8NameError(
      `${path.join(dir, shown)}: a file name that is not UTF-8, which nvshmem-efa cannot copy, hash or patch`,
      `rename it to UTF-8 (convmv -f latin1 -t utf8 --notest -r ${dir}) or remove it, then rerun`,
      [],
    );
  }
}

const byName = (a: Dirent, b: Dirent) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function entryOf(d: Dirent, dir: string, rel: string): TreeEntry {
  const abs = path.join(dir, d.name);
  const type = d.isDirectory() ? 'dir' : d.isFile() ? 'file' : d.isSymbolicLink() ? 'symlink' : 'other';
  return { name: d.name, rel: rel ? `${rel}/${d.name}` : d.name, abs, real: abs, type };
}

const skipped = (e: TreeEntry, rules: readonly SkipRule[]) => rules.some((rule) => rule(e));

/** The link's entry as what it leads to; refuses (throws) a dangling link and a link to a directory outside. */
async function followLink(e: TreeEntry, policy: Exclude<LinkPolicy, 'entries'>): Promise<TreeEntry> {
  const target = await readlink(e.abs);
  let real: string;
  let type: TreeEntry['type'];
  try {
    real = await realpath(e.abs);
    const st = await stat(real);
    type = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
  } catch {
    throw policy.refuse({ kind: 'dangling', entry: e, target });
  }
  if (type === 'dir' && !relation(real, policy.inside)) throw policy.refuse({ kind: 'outside', entry: e, real });
  return { ...e, real, type, link: target };
}

/**
 * Walks the tree under `root` (from `start`), calling `visit` for every entry no skip rule leaves out;
 * a visit may be async, and the walk waits for it.
 */
export async function walkTree(root: string, visit: (e: TreeEntry) => Verdict | Promise<Verdict>, opts: WalkOptions = {}): Promise<void> {
  const rules = opts.skip ?? [];
  const follow = opts.links && opts.links !== 'entries' ? opts.links : undefined;
  /** Walks one directory; true when a visit stopped the walk. `ancestors`: real paths walked into (links followed). */
  const walkDir = async (dir: string, rel: string, depth: number, ancestors: readonly string[]): Promise<boolean> => {
    let dirents: Dirent[];
    try {
      dirents = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (!opts.onUnreadable) throw err;
      opts.onUnreadable(rel, err);
      return false;
    }
    checkNames(dir, dirents, () => readdirSync(dir, { encoding: 'buffer' }));
    if (opts.sorted) dirents.sort(byName);
    for (const d of dirents) {
      opts.signal?.throwIfAborted();
      let e = entryOf(d, dir, rel);
      if (skipped(e, rules)) continue;
      if (follow && e.type === 'symlink') {
        e = await followLink(e, follow);
        // Now that it is known what the link leads to, the rules for directories apply to it.
        if (skipped(e, rules)) continue;
      }
      if (e.type !== 'dir') {
        if ((await visit(e)) === 'stop') return true;
        continue;
      }
      if (opts.fence) {
        const id = await identityOf(e.real);
        if (opts.fence.ids.has(id)) throw opts.fence.refuse(e, id);
      }
      let within = ancestors;
      if (follow) {
        const realDir = await realpath(e.real);
        if (ancestors.includes(realDir)) throw follow.refuse({ kind: 'loop', entry: e, real: realDir });
        within = [...ancestors, realDir];
      }
      const verdict = await visit(e);
      if (verdict === 'stop') return true;
      if (verdict === 'skip' || (opts.maxDepth !== undefined && depth + 1 > opts.maxDepth)) continue;
      if (await walkDir(e.real, e.rel, depth + 1, within)) return true;
    }
    return false;
  };
  const start = opts.start ?? '';
  await walkDir(path.join(root, start), start, 0, follow ? [follow.inside] : []);
}

/** walkTree for callers that cannot wait (a step's restore); links are entries, never followed. */
export function walkTreeSync(root: string, visit: (e: TreeEntry) => Verdict, opts: Omit<WalkOptions, 'links' | 'signal'> = {}): void {
  const rules = opts.skip ?? [];
  const walkDir = (dir: string, rel: string, depth: number): boolean => {
    let dirents: Dirent[];
    try {
      dirents = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      if (!opts.onUnreadable) throw err;
      opts.onUnreadable(rel, err);
      return false;
    }
    checkNames(dir, dirents, () => readdirSync(dir, { encoding: 'buffer' }));
    if (opts.sorted) dirents.sort(byName);
    for (const d of dirents) {
      const e = entryOf(d, dir, rel);
      if (skipped(e, rules)) continue;
      const verdict = visit(e);
      if (verdict === 'stop') return true;
      if (e.type !== 'dir' || verdict === 'skip' || (opts.maxDepth !== undefined && depth + 1 > opts.maxDepth)) continue;
      if (walkDir(e.real, e.rel, depth + 1)) return true;
    }
    return false;
  };
  const start = opts.start ?? '';
  walkDir(path.join(root, start), start, 0);
}
