import type { Doc, Located, LocatedSpan } from '../engine/plan.ts';
import { lineOf } from '../engine/text.ts';

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** All whole lines whose text, trimmed, is exactly `text` (an include, a Python statement). */
function findLines(doc: Doc, text: string): RegExpExecArray[] {
  const re = new RegExp(`^([ \\t]*)${esc(text)}[ \\t]*\\r?$`, 'gm');
  return [...doc.src.matchAll(re)];
}

function expectOne(doc: Doc, text: string, hits: RegExpExecArray[]): string | undefined {
  if (hits.length === 1) return undefined;
  if (hits.length === 0) return `no line \`${text}\``;
  return `\`${text}\` appears ${hits.length} times (lines ${hits.map((h) => lineOf(doc.src, h.index)).join(', ')}); expected once`;
}

/** The one line that is exactly `text`, as a span to replace (newline included). */
export function theLine(doc: Doc, text: string): LocatedSpan {
  const hits = findLines(doc, text);
  const problem = expectOne(doc, text, hits);
  if (problem) return { refuse: problem };
  const m = hits[0]!;
  const nl = doc.src.indexOf('\n', m.index);
  return { start: m.index, end: nl === -1 ? doc.src.length : nl + 1, indent: m[1]! };
}

/** The start of the line after the one line that is exactly `text`, with that line's indent. */
export function afterTheLine(doc: Doc, text: string): Located {
  const at = theLine(doc, text);
  if ('refuse' in at) return at;
  return { offset: at.end, indent: at.indent };
}

/** The non-blank lines right before (`before`, nearest last) and after (`after`, in order) a span, trimmed. */
function neighbours(src: string, start: number, end: number, nBefore: number, nAfter: number): { before: string[]; after: string[] } {
  const above = src.slice(0, start).split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const below = src.slice(end).split('\n').map((l) => l.trim()).filter((l) => l !== '');
  return { before: above.slice(Math.max(0, above.length - nBefore)), after: below.slice(0, nAfter) };
}

/**
 * The one line that is exactly `text`, as a span to replace, provided the non-blank lines right before it are
 * `before` and right after it are `after` (trimmed): the anchor is a statement in its context, so a tree where
 * the statement moved into other code is refused instead of patched.
 */
export function theLineBetween(doc: Doc, text: string, before: string[], after: string[]): LocatedSpan {
  const at = theLine(doc, text);
  if ('refuse' in at) return at;
  const seen = neighbours(doc.src, at.start, at.end, before.length, after.length);
  const line = lineOf(doc.src, at.start);
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  if (!same(seen.before, before))
    return { refuse: `line ${line} \`${text}\` is not preceded by \`${before.join(' / ')}\` (found \`${seen.before.join(' / ') || 'nothing'}\`)` };
  if (!same(seen.after, after))
    return { refuse: `line ${line} \`${text}\` is not followed by \`${after.join(' / ')}\` (found \`${seen.after.join(' / ') || 'nothing'}\`)` };
  return at;
}
