// What indexCpp reads from C/C++ and what planPatches decides, one behaviour at a time (issue 37,
// docs/mutation.md): the golden tests run both on real trees; these pin the cases the golden trees do not show.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { indexCpp } from '../../src/patchers/engine/cpp.ts';
import { planPatches, type CheckSpec, type InsertSpec, type OwnedFileSpec, type ReplaceSpec } from '../../src/patchers/engine/plan.ts';

const SRC = `#include "a.h"  \n#if X\nint g(void) { return 1; }\n#else\nint g(void) { return 2; }\n#endif\nstatic int *f(struct t *t) {\n  // c\n  int r = t->h->allgather(1);\n  ns::q(2);\n  (*fp)(3);\n  if (r) { return 0; }\nout:\n  x();\nout:\n  return r;\n}\nstruct s { int a; char *b, c; int arr[4]; };\ntypedef struct tag { long  z; } tag_t;\nvoid e(void) { int y = 1; }\nint h(void) { y(); return 3; }\n`;

describe('indexCpp, in detail', () => {
  it('reads a function: statements without comments, first label of a name, named calls with their statements', async () => {
    const idx = await indexCpp(SRC);
    expect(idx.functionNames).toEqual(['g', 'f', 'e', 'h']);
    expect(idx.lastTopLevelInclude).toEqual({ start: 0, end: 14, text: '#include "a.h"' });
    const f = idx.findFunction('f')!.raw!;
    expect(f).toMatchObject({ name: 'f', start: SRC.indexOf('static int *f'), end: SRC.indexOf('\nstruct s'), viaFlattened: false });
    expect(SRC.slice(f.finalReturn!.start, f.finalReturn!.end)).toBe('return r;'); // under its label
    expect(SRC.slice(f.body.start, f.body.end)).toMatch(/^\{\n {2}\/\/ c[\s\S]*return r;\n\}$/);
    expect(f.statements.map((s) => SRC.slice(s.start, s.end))).toEqual(['int r = t->h->allgather(1);', 'ns::q(2);', '(*fp)(3);', 'if (r) { return 0; }', 'out:\n  x();', 'out:\n  return r;']);
    expect([...f.labels].map(([k, s]) => [k, SRC.slice(s.start, s.end)])).toEqual([['out', 'out:\n  x();']]);
    expect(f.calls.map((c) => [c.name, SRC.slice(c.span.start, c.span.end), SRC.slice(c.statement.start, c.statement.end)])).toEqual([
      ['allgather', 't->h->allgather(1)', 'int r = t->h->allgather(1);'],
      ['q', 'ns::q(2)', 'ns::q(2);'],
      ['x', 'x()', 'out:\n  x();'],
    ]);
    const h = idx.findFunction('h')!.raw!;
    expect(SRC.slice(h.finalReturn!.start, h.finalReturn!.end)).toBe('return 3;');
    expect(idx.findFunction('e')!.raw!.finalReturn).toBeUndefined();
  });
  it('anchors the first definition of a name defined twice, and nothing for an unknown one', async () => {
    const idx = await indexCpp(SRC);
    const g = idx.findFunction('g')!.raw!;
    expect(SRC.slice(g.start, g.end)).toBe('int g(void) { return 1; }');
    expect(idx.findFunction('nope')).toBeUndefined();
  });
  it('reads struct fields by tag and by typedef name, declarations with spaces collapsed', async () => {
    const idx = await indexCpp(SRC);
    expect([...idx.structFields('s')!]).toEqual([['a', 'int a;'], ['b', 'char *b, c;'], ['c', 'char *b, c;'], ['arr', 'int arr[4];']]);
    expect([...idx.structFields('tag')!]).toEqual([['z', 'long z;']]);
    expect([...idx.structFields('tag_t')!]).toEqual([['z', 'long z;']]);
    expect(idx.structFields('nope')).toBeUndefined();
  });
  it('has no include when the only one is under #ifdef', async () => {
    const idx = await indexCpp('#ifdef A\n#include "x.h"\n#endif\nint k(void) { return 0; }\n');
    expect(idx.lastTopLevelInclude).toBeUndefined();
    expect(idx.functionNames).toEqual(['k']);
  });
  it('finds a function the raw parse lost only in the flattened parse, and lists its name once', async () => {
    const src = 'int m(int x) {\n#ifdef A\n  if (x) {\n#else\n  if (!x) {\n#endif\n    go();\n  }\nout:\n  return x;\n}\n';
    const idx = await indexCpp(src);
    const m = idx.findFunction('m')!;
    expect(m.flattened).toMatchObject({ name: 'm', viaFlattened: true });
    expect(m.flattened!.labels.has('out')).toBe(true);
    expect(idx.functionNames.filter((n) => n === 'm')).toEqual(['m']);
  });
  it('parses again after release, and keeps what it had read', async () => {
    const idx = await indexCpp(SRC);
    const inc = idx.lastTopLevelInclude;
    const f = idx.findFunction('f')!.raw!;
    idx.release();
    expect(idx.lastTopLevelInclude).toEqual(inc);
    expect(f.labels.get('out')).toBeDefined();
    expect(idx.findFunction('h')!.raw!.name).toBe('h');
    expect([...idx.structFields('s')!.keys()]).toEqual(['a', 'b', 'c', 'arr']);
    idx.release();
    idx.release();
  });
});

const tree = (files: Record<string, string | Buffer>) => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'plan2-'));
  for (const [f, c] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(d, f)), { recursive: true });
    writeFileSync(path.join(d, f), c);
  }
  return d;
};
const after = (file: string, text: string) => (src: string) => {
  const i = src.indexOf(text);
  return i < 0 ? { refuse: `no ${text}` } : { offset: i + text.length, indent: '  ' };
};
const ins = (over: Partial<InsertSpec> = {}): InsertSpec => ({
  kind: 'insert', id: 'i1', file: 'f.txt', anchor: 'a', why: 'w', parse: 'text', style: 'hash', lines: ['new'],
  locate: (d) => after('f.txt', 'A\n')(d.src),
  ...over,
});

describe('planPatches, in detail', () => {
  it('owned files: created, already present, replaced when ours, refused when not', async () => {
    const own = (file: string): OwnedFileSpec => ({ kind: 'owned-file', id: `o-${file}`, file, anchor: 'a', why: 'w', content: 'é mark v2\n', ownerMark: 'mark' });
    const d = tree({ 'same.txt': 'é mark v2\n', 'old.txt': 'mark v1\n', 'theirs.txt': 'other\n' });
    const p = await planPatches(d, [own('new.txt'), own('same.txt'), own('old.txt'), own('theirs.txt')]);
    expect(p.changes).toEqual([
      { file: 'new.txt', before: null, after: '\xc3\xa9 mark v2\n' },
      { file: 'old.txt', before: 'mark v1\n', after: '\xc3\xa9 mark v2\n' },
    ]);
    expect(p.fixes.map((f) => [f.file, f.status, f.detail])).toEqual([['new.txt', 'applied', undefined], ['same.txt', 'already-present', undefined], ['old.txt', 'applied', 'replaced an older copy']]);
    expect(p.fixes[0]).not.toHaveProperty('detail');
    expect(p.refusals).toEqual([{ id: 'o-theirs.txt', file: 'theirs.txt', anchor: 'a', why: 'w', status: 'refused', detail: 'theirs.txt exists and was not written by nvshmem-efa (no "mark" in it)' }]);
  });
  it('refuses a CMake file it cannot scan and a missing file, with or without an explanation', async () => {
    const d = tree({ 'CMakeLists.txt': 'set(A "b\n' });
    const p = await planPatches(d, [
      ins({ file: 'CMakeLists.txt', parse: 'cmake' }), ins({ id: 'i2', file: 'CMakeLists.txt', parse: 'cmake' }), ins({ id: 'm', file: 'gone.txt' }),
    ], { explainMissing: async () => undefined });
    expect(p.refusals.map((r) => r.detail)).toEqual([
      'CMakeLists.txt cannot be scanned as CMake: unterminated string at line 1',
      'CMakeLists.txt cannot be scanned as CMake: unterminated string at line 1',
      'gone.txt not found',
    ]);
    expect((await planPatches(d, [ins({ file: 'gone.txt' })])).refusals[0]!.detail).toBe('gone.txt not found');
  });
  it('gives the parses a spec asks for, on the file with its byte order mark blanked', async () => {
    const seen: string[] = [];
    const bom = (t: string) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(t)]);
    const d = tree({ 'CMakeLists.txt': bom('project(x)\n'), 'a.c': bom('int main(void) { return 0; }\n') });
    const check = (file: string, parse: CheckSpec['parse']): CheckSpec => ({
      kind: 'check', id: `c-${file}`, file, anchor: 'a', why: 'w', parse,
      verify: (doc) => {
        seen.push(`${file}: cmake ${doc.cmake?.map((c) => c.name).join(',') ?? 'none'}, cpp ${doc.cpp?.functionNames.join(',') ?? 'none'}`);
        return undefined;
      },
    });
    const p = await planPatches(d, [check('CMakeLists.txt', 'cmake'), check('a.c', 'cpp')]);
    expect(seen).toEqual(['CMakeLists.txt: cmake project, cpp none', 'a.c: cmake none, cpp main']);
    expect(p).toEqual({ changes: [], fixes: [], refusals: [] });
  });
  it('a failed check is refused with what it found; a broken block is refused with its reason', async () => {
    const d = tree({ 'f.txt': 'A\n# nvshmem-efa:begin i1\n' });
    const p = await planPatches(d, [{ kind: 'check', id: 'c', file: 'f.txt', anchor: 'a', why: 'w', parse: 'text', verify: () => 'found B instead' }, ins()]);
    expect(p.refusals.map((r) => r.detail)).toEqual(['found B instead', "f.txt: markers of 'i1' are unbalanced (begin at line 2; end at none): the file was half patched or edited by hand"]);
  });
  it('refuses a hook found without its markers, naming its line, and records it as unmarked', async () => {
    const long = `hook(${'x'.repeat(120)});`;
    const d = tree({ 'f.txt': `A\n  hook(1);\n`, 'g.txt': `A\n${long}`, 'h.txt': 'A\n# nvshmem-efa:begin i1\n  new\n# nvshmem-efa:end i1\nhook(2);\n', 'k.txt': 'A\n# nvshmem-efa:begin other\nhook(3);\n# nvshmem-efa:end other\n' });
    const fp = [/nohook/, /hook\(/g];
    const p = await planPatches(d, [
      ins({ footprint: fp }),
      ins({ file: 'g.txt', footprint: fp, locate: (doc) => after('g.txt', 'A\n')(doc.src) }),
      { kind: 'replace', id: 'i1', file: 'h.txt', anchor: 'a', why: 'w', parse: 'text', style: 'hash', lines: ['new'], footprint: fp, locate: () => ({ refuse: 'unused' }) } satisfies ReplaceSpec,
      ins({ file: 'k.txt', footprint: fp, locate: (doc) => after('k.txt', 'A\n')(doc.src) }),
    ]);
    const tail = ' (removed by hand, or by a tool that strips comments)';
    expect(p.refusals.map((r) => r.detail)).toEqual([
      `f.txt:2: the 'i1' hook (\`hook(1);\`) is there without its nvshmem-efa markers${tail}; patching would add it a second time`,
      `g.txt:2: the 'i1' hook (\`${long.slice(0, 100)}…\`) is there without its nvshmem-efa markers${tail}; patching would add it a second time`,
      `h.txt:5: the 'i1' hook (\`hook(2);\`) is there without its nvshmem-efa markers, besides its marked block${tail}`,
    ]);
    expect(p.unmarked).toEqual([{ id: 'i1', file: 'f.txt', line: 2 }, { id: 'i1', file: 'g.txt', line: 2 }, { id: 'i1', file: 'h.txt', line: 5 }]);
    // a footprint inside another marked block is that block's: not a stray hook
    expect(p.changes.map((c) => c.file)).toEqual(['k.txt']);
    expect((await planPatches(d, [ins({ footprint: [/nohook/] })])).unmarked).toBeUndefined();
  });
  it('a present block: the same, the same with LF in a CRLF file, or refused where it differs', async () => {
    const block = (eol: string, indent = '') => `${indent}# nvshmem-efa:begin i1${eol}${indent}new${eol}${indent}# nvshmem-efa:end i1${eol}`;
    const d = tree({
      'lf.txt': `A\n${block('\n', '  ')}`, 'crlf.txt': `A\r\n${block('\r\n', '  ')}`, 'mixed.txt': `A\r\n${block('\n', '  ')}`,
      'indent.txt': `A\n  # nvshmem-efa:begin i1\n    new\n  # nvshmem-efa:end i1\n`,
    });
    const p = await planPatches(d, ['lf.txt', 'crlf.txt', 'mixed.txt', 'indent.txt'].map((file) => ins({ file })));
    expect(p.fixes.map((f) => [f.file, f.status])).toEqual([['lf.txt', 'already-present'], ['crlf.txt', 'already-present'], ['mixed.txt', 'already-present']]);
    expect(p.refusals.map((r) => r.detail)).toEqual([
      "indent.txt: the 'i1' block differs from what this version of nvshmem-efa inserts (line 3 differs in indentation only; edited by hand, or written by another version)",
    ]);
    expect(p.changes).toEqual([]);
  });
  it('inserts with the file line ends, on a line of its own after a last line without a newline, and replaces spans', async () => {
    const d = tree({ 'b.txt': 'A\r\nB\r\n', 'a.txt': 'x\nA\n', 'glued.txt': 'A', 'empty.txt': '', 'r.txt': 'one\ntwo\nthree\n' });
    const p = await planPatches(d, [
      ins({ file: 'b.txt', locate: (doc) => after('b.txt', 'A\r\n')(doc.src) }),
      ins({ file: 'a.txt' }),
      ins({ file: 'a.txt', id: 'i2', lines: ['é'], locate: () => ({ offset: 0, indent: '' }) }),
      ins({ file: 'glued.txt', locate: (doc) => ({ offset: doc.src.length, indent: '' }) }),
      ins({ file: 'empty.txt', locate: () => ({ offset: 0, indent: '' }) }),
      { kind: 'replace', id: 'r1', file: 'r.txt', anchor: 'a', why: 'w', parse: 'text', style: 'c', lines: ['TWO'], locate: (doc) => ({ start: doc.src.indexOf('two'), end: doc.src.indexOf('three'), indent: '\t' }) } satisfies ReplaceSpec,
      ins({ file: 'r.txt', id: 'no', locate: () => ({ refuse: 'no anchor here' }) }),
    ]);
    expect(p.changes).toEqual([
      { file: 'a.txt', before: 'x\nA\n', after: '# nvshmem-efa:begin i2\n\xc3\xa9\n# nvshmem-efa:end i2\nx\nA\n  # nvshmem-efa:begin i1\n  new\n  # nvshmem-efa:end i1\n' },
      { file: 'b.txt', before: 'A\r\nB\r\n', after: 'A\r\n  # nvshmem-efa:begin i1\r\n  new\r\n  # nvshmem-efa:end i1\r\nB\r\n' },
      { file: 'empty.txt', before: '', after: '# nvshmem-efa:begin i1\nnew\n# nvshmem-efa:end i1\n' },
      { file: 'glued.txt', before: 'A', after: 'A\n# nvshmem-efa:begin i1\nnew\n# nvshmem-efa:end i1\n' },
      { file: 'r.txt', before: 'one\ntwo\nthree\n', after: 'one\n\t/* nvshmem-efa:begin r1 */\n\tTWO\n\t/* nvshmem-efa:end r1 */\nthree\n' },
    ]);
    expect(p.refusals.map((r) => r.detail)).toEqual(['r.txt: no anchor here']);
    expect(p.fixes.map((f) => `${f.file} ${f.id} ${f.status}`)).toEqual(['b.txt i1 applied', 'a.txt i1 applied', 'a.txt i2 applied', 'glued.txt i1 applied', 'empty.txt i1 applied', 'r.txt r1 applied']);
  });
});
