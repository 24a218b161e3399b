import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 20 item 2: `clean` deletes only what nvshmem-efa created, recorded when it was created, never what the
 * user put beside it: downloads/ (where the README tells --offline users to put archives) and install/ are
 * shared, file by file.
 */
const ls = (d: string) => readdirSync(d).sort();
const MARKER = '.nvshmem-efa-workdir.json';

describe('clean never deletes a file nvshmem-efa did not create (issue 20 item 2)', () => {
  it('after a patch run, what the user puts into downloads/, install/ and build/ survives clean, which says so', () => {
    const wd = path.join(tmp('parent-'), 'wd2');
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', wd, '--offline']).code).toBe(0);
    mkdirSync(path.join(wd, 'downloads'));
    writeFileSync(path.join(wd, 'downloads/mine.tar'), 'archive\n');
    mkdirSync(path.join(wd, 'install'));
    writeFileSync(path.join(wd, 'install/mylib.so'), 'lib\n');
    mkdirSync(path.join(wd, 'build'));
    writeFileSync(path.join(wd, 'build/notes.txt'), 'notes\n');
    const dry = cli(['clean', '--work-dir', wd, '--dry-run']);
    expect(dry.code).toBe(0);
    const removing = /^would remove ([^(]*)/m.exec(dry.stdout)?.[1] ?? '';
    expect(removing).toContain(path.join(wd, 'sources'));
    for (const d of ['downloads', 'install', 'build']) expect(removing).not.toContain(path.join(wd, d));
    const r = cli(['clean', '--work-dir', wd]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('kept 3 entries nvshmem-efa did not create');
    for (const f of ['downloads/mine.tar', 'install/mylib.so', 'build/notes.txt']) expect(r.stdout).toContain(path.join(wd, f.split('/')[0]!));
    expect(readFileSync(path.join(wd, 'downloads/mine.tar'), 'utf8')).toBe('archive\n');
    expect(readFileSync(path.join(wd, 'install/mylib.so'), 'utf8')).toBe('lib\n');
    expect(readFileSync(path.join(wd, 'build/notes.txt'), 'utf8')).toBe('notes\n');
    // What the patch run made is gone, the directory stays (the user's files are in it).
    expect(ls(wd)).toEqual(['build', 'downloads', 'install']);
  });

  it('a marker of an earlier version (every layout name claimed): the archives in downloads/ and unknown files in install/ are kept, and clean says why', () => {
    const wd = tmp();
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', wd, '--offline']).code).toBe(0);
    writeFileSync(
      path.join(wd, MARKER),
      JSON.stringify({ schema: 'nvshmem-efa-workdir/1', createdDir: false, created: ['logs', 'sources', 'build', 'install', 'stubs', 'vendor', 'downloads', 'state.json', 'report.json', 'report.md', '.nvshmem-efa.lock'] }),
    );
    mkdirSync(path.join(wd, 'downloads'));
    writeFileSync(path.join(wd, 'downloads/libfabric-2.3.0.tar.bz2'), 'the user\'s offline archive\n');
    mkdirSync(path.join(wd, 'install/nvshmem/lib'), { recursive: true });
    writeFileSync(path.join(wd, 'install/nvshmem/lib/libnvshmem_host.so'), 'ours\n');
    writeFileSync(path.join(wd, 'install/mylib.so'), 'lib\n');
    const r = cli(['clean', '--work-dir', wd]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`kept ${path.join(wd, 'downloads/libfabric-2.3.0.tar.bz2')}`);
    expect(r.stdout).toMatch(/an earlier nvshmem-efa did not record which archives it downloaded/);
    expect(readFileSync(path.join(wd, 'downloads/libfabric-2.3.0.tar.bz2'), 'utf8')).toBe('the user\'s offline archive\n');
    expect(readFileSync(path.join(wd, 'install/mylib.so'), 'utf8')).toBe('lib\n');
    expect(existsSync(path.join(wd, 'install/nvshmem'))).toBe(false);
    expect(existsSync(path.join(wd, 'sources'))).toBe(false);
    expect(ls(wd)).toEqual(['downloads', 'install']);
  });

  it('a marker edited to list ../, absolute and dot paths: those are ignored with a note, nothing outside the work dir goes', () => {
    const parent = tmp('parent-');
    const wd = path.join(parent, 'wd');
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', wd, '--offline']).code).toBe(0);
    const victim = path.join(parent, 'victim.txt');
    writeFileSync(victim, 'precious\n');
    const m = JSON.parse(readFileSync(path.join(wd, MARKER), 'utf8'));
    m.created = [...m.created, '../victim.txt', victim, '..', '.'];
    m.shared.entries = [...m.shared.entries, { path: 'downloads/../../victim.txt' }];
    writeFileSync(path.join(wd, MARKER), JSON.stringify(m));
    const r = cli(['clean', '--work-dir', wd]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`ignored "../victim.txt", "${victim}", "..", ".", "downloads/../../victim.txt" in ${path.join(wd, MARKER)}`);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(existsSync(wd)).toBe(false);
  });
});
