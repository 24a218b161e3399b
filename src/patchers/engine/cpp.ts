import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Language, Parser, type Node, type Tree } from 'web-tree-sitter';
import { flattenPreprocessor } from './flatten.ts';

const require = createRequire(import.meta.url);
let parserPromise: Promise<Parser> | undefined;

/** The C++ grammar: from node_modules, or next to a standalone bundle (scripts/bundle.mjs --standalone). */
function grammarPath(): string {
  try {
    return require.resolve('tree-sitter-cpp/tree-sitter-cpp.wasm');
  } catch {
    return path.join(path.dirname(fileURLToPath(import.meta.url)), 'tree-sitter-cpp.wasm');
  }
}

/** One parser for the process: loading the wasm grammar costs ~30 ms and the first parse warms it up. */
function getParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    const lang = await Language.load(grammarPath());
    const parser = new Parser();
    parser.setLanguage(lang);
    return parser;
  })();
  return parserPromise;
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
  /** The body's last direct `return`, if any. */
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
}

function underError(node: Node, stop: Node | null): boolean {
  for (let p: Node | null = node; p && (!stop || p.id !== stop.id); p = p.parent) {
    if (p.isError || p.isMissing) return true;
  }
  return false;
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
  const directChild = (n: Node): Node | undefined => {
    let c: Node | null = n;
    while (c && c.parent && c.parent.id !== body.id) c = c.parent;
    return c ?? undefined;
  };
  const calls: FunctionAnchor['calls'] = [];
  for (const c of body.descendantsOfType('call_expression')) {
    if (!c || underError(c, def)) continue;
    const cname = calleeName(c);
    const stmt = directChild(c);
    if (cname && stmt) calls.push({ name: cname, span: span(c), statement: span(stmt) });
  }
  calls.sort((a, b) => a.span.start - b.span.start);
  const returns = statements.filter((s) => s.type === 'return_statement');
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

function indexTree(tree: Tree, viaFlattened: boolean) {
  const root = tree.rootNode;
  const defs = new Map<string, FunctionAnchor | null>();
  for (const def of root.descendantsOfType('function_definition')) {
    if (!def) continue;
    const name = declaratorName(def);
    if (!name || defs.get(name)) continue;
    defs.set(name, functionAnchor(def, name, viaFlattened) ?? null);
  }
  return { root, defs };
}

/** Parse once, index what patchers anchor on, then free the tree (nodes are invalid after delete). */
export async function indexCpp(src: string): Promise<CppIndex> {
  const parser = await getParser();
  const tree = parser.parse(src);
  if (!tree) throw new Error('tree-sitter returned no tree');
  const { root, defs } = indexTree(tree, false);
  let lastTopLevelInclude: CppIndex['lastTopLevelInclude'];
  for (const inc of root.namedChildren) {
    if (inc?.type === 'preproc_include') {
      lastTopLevelInclude = { ...span(inc), text: inc.text.trimEnd() };
    }
  }
  const structs = new Map<string, Map<string, string>>();
  for (const spec of root.descendantsOfType('struct_specifier')) {
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
  tree.delete();

  // The `#if`-flattened copy is parsed only when asked for: a lookup whose raw parse lost the function or
  // one of its anchors to an ERROR node, or a refusal listing function names. Most trees never need it.
  let flatDefs: Map<string, FunctionAnchor | null> | undefined;
  const flat = (): Map<string, FunctionAnchor | null> => {
    if (!flatDefs) {
      const t2 = parser.parse(flattenPreprocessor(src));
      if (!t2) throw new Error('tree-sitter returned no tree');
      flatDefs = indexTree(t2, true).defs;
      t2.delete();
    }
    return flatDefs;
  };
  return {
    lastTopLevelInclude,
    get functionNames() {
      return [...new Set([...defs.keys(), ...flat().keys()])];
    },
    findFunction: (name) => {
      const raw = defs.get(name) ?? undefined;
      const found = { raw, get flattened() { return flat().get(name) ?? undefined; } };
      return raw || found.flattened ? found : undefined;
    },
    structFields: (typeName) => structs.get(typeName),
  };
}
