// The engine's small pure parts, one behaviour at a time: text arithmetic, byte strings, #if flattening, markers,
// the CMake scanner, fix records. Written against the mutants Stryker left alive in them (issue 37,
// docs/mutation.md); each expectation is a behaviour the patch engine relies on.
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { byteString, display, lineEndOf, parseView, readByteString, toBytes, utf8Bytes, withLineEnds } from '../../src/patchers/engine/bytes.ts';
import { CMakeScanError, scanCMake } from '../../src/patchers/engine/cmake-scan.ts';
import { upToDate, type FixRecord } from '../../src/patchers/engine/fix.ts';
import { flattenPreprocessor } from '../../src/patchers/engine/flatten.ts';
import { blockDifference, findBlock, hasAnyMarker, markerLine, maskMarkedBlocks, renderBlock, unmarkedHooksFix } from '../../src/patchers/engine/markers.ts';
import { afterLine, callOf, editDistance, escapeRe, indentAt, lineOf, lineStart, literal, nearestNames, startsLine, wholeLine } from '../../src/patchers/engine/text.ts';

describe('text', () => {
  it('finds line starts and ends by offset', () => {
    const s = 'ab\ncd\n';
    expect(lineStart(s, 0)).toBe(0);
    expect(lineStart(s, 2)).toBe(0); // the newline belongs to the line it ends
    expect(lineStart(s, 3)).toBe(3);
    expect(lineStart(s, 4)).toBe(3);
    expect(afterLine(s, 0)).toBe(3);
    expect(afterLine(s, 4)).toBe(6);
    expect(afterLine('ab\ncd', 4)).toBe(5); // last line without a newline: the end of the text
  });
  it('reads the indentation and whether only blanks precede an offset', () => {
    expect(indentAt('x\n \tfoo  bar', 5)).toBe(' \t');
    expect(indentAt('x\nfoo', 3)).toBe('');
    expect(startsLine('x\n  y', 4)).toBe(true);
    expect(startsLine('x\n a y', 5)).toBe(false);
  });
  it('counts lines up to an offset', () => {
    expect(lineOf('a\nb\nc', 0)).toBe(1);
    expect(lineOf('a\nb\nc', 1)).toBe(1);
    expect(lineOf('a\nb\nc', 2)).toBe(2);
    expect(lineOf('a\nb\nc', 4)).toBe(3);
    expect(lineOf('abc', 3)).toBe(1);
  });
  it('computes the edit distance', () => {
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('abc', '')).toBe(3);
    expect(editDistance('abc', 'abc')).toBe(0);
    expect(editDistance('ab', 'ba')).toBe(2);
    expect(editDistance('abcd', 'abd')).toBe(1);
    expect(editDistance('abd', 'abcd')).toBe(1);
  });
  it('suggests the nearest names: the best and the next distance, within a third of the length, at most max', () => {
    expect(nearestNames('abcdefghi', ['abcdefXXX', 'abcdefgXX', 'abcdefghX', 'abcdefghi'])).toEqual(['abcdefghX', 'abcdefgXX']);
    expect(nearestNames('abcdefghi', ['abcdefXXX'])).toEqual(['abcdefXXX']); // exactly a third away
    expect(nearestNames('abcdefghi', ['abcdeXXXX'])).toEqual([]);
    expect(nearestNames('abcdef', ['abcdeY', 'abcdeX', 'abcdeY', 'abcdXY', 'abcdZY'])).toEqual(['abcdeX', 'abcdeY', 'abcdXY']);
    expect(nearestNames('abcdef', ['abcdeY', 'abcdeX', 'abcdXY'], 2)).toEqual(['abcdeX', 'abcdeY']);
    expect(nearestNames('abc', [])).toEqual([]);
  });
  it('builds footprint patterns that match literally', () => {
    expect(escapeRe('.*+?^${}()|[]\\')).toBe('\\.\\*\\+\\?\\^\\$\\{\\}\\(\\)\\|\\[\\]\\\\');
    const line = wholeLine('  foo(x); ');
    expect(line.test('a\n \tfoo(x);  \r\nb')).toBe(true);
    expect(line.test('a\nfoo(x);')).toBe(true);
    expect(line.test('a\nx foo(x);\nb')).toBe(false);
    expect(line.test('a\nfoo(x); y\nb')).toBe(false);
    expect(line.test('a\nfooX(x);\nb')).toBe(false);
    const call = callOf('fi_close');
    expect(call.test('r = fi_close (ep);')).toBe(true);
    expect(call.test('fi_close(ep)')).toBe(true);
    expect(call.test('my_fi_close(ep)')).toBe(false);
    expect(call.test('ns::fi_close(ep)')).toBe(false);
    expect(call.test('fi_close;')).toBe(false);
    expect(literal('a.b').test('xa.by')).toBe(true);
    expect(literal('a.b').test('axb')).toBe(false);
  });
});

describe('bytes', () => {
  it('maps bytes to a byte string and back, one character per byte', () => {
    const whole = new Uint8Array([0x41, 0xff, 0x0d, 0x0a, 0x42]);
    expect(byteString(whole.subarray(1, 4))).toBe('\xff\r\n');
    expect(utf8Bytes('é€')).toBe('\xc3\xa9\xe2\x82\xac');
    expect(display('\xc3\xa9')).toBe('é');
    expect([...toBytes('\x00\xff', 'f')]).toEqual([0, 255]);
  });
  it('reads a file as its bytes', async () => {
    const f = path.join(mkdtempSync(path.join(os.tmpdir(), 'bytes-')), 'f');
    writeFileSync(f, Buffer.from([0xef, 0xbb, 0xbf, 0xff, 0x0d, 0x0a]));
    expect(await readByteString(f)).toBe('\xef\xbb\xbf\xff\r\n');
  });
  it('refuses a character that is not a byte, naming it and its offset', () => {
    expect(() => toBytes('a€', 'x.c')).toThrow(/^x\.c: character U\+20AC at offset 1 is not a byte \(tool text not encoded as UTF-8\)$/);
    expect(() => toBytes('ab\u0100', 'y')).toThrow('y: character U+0100 at offset 2 is not a byte');
    expect(() => toBytes('\u00ff', 'y')).not.toThrow();
  });
  it('judges line ends by the first line and converts inserted text to them', () => {
    expect(lineEndOf('a\r\nb\n')).toBe('\r\n');
    expect(lineEndOf('a\nb\r\n')).toBe('\n');
    expect(lineEndOf('\r\nx')).toBe('\r\n');
    expect(lineEndOf('abc')).toBe('\n');
    expect(lineEndOf('a\rb\n')).toBe('\n');
    expect(withLineEnds('a\nb\n', '\r\n')).toBe('a\r\nb\r\n');
    expect(withLineEnds('a\r\nb\n', '\r\n')).toBe('a\r\nb\r\n');
    expect(withLineEnds('a\nb', '\n')).toBe('a\nb');
  });
  it('blanks a UTF-8 byte order mark for the parsers, keeping offsets', () => {
    expect(parseView('\xef\xbb\xbfint x;')).toBe('   int x;');
    expect(parseView('int x;\xef\xbb\xbf')).toBe('int x;\xef\xbb\xbf');
    expect(parseView('\xef\xbbx')).toBe('\xef\xbbx');
  });
});

describe('flattenPreprocessor, branch by branch', () => {
  it('blanks a continued directive over its continuation lines, keeping newlines', () => {
    expect(flattenPreprocessor('#if A \\\n  && B\nx\n#endif\n')).toBe('       \n      \nx\n      \n');
  });
  it('keeps only the first branch of #if/#elif/#else', () => {
    expect(flattenPreprocessor('#if A\na\n#elif B\nb\n#else\nc\n#endif')).toBe('     \na\n       \n \n     \n \n      ');
  });
  it('keeps the #else of #if 0, not an #elif', () => {
    expect(flattenPreprocessor('#if 0\nx\n#elif B\ny\n#else\nz\n#endif')).toBe('     \n \n       \n \n     \nz\n      ');
  });
  it('leaves a stray #endif or #else as text', () => {
    expect(flattenPreprocessor('#endif\nx\n#else\ny')).toBe('#endif\nx\n#else\ny');
  });
  it('reads #if 01 as true, #if 0 with a comment as false, and spaced directives', () => {
    expect(flattenPreprocessor('#if 01\nx\n#endif\n#if 0 // off\ny\n#endif\n  #  ifndef Z\nz\n  # endif')).toBe(
      '      \nx\n      \n            \n \n      \n             \nz\n         ',
    );
  });
  it('reads comments in a directive as C does: #if/**/ 0 and #/**/if 0 are #if 0, #if /* 1 */ 0 too', () => {
    for (const d of ['#if/**/ 0', '#if/**/0', '#/**/if 0', '#if /* 1 */ 0', '# /* a */ if /* b */ 0 /* c */']) {
      const kept = flattenPreprocessor(`${d}\nx\n#else\ny\n#endif\n`).split('\n').map((l) => l.trim()).filter(Boolean);
      expect(kept, d).toEqual(['y']);
    }
  });
  it('drops every branch inside a dropped one, and keeps other directives only where kept', () => {
    const src = '#if 0\n#if 1\na\n#else\nb\n#endif\n#define Y\n#endif\n#define X\n#elifdef Q\n';
    const kept = flattenPreprocessor(src).split('\n').map((l) => l.trim()).filter(Boolean);
    expect(kept).toEqual(['#define X', '#elifdef Q']);
  });
  it('handles #elifdef/#elifndef as #elif and a last line without a newline', () => {
    expect(flattenPreprocessor('#ifdef A\na\n#elifdef B\nb\n#elifndef C\nc\n#endif\nd')).toBe('        \na\n          \n \n           \n \n      \nd');
  });
  it('ends #elifndef right after a kept #ifdef like any #elif', () => {
    expect(flattenPreprocessor('#ifdef A\na\n#elifndef C\nc\n#endif')).toBe('        \na\n           \n \n      ');
  });
  it('reads #if 0 only when 0 is the whole first word: #if A || 0 is kept', () => {
    expect(flattenPreprocessor('#if A || 0\na\n#endif')).toBe('          \na\n      ');
  });
  it('leaves a null directive (# alone) as it is, and blanks it in a dropped branch', () => {
    expect(flattenPreprocessor('#\na')).toBe('#\na');
    expect(flattenPreprocessor('#if 0\n#\na\n#endif')).toBe('     \n \n \n      ');
  });
  it('ends a directive continued past the last line at the end of the text', () => {
    expect(flattenPreprocessor('x\n#if 0 \\\n  1')).toBe('x\n       \n   ');
    expect(flattenPreprocessor('x\n#define X \\')).toBe('x\n#define X \\');
  });
});

describe('markers, in detail', () => {
  it('renders both comment styles, leaving empty lines unindented', () => {
    expect(markerLine('c', 'begin', 'x')).toBe('/* nvshmem-efa:begin x */');
    expect(markerLine('hash', 'end', 'x')).toBe('# nvshmem-efa:end x');
    expect(renderBlock('c', 'x', ['a;', '', 'b;'], '\t')).toBe('\t/* nvshmem-efa:begin x */\n\ta;\n\n\tb;\n\t/* nvshmem-efa:end x */\n');
  });
  it('finds a present block from its begin line start to after its end line', () => {
    const src = 'a\n  /* nvshmem-efa:begin p */\n  b;\n  /* nvshmem-efa:end p */\nc\n';
    expect(findBlock(src, 'c', 'p')).toEqual({ kind: 'present', start: 2, end: src.indexOf('c\n', 20), text: src.slice(2, src.indexOf('c\n', 20)) });
    const noNl = 'x\n# nvshmem-efa:begin p\ny\n# nvshmem-efa:end p';
    expect(findBlock(noNl, 'hash', 'p')).toEqual({ kind: 'present', start: 2, end: noNl.length, text: noNl.slice(2) });
    const crlf = '# nvshmem-efa:begin p\r\ny\r\n# nvshmem-efa:end p\r\nz\r\n';
    expect(findBlock(crlf, 'hash', 'p')).toMatchObject({ kind: 'present', start: 0, end: crlf.indexOf('z') });
  });
  it('does not take another id that starts with this one, or the other style, for its markers', () => {
    const other = '# nvshmem-efa:begin p1x\ny\n# nvshmem-efa:end p1x\n';
    expect(findBlock(other, 'hash', 'p1')).toEqual({ kind: 'absent' });
    expect(findBlock(other, 'c', 'p1x')).toEqual({ kind: 'absent' });
  });
  it('names the lines of a block that appears twice', () => {
    const b = renderBlock('hash', 'p', ['y'], '');
    expect(findBlock(`${b}x\n${b}`, 'hash', 'p')).toEqual({ kind: 'broken', reason: "the 'p' block appears 2 times (lines 1-3, lines 5-7); keep one" });
  });
  it('calls nested, reversed or lone markers unbalanced, naming where each is', () => {
    const B = '# nvshmem-efa:begin p\n';
    const E = '# nvshmem-efa:end p\n';
    const why = (s: string) => (findBlock(s, 'hash', 'p') as { reason: string }).reason;
    expect(why(`${B}${B}${E}${E}`)).toBe("markers of 'p' are unbalanced (begin at line 1, line 2; end at line 3, line 4): the file was half patched or edited by hand");
    expect(why(`${E}${B}`)).toBe("markers of 'p' are unbalanced (begin at line 2; end at line 1): the file was half patched or edited by hand");
    expect(why(`x\n${B}`)).toBe("markers of 'p' are unbalanced (begin at line 2; end at none): the file was half patched or edited by hand");
    expect(why(`${B}${E}${B}`)).toMatch(/unbalanced \(begin at line 1, line 3; end at line 2\)/);
    expect(why(`${E}${B}${E}${B}`)).toMatch(/unbalanced/);
  });
  it('masks every whole marked block, keeping newlines and what lies outside', () => {
    const src = 'a\n  /* nvshmem-efa:begin one */\n  x;\n  /* nvshmem-efa:end one */\nb\n# nvshmem-efa:begin two \r\ny\n# nvshmem-efa:end two';
    const out = maskMarkedBlocks(src);
    expect(out.length).toBe(src.length);
    expect(out.split('\n').map((l) => l.trim())).toEqual(['a', '', '', '', 'b', '', '', '']);
    expect(out.split('\n').length).toBe(src.split('\n').length);
    expect(maskMarkedBlocks('int a;\n')).toBe('int a;\n');
    // a begin without its end, and a marker not alone on its line, are left as they are
    const lone = 'a\n/* nvshmem-efa:begin z */\nb\n';
    expect(maskMarkedBlocks(lone)).toBe(lone);
    const inline = 'x /* nvshmem-efa:begin q */\ny\n/* nvshmem-efa:end q */\n';
    expect(maskMarkedBlocks(inline)).toBe(inline);
    // a c-style begin pairs with its c-style end only
    const mixed = '/* nvshmem-efa:begin m */\ny\n# nvshmem-efa:end m\n';
    expect(maskMarkedBlocks(mixed)).toBe(mixed);
  });
  it('names the files and the marker lines in the unmarked-hooks fix', () => {
    expect(unmarkedHooksFix([{ id: 'a', file: 'z.cpp' }, { id: 'b', file: 'a.txt' }, { id: 'c', file: 'z.cpp' }])).toBe(
      'restore a.txt, z.cpp from git (git checkout -- a.txt z.cpp) and rerun, or re-add the marker lines around each hook named ' +
        '(`/* nvshmem-efa:begin ID */` before it and `/* nvshmem-efa:end ID */` after it; `# nvshmem-efa:begin ID` ... in CMake and Python files)',
    );
  });
  it('sees any marker of the tool', () => {
    expect(hasAnyMarker('x nvshmem-efa:begin y')).toBe(true);
    expect(hasAnyMarker('x nvshmem-efa:end y')).toBe(true);
    expect(hasAnyMarker('nvshmem-efa:other')).toBe(false);
  });
  it('names the first differing line of an edited block', () => {
    expect(blockDifference('a\n  b\nc\n', 'a\nb\nc\n', 10)).toBe('line 11 differs in indentation only');
    expect(blockDifference('a\n b \nc\n', 'a\nB\nc\n', 1)).toBe('line 2: found `b`, expected `B`');
    expect(blockDifference('a', 'a\nb', 5)).toBe('line 6: found (nothing), expected `b`');
    expect(blockDifference('a\nb', 'a', 5)).toBe('line 6: found `b`, expected (nothing)');
    expect(blockDifference('same', 'same', 1)).toBe('the block differs');
    const long = 'x'.repeat(101);
    expect(blockDifference(long, 'y', 1)).toBe(`line 1: found \`${'x'.repeat(100)}…\`, expected \`y\``);
    expect(blockDifference('x'.repeat(100), 'y', 1)).toBe(`line 1: found \`${'x'.repeat(100)}\`, expected \`y\``);
  });
});

describe('scanCMake, in detail', () => {
  it('tracks the depth of every block kind, case-insensitively, never below 0', () => {
    const src = 'IF(A)\nforeach(x)\nwhile(1)\nfunction(f)\nmacro(m)\nblock()\nendblock()\nENDmacro()\nendfunction()\nendwhile()\nendforeach()\nendif()\nendif()\nx()\n';
    expect(scanCMake(src).map((c) => [c.name, c.depth])).toEqual([
      ['if', 0], ['foreach', 1], ['while', 2], ['function', 3], ['macro', 4], ['block', 5],
      ['endblock', 5], ['endmacro', 4], ['endfunction', 3], ['endwhile', 2], ['endforeach', 1], ['endif', 0], ['endif', 0], ['x', 0],
    ]);
  });
  it('reads quoted, bracket and unquoted arguments with their offsets and escapes', () => {
    const src = 'set\t(A "x\\"y" [[a\nb]] [==[c]]d]==] a\\ b [=x (p q) # c )\n  z)\nnext()';
    const [set, next] = scanCMake(src);
    expect(set!.args.map((a) => [a.text, a.kind])).toEqual([
      ['A', 'unquoted'], ['x\\"y', 'quoted'], ['a\nb', 'bracket'], ['c]]d', 'bracket'], ['a\\ b', 'unquoted'], ['[=x', 'unquoted'], ['p', 'unquoted'], ['q', 'unquoted'], ['z', 'unquoted'],
    ]);
    for (const a of set!.args) expect(src.slice(a.start, a.end)).toBe(a.kind === 'quoted' ? `"${a.text}"` : a.kind === 'bracket' ? src.slice(a.start, a.end) : a.text);
    expect(src.slice(set!.args[2]!.start, set!.args[2]!.end)).toBe('[[a\nb]]');
    expect(src.slice(set!.args[3]!.start, set!.args[3]!.end)).toBe('[==[c]]d]==]');
    expect(set!.end).toBe(src.indexOf('\nnext'));
    expect(next).toMatchObject({ name: 'next', line: 4, start: src.indexOf('next'), args: [] });
  });
  it('skips line and bracket comments, counting their lines', () => {
    const src = '#[==[ a ]] b\n]==]\n# x ( \nfoo()\n#last';
    expect(scanCMake(src).map((c) => [c.name, c.line])).toEqual([['foo', 4]]);
    expect(scanCMake('#[[x]]bar()')[0]).toMatchObject({ name: 'bar', line: 1 });
  });
  it('says what is wrong and where', () => {
    expect(() => scanCMake('a()\n)')).toThrow("unexpected ')' at line 2");
    expect(() => scanCMake('a()\nb\n(')).toThrow("expected '(' after b at line 2") // a newline may not stand before '(';
    expect(() => scanCMake('a()\nset(A "b\n')).toThrow('unterminated string at line 2');
    expect(() => scanCMake('set(A "b\\"')).toThrow(CMakeScanError);
    expect(() => scanCMake('x()\nset(A [[b]')).toThrow('unterminated bracket at offset 10');
    expect(() => scanCMake('#[=[ x ]]')).toThrow('unterminated bracket at offset 1');
    expect(() => scanCMake('\nset(A\n  (b)\n')).toThrow('unterminated set( starting at line 2');
  });
});

describe('upToDate', () => {
  it('reports what an earlier run applied as already present, and leaves the rest', () => {
    const f = (status: FixRecord['status']): FixRecord => ({ id: status, anchor: 'a', why: 'w', status });
    const before = [f('applied'), f('refused'), f('warned'), f('already-present')];
    expect(upToDate(before).map((x) => x.status)).toEqual(['already-present', 'refused', 'warned', 'already-present']);
    expect(before[0]!.status).toBe('applied');
    expect(upToDate(before)[0]).toEqual({ id: 'applied', anchor: 'a', why: 'w', status: 'already-present' });
  });
});
