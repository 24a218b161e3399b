import { spawnSync } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FilesystemError, UsageError } from '../../src/core/errors.ts';
import { applyClean, beginClaim, claimWorkDir, LAYOUT_NAMES, MARKER_FILE, planClean, recordDownload, settleClaim } from '../../src/core/work-dir.ts';
import { skipTitle } from '../helpers/skip-title.ts';

/**
 * The work-dir marker and `clean`'s plan (src/core/work-dir.ts) in process: the CLI tests of test/integration/
 * reach the same code in a child process, where a mutation test cannot see it (issue 37).
 */
const tmp = () => realpathSync(mkdtempSync(path.join(os.tmpdir(), 'wdc-')));
const SCHEMA = 'nvshmem-efa-workdir/1';
/** Every layout path a fresh claim notes as pending (none exists yet). */
const ALL_PENDING = ['logs', 'sources', 'build', 'stubs', 'vendor', 'downloads', 'install', 'install/nvshmem', 'install/libfabric', 'install/rdma-core', 'install/gdrcopy'];

const markerOf = (d: string) => JSON.parse(readFileSync(path.join(d, MARKER_FILE), 'utf8'));
const putMarker = (d: string, m: unknown) => writeFileSync(path.join(d, MARKER_FILE), typeof m === 'string' ? m : JSON.stringify(m));
const marker = (o: Record<string, unknown> = {}) => ({ schema: SCHEMA, createdDir: false, created: [], shared: { dirs: [], entries: [] }, ...o });
const notes = () => {
  const got: string[] = [];
  return { got, note: (s: string) => void got.push(s) };
};
const mk = (d: string, ...rels: string[]) => {
  for (const r of rels) mkdirSync(path.join(d, r), { recursive: true });
};
const put = (d: string, rel: string, text = 'x') => {
  mkdirSync(path.dirname(path.join(d, rel)), { recursive: true });
  writeFileSync(path.join(d, rel), text);
};
async function rejected<T extends Error>(p: Promise<unknown>, kind: new (...a: never[]) => T): Promise<T> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(kind);
  return e as T;
}

describe('claiming a work dir', () => {
  it('the layout names', () => {
    expect([...LAYOUT_NAMES]).toEqual(['logs', 'sources', 'build', 'stubs', 'vendor', 'downloads', 'install', 'state.json', 'report.json', 'report.md', '.nvshmem-efa.lock']);
  });

  it('a new directory is made and marked as made by nvshmem-efa, every layout path pending', async () => {
    const d = path.join(tmp(), 'a', 'work');
    await claimWorkDir(d, () => expect.unreachable());
    expect(readdirSync(d)).toEqual([MARKER_FILE]);
    const text = readFileSync(path.join(d, MARKER_FILE), 'utf8');
    expect(text).toBe(JSON.stringify(JSON.parse(text), null, 2) + '\n');
    expect(JSON.parse(text)).toEqual(marker({ createdDir: true, pending: ALL_PENDING }));
  });

  it('an empty directory is marked as not made by nvshmem-efa; only what is missing is pending', async () => {
    const d = tmp();
    await claimWorkDir(d);
    expect(markerOf(d)).toEqual(marker({ pending: ALL_PENDING }));
    // Claimed again: the marker stands as it is.
    mk(d, 'logs');
    await claimWorkDir(d, () => expect.unreachable());
    expect(markerOf(d).pending).toEqual(ALL_PENDING);
  });

  it('a file is not a work dir', async () => {
    const f = path.join(tmp(), 'f');
    writeFileSync(f, 'x');
    const e = await rejected(claimWorkDir(f), FilesystemError);
    expect(e.message).toBe(`--work-dir ${f} exists and is not a directory`);
    expect(e.fix).toBe(`pass a directory path (a new one is created), or move ${f} away`);
    expect((await rejected(planClean(f), FilesystemError)).message).toBe(`--work-dir ${f} exists and is not a directory`);
  });

  it('a directory holding anything else is refused, naming up to five of its entries', async () => {
    const d = tmp();
    put(d, 'a.txt');
    mk(d, 'b');
    const e = await rejected(claimWorkDir(d), UsageError);
    expect(e.message).toMatch(new RegExp(`^--work-dir ${d} is not empty and is not an nvshmem-efa work dir \\(it holds (a.txt, b|b, a.txt)\\); refusing to write into it$`));
    expect(e.fix).toBe(`pass a new or empty directory, e.g. --work-dir ${path.join(d, 'nvshmem-efa-work')}`);
    const many = tmp();
    for (const n of ['1', '2', '3', '4', '5', '6', '7']) put(many, n);
    const m = await rejected(claimWorkDir(many), UsageError);
    expect(m.message).toMatch(/\(it holds (\d, ){4}\d, … \(7 entries\)\)/);
    const five = tmp();
    for (const n of ['1', '2', '3', '4', '5']) put(five, n);
    expect((await rejected(claimWorkDir(five), UsageError)).message).toMatch(/\(it holds \d, \d, \d, \d, \d\); refusing/);
    expect(readdirSync(five)).toHaveLength(5);
  });

  it('a marker that is not ours is refused, saying why', async () => {
    const file = (d: string) => path.join(d, MARKER_FILE);
    for (const [text, why] of [
      ['{not json', 'not JSON'],
      ['[]', 'schema: '],
      [JSON.stringify({ schema: 'other/1', createdDir: false, created: [] }), 'schema: '],
      [JSON.stringify({ schema: SCHEMA, createdDir: 'yes', created: [] }), 'createdDir: '],
    ] as const) {
      const d = tmp();
      putMarker(d, text);
      const e = await rejected(claimWorkDir(d), UsageError);
      expect(e.message.startsWith(`${file(d)} is not a work-dir marker nvshmem-efa wrote (${why}`), e.message).toBe(true);
      expect(e.message.endsWith(`); refusing to write into or delete anything in ${d}`)).toBe(true);
      expect(e.fix).toBe(`pass a new or empty --work-dir, or delete what you need from ${d} yourself`);
      expect((await rejected(planClean(d), UsageError)).message).toBe(e.message);
    }
  });

  it('a marker, state or lock that is not a regular file is refused before anything is read or written', async () => {
    for (const name of [MARKER_FILE, 'state.json', '.nvshmem-efa.lock']) {
      const d = tmp();
      mk(d, name);
      const e = await rejected(claimWorkDir(d), FilesystemError);
      expect(e.message).toBe(`${path.join(d, name)} is a directory, not the file nvshmem-efa keeps there; refusing to write into ${d} (nothing was changed, ${name} was not touched)`);
      expect((await rejected(planClean(d), FilesystemError)).message).toContain(`refusing to delete anything in ${d} `);
      expect(readdirSync(d)).toEqual([name]);
    }
  });

  it("a marker's entries that are not paths of the layout are ignored, and named", async () => {
    const d = tmp();
    putMarker(d, marker({ created: ['logs', '../x'], shared: { dirs: ['downloads', 'etc'], entries: [{ path: 'downloads/a.tar' }, { path: 'downloads/a/b' }, { path: '/etc/passwd' }, { path: 'logs/a' }] }, pending: ['install/nvshmem', 'install/x', 'sources/y', 'sources/nvshmem'], legacy: ['logs', 'home'] }));
    const n = notes();
    await claimWorkDir(d, n.note);
    expect(n.got).toEqual([`ignored "../x", "etc", "downloads/a/b", "/etc/passwd", "logs/a", "install/x", "sources/y", "sources/nvshmem", "home" in ${path.join(d, MARKER_FILE)}: not paths of the work dir's layout`]);
    const one = tmp();
    putMarker(one, marker({ created: ['.'] }));
    const m = notes();
    await claimWorkDir(one, m.note);
    expect(m.got).toEqual([`ignored "." in ${path.join(one, MARKER_FILE)}: not a path of the work dir's layout`]);
    const plan = (await planClean(one))!;
    expect(plan.ignored).toBe(m.got[0]);
    expect((await planClean(d))!.ignored).toBe(n.got[0]);
    const clean = tmp();
    putMarker(clean, marker());
    expect((await planClean(clean))!.ignored).toBe('');
  });

  it('a symbolic link in place of a layout directory is refused, naming its target', async () => {
    for (const n of ['logs', 'vendor', 'downloads', 'install']) {
      const d = tmp();
      putMarker(d, marker());
      symlinkSync('/elsewhere', path.join(d, n));
      const e = await rejected(claimWorkDir(d), UsageError);
      expect(e.message).toBe(`${path.join(d, n)} is a symbolic link (to /elsewhere); nvshmem-efa makes none in its work dir and would write through it`);
      expect(e.fix).toBe(`remove the link (rm ${path.join(d, n)}; what it points to is not touched) and rerun, or pass another --work-dir (on the other disk, if that is why the link is there)`);
    }
  });

  it("an earlier version's work dir (its state.json, no marker) is adopted: its directories legacy, what is missing pending", async () => {
    const d = tmp();
    put(d, 'state.json', JSON.stringify({ version: 1, steps: {} }));
    mk(d, 'logs', 'build', 'install/nvshmem', 'install/other');
    put(d, 'stubs', 'a file');
    await claimWorkDir(d, () => expect.unreachable());
    expect(markerOf(d)).toEqual({
      schema: SCHEMA,
      createdDir: false,
      created: [],
      legacy: ['logs', 'build'],
      shared: { dirs: ['downloads', 'install'], entries: [{ path: 'install/nvshmem' }], unrecordedDownloads: true },
      pending: ['sources', 'vendor', 'downloads', 'install/libfabric', 'install/rdma-core', 'install/gdrcopy'],
    });
  });
});

describe('recording what a run made', () => {
  it('beginClaim records what a killed run left of its pending paths, removes planted links, and notes what is missing', () => {
    const d = tmp();
    putMarker(d, marker({ created: ['logs'], shared: { dirs: [], entries: [{ path: 'install/libfabric' }] }, pending: ['logs', 'sources', 'build', 'downloads', 'install/nvshmem', 'install/libfabric', 'stubs'] }));
    mk(d, 'logs', 'sources', 'downloads', 'install/nvshmem', 'install/libfabric', 'vendor');
    put(d, 'build', 'a file, not ours');
    const victim = path.join(tmp(), 'victim');
    mkdirSync(victim);
    symlinkSync(victim, path.join(d, 'sources', 'nvshmem'));
    symlinkSync(victim, path.join(d, 'install', 'gdrcopy'));
    symlinkSync(victim, path.join(d, 'logs', 'x.log'));
    const n = notes();
    beginClaim(d, n.note);
    expect(markerOf(d)).toEqual({
      schema: SCHEMA,
      createdDir: false,
      created: ['logs', 'sources'],
      shared: { dirs: ['downloads'], entries: [{ path: 'install/libfabric' }, { path: 'install/nvshmem' }] },
      pending: ['stubs', 'install/rdma-core', 'install/gdrcopy'],
    });
    expect(n.got.sort()).toEqual(
      [path.join(d, 'sources', 'nvshmem'), path.join(d, 'install', 'gdrcopy')]
        .map((l) => `removed the symbolic link ${l} (to ${victim}): nvshmem-efa makes no links in its work dir and would have written through it; ${victim} is untouched`)
        .sort(),
    );
    expect(existsSync(victim)).toBe(true);
    expect(lstatSync(path.join(d, 'logs', 'x.log')).isSymbolicLink()).toBe(true);
  });

  it('beginClaim with nothing missing leaves no pending list; without a marker it changes nothing', () => {
    const d = tmp();
    putMarker(d, marker({ created: ['logs'], shared: { dirs: ['downloads'], entries: [] } }));
    mk(d, 'logs', 'sources', 'build', 'stubs', 'vendor', 'downloads', 'install/nvshmem', 'install/libfabric', 'install/rdma-core', 'install/gdrcopy');
    beginClaim(d, () => expect.unreachable());
    expect(markerOf(d)).toEqual(marker({ created: ['logs'], shared: { dirs: ['downloads'], entries: [] } }));
    const none = tmp();
    mk(none, 'sources');
    symlinkSync('/', path.join(none, 'sources', 'l'));
    beginClaim(none, () => expect.unreachable());
    expect(readdirSync(none)).toEqual(['sources']);
    expect(readdirSync(path.join(none, 'sources'))).toEqual(['l']);
    putMarker(none, '{bad');
    beginClaim(none, () => expect.unreachable());
    expect(readFileSync(path.join(none, MARKER_FILE), 'utf8')).toBe('{bad');
  });

  it('settleClaim records pending paths made since; not final, it keeps those still missing pending', () => {
    const d = tmp();
    putMarker(d, marker({ created: ['logs'], shared: { dirs: ['install'], entries: [{ path: 'install/nvshmem' }] }, pending: ['logs', 'build', 'install', 'install/nvshmem', 'downloads', 'stubs'] }));
    mk(d, 'logs', 'build', 'install/nvshmem');
    settleClaim(d, { final: false });
    expect(markerOf(d)).toEqual(marker({ created: ['logs', 'build'], shared: { dirs: ['install'], entries: [{ path: 'install/nvshmem' }] }, pending: ['downloads', 'stubs'] }));
    mk(d, 'downloads');
    settleClaim(d, { final: false });
    expect(markerOf(d)).toEqual(marker({ created: ['logs', 'build'], shared: { dirs: ['install', 'downloads'], entries: [{ path: 'install/nvshmem' }] }, pending: ['stubs'] }));
    settleClaim(d, { final: true });
    expect(markerOf(d)).toEqual(marker({ created: ['logs', 'build'], shared: { dirs: ['install', 'downloads'], entries: [{ path: 'install/nvshmem' }] } }));
    // No pending list: nothing to record, the marker is not rewritten.
    putMarker(d, marker({ created: ['logs'] }));
    settleClaim(d, { final: true });
    expect(readFileSync(path.join(d, MARKER_FILE), 'utf8')).toBe(JSON.stringify(marker({ created: ['logs'] })));
    const none = tmp();
    settleClaim(none, { final: true });
    expect(readdirSync(none)).toEqual([]);
  });

  it("an earlier version's marker (no shared record) is upgraded: its tool directories stand, downloads unrecorded, install by prefix", () => {
    const d = tmp();
    mk(d, 'install/nvshmem', 'install/gdrcopy', 'install/mine');
    putMarker(d, { schema: SCHEMA, createdDir: true, created: ['logs', 'sources', 'downloads', 'install', 'state.json'], pending: [] });
    settleClaim(d, { final: true });
    expect(markerOf(d)).toEqual({
      schema: SCHEMA,
      createdDir: true,
      created: ['logs', 'sources'],
      shared: { dirs: ['downloads', 'install'], entries: [{ path: 'install/nvshmem' }, { path: 'install/gdrcopy' }], unrecordedDownloads: true },
    });
    const e = tmp();
    putMarker(e, { schema: SCHEMA, createdDir: false, created: ['build'], pending: [] });
    settleClaim(e, { final: true });
    expect(markerOf(e)).toEqual({ schema: SCHEMA, createdDir: false, created: ['build'], shared: { dirs: [], entries: [] } });
  });

  it('recordDownload records an archive in downloads/ of a marked work dir with its inode and size, replacing an earlier record', () => {
    const d = tmp();
    putMarker(d, marker({ shared: { dirs: ['downloads'], entries: [{ path: 'downloads/a.tar', ino: 1, size: 1 }, { path: 'downloads/b.tar', ino: 2, size: 2 }] } }));
    put(d, 'downloads/a.tar', 'archive');
    recordDownload(path.join(d, 'downloads', 'a.tar'));
    const st = statSync(path.join(d, 'downloads', 'a.tar'));
    expect(markerOf(d).shared.entries).toEqual([{ path: 'downloads/b.tar', ino: 2, size: 2 }, { path: 'downloads/a.tar', ino: st.ino, size: 7 }]);
    // Elsewhere, or in a directory without our marker: nothing is recorded.
    put(d, 'other/c.tar');
    const before = readFileSync(path.join(d, MARKER_FILE), 'utf8');
    recordDownload(path.join(d, 'other', 'c.tar'));
    expect(readFileSync(path.join(d, MARKER_FILE), 'utf8')).toBe(before);
    const none = tmp();
    put(none, 'downloads/a.tar');
    recordDownload(path.join(none, 'downloads', 'a.tar'));
    expect(readdirSync(none)).toEqual(['downloads']);
  });
});

describe("clean's plan", () => {
  it('nothing to clean: no directory, or an empty one; a directory that is not ours is refused', async () => {
    expect(await planClean(path.join(tmp(), 'none'))).toBeUndefined();
    expect(await planClean(tmp())).toBeUndefined();
    const d = tmp();
    put(d, 'state.json', '{"not":"ours"}');
    const e = await rejected(planClean(d), UsageError);
    expect(e.message).toBe(`${d} is not an nvshmem-efa work directory (no ${MARKER_FILE} or state.json of ours); refusing to delete anything in it`);
    expect(e.fix).toBe('pass the --work-dir a build used, or delete the folder yourself');
    put(d, 'state.json', '{not json');
    await rejected(planClean(d), UsageError);
  });

  it('removes what the marker says nvshmem-efa made and the files it rewrites; keeps and names the rest', async () => {
    const d = tmp();
    putMarker(d, marker({ createdDir: true, created: ['logs', 'build', 'stubs'] }));
    put(d, 'state.json');
    put(d, 'report.json');
    put(d, 'report.md');
    put(d, '.nvshmem-efa.lock');
    put(d, '.nvshmem-efa.lock.123.tmp');
    put(d, 'state.json.nvshmem-efa-tmp-99');
    put(d, 'state.json.nvshmem-efa-tmp-x');
    put(d, 'state.json.nvshmem-efa-tmp-12x');
    mk(d, 'logs/sub', 'vendor', 'report.md.d');
    symlinkSync('/', path.join(d, 'build'));
    put(d, 'stubs', 'a file');
    put(d, 'mine.txt');
    const plan = (await planClean(d))!;
    const at = (...n: string[]) => n.map((x) => path.join(d, x)).sort();
    expect(plan.remove.sort()).toEqual(at(MARKER_FILE, 'state.json', 'report.json', 'report.md', '.nvshmem-efa.lock', '.nvshmem-efa.lock.123.tmp', 'state.json.nvshmem-efa-tmp-99', 'logs'));
    expect(plan.keep.sort()).toEqual(at('vendor', 'report.md.d', 'mine.txt', 'state.json.nvshmem-efa-tmp-x', 'state.json.nvshmem-efa-tmp-12x'));
    expect(plan.notes.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: path.join(d, 'build'), why: 'a symbolic link where nvshmem-efa made a directory' },
      { path: path.join(d, 'stubs'), why: 'a file where nvshmem-efa made a directory' },
    ]);
    expect(plan.removeDir).toBe(false);
    await applyClean(d, plan);
    expect(readdirSync(d).sort()).toEqual(['build', 'mine.txt', 'report.md.d', 'state.json.nvshmem-efa-tmp-12x', 'state.json.nvshmem-efa-tmp-x', 'stubs', 'vendor']);
  });

  it('a directory nvshmem-efa made goes with its contents; a directory where state.json goes is refused', async () => {
    const d = path.join(tmp(), 'w');
    await claimWorkDir(d);
    mk(d, 'logs', 'sources/nvshmem');
    put(d, 'logs/build.log');
    settleClaim(d, { final: true });
    const plan = (await planClean(d))!;
    expect(plan.removeDir).toBe(true);
    await applyClean(d, plan);
    expect(existsSync(d)).toBe(false);
    const e = path.join(tmp(), 'w');
    await claimWorkDir(e);
    mk(e, 'state.json');
    await rejected(planClean(e), FilesystemError);
  });

  it('a directory nvshmem-efa made stays when a note names something kept in it', async () => {
    const d = path.join(tmp(), 'w');
    await claimWorkDir(d);
    mk(d, 'downloads');
    settleClaim(d, { final: true });
    put(d, 'downloads/users.tar');
    const m = markerOf(d);
    putMarker(d, { ...m, shared: { ...m.shared, unrecordedDownloads: true } });
    const plan = (await planClean(d))!;
    expect(plan.keep).toEqual([]);
    expect(plan.notes).toHaveLength(1);
    expect(plan.removeDir).toBe(false);
  });

  it("an earlier version's directories: only what it makes, of the kind it makes, goes; the rest is kept and named", async () => {
    const d = tmp();
    put(d, 'state.json', JSON.stringify({ version: 1, steps: {} }));
    put(d, 'logs/build-nvshmem.log');
    put(d, 'logs/x.nvshmem-efa-tmp-12');
    put(d, 'logs/notes.txt');
    mk(d, 'logs/a.log');
    symlinkSync('/', path.join(d, 'logs', 'l.log'));
    execFileSync('mkfifo', [path.join(d, 'logs', 'p.log')]);
    mk(d, 'sources/nvshmem', 'sources/nvshmem-3.2.5.partial', 'sources/deepep-main.keep', 'sources/libfabric-2.3.0', 'sources/gdrcopy-v2.4.partial');
    mk(d, 'build/nvshmem-stage', 'build/probe', 'vendor/efa_gda');
    put(d, 'stubs/libcuda.so');
    put(d, 'stubs/libcuda.so.tmp');
    put(d, 'stubs/libcuda_stub.c');
    put(d, 'stubs/include_cuda_h.c');
    mk(d, 'stubs/libcuda.so.1');
    const plan = (await planClean(d))!;
    const at = (...n: string[]) => n.map((x) => path.join(d, x)).sort();
    expect(plan.remove.sort()).toEqual(at('state.json', 'logs/build-nvshmem.log', 'logs/x.nvshmem-efa-tmp-12', 'sources', 'build', 'vendor', 'stubs/libcuda.so', 'stubs/libcuda.so.tmp', 'stubs/libcuda_stub.c', 'stubs/include_cuda_h.c'));
    const why = (kind: string, dir: string) => `an earlier nvshmem-efa made ${dir}/ without recording what it put there, and it makes no ${kind} of this name there; delete it yourself if you do not need it`;
    expect(plan.notes.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: path.join(d, 'logs/a.log'), why: why('directory', 'logs') },
      { path: path.join(d, 'logs/l.log'), why: why('link', 'logs') },
      { path: path.join(d, 'logs/notes.txt'), why: why('file', 'logs') },
      { path: path.join(d, 'logs/p.log'), why: why('special file', 'logs') },
      { path: path.join(d, 'stubs/libcuda.so.1'), why: why('directory', 'stubs') },
    ]);
    expect(plan.keep).toEqual([]);
    expect(plan.removeDir).toBe(false);
    // Names that look like ours but are not: another tree, another kind.
    const e = tmp();
    put(e, 'state.json', JSON.stringify({ version: 1, steps: {} }));
    mk(e, 'sources/mytree', 'sources/libfabric', 'build/other', 'vendor/efa_gda2');
    put(e, 'sources/nvshmem');
    put(e, 'vendor/efa_gda.tar');
    const p = (await planClean(e))!;
    expect(p.remove).toEqual([path.join(e, 'state.json')]);
    expect(p.notes.map((x) => path.relative(e, x.path)).sort()).toEqual(['build/other', 'sources/libfabric', 'sources/mytree', 'sources/nvshmem', 'vendor/efa_gda.tar', 'vendor/efa_gda2']);
  });

  it('downloads/: the recorded archive and its partial download go, anything else stays, with a reason where one is worth saying', async () => {
    const d = tmp();
    put(d, 'downloads/ours.tar', 'ours');
    put(d, 'downloads/ours.tar.partial');
    put(d, 'downloads/replaced.tar', 'theirs now');
    put(d, 'downloads/user.tar');
    put(d, 'downloads/stray.tar.partial');
    mk(d, 'downloads/ourdir.tar');
    const st = statSync(path.join(d, 'downloads/ours.tar'));
    const entries = [
      { path: 'downloads/ours.tar', ino: st.ino, size: st.size },
      { path: 'downloads/replaced.tar', ino: st.ino + 1, size: 11 },
      { path: 'downloads/ourdir.tar', ino: statSync(path.join(d, 'downloads/ourdir.tar')).ino },
    ];
    putMarker(d, marker({ createdDir: true, shared: { dirs: ['downloads'], entries } }));
    const plan = (await planClean(d))!;
    const at = (...n: string[]) => n.map((x) => path.join(d, x)).sort();
    expect(plan.remove.sort()).toEqual(at(MARKER_FILE, 'downloads/ours.tar', 'downloads/ours.tar.partial'));
    expect(plan.keep.sort()).toEqual(at('downloads/stray.tar.partial', 'downloads/user.tar'));
    const replacedWhy = 'not the archive nvshmem-efa downloaded there (replaced or copied since)';
    expect(plan.notes.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: path.join(d, 'downloads/ourdir.tar'), why: replacedWhy },
      { path: path.join(d, 'downloads/replaced.tar'), why: replacedWhy },
    ]);
    // An earlier version did not record its archives: each one is named.
    const m = markerOf(d);
    putMarker(d, { ...m, shared: { dirs: ['downloads'], entries: [], unrecordedDownloads: true } });
    const p = (await planClean(d))!;
    expect(p.keep).toEqual([]);
    expect(p.notes.map((x) => x.why)).toEqual(Array(6).fill('an earlier nvshmem-efa did not record which archives it downloaded; delete it yourself if you do not need it'));
  });

  it('downloads/ and install/ themselves go only when nvshmem-efa made them and nothing else is in them', async () => {
    const d = tmp();
    const size = (rel: string) => statSync(path.join(d, rel));
    put(d, 'downloads/a.tar', 'a');
    mk(d, 'install/nvshmem', 'install/libfabric');
    put(d, 'install/gdrcopy', 'a file');
    const a = size('downloads/a.tar');
    putMarker(d, marker({ shared: { dirs: ['downloads', 'install'], entries: [{ path: 'downloads/a.tar', ino: a.ino, size: a.size }, { path: 'install/nvshmem' }, { path: 'install/gdrcopy' }] } }));
    const at = (...n: string[]) => n.map((x) => path.join(d, x)).sort();
    let plan = (await planClean(d))!;
    expect(plan.remove.sort()).toEqual(at(MARKER_FILE, 'downloads', 'install/nvshmem'));
    expect(plan.keep.sort()).toEqual(at('install/gdrcopy', 'install/libfabric'));
    // Not made by nvshmem-efa: what it put there goes, the directory stays.
    putMarker(d, marker({ shared: { dirs: [], entries: [{ path: 'downloads/a.tar', ino: a.ino, size: a.size }, { path: 'install/nvshmem' }] } }));
    plan = (await planClean(d))!;
    expect(plan.remove.sort()).toEqual(at(MARKER_FILE, 'downloads/a.tar', 'install/nvshmem'));
    // Empty, and not made by nvshmem-efa: kept.
    const e = tmp();
    mk(e, 'downloads', 'install');
    putMarker(e, marker({ createdDir: true }));
    plan = (await planClean(e))!;
    expect(plan.keep.sort()).toEqual([path.join(e, 'downloads'), path.join(e, 'install')]);
    expect(plan.removeDir).toBe(false);
    // A file named downloads is the user's.
    const f = tmp();
    put(f, 'downloads', 'a file');
    putMarker(f, marker({ createdDir: true, shared: { dirs: ['downloads'], entries: [] } }));
    plan = (await planClean(f))!;
    expect(plan.keep).toEqual([path.join(f, 'downloads')]);
  });

  it('applyClean removes links themselves, the marker last, and the directory when the plan says so', async () => {
    const d = tmp();
    const victim = path.join(tmp(), 'victim');
    writeFileSync(victim, 'theirs');
    symlinkSync(victim, path.join(d, 'l'));
    mk(d, 'logs/deep/er');
    putMarker(d, marker());
    await applyClean(d, { remove: [path.join(d, MARKER_FILE), path.join(d, 'l'), path.join(d, 'logs')], keep: [], notes: [], removeDir: true, ignored: '' });
    expect(existsSync(d)).toBe(false);
    expect(readFileSync(victim, 'utf8')).toBe('theirs');
    const e = tmp();
    putMarker(e, marker());
    await applyClean(e, { remove: [], keep: [], notes: [], removeDir: false, ignored: '' });
    expect(readdirSync(e)).toEqual([]);
  });
});

const root = process.geteuid?.() === 0;
const mounted: string[] = [];
afterEach(() => {
  for (const m of mounted.splice(0).reverse()) spawnSync('umount', ['-l', m]);
});

describe.skipIf(!root)(skipTitle('clean and mounts (root: bind mounts)', !root && 'needs root for bind mounts'), () => {
  it('an entry to remove with a mount at or below it is kept and named, with how to unmount it', async () => {
    const d = path.join(tmp(), 'w');
    await claimWorkDir(d);
    mk(d, 'logs', 'build/nvshmem/mnt', 'sources/a', 'sources/b');
    settleClaim(d, { final: true });
    const theirs = tmp();
    put(theirs, 'precious');
    const one = path.join(d, 'build/nvshmem/mnt');
    const r = spawnSync('mount', ['--bind', theirs, one]);
    if (r.status !== 0) return expect.soft(r.stderr.toString(), 'mount --bind failed').toBe('');
    mounted.push(one);
    for (const m of ['a', 'b']) {
      const at = path.join(d, 'sources', m);
      expect(spawnSync('mount', ['--bind', theirs, at]).status).toBe(0);
      mounted.push(at);
    }
    const plan = (await planClean(d))!;
    expect(plan.remove.sort()).toEqual([path.join(d, MARKER_FILE), path.join(d, 'logs')].sort());
    expect(plan.notes.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: path.join(d, 'sources'), why: `${path.join(d, 'sources/a')}, ${path.join(d, 'sources/b')} are mount points (a bind mount or a file system), and clean does not delete across a mount; unmount it (umount ${path.join(d, 'sources/a')}), then clean again` },
      { path: path.join(d, 'build'), why: `${one} is a mount point (a bind mount or a file system), and clean does not delete across a mount; unmount it (umount ${one}), then clean again` },
    ].sort((a, b) => a.path.localeCompare(b.path)));
    expect(plan.removeDir).toBe(false);
    await applyClean(d, plan);
    expect(readdirSync(theirs)).toEqual(['precious']);
  });
});
