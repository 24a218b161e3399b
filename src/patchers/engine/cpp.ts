import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { gunzipSync } from 'node:zlib';
import { Language, Parser, type Node, type Tree } from 'web-tree-sitter';
import { packageRoot } from '../../core/paths.ts';
import { flattenPreprocessor } from './flatten.ts';

let parserPromise: Promise<Parser> | undefined;

/** The inflated grammar's name at the package root, in a standalone bundle only (scripts/bundle.mjs writes it). */
export const INFLATED = 'tree-sitter-cpp.wasm';

/**
 * The C++ grammar's wasm, vendored gzipped (third_party/tree-sitter-cpp/README.md says why and from where): 0.3 MB
 * in the package instead of 3.3 MB, and a few milliseconds to inflate. In a clone, an installed package and a
 * standalone bundle alike it lies under the package root. It is inflated into one buffer of the size gzip's trailer
 * records (ISIZE): with zlib's default 16 KiB chunks, copying 200 chunks together cost as much as the inflating
 * (about 30 ms of a `patch --dry-run`, issue 38 item 3).
 */
function grammar(): Uint8Array {
  // A standalone bundle (scripts/bundle.mjs --standalone) carries the grammar inflated too, at its top, as the
  // container runs it: inflating took about 20 ms of every `patch --dry-run` (issue 38 item 3). Elsewhere (a
  // clone, the npm package) there is only the .gz.
  try {
    return readFileSync(path.join(packageRoot(), INFLATED));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const gz = readFileSync(path.join(packageRoot(), 'third_party/tree-sitter-cpp/tree-sitter-cpp.wasm.gz'));
  return gunzipSync(gz, { chunkSize: Math.max(64 * 1024, gz.readUInt32LE(gz.length - 4) + 1) });
}

/**
 * One parser for the process: loading the wasm grammar costs ~30 ms and the first parse warms it up.
 *
 * The grammar's wasm runs on V8's baseline compiler (Liftoff) only. By default V8 recompiles hot wasm functions
 * with its optimising compiler, TurboFan, in the background; for this grammar (3.4 MB, one huge lexer function)
 * that took about 0.5 s of CPU on 2 cores while a `patch --dry-run` of NVSHMEM 3.4.5 parses about 0.3 MB, and
 * stalled the run meanwhile (bench/results/patch-time.md). Liftoff's code parses that in about 0.1 s. The flag
 * is read when a wasm module is compiled, so it is set before the first one is.
 */
function getParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    setFlagsFromString('--liftoff-only');
    // Compiled up front, on V8's background threads, not function by function on the main thread at the first
    // parse (lazy compilation, V8's default): the grammar compiles while the runtime's wasm is set up and the
    // caller goes on (prepareParser), instead of stalling the first parse for about 50 ms (issue 38 item 3).
    setFlagsFromString('--no-wasm-lazy-compilation');
    // readFileSync and gunzipSync return Buffers over ordinary ArrayBuffers (never shared ones), as compile wants.
    const grammarModule = WebAssembly.compile(grammar() as Uint8Array<ArrayBuffer>);
    grammarModule.catch(() => {}); // awaited below, after Parser.init: a failure is thrown there
    await Parser.init();
    const lang = Language.loadSync(await grammarModule);
    const parser = new Parser();
    parser.setLanguage(lang);
    return parser;
  })();
  return parserPromise;
}

/**
 * Starts making the parser without waiting for it: a command that will parse calls this first, so that the
 * grammar's compilation (background threads) overlaps its other work. A failure surfaces at the first parse.
 */
export function prepareParser(): void {
  getParser().catch(() => {});
}

export interface Span {
  start: number;
  end: number;
}

export interface FunctionAnchor extends Span {
  name: string;
  body: Span;
  /** Offsets of the body's direct statements, in order. */
  statements: Span[];
  labels: Map<string, Span>;
  /** Calls anywhere in the body, by callee name, in source order (only those outside ERROR nodes). */
  calls: { name: string; span: Span; statement: Span }[];
  /** The body's last direct `return` (under its labels, if any), if any. */
  finalReturn?: Span;
  /** Parsed on the `#if`-flattened copy (the raw parse had the function inside an ERROR node). */
  viaFlattened: boolean;
}

export interface CppIndex {
  /** Last `#include` whose parent is the translation unit (not inside `#if`/`#ifdef`). */
  lastTopLevelInclude?: Span & { text: string };
  functionNames: string[];
  /** The function as the raw parse saw it and as the `#if`-flattened parse saw it (either may be absent). */
  findFunction(name: string): { raw?: FunctionAnchor; flattened?: FunctionAnchor } | undefined;
  /** Field declarations of a struct/typedef by name: field name -> declaration text. */
  structFields(typeName: string): Map<string, string> | undefined;
  /** Frees the parse now (otherwise when the index is collected); what was read from it stays. */
  release(): void;
}

function underError(node: Node, stop: Node | null): boolean {
  for (let p: Node | null = node; p && (!stop || p.id !== stop.id); p = p.parent) {
    if (p.isError || p.isMissing) return true;
  }
  return false;
}

/**
 * The body's direct child that holds `node`, or undefined when `node` or an ancestor below the definition is an
 * ERROR or MISSING node. One walk up the tree for both answers: each step is a call into the wasm parser.
 */
function statementOf(node: Node, body: Node, def: Node): Node | undefined {
  let stmt: Node | undefined;
  for (let p: Node | null = node; p && p.id !== def.id; ) {
    if (p.isError || p.isMissing) return undefined;
    const parent: Node | null = p.parent;
    if (!stmt && parent?.id === body.id) stmt = p;
    p = parent;
  }
  return stmt;
}

function declaratorName(def: Node): string | undefined {
  let d: Node | null = def.childForFieldName('declarator');
  while (d && d.type !== 'function_declarator') d = d.childForFieldName('declarator');
  const id = d?.childForFieldName('declarator');
  return id ? id.text : undefined;
}

function calleeName(call: Node): string | undefined {
  const fn = call.childForFieldName('function');
  if (!fn) return undefined;
  if (fn.type === 'identifier') return fn.text;
  // `t->boot_handle->allgather(...)`, `ns::f(...)`: the last identifier names the callee.
  const last = fn.childForFieldName('field') ?? fn.childForFieldName('name');
  return last?.text;
}

function span(n: Node): Span {
  return { start: n.startIndex, end: n.endIndex };
}

/** The statement a label (or several) stands before; any other statement itself. */
function unlabeled(s: Node): Node {
  let at = s;
  while (at.type === 'labeled_statement') {
    const inner = at.namedChildren.filter((c): c is Node => !!c && c.type !== 'comment' && c.type !== 'statement_identifier');
    const last = inner[inner.length - 1];
    if (!last) break;
    at = last;
  }
  return at;
}

function functionAnchor(def: Node, name: string, viaFlattened: boolean): FunctionAnchor | undefined {
  if (underError(def, null)) return undefined;
  const body = def.childForFieldName('body');
  if (!body || body.type !== 'compound_statement') return undefined;
  const statements = body.namedChildren.filter((c): c is Node => !!c && c.type !== 'comment');
  const labels = new Map<string, Span>();
  for (const l of body.descendantsOfType('labeled_statement')) {
    if (!l || underError(l, def)) continue;
    const label = l.childForFieldName('label');
    if (label && !labels.has(label.text)) labels.set(label.text, span(l));
  }
  const calls: FunctionAnchor['calls'] = [];
  for (const c of body.descendantsOfType('call_expression')) {
    const stmt = c && statementOf(c, body, def);
    const cname = stmt && calleeName(c);
    if (cname) calls.push({ name: cname, span: span(c!), statement: span(stmt) });
  }
  calls.sort((a, b) => a.span.start - b.span.start);
  // A return under labels (`out: return status;`, the end of every goto-cleanup function) is the body's return
  // too: taken for the end of the body, code inserted "before the final return" would land after it, dead.
  const returns = statements.map(unlabeled).filter((s) => s.type === 'return_statement');
  const finalReturn = returns.length ? span(returns[returns.length - 1]!) : undefined;
  return {
    name,
    start: def.startIndex,
    end: def.endIndex,
    body: span(body),
    statements: statements.map(span),
    labels,
    calls,
    finalReturn,
    viaFlattened,
  };
}

/** The function definitions of a tree by name, in source order (a name defined twice, e.g. under `#if`/`#else`, has both). */
function definitionsByName(tree: Tree): Map<string, Node[]> {
  const defs = new Map<string, Node[]>();
  for (const def of tree.rootNode.descendantsOfType('function_definition')) {
    const name = def && declaratorName(def);
    if (!name) continue;
    const list = defs.get(name);
    if (list) list.push(def);
    else defs.set(name, [def]);
  }
  return defs;
}

/** The struct/typedef fields of a tree: type name -> (field name -> declaration text). */
function structsOf(tree: Tree): Map<string, Map<string, string>> {
  const structs = new Map<string, Map<string, string>>();
  for (const spec of tree.rootNode.descendantsOfType('struct_specifier')) {
    const body = spec?.childForFieldName('body');
    if (!spec || !body) continue;
    const fields = new Map<string, string>();
    for (const f of body.namedChildren) {
      if (f?.type !== 'field_declaration') continue;
      for (const d of f.childrenForFieldName('declarator')) {
        let id: Node | null = d;
        while (id && id.type !== 'field_identifier') id = id.childForFieldName('declarator');
        if (id) fields.set(id.text, f.text.replace(/\s+/g, ' ').trim());
      }
    }
    const tag = spec.childForFieldName('name')?.text;
    if (tag) structs.set(tag, fields);
    const parent = spec.parent;
    if (parent?.type === 'type_definition') {
      for (const d of parent.childrenForFieldName('declarator')) if (d) structs.set(d.text, fields);
    }
  }
  return structs;
}

function lastTopLevelIncludeOf(tree: Tree): CppIndex['lastTopLevelInclude'] {
  let last: CppIndex['lastTopLevelInclude'];
  for (const inc of tree.rootNode.namedChildren) {
    if (inc?.type === 'preproc_include') last = { ...span(inc), text: inc.text.trimEnd() };
  }
  return last;
}

/** A tree that is still held when its index is collected (an index nobody released) is freed then. */
const unreleased = new FinalizationRegistry<{ tree?: Tree }>((held) => held.tree?.delete());

/**
 * One source text's parse, made on first use and freed by release(); a use after release parses again. What is
 * read from it is kept as plain data (spans, names, texts), so it outlives the tree.
 */
class LazyParse {
  private readonly held: { tree?: Tree } = {};
  private defs?: Map<string, Node[]>;
  private readonly anchors = new Map<string, FunctionAnchor | null>();

  constructor(
    private readonly parser: Parser,
    private readonly text: string,
    private readonly viaFlattened: boolean,
  ) {
    unreleased.register(this, this.held, this);
  }

  tree(): Tree {
    if (!this.held.tree) {
      const tree = this.parser.parse(this.text);
      if (!tree) throw new Error('tree-sitter returned no tree');
      this.held.tree = tree;
    }
    return this.held.tree;
  }

  private definitions(): Map<string, Node[]> {
    this.defs ??= definitionsByName(this.tree());
    return this.defs;
  }

  names(): string[] {
    return [...this.definitions().keys()];
  }

  /** The first definition of `name` that anchors (outside ERROR nodes, with a body); each name is anchored once. */
  anchor(name: string): FunctionAnchor | undefined {
    if (!this.anchors.has(name)) {
      let found: FunctionAnchor | null = null;
      for (const def of this.definitions().get(name) ?? []) {
        found = functionAnchor(def, name, this.viaFlattened) ?? null;
        if (found) break;
      }
      this.anchors.set(name, found);
    }
    return this.anchors.get(name) ?? undefined;
  }

  release(): void {
    this.held.tree?.delete();
    this.held.tree = undefined;
    this.defs = undefined; // its nodes belonged to the freed tree
  }
}

/**
 * Index what patchers anchor on, parsing only when first asked and anchoring only the functions asked for: a
 * plan looks up a few functions of files that define dozens, and a tree whose hooks are all present already asks
 * for none. release() frees the parse (a later lookup parses again).
 */
export async function indexCpp(src: string): Promise<CppIndex> {
  const parser = await getParser();
  const raw = new LazyParse(parser, src, false);
  // The `#if`-flattened copy is parsed only when asked for: a lookup whose raw parse lost the function or
  // one of its anchors to an ERROR node, or a refusal listing function names. Most trees never need it.
  let flat: LazyParse | undefined;
  const flattened = () => (flat ??= new LazyParse(parser, flattenPreprocessor(src), true));
  let include: { value: CppIndex['lastTopLevelInclude'] } | undefined;
  let structs: Map<string, Map<string, string>> | undefined;
  return {
    get lastTopLevelInclude() {
      include ??= { value: lastTopLevelIncludeOf(raw.tree()) };
      return include.value;
    },
    get functionNames() {
      return [...new Set([...raw.names(), ...flattened().names()])];
    },
    findFunction: (name) => {
      const r = raw.anchor(name);
      const found = { raw: r, get flattened() { return flattened().anchor(name); } };
      return r || found.flattened ? found : undefined;
    },
    structFields: (typeName) => (structs ??= structsOf(raw.tree())).get(typeName),
    release: () => {
      raw.release();
      flat?.release();
    },
  };
}
