// The commit's parts one behaviour at a time (issue 37, docs/mutation.md): the diff and patch series apply.ts
// writes, the owners it gives, and what journal.ts reads, refuses, reports and recovers. journal.test.ts covers
// the recovery paths as a whole; these pin the details its survivors showed untested.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { describe, expect, it } from 'vitest';
import { processStartTime } from '../../src/core/proc.ts';
import { exportPatches, renderDiff, renderFileDiff, seriesNames, writeChanges } from '../../src/patchers/engine/apply.ts';
import {
  describeJournal, dirsUpTo, journalState, JOURNAL, readJournal, recoverJournal, removeJournal, sha256, STAGED, syncDir, writeJournal,
} from '../../src/patchers/engine/journal.ts';

const tmp = (p: string) => mkdtempSync(path.join(os.tmpdir(), p));
const isRoot = process.geteuid?.() === 0;
const GONE = 2 ** 22 + 1; // a pid no process can have

/** A journal written as a run that is gone would have left it, with `over` replacing its fields. */
function journalIn(d: string, over: Record<string, unknown> = {}): void {
  writeFileSync(path.join(d, JOURNAL), JSON.stringify({
    schema: 'nvshmem-efa-journal/1', pid: GONE, procStart: '1', host: os.hostname(), startedAt: 't0',
    files: [{ file: 'a.txt', staged: 'a.txt' + STAGED, before: null, after: sha256('x') }], createdDirs: [],
    ...over,
  }));
}
const entry = (file: string, before: string | null, after: string, extra: Record<string, unknown> = {}) => ({
  file, staged: file + STAGED, after: sha256(after),
  before: before === null ? null : { sha256: sha256(before), mode: 0o640, base64: Buffer.from(before).toString('base64'), ...extra },
});

describe('the diff and the patch series', () => {
  it('renders a git diff of a changed file with three lines of context, and of a new file', () => {
    const c = { file: 'd/a.c', before: '1\n2\n3\n4\n5\n6\n7\n8\n9\n', after: '1\n2\n3\n4\nX\n6\n7\n8\n9\n' };
    expect(renderFileDiff(c)).toBe('diff --git a/d/a.c b/d/a.c\n--- a/d/a.c\n+++ b/d/a.c\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+X\n 6\n 7\n 8\n');
    const n = { file: 'n.txt', before: null, after: 'new\n' };
    expect(renderFileDiff(n)).toBe('diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,1 @@\n+new\n');
    expect(renderDiff([c, n])).toBe(renderFileDiff(c) + renderFileDiff(n));
    expect(renderDiff([])).toBe('');
    // a file name that is no ASCII is written as the bytes of its UTF-8
    expect(renderFileDiff({ file: 'é', before: null, after: 'x\n' })).toMatch(/^diff --git a\/\xc3\xa9 b\/\xc3\xa9\n/);
  });
  it("renders a new file's patch as jsdiff's line diff against nothing does, without running the diff", () => {
    // The fast path for new files (issue 38 item 3) must print the very bytes the diff printed: last lines with
    // and without a newline, empty lines, CRLF and a lone CR, bytes above 0x7f, an empty file, a file name jsdiff quotes.
    const texts = ['', '\n', '\n\n', 'a', 'a\n', 'a\nb', 'a\n\nb\n', 'x\r\ny\r\n', 'x\r\ny', 'a\rb\n\n', '\xc3\xa9\xff\n', ' lead\n\ttab \n', '+\n-\n \n\\ No newline at end of file\n'];
    for (const name of ['n.txt', 'd/with space.c', 'q"uote\tx']) {
      for (const after of texts) {
        const viaDiff = createTwoFilesPatch('/dev/null', `b/${name}`, '', after, undefined, undefined, { context: 3 });
        const expected = `diff --git a/${name} b/${name}\nnew file mode 100644\n${viaDiff.slice(viaDiff.indexOf('--- '))}`;
        expect(renderFileDiff({ file: name, before: null, after }), JSON.stringify({ name, after })).toBe(expected);
      }
    }
  });
  it('names one numbered patch per file and writes them with a series', async () => {
    const changes = Array.from({ length: 10 }, (_, i) => ({ file: i === 0 ? 'src/x y/z.c' : `f${i}.txt`, before: null, after: `${i}\n` }));
    const names = seriesNames(changes);
    expect(names[0]).toBe('0001-src-x-y-z.c.patch');
    expect(names[9]).toBe('0010-f9.txt.patch');
    // A run of characters a file name should not have is one dash, not one per character.
    expect(seriesNames([{ file: 'a  b\t+c', before: null, after: '' }])).toEqual(['0001-a-b-c.patch']);
    const d = tmp('series-');
    expect(await exportPatches(d, changes.slice(0, 2))).toEqual(['0001-src-x-y-z.c.patch', '0002-f1.txt.patch']);
    expect(readFileSync(path.join(d, 'series'), 'utf8')).toBe('0001-src-x-y-z.c.patch\n0002-f1.txt.patch\n');
    expect(readFileSync(path.join(d, '0002-f1.txt.patch'), 'latin1')).toBe(renderFileDiff(changes[1]!));
    expect(readdirSync(d).sort()).toEqual(['0001-src-x-y-z.c.patch', '0002-f1.txt.patch', 'series']);
  });
});

describe('writeChanges: created folders', () => {
  it('removes every folder it created when the commit fails, and only those', async () => {
    const d = tmp('dirs-');
    mkdirSync(path.join(d, 'keep'));
    mkdirSync(path.join(d, 'z'));
    await expect(writeChanges(d, [
      { file: 'keep/a/b.txt', before: null, after: 'b\n' },
      { file: 'keep/a/c/d.txt', before: null, after: 'd\n' },
      { file: 'n/e.txt', before: null, after: 'e\n' },
      { file: 'z', before: null, after: 'z\n' },
    ])).rejects.toThrow(/EISDIR|directory/i);
    expect(readdirSync(d, { recursive: true, encoding: 'utf8' }).sort()).toEqual(['keep', 'z']);
  });
});

describe('journal helpers', () => {
  it('lists the folders from one up to the root', () => {
    expect(dirsUpTo('/r', '/r/a/b')).toEqual(['/r/a/b', '/r/a', '/r']);
    expect(dirsUpTo('/r', '/r')).toEqual(['/r']);
    expect(dirsUpTo('/r/s', '/x/y')).toEqual(['/x/y']);
    expect(dirsUpTo('/r', '/')).toEqual(['/']);
  });
  it('syncs a folder that is not there without failing', async () => {
    await expect(syncDir('/nonexistent/dir/for/sure')).resolves.toBeUndefined();
  });
  it('writes the journal with who wrote it and when, and removes it with its temporary copy', async () => {
    const d = tmp('jw-');
    const before = Date.now();
    await writeJournal(d, { files: [entry('a.txt', null, 'x')], createdDirs: ['n'] });
    const j = JSON.parse(readFileSync(path.join(d, JOURNAL), 'utf8'));
    expect(j).toMatchObject({ schema: 'nvshmem-efa-journal/1', pid: process.pid, procStart: processStartTime(process.pid), host: os.hostname(), createdDirs: ['n'] });
    expect(Date.parse(j.startedAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(readdirSync(d)).toEqual([JOURNAL]);
    expect(await readJournal(d)).toEqual(j);
    writeFileSync(path.join(d, JOURNAL + '.tmp'), 'half');
    await removeJournal(d);
    expect(readdirSync(d)).toEqual([]);
    await expect(writeJournal(path.join(d, 'missing'), { files: [entry('a.txt', null, 'x')], createdDirs: [] })).rejects.toMatchObject({ code: 'ENOENT' });
  });
  it('a journal that cannot be read is an error of its own; a leftover temporary journal is removed', async () => {
    const d = tmp('jr-');
    mkdirSync(path.join(d, JOURNAL));
    await expect(readJournal(d)).rejects.toMatchObject({ code: 'EISDIR' });
    const e = tmp('jt-');
    writeFileSync(path.join(e, JOURNAL + '.tmp'), '{');
    expect(await recoverJournal(e)).toBeUndefined();
    expect(readdirSync(e)).toEqual([]);
  });
});

describe('readJournal refuses what it cannot trust', () => {
  const refusal = async (d: string) => {
    const e = await readJournal(d).then(() => undefined, (x: unknown) => x as { exitCode: number; message: string; fix: string });
    expect(e, 'refused').toBeDefined();
    expect(e!.exitCode).toBe(3);
    return e!;
  };
  it('says why: not JSON, not the format, with the way out', async () => {
    const d = tmp('jb-');
    writeFileSync(path.join(d, JOURNAL), '{');
    const e = await refusal(d);
    expect(e.message).toBe(`${path.join(d, JOURNAL)} is not a patch journal this version of nvshmem-efa can act on (not JSON); nothing was changed`);
    expect(e.fix).toBe(`if no nvshmem-efa run is patching ${d}, check the tree (git status; files ending in ${STAGED} are staged copies of a patch), restore what is half patched, and remove ${path.join(d, JOURNAL)}`);
    journalIn(d, { schema: 'nvshmem-efa-journal/2' });
    expect((await refusal(d)).message).toMatch(/\(not in the journal format\)/);
    journalIn(d, { files: [] });
    expect((await refusal(d)).message).toMatch(/\(not in the journal format\)/);
  });
  it('refuses every path that is not a plain relative one inside the tree, in files, staged copies and folders', async () => {
    for (const bad of ['', '.', '..', '../a', 'a/../b', 'a//b', './a', '/abs', 'a\0b']) {
      const d = tmp('jp-');
      journalIn(d, { files: [{ file: bad, staged: bad + STAGED, before: null, after: sha256('x') }] });
      expect((await refusal(d)).message, JSON.stringify(bad)).toContain(`it names ${JSON.stringify(bad)}, a path outside the tree or through a link`);
      journalIn(d, { createdDirs: [bad] });
      expect((await refusal(d)).message, JSON.stringify(bad)).toContain(`it names ${JSON.stringify(bad)}`);
    }
    const d = tmp('js-');
    journalIn(d, { files: [{ file: 'a.txt', staged: 'b.txt' + STAGED, before: null, after: sha256('x') }] });
    expect((await refusal(d)).message).toContain(`(the staged copy of a.txt is not a.txt${STAGED})`);
    journalIn(d, { files: [{ file: 'a.txt', staged: '../a.txt' + STAGED, before: null, after: sha256('x') }] });
    expect((await refusal(d)).message).toContain('it names "../a.txt.nvshmem-efa-new"');
  });
  it('refuses a path through a link or a file at any depth, accepts one whose folders are not there yet', async () => {
    const d = tmp('jl-');
    mkdirSync(path.join(d, 'sub/real'), { recursive: true });
    symlinkSync(path.join(d, 'sub/real'), path.join(d, 'sub/link'));
    writeFileSync(path.join(d, 'f'), '');
    for (const bad of ['sub/link/x', 'f/x', 'sub/link/deeper/x']) {
      journalIn(d, { files: [{ file: bad, staged: bad + STAGED, before: null, after: sha256('x') }] });
      expect((await refusal(d)).message, bad).toContain(`it names ${JSON.stringify(bad)}`);
    }
    for (const ok of ['sub/real/x', 'no/such/dir/x', 'x']) {
      journalIn(d, { files: [{ file: ok, staged: ok + STAGED, before: null, after: sha256('x') }], createdDirs: ['sub/real', 'no'] });
      expect((await readJournal(d))?.files[0]!.file).toBe(ok);
    }
  });
});

describe('recoverJournal: whose journal, and what it says', () => {
  it('a journal from another host is busy while young, recovered once ten minutes old, and says which host', async () => {
    const d = tmp('jh-');
    journalIn(d, { host: 'other-node', pid: process.pid });
    await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 7, message: `nvshmem-efa run pid ${process.pid} on other-node is writing its patch into ${d} (${JOURNAL}, started t0)` });
    const old = (Date.now() - 11 * 60_000) / 1000;
    utimesSync(path.join(d, JOURNAL), old, old);
    const r = await recoverJournal(d);
    expect(r).toEqual({ action: 'rolled back', message: `an interrupted nvshmem-efa patch of ${d} (pid ${process.pid} on other-node, t0): 0 of 1 files replaced and 1 staged file(s) missing or cut short: rolled it back (the 0 replaced file(s) have their content from before again) and removed its staged files` });
    expect(readdirSync(d)).toEqual([]);
  });
  it("this process's own journal, or a live pid that started at another time, is not a running owner", async () => {
    for (const over of [{ pid: process.pid, procStart: null }, { pid: process.ppid, procStart: 'not its start' }]) {
      const d = tmp('jo-');
      journalIn(d, over);
      expect((await recoverJournal(d))?.action).toBe('rolled back');
    }
    const d = tmp('jq-');
    journalIn(d, { pid: process.ppid, procStart: processStartTime(process.ppid) });
    await expect(recoverJournal(d)).rejects.toMatchObject({ exitCode: 7, message: expect.stringMatching(new RegExp(`^nvshmem-efa run pid ${process.ppid} is writing`)) });
  });
  it('completes: renames the staged files, removes leftovers, and counts what the kill had done', async () => {
    const d = tmp('jc-');
    writeFileSync(path.join(d, 'a.txt'), 'A2\n'); // renamed before the kill
    writeFileSync(path.join(d, 'b.txt'), 'B\n');
    writeFileSync(path.join(d, 'b.txt' + STAGED), 'B2\n');
    mkdirSync(path.join(d, 'n'));
    writeFileSync(path.join(d, 'n/c.txt' + STAGED), 'C\n');
    writeFileSync(path.join(d, 'a.txt.nvshmem-efa-old'), 'left by a rollback');
    journalIn(d, { files: [entry('a.txt', 'A\n', 'A2\n'), entry('b.txt', 'B\n', 'B2\n'), entry('n/c.txt', null, 'C\n')], createdDirs: ['n'] });
    const j = (await readJournal(d))!;
    const s = await journalState(d, j);
    expect(s).toMatchObject({ action: 'complete', conflicts: [], replaced: 1 });
    expect(s.entries.map((e) => [e.done, e.untouched, e.staged])).toEqual([[true, false, false], [false, true, true], [false, true, true]]);
    expect(describeJournal(d, s)).toBe(`an interrupted nvshmem-efa patch of ${d} (pid ${GONE}, t0): 1 of 3 files replaced`);
    const r = await recoverJournal(d);
    expect(r).toEqual({ action: 'completed', message: `${describeJournal(d, s)}: completed it (the other 2 renamed into place) and removed its staged files` });
    expect(readdirSync(d, { recursive: true, encoding: 'utf8' }).sort()).toEqual(['a.txt', 'b.txt', 'n', 'n/c.txt']);
    expect(readFileSync(path.join(d, 'b.txt'), 'utf8')).toBe('B2\n');
    expect(readFileSync(path.join(d, 'n/c.txt'), 'utf8')).toBe('C\n');
  });
  it('rolls back: a created file removed, a replaced one restored with its mode and owner, user files in created folders kept', async () => {
    const d = tmp('jk-');
    writeFileSync(path.join(d, 'a.txt'), 'A2\n');
    writeFileSync(path.join(d, 'b.txt'), 'B2\n');
    mkdirSync(path.join(d, 'n/m/l'), { recursive: true });
    writeFileSync(path.join(d, 'n/c.txt'), 'C\n');
    mkdirSync(path.join(d, 'k'));
    writeFileSync(path.join(d, 'k/user.txt'), 'mine\n');
    journalIn(d, {
      files: [entry('a.txt', 'A\n', 'A2\n', { uid: 1234, gid: 4321 }), entry('b.txt', 'B\n', 'B2\n', { uid: 1234 }), entry('n/c.txt', null, 'C\n'), entry('k/d.txt', null, 'D\n')],
      createdDirs: ['n', 'k', 'gone'],
    });
    const r = await recoverJournal(d);
    expect(r?.message).toMatch(/: 3 of 4 files replaced and 1 staged file\(s\) missing or cut short: rolled it back \(the 3 replaced file\(s\)/);
    expect(readdirSync(d, { recursive: true, encoding: 'utf8' }).sort()).toEqual(['a.txt', 'b.txt', 'k', 'k/user.txt']);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
    expect(statSync(path.join(d, 'a.txt')).mode & 0o7777).toBe(0o640);
    if (isRoot) {
      expect([statSync(path.join(d, 'a.txt')).uid, statSync(path.join(d, 'a.txt')).gid]).toEqual([1234, 4321]);
      // an owner without its group (a journal of another version) is not applied
      expect(statSync(path.join(d, 'b.txt')).uid).toBe(process.getuid!());
    }
  });
  it('a conflict names each changed file, its fix and its refusals, and touches nothing', async () => {
    const d = tmp('jx-');
    writeFileSync(path.join(d, 'a.txt'), 'edited\n');
    writeFileSync(path.join(d, 'n.txt'), 'someone else\n');
    journalIn(d, { files: [entry('a.txt', 'A\n', 'A2\n'), entry('n.txt', null, 'N\n')] });
    const s = await journalState(d, (await readJournal(d))!);
    expect(s).toMatchObject({ action: 'conflict', conflicts: ['a.txt', 'n.txt'], replaced: 0 });
    await expect(recoverJournal(d)).rejects.toMatchObject({
      exitCode: 3,
      message: `${describeJournal(d, s)}, and a.txt, n.txt changed since (neither as before the patch nor as after it); nothing was changed`,
      fix: `restore a.txt n.txt (git checkout -- a.txt n.txt), remove ${path.join(d, JOURNAL)} and the ${STAGED} files beside them, and rerun`,
      refusals: ['a.txt: changed since the interrupted patch', 'n.txt: changed since the interrupted patch'],
    });
    expect(existsSync(path.join(d, JOURNAL))).toBe(true);
  });
});
