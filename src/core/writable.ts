import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { FilesystemError } from './errors.ts';
import { nearestExisting, whoAmI } from './fs-facts.ts';

const WHAT: Record<string, string> = { EROFS: 'is on a read-only file system', EACCES: 'is not writable by this user', EPERM: 'cannot be changed here' };

/**
 * Refuses (exit 6), before anything is written, a tree that `--in-place` would write into where this user
 * cannot: `dirs` are the directories the run will create files in (the patch stages each new file beside
 * the one it replaces, and renames need the directory, not the file, to be writable). access(2) answers for
 * read-only mounts (EROFS) and permission bits (EACCES) alike.
 */
export function checkInPlaceWritable(flag: string, root: string, dirs: readonly string[], changed: string): void {
  for (const dir of [...new Set([root, ...dirs].map((d) => nearestExisting(d)))]) {
    try {
      accessSync(dir, constants.W_OK | constants.X_OK);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'EACCES';
      const shown = dir === root ? '' : ` (${path.relative(root, dir)})`;
      throw new FilesystemError(
        `${flag} ${root} cannot be patched in place: ${dir === root ? 'it' : `its directory${shown}`} ${WHAT[code] ?? `cannot be written (${code})`} [${code}]; ${changed}`,
        `--in-place patches ${flag} ${root} where it is: make it writable by this user (${whoAmI()}), or drop --in-place to patch a copy in the work dir instead`,
        dir,
        code,
      );
    }
  }
}
