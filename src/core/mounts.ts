import { readFileSync } from 'node:fs';
import path from 'node:path';

/*
 * Where a directory can be reached, from the mount table: a bind mount shows one folder of a file system at a
 * second place (or a third), so two paths that share no prefix may name the same files. Linux only (read from
 * /proc/self/mountinfo); elsewhere the table is empty and every directory is reachable only where it is.
 */

/** One line of /proc/self/mountinfo: which file system (major:minor), which of its folders (root), mounted where. */
export interface Mount {
  dev: string;
  root: string;
  at: string;
}

/** A folder of a file system: the file system (major:minor) and the folder's path inside it. */
export interface FsPlace {
  dev: string;
  inFs: string;
}

const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** The mount table, in mount order (a later mount hides what an earlier one at the same place showed). */
export function readMounts(text?: string): Mount[] {
  let t = text;
  if (t === undefined) {
    try {
      t = readFileSync('/proc/self/mountinfo', 'utf8');
    } catch {
      return [];
    }
  }
  const out: Mount[] = [];
  for (const line of t.split('\n')) {
    const f = line.split(' ');
    if (f.length < 5 || !f[2]!.includes(':')) continue;
    out.push({ dev: f[2]!, root: unescape(f[3]!), at: unescape(f[4]!) });
  }
  return out;
}

/** `p` is `dir` or below it (both absolute and normalised). */
export function within(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir === '/' ? '/' : dir + '/');
}

const below = (p: string, dir: string) => p !== dir && within(p, dir);
const joinIn = (base: string, rel: string) => (rel === '' ? base : path.posix.join(base, rel));

/** The file system and folder that the real path `p` shows (the topmost mount at or above it). */
export function placeOf(p: string, mounts: readonly Mount[]): FsPlace | undefined {
  let best: Mount | undefined;
  for (const m of mounts) if (within(p, m.at) && (!best || m.at.length >= best.at.length)) best = m;
  if (!best) return undefined;
  return { dev: best.dev, inFs: joinIn(best.root, path.posix.relative(best.at, p)) };
}

/** Every path at which a folder can be reached: one per mount of its file system that shows it. */
export function pathsOf(place: FsPlace, mounts: readonly Mount[]): string[] {
  const out: string[] = [];
  for (const m of mounts) if (m.dev === place.dev && within(place.inFs, m.root)) out.push(joinIn(m.at, path.posix.relative(m.root, place.inFs)));
  return [...new Set(out)];
}

/**
 * The folders whose files are reachable through the directory at real path `p`: its own, and that of every mount
 * below any path at which one of those can be reached (a bind mount inside it, or inside a second path of it).
 * Two directories share files exactly when a folder of one is, or holds, or is inside a folder of the other.
 */
export function regionOf(p: string, mounts: readonly Mount[]): FsPlace[] {
  const first = placeOf(p, mounts);
  if (!first) return [];
  const region: FsPlace[] = [first];
  const seen = new Set([`${first.dev}\0${first.inFs}`]);
  for (let i = 0; i < region.length; i++) {
    const seenAt = pathsOf(region[i]!, mounts);
    for (const m of mounts) {
      if (!seenAt.some((v) => below(m.at, v))) continue;
      const key = `${m.dev}\0${m.root}`;
      if (seen.has(key)) continue;
      seen.add(key);
      region.push({ dev: m.dev, inFs: m.root });
    }
  }
  return region;
}

/** The mount points at or below the real path `dir`: what a recursive delete of `dir` would reach into. */
export function mountsAtOrBelow(dir: string, mounts: readonly Mount[] = readMounts()): string[] {
  return [...new Set(mounts.filter((m) => within(m.at, dir)).map((m) => m.at))];
}
