import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from './errors.ts';
import { mountsAtOrBelow, pathsOf, readMounts, regionOf, within, type FsPlace, type Mount } from './mounts.ts';

/**
 * The real path of `p` (symlinks resolved), or, for a path that does not exist yet, the real path of its
 * nearest existing ancestor with the rest appended: `--work-dir link/new` inside a source tree reached
 * through a symlink must still be recognised as inside it.
 */
export function realPathLoose(p: string): string {
  const rest: string[] = [];
  let cur = path.resolve(p);
  for (;;) {
    try {
      return path.join(realpathSync(cur), ...rest.reverse());
    } catch {
      const up = path.dirname(cur);
      if (up === cur) return path.resolve(p);
      rest.push(path.basename(cur));
      cur = up;
    }
  }
}

/** How `a` stands to `b`, as the verb of "a … b" in a message. */
export type Relation = 'is the same directory as' | 'is inside' | 'contains';

export function relation(a: string, b: string): Relation | undefined {
  if (a === b) return 'is the same directory as';
  const inside = (x: string, y: string) => x.startsWith(y.endsWith(path.sep) ? y : y + path.sep);
  if (inside(a, b)) return 'is inside';
  if (inside(b, a)) return 'contains';
  return undefined;
}

/** How two directories overlap, and where that can be seen when their paths do not say it. */
export interface Overlap {
  relation: Relation;
  /** Why, when the paths alone do not show it: a second path of one of them, or their identity. */
  via?: string;
}

/** The existing directories among the real path `p` and its ancestors, `p` first, with device and inode. */
function identities(p: string): { at: string; id: string }[] {
  const out: { at: string; id: string }[] = [];
  for (let cur = p; ; cur = path.dirname(cur)) {
    try {
      const st = statSync(cur, { bigint: true });
      out.push({ at: cur, id: `${st.dev}:${st.ino}` });
    } catch {
      /* not there (yet): only what exists has an identity */
    }
    if (path.dirname(cur) === cur) return out;
  }
}

/**
 * By device and inode: `a` is `b`, or one is found among the other's ancestors (a bind mount or a linked
 * parent makes two paths of one directory). A path that does not exist yet is judged by its nearest existing
 * ancestor: it can be inside something, never contain anything.
 */
function byInode(a: string, b: string): Overlap | undefined {
  const ia = identities(a);
  const ib = identities(b);
  const aIs = ia[0]?.at === a ? ia[0].id : undefined;
  const bIs = ib[0]?.at === b ? ib[0].id : undefined;
  const via = (x: { at: string }, y: string) => `by device and inode, ${x.at} is ${y}`;
  if (aIs && aIs === bIs) return { relation: 'is the same directory as', via: via(ia[0]!, b) };
  const inA = bIs ? ia.find((x) => x.id === bIs) : undefined;
  if (inA) return { relation: 'is inside', via: via(inA, b) };
  const inB = aIs ? ib.find((x) => x.id === aIs) : undefined;
  if (inB) return { relation: 'contains', via: via(inB, a) };
  return undefined;
}

/**
 * By the mount table: the folders each directory shows (its own, and those mounted anywhere below any path of
 * it) are compared as folders of their file systems, so a work dir bind-mounted inside a source tree, or a
 * source mounted inside the work dir, is seen whichever of its paths was named.
 */
function byMounts(a: string, b: string, mounts: readonly Mount[]): Overlap | undefined {
  const ra = regionOf(a, mounts);
  const rb = regionOf(b, mounts);
  if (!ra.length || !rb.length) return undefined;
  const same = (x: FsPlace, y: FsPlace) => x.dev === y.dev && x.inFs === y.inFs;
  const holds = (x: FsPlace, y: FsPlace) => x.dev === y.dev && within(y.inFs, x.inFs);
  // Where the shared folder is seen under the path named for it, and where else (the mount that joins them).
  const show = (f: FsPlace, named: string) => {
    const paths = pathsOf(f, mounts);
    const here = paths.find((p) => within(p, named)) ?? named;
    const there = paths.find((p) => !within(p, named) && !within(named, p));
    return there ? `through a mount, ${here} is also at ${there}` : 'through a mount';
  };
  if (same(ra[0]!, rb[0]!)) return { relation: 'is the same directory as', via: show(rb[0]!, b) };
  // `a` itself reachable inside `b` (at `b`'s own folder or one mounted below it), or the reverse.
  if (rb.some((y) => holds(y, ra[0]!))) return { relation: 'is inside', via: show(ra[0]!, a) };
  if (ra.some((x) => holds(x, rb[0]!))) return { relation: 'contains', via: show(rb[0]!, b) };
  // Only folders mounted below each share files: part of one is inside the other.
  for (const x of ra) for (const y of rb) if (holds(x, y)) return { relation: 'contains', via: show(y, b) };
  for (const x of ra) for (const y of rb) if (holds(y, x)) return { relation: 'is inside', via: show(x, a) };
  return undefined;
}

/** How `a` stands to `b` (both real paths, see realPathLoose): by path, by device and inode, by the mount table. */
export function overlapOf(a: string, b: string, mounts: readonly Mount[] = readMounts()): Overlap | undefined {
  const r = relation(a, b);
  if (r) return { relation: r };
  return byInode(a, b) ?? byMounts(a, b, mounts);
}

/**
 * A recursive delete crosses mount points: before a step deletes one of its own directories to put a new one
 * in its place (a copy, an install prefix), what is mounted at or below it (someone's tree, bind-mounted there)
 * refuses the step (exit 2) instead of being deleted with it.
 */
export function refuseMountsInside(dirs: readonly string[], doing: string): void {
  const mounts = readMounts();
  for (const d of dirs) {
    const at = mountsAtOrBelow(realPathLoose(d), mounts);
    if (!at.length) continue;
    throw new UsageError(`${at[0]} is a mount point at or inside ${d}, which ${doing}; that would delete what the mount shows`, `unmount it (umount ${at[0]}), then rerun`);
  }
}

export interface NamedDir {
  /** The option that named it, e.g. --work-dir. */
  flag: string;
  dir: string;
}

/**
 * Refuses (exit 2) any two of these directories that are equal or nested: compared by real path, then by
 * identity (device and inode of each and its ancestors, and the mount table), since a bind mount or a linked
 * parent gives one directory two paths. Copying a tree into a work dir inside it copies the copy; a work dir
 * containing the sources is deleted by `clean`; an export inside a source writes into it.
 */
export function checkDisjoint(dirs: readonly NamedDir[]): void {
  const mounts = readMounts();
  const real = dirs.map((d) => ({ ...d, real: realPathLoose(d.dir) }));
  for (let i = 0; i < real.length; i++) {
    for (let j = i + 1; j < real.length; j++) {
      const a = real[i]!;
      const b = real[j]!;
      const o = overlapOf(a.real, b.real, mounts);
      if (!o) continue;
      const shown = (d: typeof a) => (d.real === path.resolve(d.dir) ? d.dir : `${d.dir} (${d.real})`);
      throw new UsageError(
        `${a.flag} ${shown(a)} ${o.relation} ${b.flag} ${shown(b)}${o.via ? ` (${o.via})` : ''}; they must not overlap`,
        a.flag === '--work-dir' || b.flag === '--work-dir'
          ? `pass a --work-dir outside the source trees (and not mounted inside one), e.g. --work-dir ${path.join(path.dirname(b.flag === '--work-dir' ? a.real : b.real), 'nvshmem-efa-work')}`
          : `pass separate directories for ${a.flag} and ${b.flag}`,
      );
    }
  }
}
