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
