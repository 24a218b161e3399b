import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { planDeepEp } from '../../src/patchers/deepep/index.ts';
import { deepEpSpecs } from '../../src/patchers/deepep/specs.ts';
import { loadShim } from '../../src/patchers/deepep/template.ts';
import { findBlock, maskMarkedBlocks } from '../../src/patchers/engine/markers.ts';
import type { FileChange, PatchSpec } from '../../src/patchers/engine/plan.ts';
import { planNvshmem, nvshmemSpecs } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Item 5 of issue 20: a hook is recognised by its code, not only by its markers. For every spec that inserts or
 * replaces code, its footprint must match the code it writes and nothing in the unpatched trees we know, or the
 * refusal would either miss a stripped hook or refuse a pristine tree.
 */
const template = await loadTemplate();
const shim = await loadShim();

type Edit = Extract<PatchSpec, { kind: 'insert' | 'replace' }>;
const edits = (specs: PatchSpec[]) => specs.filter((s): s is Edit => s.kind === 'insert' || s.kind === 'replace');

const cases = [
  { name: 'nvshmem single-rail', tree: () => materialize('v3.4-like'), specs: nvshmemSpecs(template, [], 'single-rail', ' nvshmem_device ${ACTIVE_TRANSPORTS}'), plan: (t: string) => planNvshmem(t, template) },
  { name: 'nvshmem multi-rail', tree: () => materialize('multi-rail'), specs: nvshmemSpecs(template, [], 'multi-rail'), plan: (t: string) => planNvshmem(t, template) },
  { name: 'deepep v1', tree: () => materialize('v1', GOLDEN_DEEPEP), specs: deepEpSpecs('v1', shim), plan: (t: string) => planDeepEp(t) },
  { name: 'deepep epv2', tree: () => materialize('epv2-legacy', GOLDEN_DEEPEP), specs: deepEpSpecs('epv2', shim), plan: (t: string) => planDeepEp(t) },
];

describe.each(cases)('footprints: $name', (c) => {
  it('every insert and replace has one', () => {
    expect(edits(c.specs).filter((s) => !s.footprint?.length).map((s) => s.id)).toEqual([]);
  });

  it('each matches the block it writes and no file of the unpatched tree', async () => {
    const tree = c.tree();
    const plan = await c.plan(tree);
    expect(plan.refusals).toEqual([]);
    const after = new Map(plan.changes.map((ch: FileChange) => [ch.file, ch.after]));
    for (const s of edits(c.specs)) {
      const pristine = readFileSync(path.join(tree, s.file), 'utf8');
      for (const re of s.footprint!) expect({ id: s.id, match: re.test(pristine) }).toEqual({ id: s.id, match: false });
      const block = findBlock(after.get(s.file)!, s.style, s.id);
      expect(block.kind).toBe('present');
      if (block.kind !== 'present') continue;
      expect({ id: s.id, match: s.footprint!.some((re) => re.test(block.text)) }).toEqual({ id: s.id, match: true });
      // Inside its own markers the hook is not "without markers".
      expect({ id: s.id, match: s.footprint!.some((re) => re.test(maskMarkedBlocks(after.get(s.file)!))) }).toEqual({ id: s.id, match: false });
    }
  });

  it('a patched tree whose markers are stripped is refused hook by hook, with nothing planned', async () => {
    const tree = c.tree();
    const plan = await c.plan(tree);
    for (const ch of plan.changes) {
      const stripped = ch.after.replace(/^[ \t]*(\/\* nvshmem-efa:(begin|end) \S+ \*\/|# nvshmem-efa:(begin|end) \S+)\n/gm, '');
      mkdirSync(path.dirname(path.join(tree, ch.file)), { recursive: true });
      writeFileSync(path.join(tree, ch.file), stripped, 'latin1');
    }
    const again = await c.plan(tree);
    expect(again.fixes.filter((f) => f.status === 'applied')).toEqual([]);
    expect(again.unmarked!.map((u) => u.id).sort()).toEqual(edits(c.specs).map((s) => s.id).sort());
  });
});
