import { PatchRefusedError } from '../core/errors.ts';
import { hashJson, hashTree } from '../core/hash.ts';
import { toolVersion } from '../core/paths.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import { loadShim } from '../patchers/deepep/template.ts';
import { writeChanges } from '../patchers/engine/apply.ts';
import type { PatchPlan } from '../patchers/engine/plan.ts';
import { requireDeepEp, wantsDeepEp } from './get-deepep.ts';
import type { DeepEpPatchResult, Step } from './types.ts';

export function deepEpRefusalError(plan: PatchPlan, dir: string): PatchRefusedError {
  return new PatchRefusedError(
    `DeepEP tree ${dir} does not look as expected; nothing was changed`,
    'use DeepEP 567632d (--deepep-ref 567632d), a V1 revision from v1.2.1 on, or EPv2; if the tree was edited by hand, restore it (git checkout -- .) and rerun',
    plan.refusals.map((r) => `${r.id}: ${r.detail}`),
  );
}

export const patchDeepEpStep: Step = {
  id: 'patch-deepep',
  title: 'Patch DeepEP with the EFA shim',
  enabled: wantsDeepEp,
  restampAfterRun: true,
  async stamp(ctx) {
    return { tree: await hashTree(requireDeepEp(ctx).dir), shim: hashJson(await loadShim()), tool: toolVersion() };
  },
  async run(ctx, io) {
    const dir = requireDeepEp(ctx).dir;
    const plan = await planDeepEp(dir);
    if (plan.refusals.length) {
      ctx.refusals = [...(ctx.refusals ?? []), ...plan.refusals];
      throw deepEpRefusalError(plan, dir);
    }
    await writeChanges(dir, plan.changes);
    const applied = plan.fixes.filter((f) => f.status === 'applied').length;
    io.progress(`${plan.layout} layout: ${applied} applied, ${plan.fixes.length - applied} already present`);
    const result: DeepEpPatchResult = { layout: plan.layout!, fixes: plan.fixes };
    ctx.deepepPatch = result;
    return result;
  },
  restore(ctx, result) {
    ctx.deepepPatch = result as DeepEpPatchResult;
    return true;
  },
};
