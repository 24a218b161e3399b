import { readdirSync, readFileSync } from 'node:fs';

/**
 * Stopping a build means stopping every process under it. Signalling the direct child is not enough:
 * `cmake --build` does not pass SIGTERM on to ninja, and ninja starts each compiler in a process group of
 * its own, so neither the child's pid nor our process group reaches them, and the output pipe they hold
 * keeps the run waiting for the whole build. The tree is found through /proc (parent pids).
 */

interface Proc {
  ppid: number;
  state: string;
}

function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: f[0]!, ppid: Number(f[1]) };
  } catch {
    return undefined;
  }
}

function children(): Map<number, number[]> {
  const byParent = new Map<number, number[]>();
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return byParent;
  }
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    const p = readProc(Number(n));
    if (!p) continue;
    byParent.set(p.ppid, [...(byParent.get(p.ppid) ?? []), Number(n)]);
  }
  return byParent;
}

/** Every process below `root` (not `root` itself), parents before children. */
export function descendants(root: number): number[] {
  const byParent = children();
  const out: number[] = [];
  const queue = [root];
  while (queue.length) {
    for (const c of byParent.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** Alive and not a zombie (a zombie has exited; its parent, maybe init, has not reaped it yet). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const p = readProc(pid);
  return p ? p.state !== 'Z' && p.state !== 'X' : true;
}

const send = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone already */
  }
};

/**
 * Stops `root` and everything below it: the tree is frozen first (SIGSTOP, top down, until no new process
 * appears) so nothing forks or is re-parented away while it is collected, then each process gets SIGTERM
 * (and SIGCONT to act on it); whatever still runs after `graceMs` gets SIGKILL. Resolves once all are gone
 * or killed.
 */
export async function killTree(root: number, graceMs = 2000): Promise<void> {
  const all = new Set<number>([root]);
  send(root, 'SIGSTOP');
  for (let round = 0; round < 20; round++) {
    const found = descendants(root).filter((p) => !all.has(p));
    if (found.length === 0) break;
    for (const p of found) {
      all.add(p);
      send(p, 'SIGSTOP');
    }
  }
  for (const p of all) {
    send(p, 'SIGTERM');
    send(p, 'SIGCONT');
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && [...all].some(isRunning)) await new Promise((r) => setTimeout(r, 50));
  for (const p of all) if (isRunning(p)) send(p, 'SIGKILL');
}
