import { accessSync, constants, existsSync, readFileSync, realpathSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/*
 * Facts about the file systems a fault happened on, for messages that must name the right disk and the right
 * permission. Everything here is best effort and never throws: a message is being built from a failure.
 */

/** `p` if it exists, else its nearest existing ancestor (where `mkdir -p` would start). */
export function nearestExisting(p: string): string {
  let cur = path.resolve(p);
  while (!existsSync(cur)) {
    const up = path.dirname(cur);
    if (up === cur) break;
    cur = up;
  }
  return cur;
}

/** Mount points from /proc/self/mountinfo (field 5, octal escapes undone), longest first. */
function mountPoints(): string[] {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4])
      .filter((m): m is string => !!m)
      .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
      .sort((a, b) => b.length - a.length);
  } catch {
    return [];
  }
}

/** Where the file system holding `p` (or its nearest existing ancestor) is mounted; undefined without /proc. */
export function mountPointOf(p: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(nearestExisting(p));
  } catch {
    return undefined;
  }
  return mountPoints().find((m) => m === '/' || real === m || real.startsWith(m + path.sep));
}

/** Bytes and inodes left to this user on the file system holding `p`. */
export function spaceLeft(p: string): { bytes: number; inodes: number } | undefined {
  try {
    const s = statfsSync(nearestExisting(p));
    return { bytes: s.bavail * s.bsize, inodes: s.ffree };
  } catch {
    return undefined;
  }
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

/** Whether this process may read (or write) `p`, as the kernel would decide it now (real uid, read-only mounts). */
export function mayAccess(p: string, mode: 'read' | 'write'): boolean {
  try {
    accessSync(p, mode === 'read' ? constants.R_OK : constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The user this process runs as, for "readable by this user (…)". */
export function whoAmI(): string {
  try {
    return os.userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}
