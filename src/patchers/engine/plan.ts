import path from 'node:path';
import MagicString from 'magic-string';
import { scanCMake, CMakeScanError, type CMakeCommand } from './cmake-scan.ts';
import { indexCpp, type CppIndex } from './cpp.ts';
import type { FixRecord } from './fix.ts';
import { blockDifference, findBlock, maskMarkedBlocks, renderBlock, type CommentStyle } from './markers.ts';
import { lineOf, lineStart } from './text.ts';
import { lineEndOf, parseView, readByteString, utf8Bytes, withLineEnds } from './bytes.ts';

/**
 * Plan, then apply (changesets' split): specs are located against the untouched files, the result is a list
 * of whole-file changes plus a Fix record per spec. Nothing is written here, so `--dry-run`, `--export` and a
 * refusal all see the same plan, and a refusal leaves the tree exactly as it was.
 */
export interface Doc {
  file: string;
  /** The file's bytes, one character per byte (bytes.ts): offsets are byte offsets. */
  src: string;
  cpp?: CppIndex;
  cmake?: CMakeCommand[];
}

export type Located = { offset: number; indent: string } | { refuse: string };

interface SpecBase {
  id: string;
  /** Path relative to the tree root, with forward slashes. */
  file: string;
  anchor: string;
  why: string;
}

/**
 * What the code a patch inserts looks like, markers aside: patterns that match its distinctive lines (its call,
 * its include) and nothing in an unpatched file. Markers can be lost (stripped by hand, or by a tool that
 * drops comments) while the hook stays; without this, the hook would be inserted a second time.
 */
interface Footprinted {
  footprint?: readonly RegExp[];
}

/** Insert a marked block of lines at a located line start. */
export interface InsertSpec extends SpecBase, Footprinted {
  kind: 'insert';
  parse: 'cpp' | 'cmake' | 'text';
  style: CommentStyle;
  lines: readonly string[];
  locate(doc: Doc): Located;
}

/** Where a replaced span lies: whole lines, [start, end), and the indent the block takes. */
export type LocatedSpan = { start: number; end: number; indent: string } | { refuse: string };

/**
 * Replace located whole lines with a marked block. The block says what it replaced (in `lines`), so the
 * marker check alone tells a second run that the replacement is already there.
 */
export interface ReplaceSpec extends SpecBase, Footprinted {
  kind: 'replace';
  parse: 'cpp' | 'cmake' | 'text';
  style: CommentStyle;
  lines: readonly string[];
  locate(doc: Doc): LocatedSpan;
}

/** Verify a precondition; a returned string is the refusal (what was found instead). */
export interface CheckSpec extends SpecBase {
  kind: 'check';
  parse: 'cpp' | 'cmake' | 'text';
  verify(doc: Doc): string | undefined;
}

/** A file the tool owns outright (template copies): created, or rewritten when its content differs. */
export interface OwnedFileSpec extends SpecBase {
  kind: 'owned-file';
  content: string;
  /** A string every version of this file carries; an existing file without it is someone else's. */
  ownerMark: string;
}

export type PatchSpec = InsertSpec | ReplaceSpec | CheckSpec | OwnedFileSpec;

/** A whole-file change; `before` and `after` are byte strings (bytes.ts), written back byte for byte. */
export interface FileChange {
  file: string;
  before: string | null;
  after: string;
}

/** A hook found without its markers: the refusal's fix names these files. */
export interface UnmarkedHook {
  id: string;
  file: string;
  line: number;
}

export interface PatchPlan {
  changes: FileChange[];
  fixes: FixRecord[];
  refusals: FixRecord[];
  /** Hooks already in the tree without their markers (each is also a refusal). */
  unmarked?: UnmarkedHook[];
}

export interface PlanOptions {
  /** Explains a missing file (e.g. "found src/comm/... instead"): appended to the refusal. */
  explainMissing?: (file: string) => Promise<string | undefined>;
}

/** A file's bytes (bytes.ts), or undefined when it cannot be read (absent, a directory, no permission). */
const readOrUndefined = (root: string, file: string): Promise<string | undefined> => readByteString(path.join(root, file)).catch(() => undefined);

async function loadDoc(file: string, read: Promise<string | undefined>, parse: Set<string>): Promise<Doc | undefined> {
  const src = await read;
  if (src === undefined) return undefined;
  const doc: Doc = { file, src };
  if (parse.has('cpp')) doc.cpp = await indexCpp(parseView(src));
  if (parse.has('cmake')) doc.cmake = scanCMake(parseView(src));
  return doc;
}

/** The first match of a footprint pattern outside every marked block: its line and that line's text. */
function findFootprint(src: string, unmarkedText: string, footprint: readonly RegExp[] | undefined): { line: number; text: string } | undefined {
  for (const re of footprint ?? []) {
    const m = new RegExp(re.source, re.flags.replace('g', '')).exec(unmarkedText);
    if (!m) continue;
    const start = lineStart(src, m.index);
    const nl = src.indexOf('\n', m.index);
    const text = src.slice(start, nl === -1 ? src.length : nl).trim();
    return { line: lineOf(src, m.index), text: text.length > 100 ? `${text.slice(0, 100)}…` : text };
  }
  return undefined;
}

export async function planPatches(root: string, specs: readonly PatchSpec[], opts: PlanOptions = {}): Promise<PatchPlan> {
  const plan: PatchPlan = { changes: [], fixes: [], refusals: [] };
  const byFile = new Map<string, PatchSpec[]>();
  for (const s of specs) byFile.set(s.file, [...(byFile.get(s.file) ?? []), s]);
  // Every file is read at once, not one after another: the reads wait on the disk together, and a file is read once.
  const reads = new Map([...byFile.keys()].map((f) => [f, readOrUndefined(root, f)]));

  for (const [file, fileSpecs] of byFile) {
    const record = (s: PatchSpec, status: FixRecord['status'], detail?: string) => {
      const r: FixRecord = { id: s.id, file, anchor: s.anchor, why: s.why, status, ...(detail ? { detail } : {}) };
      (status === 'refused' ? plan.refusals : plan.fixes).push(r);
    };

    const owned = fileSpecs.filter((s): s is OwnedFileSpec => s.kind === 'owned-file');
    for (const s of owned) {
      const before = (await reads.get(file)) ?? null; // absent: created
      const content = utf8Bytes(s.content);
      if (before === content) record(s, 'already-present');
      else if (before !== null && !before.includes(utf8Bytes(s.ownerMark))) {
        record(s, 'refused', `${file} exists and was not written by nvshmem-efa (no "${s.ownerMark}" in it)`);
      } else {
        plan.changes.push({ file, before, after: content });
        record(s, 'applied', before === null ? undefined : 'replaced an older copy');
      }
    }
    const edits = fileSpecs.filter((s): s is InsertSpec | ReplaceSpec | CheckSpec => s.kind !== 'owned-file');
    if (edits.length === 0) continue;

    let doc: Doc | undefined;
    try {
      doc = await loadDoc(file, reads.get(file)!, new Set(edits.map((s) => s.parse)));
    } catch (e) {
      const why = e instanceof CMakeScanError ? `cannot be scanned as CMake: ${e.message}` : String(e);
      for (const s of edits) record(s, 'refused', `${file} ${why}`);
      continue;
    }
    if (!doc) {
      const hint = (await opts.explainMissing?.(file)) ?? '';
      for (const s of edits) record(s, 'refused', `${file} not found${hint ? `; ${hint}` : ''}`);
      continue;
    }
    const ms = new MagicString(doc.src);
    const unmarkedText = maskMarkedBlocks(doc.src);
    // A block is the tool's UTF-8 text, with the file's own line ends (CRLF in a CRLF file).
    const eol = lineEndOf(doc.src);
    const block = (s: InsertSpec | ReplaceSpec, indent: string) => withLineEnds(utf8Bytes(renderBlock(s.style, s.id, s.lines, indent)), eol);
    for (const s of edits) {
      if (s.kind === 'check') {
        const problem = s.verify(doc);
        if (problem) record(s, 'refused', problem);
        continue;
      }
      const state = findBlock(doc.src, s.style, s.id);
      if (state.kind === 'broken') {
        record(s, 'refused', `${file}: ${state.reason}`);
        continue;
      }
      const stray = findFootprint(doc.src, unmarkedText, s.footprint);
      if (stray) {
        // Refused, not re-inserted and not adopted: which lines belonged to the hook is no longer known, so
        // neither replacing them nor counting them as "already present" would be safe.
        const besides = state.kind === 'present' ? ', besides its marked block' : '';
        const then = s.kind === 'insert' ? '; patching would add it a second time' : '';
        record(
          s,
          'refused',
          `${file}:${stray.line}: the '${s.id}' hook (\`${stray.text}\`) is there without its nvshmem-efa markers${besides} (removed by hand, or by a tool that strips comments)${then}`,
        );
        (plan.unmarked ??= []).push({ id: s.id, file, line: stray.line });
        continue;
      }
      if (state.kind === 'present') {
        const indent = /^[ \t]*/.exec(state.text)![0];
        const expected = block(s, indent);
        // In a CRLF file, a block an earlier version inserted with LF line ends is the same block.
        if (state.text === expected || state.text === utf8Bytes(renderBlock(s.style, s.id, s.lines, indent))) record(s, 'already-present');
        else {
          const diff = blockDifference(state.text, expected, lineOf(doc.src, state.start));
          record(s, 'refused', `${file}: the '${s.id}' block differs from what this version of nvshmem-efa inserts (${diff}; edited by hand, or written by another version)`);
        }
        continue;
      }
      const at = s.locate(doc);
      if ('refuse' in at) {
        record(s, 'refused', `${file}: ${at.refuse}`);
        continue;
      }
      const text = block(s, at.indent);
      if ('offset' in at) {
        // After a last line without a newline, the block starts a line of its own instead of being glued onto it.
        const glued = at.offset === doc.src.length && doc.src.length > 0 && !doc.src.endsWith('\n');
        ms.appendLeft(at.offset, glued ? eol + text : text);
      } else ms.overwrite(at.start, at.end, text);
      record(s, 'applied');
    }
    // Every spec of this file is done with its parse (what they read from it stays).
    doc.cpp?.release();
    if (ms.hasChanged()) plan.changes.push({ file, before: doc.src, after: ms.toString() });
  }
  plan.changes.sort((a, b) => a.file.localeCompare(b.file));
  return plan;
}
