import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, realpathSync } from 'node:fs';
import path from 'node:path';

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

export type SmallFile = { kind: 'missing' } | { kind: 'bad'; why: string } | { kind: 'ok'; text: string; mtimeMs: number };

/**
 * The text of a small regular file, read without following a link (O_NOFOLLOW) and never more than `max` bytes:
 * a lock or marker replaced by a link to /dev/zero or a FIFO must neither hang the run nor be read as ours.
 */
export function readSmallFile(file: string, max = 1 << 20): SmallFile {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { kind: 'missing' };
    if (code === 'ELOOP') return { kind: 'bad', why: 'a symbolic link' };
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { kind: 'bad', why: st.isDirectory() ? 'a directory' : 'not a regular file' };
    if (st.size > max) return { kind: 'bad', why: `${st.size} bytes, larger than any nvshmem-efa writes` };
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    return { kind: 'ok', text: buf.subarray(0, got).toString('utf8'), mtimeMs: st.mtimeMs };
  } finally {
    closeSync(fd);
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
