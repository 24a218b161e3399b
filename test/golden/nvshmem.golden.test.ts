import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exportPatches, renderDiff, writeChanges } from '../../src/patchers/engine/apply.ts';
import type { PatchPlan } from '../../src/patchers/engine/plan.ts';
import { planNvshmem } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { golden, goldenCases, materialize } from '../helpers/golden.ts';


function refusalText(plan: PatchPlan): string {
  return plan.refusals.map((r) => `${r.id} (${r.file}: ${r.anchor})\n  ${r.detail}\n`).join('');
}

const template = await loadTemplate();

describe.each(goldenCases())('golden $name', (c) => {
  it(`${c.expect === 'patch' ? 'produces the expected patch' : 'is refused with the expected message'} (${c.note})`, async () => {
    const tree = materialize(c);
    const plan = await planNvshmem(tree, template);
    if (c.expect === 'refuse') {
      expect(plan.refusals.length).toBeGreaterThan(0);
      golden(path.join(c.dir, 'expected-refusals.txt'), refusalText(plan));
      return;
    }
    expect(refusalText(plan)).toBe('');
    golden(path.join(c.dir, 'expected.patch'), renderDiff(plan.changes));
  });

  if (c.expect !== 'patch') return;

  it('changes nothing when run a second time', async () => {
    const tree = materialize(c);
    await writeChanges(tree, (await planNvshmem(tree, template)).changes);
    const again = await planNvshmem(tree, template);
    expect(again.changes).toEqual([]);
    expect(again.refusals).toEqual([]);
    expect(new Set(again.fixes.map((f) => f.status))).toEqual(new Set(['already-present']));
  });

  it('exports patches that git apply accepts on the pristine tree and that give the same files', async () => {
    const tree = materialize(c);
    const plan = await planNvshmem(tree, template);
    const out = materialize(c) + '-patches';
    const names = await exportPatches(out, plan.changes);
    execFileSync('git', ['init', '-q'], { cwd: tree });
    for (const n of names) execFileSync('git', ['apply', path.join(out, n)], { cwd: tree });
    for (const ch of plan.changes) expect(readFileSync(path.join(tree, ch.file), 'utf8')).toBe(ch.after);
  });
});

describe('golden cases against each other', () => {
  it('a half-patched tree is completed to exactly the fully patched tree', async () => {
    const full = materialize('v3.4-like');
    await writeChanges(full, (await planNvshmem(full, template)).changes);
    const half = materialize('half-patched');
    await writeChanges(half, (await planNvshmem(half, template)).changes);
    const f = 'src/modules/transport/libfabric/libfabric.cpp';
    expect(readFileSync(path.join(half, f), 'utf8')).toBe(readFileSync(path.join(full, f), 'utf8'));
  });

  it('the already-patched fixture is exactly what patching v3.4-like produces', async () => {
    const full = materialize('v3.4-like');
    const plan = await planNvshmem(full, template);
    const patched = materialize('already-patched');
    for (const ch of plan.changes) expect(readFileSync(path.join(patched, ch.file), 'utf8')).toBe(ch.after);
  });

  it('template sources are part of the patch', async () => {
    const plan = await planNvshmem(materialize('v3.4-like'), template);
    const files = plan.changes.map((ch) => ch.file);
    for (const f of [...template.manifest.sources, ...template.manifest.headers]) expect(files).toContain(`${template.manifest.destination}/${f}`);
  });
});
