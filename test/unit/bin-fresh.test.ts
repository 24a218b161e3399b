import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, symlinkSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/**
 * bin/nvshmem-efa.js runs dist/ only while it was bundled from src/ as it is: told by the files' stat first
 * (dist/source-stat.txt, no file read: part of --help's start-up), by their contents when the stat differs
 * (dist/source-hash.txt), and never when a source changed. Run on a copy of the package, bundled there.
 */
describe('bin/nvshmem-efa.js runs the bundle only when it is current', () => {
  let pkg = '';
  /** Which of bundle, content check and tsx one start used, from the modules it resolved. */
  const start = () => {
    const trace = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-trace-')), 'modules.txt');
    const r = spawnSync(process.execPath, ['--import', path.join(ROOT, 'test/helpers/module-trace.mjs'), path.join(pkg, 'bin/nvshmem-efa.js'), '--version'], {
      env: { ...process.env, MODULE_TRACE: trace },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const modules = readFileSync(trace, 'utf8');
    return { bundle: modules.includes('/dist/cli.mjs'), hashed: modules.includes('/bin/source-hash.js'), tsx: modules.includes('/src/cli.ts') };
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
    expect(start()).toEqual({ bundle: true, hashed: false, tsx: false });
  });

  it('a source touched, not changed: the bundle, after a content check that refreshes the stat stamp', () => {
    const later = new Date(Date.now() + 5000);
    utimesSync(path.join(pkg, 'src/pins.ts'), later, later);
    expect(start()).toEqual({ bundle: true, hashed: true, tsx: false });
    expect(start()).toEqual({ bundle: true, hashed: false, tsx: false });
  });

  it('a source changed: the sources through tsx', () => {
    appendFileSync(path.join(pkg, 'src/pins.ts'), '\n');
    expect(start()).toEqual({ bundle: false, hashed: true, tsx: true });
  });
});
