// The device API patch (issue 23: NVSHMEM's nvshmemi_transfer_* functions routed through EFA GDA, and the slot they
// read) on miniature trees written for these tests in NVSHMEM 3.4.5's, 3.5's and AWS's 3.5.7 shapes: the expected
// patch, nothing more on a second run, and refusals that name what differs.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderDiff, writeChanges } from '../../src/patchers/engine/apply.ts';
import { display } from '../../src/patchers/engine/bytes.ts';
import { planPatches } from '../../src/patchers/engine/plan.ts';
import { deviceApiSpecs, HEADERS_DIR, HOOKS, hookShapeProblem } from '../../src/patchers/nvshmem/device-api.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { golden, goldenCases, materialize, refusalText } from '../helpers/golden.ts';

const ROOT = path.join(import.meta.dirname, 'device-api');
const template = await loadTemplate();
const specs = () => deviceApiSpecs(template);

describe.each(goldenCases(ROOT))('device API golden $name', (c) => {
  it(`${c.expect === 'patch' ? 'produces the expected patch' : 'is refused with the expected message'} (${c.note})`, async () => {
    const plan = await planPatches(materialize(c, ROOT), specs());
    if (c.expect === 'refuse') {
      expect(plan.refusals.length).toBeGreaterThan(0);
      golden(path.join(c.dir, 'expected-refusals.txt'), refusalText(plan));
      return;
    }
    expect(refusalText(plan)).toBe('');
    // The headers copied into src/include/nvshmem_efa/ are the templates themselves: checked here, not in the golden.
    const headers = plan.changes.filter((ch) => ch.file.startsWith(`${HEADERS_DIR}/`));
    expect(headers.map((h) => path.basename(h.file)).sort()).toEqual(template.manifest.installHeaders.filter((n) => n !== 'efa_io_defs.h').sort());
    for (const h of headers) expect(display(h.after)).toBe(template.files.find((f) => f.name === path.basename(h.file))!.content);
    golden(path.join(c.dir, 'expected.patch'), display(renderDiff(plan.changes.filter((ch) => !headers.includes(ch)))));
  });

  if (c.expect !== 'patch') return;
  it('changes nothing when run a second time', async () => {
    const tree = materialize(c, ROOT);
    await writeChanges(tree, (await planPatches(tree, specs())).changes);
    const again = await planPatches(tree, specs());
    expect(again.changes).toEqual([]);
    expect(again.refusals).toEqual([]);
    expect(new Set(again.fixes.map((f) => f.status))).toEqual(new Set(['already-present']));
  });
});

describe('device API hook shapes', () => {
  it('every hook names only parameters its function has in both layouts, and says which are missing otherwise', () => {
    const nbi = HOOKS.find((h) => h.fn === 'nvshmemi_transfer_rma_nbi')!;
    const head = 'template <threadgroup_t SCOPE, nvshmemi_op_t channel_op> __device__ void nvshmemi_transfer_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe)';
    expect(hookShapeProblem(head, nbi)).toBeUndefined();
    expect(hookShapeProblem(head.replace('int pe)', 'int pe, nvshmemx_qp_handle_t qp_index)'), nbi)).toBeUndefined();
    expect(hookShapeProblem(head.replace('channel_op>', 'op>').replace('size_t bytes', 'size_t n'), nbi)).toBe(
      'the hook calls the GDA path with names this definition lacks: no template parameter channel_op (found <SCOPE, op>); no parameter bytes (found (rptr, lptr, n, pe))',
    );
  });
});
