import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { scanCMake, CMakeScanError } from '../../src/patchers/engine/cmake-scan.ts';
import { indexCpp } from '../../src/patchers/engine/cpp.ts';
import { flattenPreprocessor } from '../../src/patchers/engine/flatten.ts';
import { findBlock, renderBlock } from '../../src/patchers/engine/markers.ts';
import { planPatches, type InsertSpec } from '../../src/patchers/engine/plan.ts';
import { readFileSync } from 'node:fs';
import { materialize } from '../helpers/golden.ts';

describe('flattenPreprocessor', () => {
  it('keeps the first branch, blanks directives and other branches, preserves offsets', () => {
    const src = 'a\n#ifdef X\nb\n#else\nc\n#endif\nd\n';
    const out = flattenPreprocessor(src);
    expect(out.length).toBe(src.length);
    expect(out.split('\n').map((l) => l.trim())).toEqual(['a', '', 'b', '', '', '', 'd', '']);
  });
  it('keeps the #else of #if 0 and handles nesting and continued directives', () => {
    const src = '#if 0\nx\n#else\ny\n#endif\n#if A \\\n  && B\n#if 0\nz\n#endif\nw\n#endif\n';
    const kept = flattenPreprocessor(src).split('\n').map((l) => l.trim()).filter(Boolean);
    expect(kept).toEqual(['y', 'w']);
  });
});

describe('indexCpp', () => {
  it('finds the last unconditional top-level include, not one inside #ifdef', async () => {
    const idx = await indexCpp('#include "a.h"\n#include <b.h>\n#ifdef G\n#include "c.h"\n#endif\nint f() { return 0; }\n');
    expect(idx.lastTopLevelInclude?.text).toBe('#include <b.h>');
  });
  it('finds functions, labels, calls and the final return', async () => {
    const idx = await indexCpp('static int g(int x) {\n  int s = 0;\n  s = h(x);\nout:\n  fi_close(x);\n  return s;\n}\n');
    const f = idx.findFunction('g')!.raw!;
    expect([...f.labels.keys()]).toEqual(['out']);
    expect(f.calls.map((c) => c.name)).toEqual(['h', 'fi_close']);
    expect(f.finalReturn).toBeDefined();
  });
  it('falls back to the #if-flattened parse when an #ifdef split hides the labels', async () => {
    const src = readFileSync(path.join(materialize('ifdef-split'), 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8');
    const f = (await indexCpp(src)).findFunction('nvshmemt_libfabric_connect_endpoints')!;
    expect(f.raw?.labels.has('out') ?? false).toBe(false);
    expect(f.flattened?.labels.has('out')).toBe(true);
    expect(f.flattened?.viaFlattened).toBe(true);
  });
  it('reads struct fields of a typedef', async () => {
    const idx = await indexCpp('typedef struct { struct fid_domain *domain; int n; } st_t;\n');
    expect(idx.structFields('st_t')?.get('domain')).toBe('struct fid_domain *domain;');
  });
});

describe('scanCMake', () => {
  it('finds commands, arguments, depth, comments and brackets', () => {
    const src = '# c\nif(A)\n  set(X "a b" [=[x)y]=] ${V}) # tail\nendif()\n#[[ block\n(comment]]\nfoo(BAR\n  baz)\n';
    const cmds = scanCMake(src);
    expect(cmds.map((c) => [c.name, c.depth, c.line])).toEqual([['if', 0, 2], ['set', 1, 3], ['endif', 0, 4], ['foo', 0, 7]]);
    expect(cmds[1]!.args.map((a) => [a.text, a.kind])).toEqual([['X', 'unquoted'], ['a b', 'quoted'], ['x)y', 'bracket'], ['${V}', 'unquoted']]);
    expect(src.slice(cmds[3]!.start, cmds[3]!.end)).toBe('foo(BAR\n  baz)');
  });
  it('reports unterminated commands with a line number', () => {
    expect(() => scanCMake('set(A\n  "b"\n')).toThrow(CMakeScanError);
    expect(() => scanCMake('x\n')).toThrow(/expected '\(' after x at line 1/);
  });
});

describe('markers', () => {
  it('distinguishes absent, present and broken blocks', () => {
    const block = renderBlock('hash', 'p1', ['a()'], '  ');
    expect(block).toBe('  # nvshmem-efa:begin p1\n  a()\n  # nvshmem-efa:end p1\n');
    expect(findBlock('x\n', 'hash', 'p1').kind).toBe('absent');
    expect(findBlock(`x\n${block}y\n`, 'hash', 'p1')).toMatchObject({ kind: 'present', text: block });
    expect(findBlock(`${block}${block}`, 'hash', 'p1').kind).toBe('broken');
    expect(findBlock('# nvshmem-efa:end p1\n', 'hash', 'p1').kind).toBe('broken');
  });
});

describe('planPatches', () => {
  const spec = (over: Partial<InsertSpec> = {}): InsertSpec => ({
    kind: 'insert', id: 'demo', file: 'f.txt', anchor: 'after the line "A"', why: 'demo', parse: 'text', style: 'hash', lines: ['inserted'],
    locate: (d) => { const i = d.src.indexOf('A\n'); return i < 0 ? { refuse: 'no line "A"' } : { offset: i + 2, indent: '' }; },
    ...over,
  });
  const tree = (content: string) => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'plan-'));
    writeFileSync(path.join(d, 'f.txt'), content);
    return d;
  };
  it('applies, then reports already-present, and refuses a changed block', async () => {
    const p1 = await planPatches(tree('A\nB\n'), [spec()]);
    expect(p1.changes[0]!.after).toBe('A\n# nvshmem-efa:begin demo\ninserted\n# nvshmem-efa:end demo\nB\n');
    const p2 = await planPatches(tree(p1.changes[0]!.after), [spec()]);
    expect(p2.changes).toEqual([]);
    expect(p2.fixes[0]!.status).toBe('already-present');
    const edited = p1.changes[0]!.after.replace('inserted', 'edited');
    const p3 = await planPatches(tree(edited), [spec()]);
    expect(p3.refusals[0]!.detail).toMatch(/differs from what this version of nvshmem-efa inserts/);
  });
  it('refuses with the anchor it looked for and a missing file with the explanation', async () => {
    const p = await planPatches(tree('B\n'), [spec(), spec({ id: 'other', file: 'missing.txt' })], { explainMissing: async () => 'found elsewhere.txt instead' });
    expect(p.changes).toEqual([]);
    expect(p.refusals.map((r) => r.detail)).toEqual(['f.txt: no line "A"', 'missing.txt not found; found elsewhere.txt instead']);
  });
});
