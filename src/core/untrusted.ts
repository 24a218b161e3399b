import { closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, realpathSync, type Stats } from 'node:fs';
import path from 'node:path';
import { FilesystemError } from './errors.ts';

/**
 * Files nvshmem-efa reads back (markers, state.json, the lock, report.json) live in folders anyone with write
 * access may have edited: as root on a shared node, a path read from one of them must never reach outside its
 * folder, and a link planted there must never be followed out of it. These are the checks, in one place.
 */

/** One path component: not empty, not `.` or `..`, no separator, no NUL, at most 255 bytes. */
export function isPlainName(name: unknown): name is string {
  return typeof name === 'string' && name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name) && Buffer.byteLength(name) <= 255;
}

/** A relative path of plain names (`a/b`), `depth` components at most: nothing absolute, no `..`, no `//`. */
export function isConfinedPath(rel: unknown, depth: number): rel is string {
  if (typeof rel !== 'string') return false;
  const parts = rel.split('/');
  return parts.length <= depth && parts.every(isPlainName);
}

export type EntryKind = 'missing' | 'file' | 'dir' | 'symlink' | 'other';

/** What `dir/rel` is, looked at with lstat; a link anywhere on the way below `dir` makes it `symlink`. */
export function entryKind(dir: string, rel: string): EntryKind {
  let at = dir;
  const parts = rel.split('/');
  for (const [i, part] of parts.entries()) {
    at = path.join(at, part);
    let st;
    try {
      st = lstatSync(at);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return 'missing';
      throw e;
    }
    if (st.isSymbolicLink()) return 'symlink';
    if (i < parts.length - 1 && !st.isDirectory()) return 'missing';
    if (i === parts.length - 1) return st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
  }
  return 'dir';
}

export type SmallFile =
  | { kind: 'missing' }
  | { kind: 'bad'; why: string; what: 'link' | 'dir' | 'special' | 'too-large' }
  | { kind: 'ok'; bytes: Buffer; text: string; mtimeMs: number };

/**
 * The bytes of a small regular file, never more than `max`: opened with O_NONBLOCK (a FIFO blocks neither the
 * open nor the read) and checked with fstat on the open descriptor (no race with a rename in between). By
 * default a link is not followed (O_NOFOLLOW): a lock or marker replaced by a link to /dev/zero or to someone's
 * file must neither hang the run nor be read as ours. `follow` is for paths the user names (an option).
 * Other errors (EACCES, ENOTDIR) are thrown as they are, for the caller to say with its own words.
 */
export function readSmallFile(file: string, max = 1 << 20, o: { follow?: boolean } = {}): SmallFile {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | (o.follow ? 0 : constants.O_NOFOLLOW));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { kind: 'missing' };
    if (code === 'ELOOP' && !o.follow) return { kind: 'bad', why: 'a symbolic link', what: 'link' };
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return { kind: 'bad', why: 'a directory', what: 'dir' };
    if (!st.isFile()) return { kind: 'bad', why: `not a regular file (${specialKind(st)})`, what: 'special' };
    if (st.size > max) return { kind: 'bad', why: `${st.size} bytes, more than the ${max} such a file can be`, what: 'too-large' };
    // Read to the size fstat gave, no further: a file that grows while read stays bounded.
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    const bytes = buf.subarray(0, got);
    return { kind: 'ok', bytes, text: bytes.toString('utf8'), mtimeMs: st.mtimeMs };
  } finally {
    closeSync(fd);
  }
}

function specialKind(st: { isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'a special file';
}

/**
 * The files nvshmem-efa keeps in a folder of its own (the work dir's marker, state.json, the lock) are regular
 * files it wrote. A directory, FIFO, socket, device or symbolic link in the place of one is someone else's: it
 * is never read, taken over, replaced or deleted. Refused (exit 6: a path of the wrong kind), naming it; `doing`
 * says what was refused ("write into /w").
 */
export function refuseOddOwnFiles(dir: string, names: readonly string[], doing: string): void {
  for (const n of names) {
    const p = path.join(dir, n);
    let st: Stats;
    try {
      st = lstatSync(p);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw e;
    }
    if (st.isFile()) continue;
    const kind = st.isSymbolicLink() ? `a symbolic link (to ${readlinkSync(p)})` : st.isDirectory() ? 'a directory' : specialKind(st);
    throw new FilesystemError(
      `${p} is ${kind}, not the file nvshmem-efa keeps there; refusing to ${doing} (nothing was changed, ${n} was not touched)`,
      `move ${p} away (it is not nvshmem-efa's: keep what you need of it), then rerun`,
      p,
      st.isDirectory() ? 'EISDIR' : 'EINVAL',
    );
  }
}

/**
 * True when `p` is `root` itself or a real directory below it: inside by name, no link on the way down from
 * `root` (lstat on each component), and its real path under `root`'s real path. What a recorded path must be
 * before a run patches, builds or deletes there.
 */
export function isOwnDir(root: string, p: string): boolean {
  const rel = path.relative(path.resolve(root), path.resolve(p));
  if (rel === '') return true;
  if (rel.startsWith('..') || path.isAbsolute(rel)) return false;
  if (entryKind(root, rel.split(path.sep).join('/')) !== 'dir') return false;
  try {
    return realpathSync(p) === path.join(realpathSync(root), rel);
  } catch {
    return false;
  }
}
