/**
 * A scanner for CMake's command invocations (cmake-language(7)): enough to find a command by name and
 * first argument and to know where it ends. No CMake grammar exists on npm; the language is small.
 */
export interface CMakeArg {
  text: string;
  start: number;
  end: number;
  kind: 'unquoted' | 'quoted' | 'bracket';
}

export interface CMakeCommand {
  name: string;
  /** Offset of the command name. */
  start: number;
  /** Offset just after the closing parenthesis. */
  end: number;
  line: number;
  args: CMakeArg[];
  /** Nesting depth in if/foreach/while/function/macro/block bodies. */
  depth: number;
}

export class CMakeScanError extends Error {}

const OPENERS = new Set(['if', 'foreach', 'while', 'function', 'macro', 'block']);
const CLOSERS = new Set(['endif', 'endforeach', 'endwhile', 'endfunction', 'endmacro', 'endblock']);

function bracketOpen(src: string, i: number): number | undefined {
  // `[`, then any number of `=`, then `[`: returns the count of `=`.
  if (src[i] !== '[') return undefined;
  let j = i + 1;
  while (src[j] === '=') j++;
  return src[j] === '[' ? j - i - 1 : undefined;
}

function skipBracket(src: string, i: number, eqs: number): number {
  const close = ']' + '='.repeat(eqs) + ']';
  const end = src.indexOf(close, i + eqs + 2);
  if (end === -1) throw new CMakeScanError(`unterminated bracket at offset ${i}`);
  return end + close.length;
}

export function scanCMake(src: string): CMakeCommand[] {
  const cmds: CMakeCommand[] = [];
  let i = 0;
  let line = 1;
  let depth = 0;
  const n = src.length;
  const advanceTo = (j: number) => {
    for (let k = i; k < j; k++) if (src[k] === '\n') line++;
    i = j;
  };
  while (i < n) {
    const c = src[i]!;
    if (c === '#') {
      const eqs = bracketOpen(src, i + 1);
      advanceTo(eqs !== undefined ? skipBracket(src, i + 1, eqs) : (src.indexOf('\n', i) + 1 || n));
      continue;
    }
    if (/\s/.test(c)) {
      advanceTo(i + 1);
      continue;
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i, i + 200));
    if (!m) throw new CMakeScanError(`unexpected '${c}' at line ${line}`);
    const name = m[0];
    const start = i;
    const cmdLine = line;
    advanceTo(i + name.length);
    while (i < n && (src[i] === ' ' || src[i] === '\t')) advanceTo(i + 1);
    if (src[i] !== '(') throw new CMakeScanError(`expected '(' after ${name} at line ${line}`);
    advanceTo(i + 1);
    const args: CMakeArg[] = [];
    let parens = 1;
    while (i < n && parens > 0) {
      const ch = src[i]!;
      if (ch === '(') {
        parens++;
        advanceTo(i + 1);
      } else if (ch === ')') {
        parens--;
        advanceTo(i + 1);
      } else if (/\s/.test(ch)) {
        advanceTo(i + 1);
      } else if (ch === '#') {
        const eqs = bracketOpen(src, i + 1);
        advanceTo(eqs !== undefined ? skipBracket(src, i + 1, eqs) : (src.indexOf('\n', i) + 1 || n));
      } else if (ch === '"') {
        let j = i + 1;
        while (j < n && src[j] !== '"') j += src[j] === '\\' ? 2 : 1;
        if (j >= n) throw new CMakeScanError(`unterminated string at line ${line}`);
        args.push({ text: src.slice(i + 1, j), start: i, end: j + 1, kind: 'quoted' });
        advanceTo(j + 1);
      } else if (bracketOpen(src, i) !== undefined) {
        const eqs = bracketOpen(src, i)!;
        const j = skipBracket(src, i, eqs);
        args.push({ text: src.slice(i + eqs + 2, j - eqs - 2), start: i, end: j, kind: 'bracket' });
        advanceTo(j);
      } else {
        let j = i;
        while (j < n && !/[\s()#"]/.test(src[j]!)) {
          if (src[j] === '\\') j++;
          j++;
        }
        // `${VAR}` and generator expressions may contain quotes or spaces only in exotic code; accept as is.
        args.push({ text: src.slice(i, j), start: i, end: j, kind: 'unquoted' });
        advanceTo(j);
      }
    }
    if (parens > 0) throw new CMakeScanError(`unterminated ${name}( starting at line ${cmdLine}`);
    const lower = name.toLowerCase();
    if (CLOSERS.has(lower)) depth = Math.max(0, depth - 1);
    cmds.push({ name: lower, start, end: i, line: cmdLine, args, depth });
    if (OPENERS.has(lower)) depth++;
  }
  return cmds;
}
