/**
 * Reads the store order of compiled GDA device code in its PTX (nvcc -ptx): which stores are doorbell stores, and
 * whether the system fences the design needs stand between them and the other stores on every path through the
 * function. The CPU model of the device code cannot see a missing fence (x86 keeps stores in order), so this is
 * what guards them (docs/contributing.md, "Store order in the compiled GDA post path").
 *
 * A doorbell store is recognised by where its address comes from, not by its text: efa_gda_sq_of reads a queue's
 * constants with four 16-byte read-only loads at offsets 0, 16, 48 and 64 of the queue (static_asserts in
 * nvshmemx_efa_gda_device_base.cuh), and the doorbell pointer is the second word of the first one (qp->db). Every
 * store whose address register derives from that word (through mov, cvta, add) is a doorbell store.
 */

export interface Insn {
  /** The instruction as written, without its guard predicate and final semicolon. */
  text: string;
  /** Its opcode with modifiers (`st.volatile.global.u32`). */
  op: string;
  /** Guarded by a predicate (`@%p1 bra ...`): it may not execute. */
  guarded: boolean;
  /** Labels that name this instruction. */
  labels: string[];
}

export interface PtxFunction {
  name: string;
  insns: Insn[];
}

/** The functions with a body (.entry kernels and .func device functions) of a PTX module. */
export function parsePtx(ptx: string): PtxFunction[] {
  const text = ptx.replace(/\/\/[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
  const out: PtxFunction[] = [];
  const head = /(?:^|\n)\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)\s*\(/g;
  for (let m = head.exec(text); m; m = head.exec(text)) {
    // The parameter list, then either ';' (a declaration) or the body in braces.
    let i = text.indexOf(')', m.index + m[0].length);
    while (i >= 0 && /\s/.test(text[i + 1] ?? '')) i++;
    const next = text.slice(i + 1).search(/[;{]/);
    if (next < 0 || text[i + 1 + next] === ';') continue;
    const open = i + 1 + next;
    let depth = 0;
    let end = open;
    for (; end < text.length; end++) {
      if (text[end] === '{') depth++;
      else if (text[end] === '}' && --depth === 0) break;
    }
    out.push({ name: m[1]!, insns: parseBody(text.slice(open + 1, end)) });
    head.lastIndex = end;
  }
  return out;
}

function parseBody(body: string): Insn[] {
  const insns: Insn[] = [];
  let labels: string[] = [];
  for (let chunk of body.split(';')) {
    // Leading braces open and close a call sequence's scope; braces after the opcode are vector operands.
    for (let l = /^\s*(?:[{}]|([\w$]+):)/.exec(chunk); l; l = /^\s*(?:[{}]|([\w$]+):)/.exec(chunk)) {
      if (l[1]) labels.push(l[1]);
      chunk = chunk.slice(l[0].length);
    }
    const s = chunk.replace(/\s+/g, ' ').trim();
    if (!s || s.startsWith('.')) continue; // a directive (.reg, .local, .param): no instruction
    const g = /^@!?%\w+ /.exec(s);
    const rest = g ? s.slice(g[0].length) : s;
    insns.push({ text: rest, op: rest.split(' ')[0]!, guarded: !!g, labels });
    labels = [];
  }
  if (labels.length) insns.push({ text: 'ret', op: 'ret', guarded: false, labels }); // a label at the end falls off
  return insns;
}

/** Instruction indices each instruction may be followed by. */
function successors(insns: Insn[]): number[][] {
  const at = new Map<string, number>();
  insns.forEach((x, i) => x.labels.forEach((l) => at.set(l, i)));
  return insns.map((x, i) => {
    if (x.op.startsWith('brx')) throw new Error(`indirect branch not followed: ${x.text}`);
    const fall = i + 1 < insns.length ? [i + 1] : [];
    if (x.op.startsWith('bra')) {
      const target = at.get(x.text.split(' ').at(-1)!.replace(/,$/, ''));
      if (target === undefined) throw new Error(`branch to an unknown label: ${x.text}`);
      return x.guarded ? [target, ...fall] : [target];
    }
    if (/^(ret|exit|trap)\b/.test(x.op) && !x.guarded) return [];
    return fall;
  });
}

/** A fence that orders every earlier store of the thread before every later one, as seen by the system (the NIC). */
export function isSystemFence(x: Insn): boolean {
  return /^(membar\.sys|fence\.(sc|acq_rel|release)\.sys)$/.test(x.op);
}

/** A store, atomic or call: something that may write memory the NIC or another thread reads. Thread-local,
 * shared-memory and parameter stores are not. */
export function writesMemory(x: Insn): boolean {
  if (/^st\b/.test(x.op)) return !/\.(local|shared|param)\b/.test(x.op);
  if (/^(atom|red)\b/.test(x.op)) return !/\.shared\b/.test(x.op);
  return /^call\b/.test(x.op);
}

/** The register holding a memory operand's base address (`[%rd12+8]` -> `%rd12`), if it is one. */
function addressRegister(x: Insn): string | undefined {
  return /\[\s*(%[\w]+)\s*(?:\+\s*-?\d+)?\s*\]/.exec(x.text)?.[1];
}

function operands(x: Insn): string[] {
  return x.text.slice(x.op.length).split(',').map((s) => s.trim());
}

/** The stores of fn whose address derives from a queue's doorbell pointer (qp->db, see above). */
export function doorbellStores(fn: PtxFunction): number[] {
  const defs = new Map<string, number>();
  for (const x of fn.insns) {
    const d = /^[\w.]+ (%\w+)/.exec(x.text)?.[1];
    if (d) defs.set(d, (defs.get(d) ?? 0) + 1);
  }
  // Each register defined once as another plus a constant (or a copy) is that register's base plus an offset.
  const sym = new Map<string, { base: string; off: number }>();
  const symOf = (r: string) => sym.get(r) ?? { base: r, off: 0 };
  const copies: [string, string][] = [];
  for (const x of fn.insns) {
    const o = operands(x);
    if (/^(mov\.[bu]64|cvta\.to\.global\.u64)$/.test(x.op) && /^%\w+$/.test(o[1] ?? '')) {
      copies.push([o[0]!, o[1]!]);
      if (defs.get(o[0]!) === 1) sym.set(o[0]!, symOf(o[1]!));
    } else if (/^add\.[su]64$/.test(x.op) && /^-?\d+$/.test(o[2] ?? '') && defs.get(o[0]!) === 1) {
      const s = symOf(o[1]!);
      sym.set(o[0]!, { base: s.base, off: s.off + Number(o[2]) });
    }
  }
  // The 16-byte read-only loads, by address; the doorbell word is the second of the one at a queue's offset 0.
  const loads: { base: string; off: number; second: string }[] = [];
  for (const x of fn.insns) {
    const m = /^ld\.global\.nc\.v2\.[bu]64 \{\s*%\w+\s*,\s*(%\w+)\s*\}\s*,\s*\[\s*(%\w+)\s*(?:\+\s*(-?\d+))?\s*\]/.exec(x.text);
    if (!m) continue;
    const s = symOf(m[2]!);
    loads.push({ base: s.base, off: s.off + Number(m[3] ?? 0), second: m[1]! });
  }
  const at = (base: string, off: number) => loads.some((l) => l.base === base && l.off === off);
  const db = new Set(loads.filter((l) => [16, 48, 64].every((d) => at(l.base, l.off + d))).map((l) => l.second));
  for (let grew = true; grew; ) {
    grew = false;
    for (const [to, from] of copies) if (db.has(from) && !db.has(to)) grew = db.add(to) !== undefined;
  }
  return fn.insns.flatMap((x, i) => (/^st\b/.test(x.op) && db.has(addressRegister(x) ?? '') ? [i] : []));
}

/**
 * Runs a forward data-flow analysis over fn's instructions to a fixed point: state at entry, transfer per
 * instruction, join where paths meet. Returns the state before each instruction (undefined: unreachable).
 */
function flow<S>(fn: PtxFunction, entry: S, transfer: (i: number, s: S) => S, join: (a: S, b: S) => S, eq: (a: S, b: S) => boolean) {
  const succ = successors(fn.insns);
  const before: (S | undefined)[] = new Array(fn.insns.length).fill(undefined);
  if (!fn.insns.length) return before;
  before[0] = entry;
  const work = [0];
  while (work.length) {
    const i = work.pop()!;
    const after = transfer(i, before[i]!);
    for (const j of succ[i]!) {
      const old = before[j];
      const next = old === undefined ? after : join(old, after);
      if (old === undefined || !eq(old, next)) {
        before[j] = next;
        work.push(j);
      }
    }
  }
  return before;
}

export interface Finding {
  at: number;
  insn: string;
  why: string;
}

/**
 * The doorbell rules of efa_gda_ring: on every path, (1) a system fence between the last store before a doorbell
 * store (the WQE, the signal's value, the slot's PE) and the doorbell store; (2) the doorbell store itself volatile
 * (or .mmio, or a release at system scope), so it is issued once, where it is written; (3) a system fence between
 * the doorbell store and the next store (sq_rung, which lets the next slot's owner ring: doorbells must reach the
 * NIC in slot order). Returns what breaks them, and the doorbell stores found (none: the check saw nothing).
 */
export function checkDoorbellOrder(fn: PtxFunction): { doorbells: number[]; findings: Finding[] } {
  const doorbells = doorbellStores(fn);
  const isDb = new Set(doorbells);
  type S = { dirty: boolean; pending: boolean };
  const transfer = (i: number, s: S): S => {
    const x = fn.insns[i]!;
    if (isSystemFence(x)) return { dirty: false, pending: false };
    if (isDb.has(i)) return { dirty: false, pending: true };
    if (writesMemory(x)) return { dirty: true, pending: s.pending };
    return s;
  };
  const before = flow<S>(fn, { dirty: false, pending: false }, transfer, (a, b) => ({ dirty: a.dirty || b.dirty, pending: a.pending || b.pending }),
    (a, b) => a.dirty === b.dirty && a.pending === b.pending);
  const findings: Finding[] = [];
  fn.insns.forEach((x, i) => {
    const s = before[i];
    if (!s) return;
    const f = (why: string) => findings.push({ at: i, insn: x.text, why });
    if (isDb.has(i)) {
      if (s.dirty) f('doorbell store reachable from an earlier store with no system fence between them');
      if (s.pending) f('doorbell store reachable from an earlier doorbell store with no system fence between them');
      if (!/\.(volatile|mmio)\b|\.release\.sys\b/.test(x.op) && !/^st\.release\.sys/.test(x.op)) f('doorbell store is not volatile, .mmio or a system-scope release');
    } else if (s.pending && writesMemory(x)) {
      f('store reachable from a doorbell store with no system fence between them');
    }
  });
  return { doorbells, findings };
}

/** Whether an instruction calls a function whose name contains `callee`. */
export function callsFunction(x: Insn, callee: string): boolean {
  return /^call\b/.test(x.op) && x.text.includes(callee);
}

/**
 * What must come first on every path to each doorbell store of fn (the shim's wait for the payload's completion
 * before its signal; its async-proxy fence before a put): the doorbell stores reachable without an instruction
 * for which `first` holds, and how many such instructions fn has.
 */
export function checkBeforeDoorbells(fn: PtxFunction, first: (x: Insn) => boolean, what: string): { doorbells: number[]; seen: number; findings: Finding[] } {
  const doorbells = doorbellStores(fn);
  const before = flow<boolean>(fn, false, (i, s) => s || first(fn.insns[i]!), (a, b) => a && b, (a, b) => a === b);
  const findings = doorbells.filter((i) => before[i] === false)
    .map((i) => ({ at: i, insn: fn.insns[i]!.text, why: `doorbell store reachable without ${what} before it` }));
  return { doorbells, seen: fn.insns.filter(first).length, findings };
}
