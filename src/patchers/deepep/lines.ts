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
