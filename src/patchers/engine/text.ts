/** Line arithmetic on source text: insertions always happen at line starts so blocks stay whole lines. */
export function lineStart(src: string, offset: number): number {
  return src.lastIndexOf('\n', offset - 1) + 1;
}

/** Offset just after the newline that ends the line holding `offset` (or the end of the text). */
export function afterLine(src: string, offset: number): number {
  const nl = src.indexOf('\n', offset);
  return nl === -1 ? src.length : nl + 1;
}

export function indentAt(src: string, offset: number): string {
  const start = lineStart(src, offset);
  return /^[ \t]*/.exec(src.slice(start))![0];
}

/** True when only blanks stand between the start of the line and `offset`. */
export function startsLine(src: string, offset: number): boolean {
  return src.slice(lineStart(src, offset), offset).trim() === '';
}

export function lineOf(src: string, offset: number): number {
  let n = 1;
  for (let i = src.indexOf('\n'); i !== -1 && i < offset; i = src.indexOf('\n', i + 1)) n++;
  return n;
}

/** Levenshtein distance (insertions, deletions, substitutions each cost 1). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The candidates closest to `name` by edit distance, best first: those as close as the closest one (ties),
 * at most `max`, and none further than a third of the name's length (that is not a rename, just another name).
 */
export function nearestNames(name: string, candidates: readonly string[], max = 3): string[] {
  const scored = [...new Set(candidates)]
    .filter((c) => c !== name)
    .map((c) => ({ c, d: editDistance(name, c) }))
    .filter((x) => x.d <= Math.ceil(name.length / 3))
    .sort((x, y) => x.d - y.d || x.c.localeCompare(y.c));
  const best = scored[0]?.d;
  return scored.filter((x) => x.d <= best! + 1).slice(0, max).map((x) => x.c);
}

export const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Footprint patterns (plan.ts): a line that is exactly `text` once trimmed. */
export function wholeLine(text: string): RegExp {
  return new RegExp(`^[ \\t]*${escapeRe(text.trim())}[ \\t]*\\r?$`, 'm');
}

/** Footprint patterns (plan.ts): a call of `name`, whatever its arguments. */
export function callOf(name: string): RegExp {
  return new RegExp(`(?<![\\w:])${escapeRe(name)}\\s*\\(`);
}

/** Footprint patterns (plan.ts): `text` anywhere (a distinctive macro or variable name). */
export function literal(text: string): RegExp {
  return new RegExp(escapeRe(text));
}
