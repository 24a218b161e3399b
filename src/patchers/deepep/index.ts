import { planPatches, type PatchPlan } from '../engine/plan.ts';
import { detectLayout, type DeepEpLayout } from './layout.ts';
import { deepEpSpecs } from './specs.ts';
import { loadShim } from './template.ts';

export interface DeepEpPlan extends PatchPlan {
  layout?: DeepEpLayout;
}

/** Plans the DeepEP patches; an unknown layout is one refusal that says what was found. */
export async function planDeepEp(root: string, shim?: string): Promise<DeepEpPlan> {
  const layout = detectLayout(root);
  if (typeof layout !== 'string') {
    return {
      changes: [],
      fixes: [],
      refusals: [{ id: 'deepep-layout', anchor: 'csrc/kernels/configs.cuh (V1) or csrc/kernels/legacy/ (EPv2)', why: 'each layout has its own include sites and init', status: 'refused', detail: layout.refuse }],
    };
  }
  const plan = await planPatches(root, deepEpSpecs(layout, shim ?? (await loadShim())));
  return { ...plan, layout };
}
