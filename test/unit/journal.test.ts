import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeChanges } from '../../src/patchers/engine/apply.ts';
import { JOURNAL, readJournal, recoverJournal, sha256, STAGED, writeJournal } from '../../src/patchers/engine/journal.ts';
import type { FileChange } from '../../src/patchers/engine/plan.ts';

/**
 * Item 6 of issue 20: the recovery of a commit a SIGKILL interrupted. The integration test kills the real CLI;
 * these build the states a kill can leave (journal, some files replaced, some staged) and check what the next run
 * does with each: complete, roll back, or refuse.
 */
function tree(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'journal-'));
  writeFileSync(path.join(d, 'a.txt'), 'A\n');
  chmodSync(path.join(d, 'a.txt'), 0o755);
  writeFileSync(path.join(d, 'b.txt'), 'B\n');
  return d;
}
const all = (d: string): string[] => readdirSync(d, { recursive: true, encoding: 'utf8' }).sort();
const CHANGES: FileChange[] = [
  { file: 'a.txt', before: 'A\n', after: 'A2\n' },
  { file: 'b.txt', before: 'B\n', after: 'B2\n' },
  { file: 'new/dir/c.txt', before: null, after: 'C\n' },
];

/** The state a kill leaves after `renamed` renames: journal, staged files, the first `renamed` files replaced. */
async function killedAfter(renamed: number): Promise<string> {
  const d = tree();
  const entry = (c: FileChange) => ({
    file: c.file,
    staged: c.file + STAGED,
    before: c.before === null ? null : { sha256: sha256(c.before), mode: statSync(path.join(d, c.file)).mode & 0o7777, base64: Buffer.from(c.before).toString('base64') },
    after: sha256(c.after),
  });
  await writeJournal(d, { files: CHANGES.map(entry), createdDirs: ['new'] });
  // A journal left by a run that is gone: a pid that cannot be running.
  const j = JSON.parse(readFileSync(path.join(d, JOURNAL), 'utf8'));
  writeFileSync(path.join(d, JOURNAL), JSON.stringify({ ...j, pid: 2 ** 22 + 1, procStart: '1' }));
  mkdirSync(path.join(d, 'new/dir'), { recursive: true });
  for (const c of CHANGES) writeFileSync(path.join(d, c.file + STAGED), c.after);
  chmodSync(path.join(d, 'a.txt' + STAGED), 0o755);
  for (const c of CHANGES.slice(0, renamed)) renameSync(path.join(d, c.file + STAGED), path.join(d, c.file));
  return d;
}

describe('recoverJournal', () => {
  it('no journal: nothing to do', async () => {
    expect(await recoverJournal(tree())).toBeUndefined();
  });

  it('every file replaced or staged whole: completes the commit, exactly as an uninterrupted one, modes kept', async () => {
    const d = await killedAfter(1);
    const r = await recoverJournal(d);
    expect(r?.action).toBe('completed');
    expect(r?.message).toMatch(/1 of 3 files replaced: completed it/);
    const clean = tree();
    await writeChanges(clean, CHANGES);
    expect(all(d)).toEqual(all(clean));
    for (const f of ['a.txt', 'b.txt', 'new/dir/c.txt']) expect(readFileSync(path.join(d, f), 'utf8')).toBe(readFileSync(path.join(clean, f), 'utf8'));
    expect(statSync(path.join(d, 'a.txt')).mode & 0o777).toBe(0o755);
  });

  it('a staged file missing (killed while staging): rolls back to the exact bytes and modes before, created dirs removed', async () => {
    const d = await killedAfter(1);
    rmSync(path.join(d, 'new/dir/c.txt' + STAGED));
    const r = await recoverJournal(d);
    expect(r?.action).toBe('rolled back');
    expect(all(d)).toEqual(all(tree()));
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
    expect(statSync(path.join(d, 'a.txt')).mode & 0o777).toBe(0o755);
    expect(existsSync(path.join(d, 'new'))).toBe(false);
  });

  it('a staged file cut short counts as missing: rolled back, never renamed into place', async () => {
    const d = await killedAfter(0);
    writeFileSync(path.join(d, 'b.txt' + STAGED), 'B');
    expect((await recoverJournal(d))?.action).toBe('rolled back');
    expect(readFileSync(path.join(d, 'b.txt'), 'utf8')).toBe('B\n');
    expect(all(d)).toEqual(all(tree()));
  });

  it('a listed file changed since: refused (exit 3), nothing touched', async () => {
    const d = await killedAfter(1);
    writeFileSync(path.join(d, 'b.txt'), 'edited by the user\n');
    const entries = all(d);
    await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 3, message: expect.stringMatching(/b\.txt changed since/) });
    expect(all(d)).toEqual(entries);
  });

  it('a journal whose run is still there: refused as busy (exit 7)', async () => {
    const d = tree();
    await writeJournal(d, { files: [{ file: 'a.txt', staged: 'a.txt' + STAGED, before: null, after: sha256('x') }], createdDirs: [] });
    const j = JSON.parse(readFileSync(path.join(d, JOURNAL), 'utf8'));
    writeFileSync(path.join(d, JOURNAL), JSON.stringify({ ...j, pid: process.ppid, procStart: null }));
    await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 7 });
  });

  it('an untrusted journal naming paths outside the tree, or through a link, is refused and nothing is deleted', async () => {
    const outside = mkdtempSync(path.join(os.tmpdir(), 'victim-'));
    writeFileSync(path.join(outside, 'victim.txt'), 'mine\n');
    const bad = [`../${path.basename(outside)}/victim.txt`, path.join(outside, 'victim.txt')];
    for (const file of bad) {
      const d = tree();
      writeFileSync(path.join(d, JOURNAL), JSON.stringify({
        schema: 'nvshmem-efa-journal/1', pid: 2 ** 22 + 1, procStart: '1', host: os.hostname(), startedAt: 'x',
        files: [{ file, staged: file + STAGED, before: null, after: sha256('x') }], createdDirs: [],
      }));
      await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 3 });
    }
    const d = tree();
    symlinkSync(outside, path.join(d, 'link'));
    writeFileSync(path.join(d, JOURNAL), JSON.stringify({
      schema: 'nvshmem-efa-journal/1', pid: 2 ** 22 + 1, procStart: '1', host: os.hostname(), startedAt: 'x',
      files: [{ file: 'link/victim.txt', staged: 'link/victim.txt' + STAGED, before: null, after: sha256('x') }], createdDirs: [],
    }));
    await expect(readJournal(d)).rejects.toMatchObject({ exitCode: 3, message: expect.stringMatching(/through a link/) });
    expect(readFileSync(path.join(outside, 'victim.txt'), 'utf8')).toBe('mine\n');
    writeFileSync(path.join(d, JOURNAL), '{ not json');
    await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 3, message: expect.stringMatching(/not JSON/) });
  });
});

describe('writeChanges and its journal', () => {
  it('leaves no journal or staged file after a commit, and writes none for an empty plan', async () => {
    const d = tree();
    await writeChanges(d, CHANGES);
    expect(all(d).filter((f) => f.includes('nvshmem-efa'))).toEqual([]);
    await writeChanges(d, []);
    expect(all(d).filter((f) => f.includes('nvshmem-efa'))).toEqual([]);
  });

  it('a rename failing half way rolls back in process and removes the journal', async () => {
    const d = tree();
    mkdirSync(path.join(d, 'z'));
    const entries = all(d);
    // A directory stands where the last (new) file goes: its rename fails after the others succeeded.
    await expect(writeChanges(d, [...CHANGES.slice(0, 2), { file: 'z', before: null, after: 'z\n' }])).rejects.toThrow(/EISDIR|directory/i);
    expect(all(d)).toEqual(entries);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
  });
});
