import { readFile } from 'node:fs/promises';
import path from 'node:path';
import MagicString from 'magic-string';
import { scanCMake, CMakeScanError, type CMakeCommand } from './cmake-scan.ts';
import { indexCpp, type CppIndex } from './cpp.ts';
import type { FixRecord } from './fix.ts';
import { blockDifference, findBlock, renderBlock, type CommentStyle } from './markers.ts';
import { lineOf } from './text.ts';

/**
 * Plan, then apply (changesets' split): specs are located against the untouched files, the result is a list
 * of whole-file changes plus a Fix record per spec. Nothing is written here, so `--dry-run`, `--export` and a
 * refusal all see the same plan, and a refusal leaves the tree exactly as it was.
 */
export interface Doc {
  file: string;
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

/** Insert a marked block of lines at a located line start. */
export interface InsertSpec extends SpecBase {
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
export interface ReplaceSpec extends SpecBase {
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

export interface FileChange {
  file: string;
  before: string | null;
  after: string;
}

export interface PatchPlan {
  changes: FileChange[];
  fixes: FixRecord[];
  refusals: FixRecord[];
}

export interface PlanOptions {
  /** Explains a missing file (e.g. "found src/comm/... instead"): appended to the refusal. */
  explainMissing?: (file: string) => Promise<string | undefined>;
}

async function loadDoc(root: string, file: string, parse: Set<string>): Promise<Doc | undefined> {
  let src: string;
  try {
    src = await readFile(path.join(root, file), 'utf8');
  } catch {
    return undefined;
  }
  const doc: Doc = { file, src };
  if (parse.has('cpp')) doc.cpp = await indexCpp(src);
  if (parse.has('cmake')) doc.cmake = scanCMake(src);
  return doc;
}

export async function planPatches(root: string, specs: readonly PatchSpec[], opts: PlanOptions = {}): Promise<PatchPlan> {
  const plan: PatchPlan = { changes: [], fixes: [], refusals: [] };
  const byFile = new Map<string, PatchSpec[]>();
  for (const s of specs) byFile.set(s.file, [...(byFile.get(s.file) ?? []), s]);

  for (const [file, fileSpecs] of byFile) {
    const record = (s: PatchSpec, status: FixRecord['status'], detail?: string) => {
      const r: FixRecord = { id: s.id, file, anchor: s.anchor, why: s.why, status, ...(detail ? { detail } : {}) };
      (status === 'refused' ? plan.refusals : plan.fixes).push(r);
    };

    const owned = fileSpecs.filter((s): s is OwnedFileSpec => s.kind === 'owned-file');
    for (const s of owned) {
      let before: string | null = null;
      try {
        before = await readFile(path.join(root, file), 'utf8');
      } catch {
        /* absent: created */
      }
      if (before === s.content) record(s, 'already-present');
      else if (before !== null && !before.includes(s.ownerMark)) {
        record(s, 'refused', `${file} exists and was not written by nvshmem-efa (no "${s.ownerMark}" in it)`);
      } else {
        plan.changes.push({ file, before, after: s.content });
        record(s, 'applied', before === null ? undefined : 'replaced an older copy');
      }
    }
    const edits = fileSpecs.filter((s): s is InsertSpec | ReplaceSpec | CheckSpec => s.kind !== 'owned-file');
    if (edits.length === 0) continue;

    let doc: Doc | undefined;
    try {
      doc = await loadDoc(root, file, new Set(edits.map((s) => s.parse)));
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
      if (state.kind === 'present') {
        const indent = /^[ \t]*/.exec(state.text)![0];
        const expected = renderBlock(s.style, s.id, s.lines, indent);
        if (state.text === expected) record(s, 'already-present');
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
      const block = renderBlock(s.style, s.id, s.lines, at.indent);
      if ('offset' in at) ms.appendLeft(at.offset, block);
      else ms.overwrite(at.start, at.end, block);
      record(s, 'applied');
    }
    if (ms.hasChanged()) plan.changes.push({ file, before: doc.src, after: ms.toString() });
  }
  plan.changes.sort((a, b) => a.file.localeCompare(b.file));
  return plan;
}
