import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { cli, ENV, ROOT, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * The package as a user installs it (issue 39 items 2 and 3): `npm pack`, installed into a folder that is no clone,
 * run from there. Offline: its dependencies come from npm's cache, which `npm ci` in this clone filled. `npm install
 * <tgz>` offline would still ask the registry for each dependency's metadata (the cache holds only tarballs), so
 * the folder gets a lock made of this clone's lock, its non-dev entries (the dependencies' closure, each with its
 * tarball's integrity), and `npm ci --offline` installs exactly that. A user's `npm install -g <tgz>` resolves the
 * same pinned dependencies from the registry.
 */
const MAX_NODE_MODULES = 25e6; // issue 39's acceptance: a fresh install's node_modules at most 25 MB (on disk, as du counts)

let dir = '';
let install: SpawnSyncReturns<string>;
let tarball: string[] = [];

const npm = (args: string[], cwd: string) => spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
const installed = () => path.join(dir, 'node_modules/nvshmem-efa');
/** Runs the installed bin the way npm links it, from the folder that has no clone. */
const run = (args: string[]) => {
  const r = spawnSync(path.join(dir, 'node_modules/.bin/nvshmem-efa'), args, { cwd: dir, env: ENV, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
/** Every file of the installed package with its size and mtime: what a run must leave as it is. */
const listing = () =>
  readdirSync(installed(), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const st = statSync(path.join(e.parentPath, e.name));
      return `${path.relative(installed(), path.join(e.parentPath, e.name))} ${st.size} ${st.mtimeMs}`;
    })
    .sort();

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-user-'));
  // --ignore-scripts: prepack would bundle dist/ again under the other tests' feet; the global setup made it current.
  const pack = npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT);
  expect(pack.status, pack.stderr).toBe(0);
  const [packed] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  tarball = packed!.files.map((f) => f.path);
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  const spec = `file:${packed!.filename}`;
  const packages: Record<string, unknown> = {
    '': { dependencies: { 'nvshmem-efa': spec } },
    'node_modules/nvshmem-efa': { version: pkg.version, resolved: spec, license: pkg.license, dependencies: pkg.dependencies, bin: pkg.bin, engines: pkg.engines, os: pkg.os },
  };
  for (const [k, v] of Object.entries(lock.packages as Record<string, { dev?: boolean }>)) if (k !== '' && !v.dev) packages[k] = v;
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, dependencies: { 'nvshmem-efa': spec } }));
  writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify({ lockfileVersion: 3, requires: true, packages }));
  install = npm(['ci', '--offline', '--no-audit', '--no-fund'], dir);
  expect(install.status, `npm ci --offline in ${dir} (is npm's cache filled by npm ci in this clone?):\n${install.stderr}`).toBe(0);
});

describe('the packed package', () => {
  it('holds the program (dist/), LICENSE and the docs the README links to; no sources, scripts or byte code', () => {
    for (const f of ['LICENSE', 'README.md', 'bin/nvshmem-efa.js', 'dist/cli.mjs', 'docs/cli.md', 'examples/slurm/deepep-tests.sbatch', 'third_party/tree-sitter-cpp/tree-sitter-cpp.wasm.gz']) expect(tarball).toContain(f);
    expect(tarball.filter((f) => /^(src|scripts|test)\/|__pycache__|\.pyc$|source-(hash|stat)\.txt$/.test(f))).toEqual([]);
    // Every relative link of the README names a file or folder the package has.
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)#:]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!.replace(/\/$/, ''));
    expect(links.length).toBeGreaterThan(20);
    expect(links.filter((l) => !tarball.some((f) => f === l || f.startsWith(`${l}/`)))).toEqual([]);
  });

  it('installs with no install script and no warning about one; node_modules within 25 MB; no tree-sitter-cpp, tsx, esbuild', () => {
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/install-scripts|install script/i);
    const manifest = JSON.parse(readFileSync(path.join(installed(), 'package.json'), 'utf8'));
    expect(Object.keys(manifest.scripts ?? {}).filter((s) => /^(pre|post)?(install|prepare)$/.test(s))).toEqual([]);
    let bytes = 0;
    for (const e of readdirSync(path.join(dir, 'node_modules'), { recursive: true, withFileTypes: true })) if (e.isFile()) bytes += statSync(path.join(e.parentPath, e.name)).blocks * 512;
    expect(bytes).toBeLessThanOrEqual(MAX_NODE_MODULES);
    const names = Object.keys(JSON.parse(readFileSync(path.join(dir, 'node_modules/.package-lock.json'), 'utf8')).packages);
    expect(names.filter((n) => /\/(tree-sitter-cpp|tree-sitter-c|tsx|esbuild|@esbuild\/.*)$/.test(n))).toEqual([]);
  });
});

describe('the installed CLI, run from a folder that is no clone', () => {
  it('--help, --version, doctor --json and patch of a miniature NVSHMEM 3.4.5 work, and write nothing inside the package', async () => {
    const before = listing();
    const help = run(['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^Usage: nvshmem-efa/m);

    const version = run(['--version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout).toMatch(/^nvshmem-efa \d+\.\d+\.\d+\n/);

    // doctor's exit status depends on this host's toolchain; its JSON must parse and hold the checks.
    const doctor = run(['doctor', '--json']);
    expect([0, 1], doctor.stderr).toContain(doctor.code);
    expect((JSON.parse(doctor.stdout) as { checks: unknown[] }).checks.length).toBeGreaterThan(0);

    // The miniature NVSHMEM 3.4.5 tree of test/golden, patched by the installed CLI and by this clone's: the same files.
    const [mine, theirs] = [materialize('v3.4-like'), materialize('v3.4-like')];
    const patched = run(['patch', '--nvshmem-src', mine, '--in-place', '--offline', '--work-dir', tmp()]);
    expect(patched.code, patched.stderr).toBe(0);
    expect(cli(['patch', '--nvshmem-src', theirs, '--in-place', '--offline', '--work-dir', tmp()]).code).toBe(0);
    expect(await hashTree(mine)).toEqual(await hashTree(theirs));
    expect(await hashTree(mine)).not.toEqual(await hashTree(materialize('v3.4-like')));

    expect(listing()).toEqual(before);
  });
});

