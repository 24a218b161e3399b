import { describe, expect, it } from 'vitest';
import { hashJson, hashTree } from '../../src/core/hash.ts';
import { codeIdentity } from '../../src/core/code-identity.ts';
import { NVSHMEM_BUILD_OUTPUTS } from '../../src/core/nvshmem-tree.ts';
import { nvshmemSpecDigest } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { patchNvshmemStep } from '../../src/steps/patch-nvshmem.ts';
import type { Ctx } from '../../src/steps/types.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * patch-nvshmem's stamp reuses the last run's spec digest (a parser start-up, about a second of a no-op rerun)
 * only when the same code computed it for the same tree and template; anything else computes it afresh.
 */
function ctxWith(dir: string, memo?: { key: string; digest: string }): Ctx {
  const result = memo ? { specMemo: memo } : undefined;
  return { source: { dir }, opts: { nvshmemDeviceApi: false }, state: { get: (id: string) => (id === 'patch-nvshmem' && result ? { stamp: 'x', result } : undefined) } } as unknown as Ctx;
}

describe("patch-nvshmem's stamp and its spec-digest memo", () => {
  it('reuses the memo for the same tree, template and code; recomputes when the key is another', async () => {
    const dir = materialize('v3.4-like');
    const t = await loadTemplate();
    const real = hashJson(await nvshmemSpecDigest(dir, t));
    const key = hashJson([await hashTree(dir, { generated: NVSHMEM_BUILD_OUTPUTS }), hashJson(t.files), await codeIdentity(), { nvshmemDeviceApi: false }]);
    const fresh = (await patchNvshmemStep.stamp!(ctxWith(dir))) as { specs: string };
    expect(fresh.specs).toBe(real);
    // A memo under the right key is taken as it is (a planted digest shows it was not recomputed)...
    const reused = (await patchNvshmemStep.stamp!(ctxWith(dir, { key, digest: 'planted' }))) as { specs: string };
    expect(reused.specs).toBe('planted');
    // ...and one under another key (another tree, template or tool code) is not.
    const stale = (await patchNvshmemStep.stamp!(ctxWith(dir, { key: hashJson(['another tree']), digest: 'planted' }))) as { specs: string };
    expect(stale.specs).toBe(real);
  });
});
