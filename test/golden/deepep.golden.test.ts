import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exportPatches, renderDiff, writeChanges } from '../../src/patchers/engine/apply.ts';
import { display } from '../../src/patchers/engine/bytes.ts';
import { planDeepEp } from '../../src/patchers/deepep/index.ts';
import { GOLDEN_DEEPEP, golden, goldenCases, materialize, refusalText } from '../helpers/golden.ts';



describe.each(goldenCases(GOLDEN_DEEPEP))('golden deepep $name', (c) => {
  it(`${c.expect === 'patch' ? 'produces the expected patch' : 'is refused with the expected message'} (${c.note})`, async () => {
    const plan = await planDeepEp(materialize(c, GOLDEN_DEEPEP));
    if (c.expect === 'refuse') {
      expect(plan.refusals.length).toBeGreaterThan(0);
      golden(path.join(c.dir, 'expected-refusals.txt'), refusalText(plan));
      return;
    }
    expect(refusalText(plan)).toBe('');
    golden(path.join(c.dir, 'expected.patch'), display(renderDiff(plan.changes)));
  });

  if (c.expect !== 'patch') return;

  it('changes nothing when run a second time (an already patched tree is left unchanged)', async () => {
    const tree = materialize(c, GOLDEN_DEEPEP);
    await writeChanges(tree, (await planDeepEp(tree)).changes);
    const again = await planDeepEp(tree);
    expect(again.changes).toEqual([]);
    expect(again.refusals).toEqual([]);
    expect(new Set(again.fixes.map((f) => f.status))).toEqual(new Set(['already-present']));
  });

  it('exports patches that git apply accepts on the pristine tree', async () => {
    const tree = materialize(c, GOLDEN_DEEPEP);
    const plan = await planDeepEp(tree);
    const out = `${tree}-patches`;
    const names = await exportPatches(out, plan.changes);
    execFileSync('git', ['init', '-q'], { cwd: tree });
    for (const n of names) execFileSync('git', ['apply', path.join(out, n)], { cwd: tree });
    for (const ch of plan.changes) expect(readFileSync(path.join(tree, ch.file), 'latin1')).toBe(ch.after);
  });
});

