import type { FunctionAnchor } from '../engine/cpp.ts';
import type { Doc, Located } from '../engine/plan.ts';
import { afterLine, indentAt, nearestNames } from '../engine/text.ts';

/** A renamed anchor: the nearest function names by edit distance, closest first. */
export function similarNames(doc: Doc, name: string): string {
  const near = nearestNames(name, doc.cpp?.functionNames ?? []);
  return near.length ? `nearest: ${near.map((n) => `${n}()`).join(', ')}; renamed?` : 'no function with a similar name';
}

/**
 * Picks the raw or the `#if`-flattened parse of a function, whichever satisfies `need`; refuses when neither
 * does. This is the "use an anchor only outside ERROR nodes, else flatten, else refuse" rule.
 */
export function withFunction(doc: Doc, name: string, need: (f: FunctionAnchor) => string | Located): Located {
  const found = doc.cpp!.findFunction(name);
  if (!found) return { refuse: `no definition of ${name}() found (${similarNames(doc, name)})` };
  let firstProblem = '';
  // The flattened parse is made only if the raw one does not do.
  for (const pick of [() => found.raw, () => found.flattened]) {
    const f = pick();
    if (!f) continue;
    const r = need(f);
    if (typeof r !== 'string') return r;
    firstProblem ||= r;
  }
  return { refuse: `in ${name}(): ${firstProblem}` };
}

/** The indent of the body's statements (its first statement's), or four spaces for an empty body. */
export function bodyIndent(doc: Doc, f: FunctionAnchor): string {
  const first = f.statements[0];
  return first ? indentAt(doc.src, first.start) : '    ';
}

/** First in the body: the line after the one holding its opening brace, at the body's indent. */
export function firstInBody(doc: Doc, f: FunctionAnchor): Located {
  return { offset: afterLine(doc.src, f.body.start), indent: bodyIndent(doc, f) };
}
