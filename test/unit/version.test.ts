// --version says what a bug report needs (issue 39, item 4): the version, the commit the CLI was built from and the
// pins it builds; --version --json the same as a document with a schema name. The commit comes from the clone's git
// when run from a clone, else from what scripts/bundle.mjs recorded in dist/ or in a standalone bundle.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEEPEP_PINS, NVSHMEM_PINS } from '../../src/pins.ts';
import { cli, ENV, ROOT } from '../helpers/cli.ts';

const lock = (rel: string) => JSON.parse(readFileSync(path.join(ROOT, rel), 'utf8'));
const fabric = lock('third_party/libfabric/lock.json');
const gdr = lock('third_party/gdrcopy/lock.json');
const efa = lock('third_party/efa_gda/lock.json');
const pick = (s: { default: string; pins: { ref: string; commit: string }[] }) => s.pins.find((p) => p.ref === s.default)!;
const VERSION = lock('package.json').version as string;
const head = (dir: string) => execFileSync('git', ['-C', dir, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
// The real pins, not a test's stand-in lock.
const env = { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: path.join(ROOT, 'third_party/efa_gda/lock.json') };

/** Every pin, as [label, ref, commit], read from where the build reads it. */
const PINS: [string, string, string][] = [
  ['NVSHMEM', NVSHMEM_PINS[0]!.ref, NVSHMEM_PINS[0]!.commit],
  ['DeepEP', DEEPEP_PINS[0]!.ref, DEEPEP_PINS[0]!.commit],
  ['libfabric', pick(fabric.libfabric).ref, pick(fabric.libfabric).commit],
  ['rdma-core', pick(fabric.rdmaCore).ref, pick(fabric.rdmaCore).commit],
  ['GDRCopy', pick(gdr.gdrcopy).ref, pick(gdr.gdrcopy).commit],
  ['efa_io_defs.h', efa.revision, efa.commit],
];

describe('--version: the version, the commit and the pins', () => {
  it('from the clone: the text names the version, HEAD and every pin with its commit', () => {
    const r = cli(['--version'], env);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(`nvshmem-efa ${VERSION}`);
    expect(lines[1]).toMatch(new RegExp(`^commit: ${head(ROOT)}( \\(modified\\))?, from the clone$`));
    for (const [label, ref, commit] of PINS) expect(r.stdout).toMatch(new RegExp(`^  ${label.replace('.', '\\.')} +${ref} +${commit}`, 'm'));
    expect(cli(['-V'], env).stdout).toBe(r.stdout);
  });

  it('--version --json (either order): schema nvshmem-efa-version/1, the commit from git, the pins', () => {
    for (const args of [['--version', '--json'], ['--json', '-V']]) {
      const r = cli(args, env);
      expect(r.code, r.stderr).toBe(0);
      const v = JSON.parse(r.stdout);
      expect(v).toMatchObject({ schema: 'nvshmem-efa-version/1', name: 'nvshmem-efa', version: VERSION, commit: { id: head(ROOT), from: 'git' } });
      expect(typeof v.commit.modified).toBe('boolean');
      const keys = ['nvshmem', 'deepep', 'libfabric', 'rdmaCore', 'gdrcopy', 'efaIoDefs'];
      expect(Object.keys(v.pins)).toEqual(keys);
      keys.forEach((k, i) => expect(v.pins[k], k).toMatchObject({ ref: PINS[i]![1], commit: PINS[i]![2] }));
      expect(v.pins.libfabric.alsoPinned).toEqual(fabric.libfabric.pins.map((p: { ref: string }) => p.ref).filter((r: string) => r !== pick(fabric.libfabric).ref));
    }
  });

  it('dist/ built in a clone and run where there is no clone any more: the commit recorded by the bundle', () => {
    const pkg = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-ver-')), 'pkg');
    for (const d of ['bin', 'src', 'scripts', 'templates', 'third_party', 'package.json']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
    const git = (...a: string[]) => execFileSync('git', ['-C', pkg, '-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { encoding: 'utf8' });
    git('init', '-q');
    git('add', '-A', 'bin', 'src', 'scripts', 'package.json');
    git('commit', '-q', '-m', 'x');
    const commit = head(pkg);
    const b = spawnSync(process.execPath, [path.join(pkg, 'scripts/bundle.mjs')], { encoding: 'utf8' });
    expect(b.status, b.stderr).toBe(0);
    rmSync(path.join(pkg, '.git'), { recursive: true });
    const r = spawnSync(process.execPath, [path.join(pkg, 'bin/nvshmem-efa.js'), '--version', '--json'], { env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).commit).toEqual({ id: commit, modified: false, from: 'bundle' });
    const t = spawnSync(process.execPath, [path.join(pkg, 'bin/nvshmem-efa.js'), '--version'], { env, encoding: 'utf8' });
    expect(t.stdout.split('\n')[1]).toBe(`commit: ${commit}, from the bundle`);
  }, 120_000);

  it('a standalone bundle (scripts/bundle.mjs --standalone) carries the commit of the clone it was built in', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-ver-standalone-'));
    const b = spawnSync(process.execPath, [path.join(ROOT, 'scripts/bundle.mjs'), '--standalone', dir], { cwd: ROOT, encoding: 'utf8' });
    expect(b.status, b.stderr).toBe(0);
    const r = spawnSync(process.execPath, [path.join(dir, 'nvshmem-efa.mjs'), '--version', '--json'], { env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).commit).toMatchObject({ id: head(ROOT), from: 'bundle' });
  }, 120_000);
});
