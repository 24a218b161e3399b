import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, ENV, IO_DEFS, LOCK } from '../helpers/cli.ts';
import { hungPids, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { digest, type Case, type Plan, type Run, type Sandbox } from './runner.ts';
import { LOCK_FILE } from '../../src/core/work-dir-names.ts';

/**
 * Issue 36, classes 4 and 5: no process is killed that this tool did not start (a lock anyone who can write the work
 * dir can forge names pids, start times and command lines, all readable in /proc), and every terminating signal, at
 * any moment of any command, stops the children, releases the lock and exits 130 with a line saying how to resume
 * (docs/reliability.md, the signal table).
 */

const D = ['--efa-io-defs', IO_DEFS];
const patch = (src: string, work: string, ...more: string[]) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline', ...D, ...more];
const LOCK_NAME = '.nvshmem-efa.lock';
const NOBODY = 65534;

function cliSync(args: string[]): void {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
  if (r.status !== 0) throw new Error(`setup: nvshmem-efa ${args[0]} exited ${r.status}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`);
}

/** Alive and not a zombie. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!);
  } catch {
    return false;
  }
}

const procStart = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
};
const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0$/, '').split('\0');

/** Waits until `pid` runs `argv0` (a spawned process has not always exec'd yet when spawn returns). */
function execd(pid: number, argv0: string): number {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      if (cmdline(pid)[0] === argv0) return pid;
    } catch {
      /* not yet */
    }
    execFileSync('sleep', ['0.05']);
  }
  throw new Error(`pid ${pid} never ran ${argv0}`);
}

/** The live children of `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number).filter((n) => {
    try {
      const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] === String(pid) && running(n);
    } catch {
      return false;
    }
  });
}

/** A pid that names no process (one that has exited and been reaped). */
const deadPid = () => spawnSync('true').pid!;

/** A lock as a forger writes it: a holder that is gone, and `children` copied from /proc (pid, start time, argv). */
function forgedLock(children: number[], more: Record<string, unknown> = {}): string {
  return JSON.stringify({
    pid: deadPid(), host: os.hostname(), procStart: '1', command: 'nvshmem-efa build', startedAt: new Date().toISOString(),
    children: children.map((pid) => ({ pid, procStart: procStart(pid), cmdline: cmdline(pid) })), ...more,
  }) + '\n';
}

/** Each of `pids` still runs, or what was killed. */
function survived(pids: number[], what: string): string | undefined {
  const dead = pids.filter((p) => !running(p));
  return dead.length ? `${what} (pid ${dead.join(', ')}) was killed: nothing proved the dead run had started it` : undefined;
}

/** The CLI of this case's run: node running the bin, in the sandbox (the runner starts it there). */
function cliPid(s: Sandbox): number | undefined {
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      if (readlinkSync(`/proc/${n}/cwd`) !== s.dir) continue;
      if (cmdline(Number(n)).includes(BIN)) return Number(n);
    } catch {
      /* gone, or not ours to read */
    }
  }
  return undefined;
}

/** Whether Node has set up its own signal handling (its inspector's SIGUSR1 handler): before that no handler of ours can exist. */
function nodeStarted(pid: number): boolean {
  try {
    const cgt = /^SigCgt:\s*([0-9a-f]+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return !!cgt && (BigInt(`0x${cgt}`) & (1n << 9n)) !== 0n;
  } catch {
    return false;
  }
}

/**
 * `ms` after the run started, once Node itself is up (a signal in the first tens of milliseconds, before Node runs
 * a line of JavaScript, takes its default action; docs/reliability.md says so): the window where the CLI loads.
 */
function afterStart(s: Sandbox, ms: number): () => boolean {
  const t0 = Date.now();
  let upAt = 0;
  return () => {
    const pid = cliPid(s);
    if (!upAt && pid && nodeStarted(pid)) upAt = Date.now();
    return upAt > 0 && Date.now() - t0 >= ms && Date.now() - upAt >= 150;
  };
}

/**
 * Sends `sig` to the CLI's pid alone (not its process group), `times` times `gapMs` apart, once `cond` holds. The
 * runner's own group signal is never sent (this always answers false).
 */
function toPid(s: Sandbox, sig: NodeJS.Signals, cond: () => boolean, times = 1, gapMs = 200): () => boolean {
  let sent = 0;
  let at = 0;
  return () => {
    if (sent < times && (sent ? Date.now() - at >= gapMs : cond())) {
      const pid = cliPid(s);
      if (pid) {
        process.kill(pid, sig);
        sent++;
        at = Date.now();
      }
    }
    return false;
  };
}

/** Processes whose command line names the sandbox (a copy, a build, a clean): none may outlive the run. */
function leftInSandbox(s: Sandbox): number[] {
  const out: number[] = [];
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n) || Number(n) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${n}/cmdline`, 'utf8');
      // The CLI of a rerun names the sandbox too; the interrupted one has ended (the runner waited for it).
      if (argv.includes(s.dir) && !argv.includes(BIN) && running(Number(n))) out.push(Number(n));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** After an interrupted run: no lock, no process of the run, none of the fake toolchain's hung ones. */
function stoppedClean(s: Sandbox, work: string, t?: FakeToolchain): string | undefined {
  if (existsSync(path.join(work, LOCK_NAME))) return `the lock ${LOCK_NAME} outlived the interrupted run`;
  const left = [...leftInSandbox(s), ...(t ? hungPids(t).filter(running) : [])];
  return left.length ? `processes outlived the interrupted run: ${left.map((p) => `${p} (${cmdline(p).join(' ').slice(0, 60)})`).join('; ')}` : undefined;
}

/** What an interrupted run must say: which signal, then how to resume. */
const said = (sig: string) => new RegExp(`interrupted by ${sig}[\\s\\S]*^fix: rerun`, 'm');

/** Kills whatever pids a hung fake build wrote, when the case ends (they run in sessions of their own). */
function reapHung(s: Sandbox, t: FakeToolchain): void {
  s.onCleanup(() => {
    for (const p of hungPids(t)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
}

const waitFor = (what: string, cond: () => boolean, ms = 90_000) => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms / 1000} s`);
    execFileSync('sleep', ['0.1']);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Class 4: never kill what we did not start.

/** A work dir made by `patch`, owned by `uid` (the forger's, when it is not root's). */
function workDir(s: Sandbox, uid = 0): string {
  const w = s.p('w');
  cliSync(patch(s.nvshmem('made-by'), w));
  if (uid) spawnSync('chown', ['-R', `${uid}:${uid}`, w]);
  return w;
}

const ownershipCases: Case[] = [
  {
    id: 'forged-lock-live-sleep', cls: 'process ownership', what: "a forged lock naming a live unrelated process (pid, start time, argv copied from /proc); root's patch takes over", setup: (s) => {
      const w = workDir(s);
      const victim = execd(s.background('sleep', ['300']), 'sleep');
      writeFileSync(path.join(w, LOCK_NAME), forgedLock([victim]));
      return { runs: [{ args: patch(s.nvshmem(), w), exit: 0, stderr: new RegExp(`left pid ${victim} running`) }], check: () => survived([victim], 'the unrelated sleep') };
    },
  },
  {
    id: 'forged-lock-live-tree-build', cls: 'process ownership', what: 'a forged lock naming a live process tree (sh and its sleep); root\'s build takes over', setup: (s) => {
      const w = workDir(s);
      const sh = execd(s.background('sh', ['-c', 'sleep 300 & wait']), 'sh');
      waitFor('the sleep under sh', () => childrenOf(sh).length > 0);
      const sleep = childrenOf(sh)[0]!;
      writeFileSync(path.join(w, LOCK_NAME), forgedLock([sh]));
      const t = s.toolchain();
      return {
        runs: [{ args: s.buildArgs(s.nvshmem(), w), env: t.env, exit: 0, stderr: new RegExp(`left pid ${sh} running`) }],
        check: () => survived([sh, sleep], 'the unrelated sh or its sleep'),
      };
    },
  },
  {
    id: 'forged-lock-by-nobody', cls: 'process ownership', what: "nobody forges the lock of a work dir it may write, naming root's live process; root's run takes over", setup: (s) => {
      const w = workDir(s, NOBODY);
      const victim = execd(s.background('sleep', ['301']), 'sleep');
      // Written as nobody: everything in it is readable by nobody in /proc.
      const lock = forgedLock([victim]);
      const r = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sh', '-c', `cat > '${path.join(w, LOCK_NAME)}'`], { input: lock });
      if (r.status !== 0) throw new Error(`nobody could not write the lock: ${r.stderr}`);
      return { runs: [{ args: patch(s.nvshmem(), w), exit: 0, stderr: /left pid \d+ running/ }], check: () => survived([victim], "root's sleep") };
    },
  },
  {
    id: 'forged-lock-nobody-runs', cls: 'process ownership', what: "a forged lock naming nobody's own live process; nobody's run takes over (it could signal it, but did not start it)", setup: (s) => {
      const w = workDir(s, NOBODY);
      const victim = execd(s.background('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sleep', '302']), 'sleep');
      writeFileSync(path.join(w, LOCK_NAME), forgedLock([victim]));
      chownSync(path.join(w, LOCK_NAME), NOBODY, NOBODY);
      const src = s.nvshmem();
      spawnSync('chmod', ['-R', 'a+rX', s.dir]);
      return { runs: [{ args: patch(src, w), exit: 0, asNobody: true, stderr: /left pid \d+ running/ }], check: () => survived([victim], "nobody's sleep") };
    },
  },
  {
    id: 'forged-lock-copies-live-run', cls: 'process ownership', what: "a forged lock copying a live run's lock (its commands, and whatever proof it holds) into another work dir", setup: (s) => {
      const t = s.toolchain();
      reapHung(s, t);
      const w2 = workDir(s);
      const w1 = s.p('w1');
      const live = s.background(process.execPath, [BIN, ...s.buildArgs(s.nvshmem('hung-src'), w1)], { ...ENV, ...t.env, FAKE_HANG: 'build', NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK });
      waitFor('the live build to hang', () => hungPids(t).length === 3);
      // Its lock names cmake once the command is recorded; everything in it is copied, the holder made a dead pid.
      waitFor('the live lock to name its commands', () => { try { return JSON.parse(readFileSync(path.join(w1, LOCK_NAME), 'utf8')).children.length > 0; } catch { return false; } }, 10_000);
      const copied = JSON.parse(readFileSync(path.join(w1, LOCK_NAME), 'utf8'));
      writeFileSync(path.join(w2, LOCK_NAME), JSON.stringify({ ...copied, pid: deadPid(), procStart: '1' }) + '\n');
      const victims = [live, ...hungPids(t)];
      return { runs: [{ args: patch(s.nvshmem(), w2), exit: 0, stderr: /left pid \d+ running/ }], check: () => survived(victims, "the other work dir's live build") };
    },
  },
  {
    id: 'lock-pids-reused', cls: 'process ownership', what: 'a stale lock whose holder pid and command pid are now another live process (other start time, same argv)', setup: (s) => {
      const w = workDir(s);
      const victim = execd(s.background('sleep', ['303']), 'sleep');
      const lock = { pid: victim, host: os.hostname(), procStart: '1', command: 'nvshmem-efa build', startedAt: new Date().toISOString(), children: [{ pid: victim, procStart: '2', cmdline: cmdline(victim) }] };
      writeFileSync(path.join(w, LOCK_NAME), JSON.stringify(lock) + '\n');
      return { runs: [{ args: patch(s.nvshmem(), w), exit: 0, stderr: /took over the lock/ }], check: () => survived([victim], 'the process now holding the recorded pids') };
    },
  },
  {
    id: 'genuine-leftovers-stopped', cls: 'process ownership', what: 'a build killed outright (SIGKILL): the next run takes over and stops the commands it left running', setup: (s) => {
      const t = s.toolchain();
      reapHung(s, t);
      const src = s.nvshmem();
      const w = s.p('w');
      return {
        runs: [
          { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: 'build' }, exit: 137, kill: { signal: 'SIGKILL', when: () => hungPids(t).length === 3 } },
          { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: '' }, exit: 0, stderr: /stopped the commands it left running \(pid \d+/ },
        ],
        check: () => (hungPids(t).some(running) ? `the killed run's commands still run: ${hungPids(t).filter(running).join(', ')}` : undefined),
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------------------------
// Class 5: signals. Each run ends 130 with `error: interrupted by SIG...` and `fix: rerun ...`; no lock, no child left.

/**
 * A case: one interrupted run (exit 130, the signal and how to resume said), then, when `rerun` is given, the same
 * command again, which must succeed. Lock and processes are judged once the interrupted run has ended: at the
 * rerun's first poll (20 ms after it starts, long before it can take the lock or stop anything), else at the end.
 */
function interrupted(id: string, what: string, setup: (s: Sandbox) => { run: Run; work: string; t?: FakeToolchain; rerun?: Run; protect?: string[]; check?: () => string | undefined }): Case {
  return {
    id, cls: 'signals', what, alone: true, setup: (s): Plan => {
      const c = setup(s);
      let afterFirst: string | undefined;
      const judge = () => (afterFirst ??= stoppedClean(s, c.work, c.t) ?? '');
      const runs: Run[] = [{ ...c.run, exit: 130, stderr: c.run.stderr ?? said(c.run.kill?.signal ?? '') }];
      if (c.rerun) runs.push({ ...c.rerun, kill: { signal: 'SIGCONT', when: () => (judge(), false) } });
      return { runs, ...(c.protect ? { protect: c.protect } : {}), check: () => judge() || c.check?.() };
    },
  };
}

const signalCases: Case[] = [
  // Loading the CLI from its bundle takes a few hundred milliseconds: a signal 300 ms in lands while it loads.
  ...([['SIGTERM', 300], ['SIGINT', 300]] as const).map(([sig, ms]) =>
    interrupted(`${sig.toLowerCase()}-at-${ms}ms`, `${sig} ${ms} ms after patch starts (the CLI still loading), then a rerun`, (s) => {
      const w = s.p('w');
      const src = s.nvshmem();
      return { work: w, run: { args: patch(src, w), exit: 130, kill: { signal: sig, when: afterStart(s, ms) } }, rerun: { args: patch(src, w), exit: 0 }, protect: [src] };
    }),
  ),
  // Once loaded, the patch runs for half a second or less on a fast machine, so these wait for what it writes, not
  // for a time (at 1000 ms a patch had already ended, exit 0, once the CLI started from its bundle).
  ...([
    ['SIGTERM', 'lock', 'the work dir lock is taken', LOCK_FILE],
    ['SIGQUIT', 'lock', 'the work dir lock is taken', LOCK_FILE],
    ['SIGHUP', 'copy', 'the copy of the source appears', 'sources/nvshmem'],
  ] as const).map(([sig, at, what, rel]) =>
    interrupted(`${sig.toLowerCase()}-at-${at}`, `${sig} once ${what} (the patch under way), then a rerun`, (s) => {
      const w = s.p('w');
      const src = s.nvshmem();
      return { work: w, run: { args: patch(src, w), exit: 130, kill: { signal: sig, when: () => existsSync(path.join(w, rel)) } }, rerun: { args: patch(src, w), exit: 0 }, protect: [src] };
    }),
  ),
  interrupted('sighup-during-build', 'SIGHUP (an ssh drop) to the process group during the NVSHMEM compile, then a rerun', (s) => {
    const t = s.toolchain();
    reapHung(s, t);
    const src = s.nvshmem();
    const w = s.p('w');
    return { work: w, t, run: { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: 'build' }, exit: 130, kill: { signal: 'SIGHUP', when: () => hungPids(t).length === 3 } }, rerun: { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: '' }, exit: 0 }, protect: [src] };
  }),
  interrupted('sighup-pid-during-build', 'SIGHUP to the CLI pid alone during the NVSHMEM compile', (s) => {
    const t = s.toolchain();
    reapHung(s, t);
    const w = s.p('w');
    return { work: w, t, run: { args: s.buildArgs(s.nvshmem(), w), env: { ...t.env, FAKE_HANG: 'build' }, exit: 130, stderr: said('SIGHUP'), kill: { signal: 'SIGHUP', when: toPid(s, 'SIGHUP', () => hungPids(t).length === 3) } } };
  }),
  interrupted('sigquit-during-configure', 'SIGQUIT to the CLI pid during the NVSHMEM configure', (s) => {
    const t = s.toolchain();
    reapHung(s, t);
    const w = s.p('w');
    return { work: w, t, run: { args: s.buildArgs(s.nvshmem(), w), env: { ...t.env, FAKE_HANG: 'configure' }, exit: 130, stderr: said('SIGQUIT'), kill: { signal: 'SIGQUIT', when: toPid(s, 'SIGQUIT', () => hungPids(t).length === 3) } } };
  }),
  interrupted('sigint-twice-during-build', 'SIGINT twice (Ctrl-C, Ctrl-C) to the CLI pid during the NVSHMEM compile, then a rerun', (s) => {
    const t = s.toolchain();
    reapHung(s, t);
    const src = s.nvshmem();
    const w = s.p('w');
    return { work: w, t, run: { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: 'build' }, exit: 130, stderr: said('SIGINT'), kill: { signal: 'SIGINT', when: toPid(s, 'SIGINT', () => hungPids(t).length === 3, 2, 50) } }, rerun: { args: s.buildArgs(src, w), env: { ...t.env, FAKE_HANG: '' }, exit: 0 } };
  }),
  interrupted('sigterm-pid-during-deepep', "SIGTERM to the CLI pid during DeepEP's setup.py", (s) => {
    const t = s.toolchain();
    reapHung(s, t);
    const w = s.p('w');
    return { work: w, t, run: { args: s.buildArgs(s.nvshmem(), w, ['--deepep-src', s.deepep()]), env: { ...t.env, FAKE_HANG: 'setup' }, exit: 130, stderr: said('SIGTERM'), kill: { signal: 'SIGTERM', when: toPid(s, 'SIGTERM', () => hungPids(t).length === 3) } } };
  }),
  ...(['SIGTERM', 'SIGHUP'] as const).map((sig) =>
    interrupted(`${sig.toLowerCase()}-during-clean`, `${sig} while clean removes a large build, then clean again`, (s) => {
      const w = workDir(s);
      // Thousands of files in a folder the work dir made (its copy of the sources), so that clean takes a while.
      const junk = path.join(w, 'sources', 'nvshmem', 'junk');
      for (let d = 0; d < 40; d++) {
        mkdirSync(path.join(junk, `d${d}`), { recursive: true });
        for (let f = 0; f < 500; f++) writeFileSync(path.join(junk, `d${d}`, `${f}.o`), '');
      }
      const mine = s.file('w/mine.txt');
      const started = () => Array.from({ length: 40 }, (_, d) => path.join(junk, `d${d}`)).some((d) => !existsSync(d));
      return {
        work: w,
        run: { args: ['clean', '--work-dir', w], exit: 130, kill: { signal: sig, when: started } },
        rerun: { args: ['clean', '--work-dir', w], exit: 0 },
        protect: [mine],
      };
    }),
  ),
  ...(['SIGTERM', 'SIGHUP'] as const).map((sig) =>
    interrupted(`${sig.toLowerCase()}-during-in-place`, `${sig} during patch --in-place: the tree untouched or fully patched, then a rerun`, (s) => {
      const src = s.nvshmem();
      const pristine = digest(src);
      const ref = s.nvshmem('reference');
      cliSync(patch(ref, s.p('reference-work'), '--in-place'));
      const w = s.p('w');
      return {
        work: w,
        run: { args: patch(src, w, '--in-place'), exit: 130, kill: { signal: sig, when: () => existsSync(path.join(w, 'sources')) || existsSync(path.join(w, 'vendor')) } },
        check: () => {
          const now = digest(src);
          return now === pristine || now === digest(ref) ? undefined : `${src} is neither untouched nor fully patched`;
        },
      };
    }),
  ),
  interrupted('sigint-twice-in-place-then-rerun', 'SIGINT twice during patch --in-place, then a rerun: fully patched', (s) => {
    const src = s.nvshmem();
    const ref = s.nvshmem('reference');
    cliSync(patch(ref, s.p('reference-work'), '--in-place'));
    const w = s.p('w');
    return {
      work: w,
      run: { args: patch(src, w, '--in-place'), exit: 130, stderr: said('SIGINT'), kill: { signal: 'SIGINT', when: toPid(s, 'SIGINT', () => existsSync(path.join(w, 'vendor')), 2, 30) } },
      rerun: { args: patch(src, w, '--in-place'), exit: 0 },
      check: () => (digest(src) === digest(ref) ? undefined : `${src} is not fully patched after the rerun`),
    };
  }),
  ...(['SIGTERM', 'SIGHUP'] as const).map((sig) =>
    interrupted(`${sig.toLowerCase()}-during-export`, `${sig} while patch --export writes, then the export again: the same as one never interrupted`, (s) => {
      const src = s.nvshmem();
      cliSync(patch(src, s.p('ref-w'), '--export', s.p('ref-e')));
      const e = s.p('e');
      return {
        work: s.p('w'),
        run: { args: patch(src, s.p('w'), '--export', e), exit: 130, kill: { signal: sig, when: () => existsSync(path.join(e, '.nvshmem-efa-export.json')) } },
        rerun: { args: patch(src, s.p('w'), '--export', e), exit: 0 },
        protect: [src],
        check: () => (digest(e) === digest(s.p('ref-e')) ? undefined : 'the export differs from one never interrupted'),
      };
    }),
  ),
  interrupted('sighup-during-doctor', 'SIGHUP 1 s after doctor starts', (s) => ({ work: s.p('none'), run: { args: ['doctor', '--nvshmem-src', s.nvshmem()], exit: 130, kill: { signal: 'SIGHUP', when: afterStart(s, 1000) } } })),
];

export const killSignalCases: Case[] = [...ownershipCases, ...signalCases];
