import { lineOf } from './text.ts';

/**
 * Every block the tool inserts sits between a begin and an end marker carrying the patch id, so a second
 * run can tell "already there" from "never applied" from "half applied or edited by hand".
 */
export type CommentStyle = 'c' | 'hash';

const TOOL = 'nvshmem-efa';

export function markerLine(style: CommentStyle, which: 'begin' | 'end', id: string): string {
  const body = `${TOOL}:${which} ${id}`;
  return style === 'c' ? `/* ${body} */` : `# ${body}`;
}

export function renderBlock(style: CommentStyle, id: string, lines: readonly string[], indent: string): string {
  const out = [markerLine(style, 'begin', id), ...lines, markerLine(style, 'end', id)];
  return out.map((l) => (l === '' ? '' : indent + l)).join('\n') + '\n';
}

export type MarkerState =
  | { kind: 'absent' }
  | { kind: 'present'; start: number; end: number; text: string }
  | { kind: 'broken'; reason: string };

/** Finds the block of `id`; `text` spans from the begin line's start to just after the end line. */
export function findBlock(src: string, style: CommentStyle, id: string): MarkerState {
  const find = (which: 'begin' | 'end') => {
    const needle = markerLine(style, which, id);
    const hits: number[] = [];
    for (let i = src.indexOf(needle); i !== -1; i = src.indexOf(needle, i + 1)) {
      const after = src[i + needle.length];
      if (after === undefined || after === '\n' || after === '\r') hits.push(i);
    }
    return hits;
  };
  const begins = find('begin');
  const ends = find('end');
  if (begins.length === 0 && ends.length === 0) return { kind: 'absent' };
  const where = (xs: number[]) => xs.map((x) => `line ${lineOf(src, x)}`).join(', ') || 'none';
  // The same whole block more than once (applied twice, or copied by hand) is not an unbalanced one.
  const paired = begins.length === ends.length && begins.every((b, i) => b < ends[i]! && (i + 1 === begins.length || ends[i]! < begins[i + 1]!));
  if (paired && begins.length > 1) {
    const spans = begins.map((b, i) => `lines ${lineOf(src, b)}-${lineOf(src, ends[i]!)}`).join(', ');
    return { kind: 'broken', reason: `the '${id}' block appears ${begins.length} times (${spans}); keep one` };
  }
  if (begins.length !== 1 || ends.length !== 1 || ends[0]! < begins[0]!) {
    return {
      kind: 'broken',
      reason: `markers of '${id}' are unbalanced (begin at ${where(begins)}; end at ${where(ends)}): the file was half patched or edited by hand`,
    };
  }
  const start = src.lastIndexOf('\n', begins[0]! - 1) + 1;
  const nl = src.indexOf('\n', ends[0]!);
  const end = nl === -1 ? src.length : nl + 1;
  return { kind: 'present', start, end, text: src.slice(start, end) };
}

/**
 * The text with every whole marked block of this tool (any id, marker lines included) blanked out, newlines
 * kept so offsets and line numbers still match `src`: where a patch looks for its own code without markers
 * (code that sits inside another block of ours is accounted for by that block).
 */
export function maskMarkedBlocks(src: string): string {
  // A file with no begin marker (every file of a tree not patched yet) is its own mask: no copy of it, char by char.
  if (!src.includes(`${TOOL}:begin`)) return src;
  const out = src.split('');
  const begin = new RegExp(`^[ \\t]*(?:/\\* ${TOOL}:begin (\\S+) \\*/|# ${TOOL}:begin (\\S+))[ \\t]*\\r?$`, 'gm');
  for (const m of src.matchAll(begin)) {
    const id = m[1] ?? m[2]!;
    const style: CommentStyle = m[1] !== undefined ? 'c' : 'hash';
    const end = src.indexOf(markerLine(style, 'end', id), m.index);
    if (end === -1) continue; // unbalanced: findBlock refuses it
    const stop = src.indexOf('\n', end);
    for (let i = m.index; i < (stop === -1 ? src.length : stop); i++) if (out[i] !== '\n') out[i] = ' ';
  }
  return out.join('');
}

/**
 * The fix for hooks found without their markers (plan.ts): restore the files, or put the markers back so the
 * hooks are recognised as the tool's own.
 */
export function unmarkedHooksFix(hooks: readonly { id: string; file: string }[]): string {
  const files = [...new Set(hooks.map((h) => h.file))].sort();
  return (
    `restore ${files.join(', ')} from git (git checkout -- ${files.join(' ')}) and rerun, or re-add the marker lines ` +
    `around each hook named (\`${markerLine('c', 'begin', 'ID')}\` before it and \`${markerLine('c', 'end', 'ID')}\` after it; ` +
    `\`${markerLine('hash', 'begin', 'ID')}\` ... in CMake and Python files)`
  );
}

/** True if the text holds any marker of this tool: used to refuse files a foreign tool half-wrote. */
export function hasAnyMarker(src: string): boolean {
  return src.includes(`${TOOL}:begin`) || src.includes(`${TOOL}:end`);
}

/**
 * Where an inserted block differs from what this version inserts: the first differing line of the block,
 * as found and as expected (an edited block is refused; the user needs to see what changed).
 */
export function blockDifference(found: string, expected: string, startLine: number): string {
  const f = found.split('\n');
  const e = expected.split('\n');
  const clip = (s: string | undefined) => (s === undefined ? '(nothing)' : `\`${s.trim().length > 100 ? s.trim().slice(0, 100) + '…' : s.trim()}\``);
  for (let i = 0; i < Math.max(f.length, e.length); i++) {
    if (f[i] !== e[i]) {
      if (f[i]?.trim() === e[i]?.trim()) return `line ${startLine + i} differs in indentation only`;
      return `line ${startLine + i}: found ${clip(f[i])}, expected ${clip(e[i])}`;
    }
  }
  return 'the block differs';
}
