import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * `mkdir -p` that reports the real reason it failed. Node's recursive mkdir turns a read-only file system
 * (EROFS) into ENOENT ("no such file or directory"), which sends the user looking for a missing path; one
 * level at a time, each error is the kernel's own.
 */
export async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      if ((await stat(d)).isDirectory()) break;
      // A file in the way: mkdir below reports it (EEXIST or ENOTDIR) with its path.
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      missing.push(d);
      if (path.dirname(d) === d) break;
    }
  }
  for (const d of missing.reverse()) {
    try {
      await mkdir(d);
    } catch (e) {
      // Made meanwhile by someone else (a concurrent run): fine if it is a directory.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !(await stat(d)).isDirectory()) throw e;
    }
  }
  if (missing.length === 0 && !(await stat(dir)).isDirectory()) await mkdir(dir);
}
