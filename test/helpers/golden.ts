import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { expect } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const GOLDEN_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'golden');
export const GOLDEN = path.join(GOLDEN_ROOT, 'nvshmem');
export const GOLDEN_DEEPEP = path.join(GOLDEN_ROOT, 'deepep');

export interface GoldenCase {
  name: string;
  dir: string;
  /** The case whose tree this one starts from: a name in the same root, or a relative path to another root's case. */
  base?: string;
  expect: 'patch' | 'refuse';
  note: string;
  /**
   * Template files to copy into the tree when it is materialised: {from (repo-relative dir), to (tree dir)}.
   * Already-patched cases get the current templates this way instead of keeping stale copies.
   */
  templates?: { from: string; to: string };
  /**
   * Changes to the base case's files, each `find` present exactly once: a variant says only how it differs
   * from its base instead of repeating whole files.
   */
  edits?: { file: string; find: string; replace: string }[];
  /** A regular expression: every line of the laid tree's files that matches it is removed (after the edits). */
  stripLines?: string;
}

const REPO = path.join(GOLDEN_ROOT, '..', '..');

export function goldenCases(root = GOLDEN): GoldenCase[] {
  return readdirSync(root)
    .filter((n) => existsSync(path.join(root, n, 'case.json')))
    .sort()
    .map((name) => caseAt(path.join(root, name)));
}

function caseAt(dir: string): GoldenCase {
  return { name: path.basename(dir), dir, ...JSON.parse(readFileSync(path.join(dir, 'case.json'), 'utf8')) };
}

/** A case's base: a case of the same root by name, or of another root by relative path (`../nvshmem/v3.4-like`). */
function baseOf(gc: GoldenCase, root: string): { base: GoldenCase; root: string } {
  if (gc.base!.includes('/')) {
    const dir = path.resolve(root, gc.base!);
    return { base: caseAt(dir), root: path.dirname(dir) };
  }
  return { base: goldenCases(root).find((x) => x.name === gc.base)!, root };
}

/**
 * The files of a case: its base case's (materialised the same way, edits included, so bases chain), then its own
 * files over them, then its own edits.
 */
function layTree(gc: GoldenCase, root: string, dst: string): void {
  if (gc.base) {
    const b = baseOf(gc, root);
    layTree(b.base, b.root, dst);
  }
  if (existsSync(path.join(gc.dir, 'tree'))) cpSync(path.join(gc.dir, 'tree'), dst, { recursive: true });
  for (const e of gc.edits ?? []) {
    const file = path.join(dst, e.file);
    const text = readFileSync(file, 'utf8');
    const at = text.indexOf(e.find);
    if (at < 0 || text.indexOf(e.find, at + 1) >= 0) throw new Error(`golden case ${gc.name}: edit of ${e.file} must match exactly once: ${JSON.stringify(e.find.slice(0, 80))}`);
    writeFileSync(file, text.slice(0, at) + e.replace + text.slice(at + e.find.length));
  }
  if (gc.stripLines) {
    const re = new RegExp(gc.stripLines);
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const f = path.join(d, e.name);
        if (e.isDirectory()) walk(f);
        else if (e.isFile()) {
          const text = readFileSync(f, 'utf8');
          const kept = text.split('\n').filter((l) => !re.test(l)).join('\n');
          if (kept !== text) writeFileSync(f, kept);
        }
      }
    };
    walk(dst);
  }
}

/** A fresh temporary copy of the case's tree: its base case's tree, then its own files over it. */
export function materialize(c: GoldenCase | string, root = GOLDEN): string {
  const gc = typeof c === 'string' ? goldenCases(root).find((x) => x.name === c)! : c;
  const dst = mkdtempSync(path.join(os.tmpdir(), `nvshmem-efa-${gc.name}-`));
  layTree(gc, root, dst);
  if (gc.templates) {
    for (const f of readdirSync(path.join(REPO, gc.templates.from)).filter((n) => !n.endsWith('.json'))) {
      cpSync(path.join(REPO, gc.templates.from, f), path.join(dst, gc.templates.to, f));
    }
  }
  return dst;
}

const UPDATE = process.env.UPDATE_GOLDEN === '1';

/** Byte-for-byte comparison with a checked-in file; UPDATE_GOLDEN=1 rewrites it (review the diff). */
export function golden(file: string, actual: string): void {
  if (UPDATE || !existsSync(file)) {
    if (!UPDATE) throw new Error(`missing golden file ${file}; run with UPDATE_GOLDEN=1 and review it`);
    writeFileSync(file, actual);
  }
  expect(actual).toBe(readFileSync(file, 'utf8'));
}

/** A plan's refusals as the golden expected-refusals.txt files hold them: id, file and anchor, then the detail. */
export function refusalText(plan: { refusals: readonly { id: string; file?: string; anchor: string; detail?: string }[] }): string {
  return plan.refusals.map((r) => `${r.id} (${r.file ?? '-'}: ${r.anchor})\n  ${r.detail}\n`).join('');
}
