import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { isStateFile, STATE_FILE, StateStore } from '../../src/core/state.ts';
import { MARKER_FILE } from '../../src/core/work-dir-names.ts';

/**
 * The state store (src/core/state.ts) in process: the CLI tests see a copied work dir rerun every step, but a
 * mutation test cannot see into a child process (issue 37).
 */
const tmp = () => realpathSync(mkdtempSync(path.join(os.tmpdir(), 'state-')));

const notes = () => {
  const got: string[] = [];
  return { got, note: (s: string) => void got.push(s) };
};

const write = (dir: string, json: unknown) => writeFileSync(path.join(dir, STATE_FILE), JSON.stringify(json));
const onDisk = (dir: string) => JSON.parse(readFileSync(path.join(dir, STATE_FILE), 'utf8'));
const entry = (result: unknown) => ({ stamp: 's', result, finishedAt: 't' });

describe('state store', () => {
  it('isStateFile takes only a state of this tool', () => {
    expect(isStateFile({ version: 1, steps: {} })).toBe(true);
    expect(isStateFile({ version: 1, workDir: '/w', steps: { a: entry(null) } })).toBe(true);
    expect(isStateFile({ version: 2, steps: {} })).toBe(false);
    expect(isStateFile({ version: 1 })).toBe(false);
    expect(isStateFile({ version: 1, steps: { a: { stamp: 's' } } })).toBe(false);
    expect(isStateFile('{}')).toBe(false);
  });

  it('writes whole, pretty JSON naming the real path of its work dir, and each finished step with its time', async () => {
    const real = tmp();
    const link = path.join(tmp(), 'link');
    symlinkSync(real, link);
    const s = await StateStore.open(link, () => expect.unreachable());
    const before = Date.now();
    await s.finish('copy', 'h1', { dir: path.join(real, 'sources/x') });
    const text = readFileSync(path.join(real, STATE_FILE), 'utf8');
    expect(text).toBe(JSON.stringify(JSON.parse(text), null, 2) + '\n');
    const got = JSON.parse(text);
    expect(got).toMatchObject({ version: 1, workDir: real, steps: { copy: { stamp: 'h1', result: { dir: path.join(real, 'sources/x') } } } });
    const at = Date.parse(got.steps.copy.finishedAt);
    expect(at).toBeGreaterThanOrEqual(before - 1);
    expect(at).toBeLessThanOrEqual(Date.now() + 1);
    expect(got.steps.copy.finishedAt).toBe(new Date(at).toISOString());
    expect(s.get('copy')).toEqual(got.steps.copy);
    expect(s.get('other')).toBeUndefined();
  });

  it('a work dir that does not exist yet is named by its resolved path', async () => {
    const d = path.join(tmp(), 'new');
    const s = await StateStore.open(d, () => expect.unreachable());
    await s.finish('a', 'h', null);
    expect(onDisk(d).workDir).toBe(d);
  });

  it('begin drops a finished step and saves at once; a step not there changes nothing', async () => {
    const d = tmp();
    const s = await StateStore.open(d);
    await s.begin('a');
    expect(existsSync(path.join(d, STATE_FILE))).toBe(false);
    await s.finish('a', 'h', 1);
    await s.finish('b', 'h', 2);
    await s.begin('a');
    expect(s.get('a')).toBeUndefined();
    expect(Object.keys(onDisk(d).steps)).toEqual(['b']);
    const again = await StateStore.open(d);
    expect(again.get('a')).toBeUndefined();
    expect(again.get('b')).toMatchObject({ stamp: 'h', result: 2 });
  });

  it('keeps the steps of a state written for this work dir, or of an earlier version that named none', async () => {
    const d = tmp();
    write(d, { version: 1, workDir: d, steps: { a: entry({ dir: path.join(d, 'sources/a') }) } });
    const n = notes();
    expect((await StateStore.open(d, n.note)).get('a')).toEqual(entry({ dir: path.join(d, 'sources/a') }));
    write(d, { version: 1, steps: { a: entry({ dir: path.join(d, 'sources/a') }) } });
    const s = await StateStore.open(d, n.note);
    expect(s.get('a')).toMatchObject({ stamp: 's' });
    expect(n.got).toEqual([]);
    // Saved again, it names this work dir.
    await s.finish('b', 'h', null);
    expect(onDisk(d)).toMatchObject({ workDir: d, steps: { a: entry({ dir: path.join(d, 'sources/a') }) } });
  });

  it('a state written for another work dir (a copy) is not trusted, and says so', async () => {
    const d = tmp();
    const file = path.join(d, STATE_FILE);
    write(d, { version: 1, workDir: '/elsewhere/work', steps: { a: entry(null) } });
    const n = notes();
    const s = await StateStore.open(d, n.note);
    expect(s.get('a')).toBeUndefined();
    expect(n.got).toEqual([`${file} was written for the work dir /elsewhere/work (this one is a copy, or was moved); its steps are not trusted here and rerun`]);
    // The next save names this work dir and drops the other's steps.
    await s.finish('b', 'h', null);
    expect(onDisk(d)).toMatchObject({ workDir: d });
    expect(Object.keys(onDisk(d).steps)).toEqual(['b']);
  });

  it("an earlier version's state whose trees lie in another work dir (by its marker or state) is that one's", async () => {
    for (const own of [MARKER_FILE, STATE_FILE]) {
      const orig = tmp();
      writeFileSync(path.join(orig, own), '{}');
      const d = tmp();
      // Deep in results, in arrays and objects, under the keys dir, prefix or path.
      for (const [key, result] of [
        ['dir', { dir: path.join(orig, 'sources/nvshmem') }],
        ['prefix', [{ x: 1 }, { install: { prefix: path.join(orig, 'install/nvshmem/lib') } }]],
        ['path', { files: [{ path: path.join(orig, 'downloads/a.tar') }] }],
        ['list', { dir: ['relative', path.join(orig, 'build')] }],
      ] as const) {
        write(d, { version: 1, steps: { a: entry({ n: 1 }), b: entry(result) } });
        const n = notes();
        const s = await StateStore.open(d, n.note);
        expect(s.get('a'), `${own} ${key}`).toBeUndefined();
        expect(n.got).toEqual([`${path.join(d, STATE_FILE)} was written for the work dir ${orig} (this one is a copy, or was moved); its steps are not trusted here and rerun`]);
      }
    }
  });

  it("paths under other keys, relative paths, paths of this work dir and paths in no work dir are not another's", async () => {
    const orig = tmp();
    writeFileSync(path.join(orig, MARKER_FILE), '{}');
    mkdirSync(path.join(orig, 'sub'));
    const d = tmp();
    writeFileSync(path.join(d, MARKER_FILE), '{}');
    const plain = tmp();
    for (const result of [
      { src: path.join(orig, 'sources/x') },
      { dir: 'sources/x' },
      { dir: path.join(d, 'sources/x') },
      { dir: path.join(plain, 'x') },
      { prefix: '/' },
      { dir: 42, path: null, prefix: true },
      'just a string',
      [path.join(orig, 'x')],
    ]) {
      write(d, { version: 1, steps: { a: entry(result) } });
      const n = notes();
      expect((await StateStore.open(d, n.note)).get('a'), JSON.stringify(result)).toBeDefined();
      expect(n.got).toEqual([]);
    }
    // The first work dir found above a path decides: this one's, even with another one's marker above it.
    const inner = path.join(orig, 'sub', 'work');
    mkdirSync(inner);
    writeFileSync(path.join(inner, STATE_FILE), '{}');
    write(inner, { version: 1, steps: { a: entry({ dir: path.join(inner, 'sources/x') }) } });
    expect((await StateStore.open(inner, () => expect.unreachable())).get('a')).toBeDefined();
    // A work dir reached through a link is the same work dir.
    const link = path.join(tmp(), 'l');
    symlinkSync(d, link);
    write(d, { version: 1, steps: { a: entry({ dir: path.join(d, 'sources/x') }) } });
    expect((await StateStore.open(link, () => expect.unreachable())).get('a')).toBeDefined();
  });

  it('a file that is not a state (not JSON, another schema) is empty; one that is not a file is named in a note', async () => {
    const d = tmp();
    for (const text of ['{not json', '{"version":2,"steps":{}}', '']) {
      writeFileSync(path.join(d, STATE_FILE), text);
      const n = notes();
      expect((await StateStore.open(d, n.note)).get('a')).toBeUndefined();
      expect(n.got).toEqual([]);
    }
    const e = tmp();
    const victim = path.join(e, 'victim.json');
    writeFileSync(victim, JSON.stringify({ version: 1, steps: { a: entry(null) } }));
    symlinkSync(victim, path.join(e, STATE_FILE));
    const n = notes();
    const s = await StateStore.open(e, n.note);
    expect(s.get('a')).toBeUndefined();
    expect(n.got).toEqual([`${path.join(e, STATE_FILE)} is a symbolic link, not a state nvshmem-efa wrote; every step reruns`]);
  });

  it('notes go to stderr by default', async () => {
    const d = tmp();
    write(d, { version: 1, workDir: '/elsewhere', steps: {} });
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      await StateStore.open(d);
      expect(spy).toHaveBeenCalledWith(`note: ${path.join(d, STATE_FILE)} was written for the work dir /elsewhere (this one is a copy, or was moved); its steps are not trusted here and rerun\n`);
    } finally {
      spy.mockRestore();
    }
  });
});
