import { readFileSync } from 'node:fs';

/** What /proc says of a process: enough to tell it from a later process given the same pid. */

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where /proc is not there. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "(comm)": state is field 3, so starttime (field 22) is index 22 - 3.
    if (fields[0] === 'Z') return null;
    return fields[22 - 3] ?? null;
  } catch {
    return null;
  }
}

/** The argv of `pid` from /proc/<pid>/cmdline; null where it cannot be read. */
export function processCmdline(pid: number): string[] | null {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return raw === '' ? null : raw.replace(/\0$/, '').split('\0');
  } catch {
    return null;
  }
}
