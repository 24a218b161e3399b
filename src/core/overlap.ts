import { realpathSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from './errors.ts';

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

export interface NamedDir {
  /** The option that named it, e.g. --work-dir. */
  flag: string;
  dir: string;
}

/**
 * Refuses (exit 2) any two of these directories that are equal or nested, compared by real path. Copying a
 * tree into a work dir inside it copies the copy; a work dir containing the sources is deleted by `clean`.
 */
export function checkDisjoint(dirs: readonly NamedDir[]): void {
  const real = dirs.map((d) => ({ ...d, real: realPathLoose(d.dir) }));
  for (let i = 0; i < real.length; i++) {
    for (let j = i + 1; j < real.length; j++) {
      const a = real[i]!;
      const b = real[j]!;
      const r = relation(a.real, b.real);
      if (!r) continue;
      const shown = (d: typeof a) => (d.real === path.resolve(d.dir) ? d.dir : `${d.dir} (${d.real})`);
      throw new UsageError(
        `${a.flag} ${shown(a)} ${r} ${b.flag} ${shown(b)}; they must not overlap`,
        a.flag === '--work-dir' || b.flag === '--work-dir'
          ? `pass a --work-dir outside the source trees, e.g. --work-dir ${path.join(path.dirname(b.flag === '--work-dir' ? a.real : b.real), 'nvshmem-efa-work')}`
          : `pass separate directories for ${a.flag} and ${b.flag}`,
      );
    }
  }
}
