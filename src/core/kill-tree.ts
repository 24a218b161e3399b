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

/** Stops and SIGKILLs a tree at once, without waiting (for process 'exit' handlers, which cannot wait). */
export function killTreeNow(root: number): void {
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
  for (const p of all) send(p, 'SIGKILL');
}

/**
 * The commands this process is running. They run in process groups of their own (so that a Ctrl-C to our
 * group does not kill a parent before its children are found), which also means nothing stops them when
 * we die: the registry lets an exit handler stop them, and the work-dir lock records them so that a later
 * run taking over the lock of a killed run can stop what that run left behind.
 */
const live = new Set<number>();
let observer: ((pids: readonly number[]) => void) | undefined;

export function observeChildren(fn: ((pids: readonly number[]) => void) | undefined): void {
  observer = fn;
}

export function childStarted(pid: number): void {
  if (live.size === 0) process.on('exit', stopChildrenOnExit);
  live.add(pid);
  observer?.([...live]);
}

export function childEnded(pid: number): void {
  live.delete(pid);
  if (live.size === 0) process.off('exit', stopChildrenOnExit);
  observer?.([...live]);
}

function stopChildrenOnExit(): void {
  for (const pid of live) killTreeNow(pid);
}

/** Registers `child` while it runs: a quick query too is stopped with us, not left behind by a signal to our pid. */
export async function tracked<T>(child: PromiseLike<T> & { pid?: number }): Promise<T> {
  const pid = child.pid;
  if (pid !== undefined) childStarted(pid);
  try {
    return await child;
  } finally {
    if (pid !== undefined) childEnded(pid);
  }
}

/** Kills every command this process is running, at once (signals.ts, before it exits). */
export function stopChildrenNow(): void {
  stopChildrenOnExit();
}
