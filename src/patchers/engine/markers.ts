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
  if (begins.length !== 1 || ends.length !== 1 || ends[0]! < begins[0]!) {
    return {
      kind: 'broken',
      reason: `markers of '${id}' are unbalanced (begin at ${where(begins)}; end at ${where(ends)})`,
    };
  }
  const start = src.lastIndexOf('\n', begins[0]! - 1) + 1;
  const nl = src.indexOf('\n', ends[0]!);
  const end = nl === -1 ? src.length : nl + 1;
  return { kind: 'present', start, end, text: src.slice(start, end) };
}

/** True if the text holds any marker of this tool: used to refuse files a foreign tool half-wrote. */
export function hasAnyMarker(src: string): boolean {
  return src.includes(`${TOOL}:begin`) || src.includes(`${TOOL}:end`);
}
