import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/**
 * Issue 22: `--help` and a usage mistake load only light modules (node builtins, commander, help data), so they
 * answer in well under 0.15 s; each command's implementation, and the heavy dependencies with it, is imported
 * inside its action. Checked on what loads, never on a clock (the timing is bench/help-time/help-time.mjs's):
 * the source run through tsx, and the standalone bundle, whose entry chunk's static imports (esbuild's
 * metafile) must hold no heavy package and whose lazy chunks must stay unloaded.
 */

/** The packages a help run must not load: each costs tens of milliseconds or more to import. */
const HEAVY = ['zod', 'execa', 'listr2', 'web-tree-sitter', 'tree-sitter-cpp', 'magic-string', 'diff'];
/** What may load: the command-line parser. */
const LIGHT_PACKAGES = ['commander'];
const TRACE_HOOK = path.join(ROOT, 'test/helpers/module-trace.mjs');
const HELP_RUNS = [['--help'], ['build', '--help'], ['selftest', '--help'], ['bench', '--help'], ['build', '--no-such-option'], ['no-such-command']];

const packageOf = (file: string) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];

interface Traced {
  code: number | null;
  stdout: string;
  stderr: string;
  modules: string[];
}

/** Runs node with the trace hook; returns its output and every module URL it resolved. */
function traced(args: string[], env: NodeJS.ProcessEnv = {}): Traced {
  const trace = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-trace-')), 'modules.txt');
  const r = spawnSync(process.execPath, ['--import', TRACE_HOOK, ...args], { env: { ...process.env, ...env, MODULE_TRACE: trace }, encoding: 'utf8' });
  let modules: string[] = [];
  try {
    modules = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  } catch {
    /* nothing resolved: the assertions below say so */
  }
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, modules };
}

const BIN = path.join(ROOT, 'bin/nvshmem-efa.js');
/** Each help run of the source (through tsx), once: both describes read it. */
const sourceRuns = new Map<string, Traced>();
const fromSource = (args: string[]) => {
  const key = args.join(' ');
  if (!sourceRuns.has(key)) sourceRuns.set(key, traced([BIN, ...args], { NVSHMEM_EFA_NO_BUNDLE: '1' }));
  return sourceRuns.get(key)!;
};

describe('the CLI loads only light modules for --help and usage mistakes (source, through tsx)', () => {
  it.each(HELP_RUNS.map((a) => [a.join(' '), a]))('nvshmem-efa %s', (_name, args) => {
    const r = fromSource(args as string[]);
    expect(r.modules.some((m) => m.endsWith('/src/cli.ts')), 'the trace saw src/cli.ts load').toBe(true);
    expect([...new Set(r.modules.map(packageOf).filter((p) => p && HEAVY.includes(p)))]).toEqual([]);
  });

  it('the trace does see a heavy module when a command runs (the check above can fail)', () => {
    const r = traced([BIN, 'report', '--work-dir', path.join(os.tmpdir(), 'nvshmem-efa-no-such-work-dir')], { NVSHMEM_EFA_NO_BUNDLE: '1' });
    expect(r.modules.map(packageOf)).toContain('zod');
  });
});

/**
 * The package tree bundle.mjs bundles, in a temporary directory (a test writes nothing in the checkout): scripts/
 * and bin/ copied (bundle.mjs takes the tree above itself), native/efaemu copied with what running the tests or
 * the GPU checks can leave beside warmup/sitecustomize.py, a Python byte-code cache that must not ship; the rest
 * linked to the checkout.
 */
function packageCopy(): string {
  const pkg = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-pkg-'));
  for (const d of ['native', 'test', 'bench']) mkdirSync(path.join(pkg, d));
  for (const d of ['scripts', 'bin', 'native/efaemu']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true, filter: (f) => path.basename(f) !== '__pycache__' });
  for (const d of ['src', 'node_modules', 'package.json', 'templates', 'third_party', 'native/probe', 'native/softefa', 'test/efa_abi', 'bench/gda-signals']) symlinkSync(path.join(ROOT, d), path.join(pkg, d));
  mkdirSync(path.join(pkg, 'native/efaemu/gpu/warmup/__pycache__'));
  writeFileSync(path.join(pkg, 'native/efaemu/gpu/warmup/__pycache__/sitecustomize.cpython-311.pyc'), '');
  return pkg;
}

describe('the standalone bundle keeps the commands lazy (code splitting)', () => {
  let dir = '';
  let meta: { outputs: Record<string, { imports: { path: string; kind: string; external?: boolean }[]; inputs: Record<string, unknown> }> };
  /** The entry chunk and every chunk it imports statically: what loads before any action runs. */
  let eager = new Set<string>();
  let abs = (out: string) => out;

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-standalone-'));
    const pkg = packageCopy();
    const metafile = path.join(dir, 'meta.json');
    const r = spawnSync(process.execPath, [path.join(pkg, 'scripts/bundle.mjs'), '--standalone', dir, '--metafile', metafile], { cwd: pkg, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    meta = JSON.parse(readFileSync(metafile, 'utf8'));
    // The metafile's paths are relative to the directory bundle.mjs ran in.
    abs = (out: string) => path.resolve(pkg, out);
    const byFile = new Map(Object.entries(meta.outputs).map(([k, v]) => [abs(k), v]));
    const todo = [path.join(dir, 'cli.mjs')];
    while (todo.length) {
      const f = todo.pop()!;
      if (eager.has(f)) continue;
      eager.add(f);
      for (const i of byFile.get(f)?.imports ?? []) if (i.kind === 'import-statement' && !i.external) todo.push(abs(i.path));
    }
  });

  it('ships the native sources without Python byte-code caches (this host\'s, not the package\'s)', () => {
    expect(existsSync(path.join(dir, 'native/efaemu/gpu/warmup/sitecustomize.py'))).toBe(true);
    expect(existsSync(path.join(dir, 'native/efaemu/gpu/warmup/__pycache__'))).toBe(false);
  });

  it("the entry's static imports bundle no heavy package, only commander", () => {
    const outputs = new Map(Object.entries(meta.outputs).map(([k, v]) => [abs(k), v]));
    expect(outputs.has(path.join(dir, 'cli.mjs')), 'the metafile names the entry cli.mjs').toBe(true);
    const inputs = [...eager].flatMap((f) => Object.keys(outputs.get(f)?.inputs ?? {}));
    const packages = [...new Set(inputs.map(packageOf).filter((p): p is string => !!p))].sort();
    expect(packages, `modules loaded by --help:\n${inputs.join('\n')}`).toEqual(LIGHT_PACKAGES);
  });

  it.each(HELP_RUNS.map((a) => [a.join(' '), a]))('nvshmem-efa.mjs %s loads no lazy chunk, and says what the source says', (_name, args) => {
    const r = traced([path.join(dir, 'nvshmem-efa.mjs'), ...(args as string[])]);
    const chunks = r.modules.filter((m) => m.startsWith('file:') && m.endsWith('.mjs')).map((m) => new URL(m).pathname);
    expect(chunks).toContain(path.join(dir, 'cli.mjs'));
    expect(chunks.filter((c) => c !== path.join(dir, 'nvshmem-efa.mjs') && !eager.has(c))).toEqual([]);
    const s = fromSource(args as string[]);
    expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: s.code, stdout: s.stdout, stderr: s.stderr });
  });
});
