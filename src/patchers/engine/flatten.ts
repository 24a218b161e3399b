/**
 * A copy of C/C++ source in which every `#if`/`#ifdef`/`#ifndef` keeps exactly one branch (the first, or the
 * `#else` of `#if 0`) and the directives and other branches become spaces. Length and newlines are kept, so
 * offsets in the copy are offsets in the original. Used only as a fallback when a preprocessor split (e.g.
 * `} else` / `#endif` / `{`) made tree-sitter swallow a function into an ERROR node.
 */
export function flattenPreprocessor(src: string): string {
  // Built from slices of the source, each line kept or blanked whole: a per-character array of a 72 KB file
  // (split(''), then join) cost about 15 ms of a `patch --dry-run` (issue 38 item 3).
  const out: string[] = [];
  interface Frame {
    parentKeep: boolean;
    keep: boolean;
    taken: boolean;
  }
  const stack: Frame[] = [];
  const keeping = () => (stack.length === 0 ? true : stack[stack.length - 1]!.keep);
  let pos = 0;
  while (pos < src.length) {
    let end = src.indexOf('\n', pos);
    if (end === -1) end = src.length;
    // A directive may continue over backslash-newlines; treat it as one logical line.
    let logicalEnd = end;
    const trimmed = src.slice(pos, end).trimStart();
    const isDirective = trimmed.startsWith('#');
    if (isDirective) {
      while (logicalEnd < src.length && src[logicalEnd - 1] === '\\') {
        const next = src.indexOf('\n', logicalEnd + 1);
        logicalEnd = next === -1 ? src.length : next;
      }
    }
    let blank = !keeping();
    if (isDirective) {
      // Comments are whitespace to the preprocessor (`#if/**/ 0` is `#if 0`): read the directive without them.
      const text = src.slice(pos, logicalEnd).replace(/\\\n/g, ' ').replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/.*$/s, '').trimStart();
      const m = /^#\s*(\w+)\s*(.*)$/s.exec(text);
      const word = m?.[1] ?? '';
      const rest = (m?.[2] ?? '').trim();
      if (word === 'if' || word === 'ifdef' || word === 'ifndef') {
        const parentKeep = keeping();
        const isIfZero = word === 'if' && /^0\b/.test(rest);
        stack.push({ parentKeep, keep: parentKeep && !isIfZero, taken: !isIfZero });
        blank = true;
      } else if ((word === 'elif' || word === 'else' || word === 'elifdef' || word === 'elifndef') && stack.length) {
        const f = stack[stack.length - 1]!;
        f.keep = f.parentKeep && !f.taken && word === 'else';
        if (f.keep) f.taken = true;
        blank = true;
      } else if (word === 'endif' && stack.length) {
        stack.pop();
        blank = true;
      }
    }
    const line = src.slice(pos, logicalEnd);
    out.push(blank ? line.replace(/[^\n]/g, ' ') : line);
    if (logicalEnd < src.length) out.push('\n');
    pos = logicalEnd + 1;
  }
  return out.join('');
}
