import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/**
 * In a clone, bin/nvshmem-efa.js runs dist/ only while it was bundled from src/ as it is: told by the files' stat
 * first (dist/source-stat.txt, no file read: part of --help's start-up), by their contents when the stat differs
 * (dist/source-hash.txt). A source changed is exit 4 saying to rebuild, never a silent start through tsx (issue 39
 * item 3); NVSHMEM_EFA_NO_BUNDLE=1 asks for tsx. Run on a copy of the package, bundled there.
 */
describe('bin/nvshmem-efa.js runs the bundle only when it is current', () => {
  let pkg = '';
  /** Which of bundle, stat check, content check and tsx one start used, from the modules it resolved. */
  const start = (env: NodeJS.ProcessEnv = {}, status = 0) => {
    const trace = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-trace-')), 'modules.txt');
    const r = spawnSync(process.execPath, ['--import', path.join(ROOT, 'test/helpers/module-trace.mjs'), path.join(pkg, 'bin/nvshmem-efa.js'), '--version'], {
      env: { ...process.env, NVSHMEM_EFA_NO_BUNDLE: undefined, ...env, MODULE_TRACE: trace },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(status);
    const modules = readFileSync(trace, 'utf8');
    return {
      bundle: modules.includes('/dist/cli.mjs'),
      stat: modules.includes('/bin/source-stat.js'),
      hashed: modules.includes('/bin/source-hash.js'),
      tsx: modules.includes('/src/cli.ts'),
      stderr: r.stderr,
    };
  };

  beforeAll(() => {
    pkg = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-pkg-')), 'pkg');
    // third_party: --version reads the pins from its locks (issue 39).
    for (const d of ['bin', 'src', 'scripts', 'third_party', 'package.json']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
    const r = spawnSync(process.execPath, [path.join(pkg, 'scripts/bundle.mjs')], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  });

  it('as bundled: the bundle, told by stat alone', () => {
    expect(start()).toMatchObject({ bundle: true, stat: true, hashed: false, tsx: false });
  });

  it('a source touched, not changed: the bundle, after a content check that refreshes the stat stamp', () => {
    const later = new Date(Date.now() + 5000);
    utimesSync(path.join(pkg, 'src/pins.ts'), later, later);
    expect(start()).toMatchObject({ bundle: true, hashed: true, tsx: false });
    expect(start()).toMatchObject({ bundle: true, hashed: false, tsx: false });
  });

  it('a source changed: exit 4 saying to rebuild, neither the bundle nor tsx; NVSHMEM_EFA_NO_BUNDLE=1: tsx', () => {
    appendFileSync(path.join(pkg, 'src/pins.ts'), '\n');
    const r = start({}, 4);
    expect(r).toMatchObject({ bundle: false, hashed: true, tsx: false });
    expect(r.stderr).toBe(`error: dist/ was bundled from other sources than src/ as it is now\nfix: run \`npm run build\` in ${pkg} (or set NVSHMEM_EFA_NO_BUNDLE=1 to run src/ through tsx, slower)\n`);
    expect(start({ NVSHMEM_EFA_NO_BUNDLE: '1' })).toMatchObject({ bundle: false, tsx: true });
  });

  it('no dist/ bundle: exit 4 saying to build', () => {
    rmSync(path.join(pkg, 'dist/cli.mjs'));
    expect(start({}, 4).stderr).toMatch(/^error: dist\/ has no bundle \(dist\/cli\.mjs\)\nfix: run `npm run build`/);
  });
});

/**
 * An installed package is dist/ without src/ (package.json's files): the bin runs the bundle as it is, reads no
 * stamp and writes nothing inside the package (issue 39 item 3: it rewrote dist/source-stat.txt in node_modules).
 */
describe('bin/nvshmem-efa.js in an installed package (no src/)', () => {
  it('runs the bundle, checks nothing, writes nothing in the package', () => {
    const pkg = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-installed-')), 'pkg');
    for (const d of ['bin/nvshmem-efa.js', 'dist', 'third_party', 'templates', 'package.json']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true });
    rmSync(path.join(pkg, 'dist/source-stat.txt'));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
    const listing = () => readdirSync(pkg, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => `${path.join(e.parentPath, e.name)} ${statSync(path.join(e.parentPath, e.name)).mtimeMs}`).sort();
    const before = listing();
    const trace = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-trace-')), 'modules.txt');
    const r = spawnSync(process.execPath, ['--import', path.join(ROOT, 'test/helpers/module-trace.mjs'), path.join(pkg, 'bin/nvshmem-efa.js'), '--version'], {
      env: { ...process.env, NVSHMEM_EFA_NO_BUNDLE: '1', MODULE_TRACE: trace },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const modules = readFileSync(trace, 'utf8');
    expect(modules).toContain('/dist/cli.mjs');
    expect(modules).not.toMatch(/source-(stat|hash)|tsx/);
    expect(listing()).toEqual(before);
  });
});
