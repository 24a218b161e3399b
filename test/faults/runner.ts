import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, ENV, IO_DEFS, LOCK, ROOT } from '../helpers/cli.ts';
import { fakeToolchain, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * The fault campaign's engine: each case lays out a sandbox (trees, files, mounts, a fake toolchain), runs
 * the real CLI one or more times, and is judged against the README's promises: the exit status its table
 * gives, nothing of the user's changed (every protected path hashed before and after: names, bytes, link
 * targets), no crash (no stack trace, no "internal error", no schema dump), no hang (every run has a bound,
 * and a run past it is killed with its process group), a failure said as `error:` plus `fix:`, and whatever
 * the case checks besides. Cases are data (cases.ts); this file knows nothing about any one of them.
 */

export type FaultClass =
  | 'paths' | 'symlinks' | 'overlap' | 'read-only' | 'full disk' | 'permissions' | 'ownership and clean' | 'export'
  | 'concurrency and locks' | 'interruption' | 'corrupted state' | 'look-alike trees' | 'bad options' | 'bad environment'
  | 'output streams'
  | 'overlap by identity'
  | 'old and odd work dirs'
  | 'process ownership'
  | 'signals'
  | 'nothing waits forever'
  | 'the rest'
  | 'bytes and owners'
  | 'links in the work dir';

export interface Run {
  args: string[];
  env?: Record<string, string | undefined>;
  /** The exit status the README's table gives for this run. */
  exit: number;
  /** What the message must say (the user is sent the right way). */
  stderr?: RegExp;
  stdout?: RegExp;
  /** Run as the unprivileged user nobody (permission faults mean nothing to root). */
  asNobody?: boolean;
  /** The command's failure is a report on stdout (doctor's failing check), not an `error:`/`fix:` pair. */
  reportOnly?: boolean;
  /** Send this signal to the run's process group once `when` is true (or after `afterMs`). */
  kill?: { signal: NodeJS.Signals; when?: () => boolean; afterMs?: number };
  timeoutMs?: number;
  /** Where the command's output goes instead of a pipe the campaign reads: a full device (/dev/full), a reader that
   * stops after the first chunk (`| head -1`), or a closed descriptor (`2>&-`). What cannot be read is not judged. */
  streams?: { out?: 'full' | 'reader-stops'; err?: 'full' | 'closed' };
  /** Run from a current directory that was removed before the command started (a shell left in a deleted folder). */
  cwdGone?: boolean;
}

export interface Plan {
  runs: Run[];
  /** User paths that must be exactly as they were when the last run ends. */
  protect?: string[];
  /** Any further promise: returns what is wrong, or nothing. */
  check?: () => string | undefined | Promise<string | undefined>;
}

export interface Case {
  id: string;
  cls: FaultClass;
  what: string;
  /** Runs with no other case beside it: its signal is timed by polling, which another case's synchronous setup would hold up. */
  alone?: boolean;
  setup(s: Sandbox): Plan | Promise<Plan>;
}

export interface Outcome {
  id: string;
  cls: FaultClass;
  what: string;
  exits: string;
  lost: string[];
  crash: boolean;
  hang: boolean;
  problems: string[];
  ok: boolean;
  ms: number;
}

/** What a case may lay out; everything it makes is removed (mounts unmounted) when the case ends. */
export class Sandbox {
  readonly dir: string;
  private cleanups: (() => void)[] = [];
  private tc?: FakeToolchain;

  constructor() {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-fault-'));
    // Readable by nobody, for the permission cases.
    chmodSync(this.dir, 0o755);
  }

  p(...parts: string[]): string {
    return path.join(this.dir, ...parts);
  }

  /** A fresh miniature NVSHMEM tree (a golden case) at `rel`. */
  nvshmem(rel = 'nvshmem', golden = 'v3.4-like'): string {
    const from = materialize(golden);
    const to = this.p(rel);
    mkdirSync(path.dirname(to), { recursive: true });
    cpSync(from, to, { recursive: true });
    rmSync(from, { recursive: true, force: true });
    return to;
  }

  deepep(rel = 'deepep'): string {
    const from = materialize('v1', GOLDEN_DEEPEP);
    const to = this.p(rel);
    cpSync(from, to, { recursive: true });
    rmSync(from, { recursive: true, force: true });
    return to;
  }

  file(rel: string, content = 'the user\'s own bytes\n'): string {
    const f = this.p(rel);
    mkdirSync(path.dirname(f), { recursive: true });
    writeFileSync(f, content);
    return f;
  }

  toolchain(): FakeToolchain {
    this.tc ??= fakeToolchain();
    return this.tc;
  }

  /** Build options for the fake toolchain (pass its env too). */
  buildArgs(src: string, work: string, extra: string[] = []): string[] {
    const t = this.toolchain();
    return ['build', '--nvshmem-src', src, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline', '--efa-io-defs', IO_DEFS, ...extra];
  }

  /** A tmpfs of `kib` KiB at `rel` (root only); unmounted when the case ends. */
  tmpfs(rel: string, kib: number, opts = ''): string {
    const at = this.p(rel);
    mkdirSync(at, { recursive: true });
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k${opts ? `,${opts}` : ''}`, 'tmpfs', at], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cannot mount a tmpfs at ${at}: ${r.stderr.trim()} (the full-disk and read-only cases need root)`);
    this.cleanups.push(() => void spawnSync('umount', ['-l', at]));
    return at;
  }

  /** `from` also visible at `to` (made if missing), by a bind mount (root only); unmounted when the case ends. */
  bind(from: string, to: string): string {
    mkdirSync(to, { recursive: true });
    const r = spawnSync('mount', ['--bind', from, to], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cannot bind-mount ${from} at ${to}: ${r.stderr.trim()} (the identity cases need root)`);
    this.cleanups.push(() => void spawnSync('umount', ['-l', to]));
    return to;
  }

  /** `dir` made read-only by a bind mount of itself (root ignores mode bits). */
  readOnly(dir: string): void {
    const a = spawnSync('mount', ['--bind', dir, dir], { encoding: 'utf8' });
    const b = spawnSync('mount', ['-o', 'remount,ro,bind', dir], { encoding: 'utf8' });
    if (a.status !== 0 || b.status !== 0) throw new Error(`cannot make ${dir} read-only: ${a.stderr}${b.stderr}`);
    this.cleanups.push(() => void spawnSync('umount', ['-l', dir]));
  }

  fill(dir: string): void {
    // Fills the file system holding `dir` (a tmpfs) to the last block.
    spawnSync('sh', ['-c', `dd if=/dev/zero of="${dir}/.filler" bs=4k 2>/dev/null; true`]);
  }

  /** A process the case starts (and the sandbox stops). */
  background(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): number {
    const c = spawn(cmd, args, { stdio: 'ignore', detached: true, env });
    c.unref();
    this.cleanups.push(() => {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    return c.pid!;
  }

  onCleanup(fn: () => void): void {
    this.cleanups.push(fn);
  }

  dispose(): void {
    for (const f of this.cleanups.reverse()) f();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Names, kinds, bytes, modes and link targets below `p` (never following a link): what "unchanged" means. */
export function digest(p: string): string {
  const h = createHash('sha256');
  const walk = (f: string, rel: string) => {
    let st;
    try {
      st = lstatSync(f);
    } catch {
      h.update(`${rel}\0missing\n`);
      return;
    }
    if (st.isSymbolicLink()) h.update(`${rel}\0link\0${readlinkSync(f)}\n`);
    else if (st.isDirectory()) {
      h.update(`${rel}\0dir\n`);
      for (const n of readdirSync(f).sort()) walk(path.join(f, n), `${rel}/${n}`);
    } else if (st.isFile()) h.update(`${rel}\0file\0${st.mode & 0o777}\0`).update(readFileSync(f)).update('\n');
    else h.update(`${rel}\0special\n`);
  };
  walk(p, '.');
  return h.digest('hex');
}

// Looked for in stderr: stdout may carry a diff of our own template (whose text says "QP internal error").
const CRASH = [/^internal error:/m, /^\s+at .+:\d+:\d+\)?$/m, /ZodError|"code":\s*"invalid_type"|"expected":\s*"/, /^Node\.js v\d+/m];

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  hang: boolean;
  /** stderr went elsewhere (Run.streams): its messages cannot be judged. */
  stderrLost: boolean;
}

let nobodyCli: { bin: string; ioDefs: string } | undefined;

/**
 * The CLI as nobody runs it: a self-contained bundle of the current sources (scripts/bundle.mjs --standalone:
 * no node_modules needed, templates and the test header beside it) in a world-readable folder of the temp dir,
 * made once per campaign and removed when it ends.
 */
function cliForNobody(): { bin: string; ioDefs: string } {
  if (nobodyCli) return nobodyCli;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-nobody-cli-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'cli');
  const b = spawnSync(process.execPath, [path.join(ROOT, 'scripts/bundle.mjs'), '--standalone', out], { encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`cannot bundle the CLI for the runs as nobody: ${b.stderr.trim()}`);
  spawnSync('chmod', ['-R', 'a+rX', dir]);
  nobodyCli = { bin: path.join(out, 'nvshmem-efa.mjs'), ioDefs: path.join(out, 'test/efa_abi', path.basename(IO_DEFS)) };
  return nobodyCli;
}

function runOnce(r: Run, s: Sandbox): Promise<Ran> {
  const env: NodeJS.ProcessEnv = { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...(r.env ?? {}) };
  for (const [k, v] of Object.entries(r.env ?? {})) if (v === undefined) delete env[k];
  let cmd = process.execPath;
  let args = [BIN, ...r.args];
  if (r.asNobody) {
    // Nobody cannot read root's private temp dirs, nor a checkout whose parent folders it cannot enter (a clone
    // inside a `mktemp -d` folder, mode 0700): it runs a copy of the CLI, its test header and the test lock that
    // it can reach, never anything under the checkout (issue 36, class 10).
    const cli = cliForNobody();
    const lock = s.p('.nobody-lock.json');
    if (!existsSync(lock)) writeFileSync(lock, readFileSync(LOCK));
    env.NVSHMEM_EFA_EFA_IO_DEFS_LOCK = lock;
    env.HOME = s.dir;
    const asNobody = ['--reuid=65534', '--regid=65534', '--clear-groups'];
    const unreachable = [cmd, s.dir].filter((p) => spawnSync('setpriv', [...asNobody, 'test', '-r', p, '-a', '-x', p]).status !== 0);
    if (unreachable.length) throw new Error(`nobody cannot reach ${unreachable.join(' or ')} (a parent folder it cannot enter): run the campaign with node, and TMPDIR, in folders every user can enter`);
    args = [...asNobody, cmd, cli.bin, ...r.args.map((a) => (a === IO_DEFS ? cli.ioDefs : a))];
    cmd = 'setpriv';
  }
  const st = r.streams ?? {};
  if (r.cwdGone) {
    // The shell enters a folder of its own, removes it, then runs the command in its place.
    args = ['-c', 'd=$1; shift; mkdir -p "$d" && cd "$d" && rmdir "$d" && exec "$0" "$@"', cmd, s.p('.gone-cwd'), ...args];
    cmd = 'sh';
  }
  if (st.err === 'closed') {
    // The shell closes descriptor 2, then runs the command in its place.
    args = ['-c', 'exec "$0" "$@" 2>&-', cmd, ...args];
    cmd = 'sh';
  }
  const full = st.out === 'full' || st.err === 'full' ? openSync('/dev/full', 'w') : undefined;
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      env, detached: true, cwd: s.dir,
      stdio: ['ignore', st.out === 'full' ? full! : 'pipe', st.err === 'full' ? full! : st.err === 'closed' ? 'ignore' : 'pipe'],
    });
    if (full !== undefined) closeSync(full);
    let out = '';
    let err = '';
    let hang = false;
    child.stdout?.on('data', (d) => {
      out += d;
      if (st.out === 'reader-stops') child.stdout!.destroy();  // the reader goes away after its first chunk
    });
    child.stderr?.on('data', (d) => (err += d));
    const group = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* gone */
      }
    };
    const timer = setTimeout(() => {
      hang = true;
      group('SIGKILL');
    }, r.timeoutMs ?? 90_000);
    let poll: NodeJS.Timeout | undefined;
    if (r.kill) {
      const k = r.kill;
      const t0 = Date.now();
      poll = setInterval(() => {
        if ((k.when && k.when()) || (k.afterMs !== undefined && Date.now() - t0 >= k.afterMs)) {
          clearInterval(poll);
          group(k.signal);
        }
      }, 20);
    }
    child.on('close', (code, sig) => {
      clearTimeout(timer);
      if (poll) clearInterval(poll);
      resolve({ code: code ?? 128 + (sig ? os.constants.signals[sig] : 0), stdout: out, stderr: err, hang, stderrLost: st.err !== undefined });
    });
  });
}

export async function runCase(c: Case): Promise<Outcome> {
  const t0 = Date.now();
  const s = new Sandbox();
  const problems: string[] = [];
  const lost: string[] = [];
  let crash = false;
  let hang = false;
  const exits: string[] = [];
  try {
    let plan: Plan;
    try {
      plan = await c.setup(s);
    } catch (e) {
      return { id: c.id, cls: c.cls, what: c.what, exits: '-', lost, crash, hang, problems: [`setup failed: ${(e as Error).message}`], ok: false, ms: Date.now() - t0 };
    }
    const before = new Map((plan.protect ?? []).map((p) => [p, digest(p)]));
    for (const [i, r] of plan.runs.entries()) {
      const tag = plan.runs.length > 1 ? `run ${i + 1}: ` : '';
      let got: Ran;
      try {
        got = await runOnce(r, s);
      } catch (e) {
        // The run could not be started as the case asks (nobody cannot reach the CLI): said, never skipped.
        exits.push('-');
        problems.push(`${tag}cannot run: ${(e as Error).message}`);
        continue;
      }
      exits.push(got.hang ? 'hang' : String(got.code));
      if (got.hang) {
        hang = true;
        problems.push(`${tag}no exit within ${(r.timeoutMs ?? 90_000) / 1000} s`);
        continue;
      }
      if (CRASH.some((re) => re.test(got.stderr))) {
        crash = true;
        problems.push(`${tag}crash: ${(CRASH.map((re) => re.exec(got.stderr)?.[0]).find(Boolean) ?? '').slice(0, 80)}`);
      }
      if (got.code !== r.exit) problems.push(`${tag}exit ${got.code}, the table says ${r.exit} (${lastError(got.stderr)})`);
      // A run killed by a signal says nothing; a command whose failure is its report (doctor) says it on stdout.
      const signalled = got.code >= 128;
      if (got.code !== 0 && !signalled && !r.reportOnly && !got.stderrLost && !(/^error: .+/m.test(got.stderr) && /^fix: .+/m.test(got.stderr))) problems.push(`${tag}failure not said as error: + fix: (${got.stderr.trim().split('\n').slice(-2).join(' | ').slice(0, 160)})`);
      if (r.stderr && !r.stderr.test(got.stderr)) problems.push(`${tag}stderr lacks ${r.stderr} (${lastError(got.stderr)})`);
      if (r.stdout && !r.stdout.test(got.stdout)) problems.push(`${tag}stdout lacks ${r.stdout} (${got.stdout.trim().split('\n').slice(-1)[0]?.slice(0, 120)})`);
    }
    for (const [p, d] of before) if (digest(p) !== d) lost.push(p.startsWith(s.dir) ? path.relative(s.dir, p) : p);
    if (lost.length) problems.push(`changed: ${lost.join(', ')}`);
    const extra = await plan.check?.();
    if (extra) problems.push(extra);
  } finally {
    s.dispose();
  }
  return { id: c.id, cls: c.cls, what: c.what, exits: exits.join(','), lost, crash, hang, problems, ok: problems.length === 0, ms: Date.now() - t0 };
}

function lastError(stderr: string): string {
  const e = stderr.split('\n').find((l) => l.startsWith('error: '));
  return (e ?? stderr.trim().split('\n').slice(-1)[0] ?? '').slice(0, 140);
}

/** The table the campaign prints, then the count line. */
export function table(outcomes: readonly Outcome[]): string {
  const rows = outcomes.map((o) => [o.cls, o.id, o.exits, o.ok ? 'as promised' : `BROKEN: ${o.problems.join('; ')}`]);
  const head = ['class', 'case', 'exit', 'result'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (i < 3 ? r[i]!.length : 0))));
  const line = (r: string[]) => r.map((c, i) => (i < 3 ? c.padEnd(w[i]!) : c)).join('  ');
  return [line(head), line(w.map((n) => '-'.repeat(n))), ...rows.map(line), '', countLine(outcomes)].join('\n');
}

export function countLine(outcomes: readonly Outcome[]): string {
  const n = (f: (o: Outcome) => boolean) => outcomes.filter(f).length;
  return `${outcomes.length} faults: ${n((o) => o.ok)} handled as promised, ${n((o) => !o.ok)} broken; ${n((o) => o.lost.length > 0)} lost data, ${n((o) => o.crash)} crashed, ${n((o) => o.hang)} hung`;
}
