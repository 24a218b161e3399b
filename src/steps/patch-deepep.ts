import { PatchRefusedError } from '../core/errors.ts';
import { hashJson } from '../core/hash.ts';
import { toolVersion } from '../core/paths.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import { detectLayout } from '../patchers/deepep/layout.ts';
import { deepEpSpecs } from '../patchers/deepep/specs.ts';
import { loadShim } from '../patchers/deepep/template.ts';
import { writeChanges } from '../patchers/engine/apply.ts';
import { unmarkedHooksFix } from '../patchers/engine/markers.ts';
import type { PatchPlan } from '../patchers/engine/plan.ts';
import { hashDeepEpSources } from './deepep-setup.ts';
import { requireDeepEp, wantsDeepEp } from './get-deepep.ts';
import { upToDate } from '../patchers/engine/fix.ts';
import { recoverCommit } from './patch-nvshmem.ts';
import type { Ctx, DeepEpPatchResult, Step } from './types.ts';

/** `changed`: what the run had already changed elsewhere when DeepEP was refused, said exactly. */
export function deepEpRefusalError(plan: PatchPlan, dir: string, changed = 'nothing was changed'): PatchRefusedError {
  const general = 'use DeepEP 567632d (--deepep-ref 567632d), a V1 revision from v1.2.1 on, or EPv2; if the tree was edited by hand, restore it (git checkout -- .) and rerun';
  const unmarked = plan.unmarked ?? [];
  const fix = unmarked.length
    ? `${unmarkedHooksFix(unmarked)}${plan.refusals.length > unmarked.length ? `; otherwise ${general}` : ''}`
    : general;
  return new PatchRefusedError(`DeepEP tree ${dir} does not look as expected; ${changed}`, fix, plan.refusals.map((r) => `${r.id}: ${r.detail}`));
}

/**
 * "Nothing was changed" must be true when printed. The preflight plans DeepEP before NVSHMEM is touched, so
 * this refusal means the tree changed since; say exactly what the run had changed by then.
 */
function changedSoFar(ctx: Ctx, dir: string): string {
  const none = `nothing was changed in ${dir}`;
  const changed = ctx.patch?.changedFiles ?? [];
  if (changed.length === 0) return none;
  if (!ctx.opts.inPlace) return `${none}; NVSHMEM was patched only in the work dir's copy (${ctx.source?.dir})`;
  return `${none}, but this run patched NVSHMEM in place in ${ctx.source?.dir}: ${changed.join(', ')} (in a git checkout, undo with: git checkout -- . && git clean -fd)`;
}

/**
 * What the patcher would write into this tree (its layout's specs: ids, files, lines, the shim), without
 * locating anything: a tool whose DeepEP patches or shim changed patches again a tree it patched before.
 */
function deepEpPatchSet(dir: string, shim: string): unknown {
  const layout = detectLayout(dir);
  if (typeof layout !== 'string') return layout;
  return deepEpSpecs(layout, shim).map((s) => ({
    id: s.id,
    file: s.file,
    kind: s.kind,
    ...('lines' in s ? { lines: s.lines } : {}),
    ...('footprint' in s && s.footprint ? { footprint: s.footprint.map(String) } : {}),
    ...('content' in s ? { content: hashJson(s.content) } : {}),
  }));
}

export const patchDeepEpStep: Step = {
  id: 'patch-deepep',
  title: 'Patch DeepEP with the EFA shim',
  enabled: wantsDeepEp,
  restampAfterRun: true,
  async stamp(ctx) {
    const dir = requireDeepEp(ctx).dir;
    return { sources: await hashDeepEpSources(dir), patches: hashJson(deepEpPatchSet(dir, await loadShim())), tool: toolVersion() };
  },
  async run(ctx, io) {
    const dir = requireDeepEp(ctx).dir;
    await recoverCommit(ctx, dir, io);
    const plan = await planDeepEp(dir);
    if (plan.refusals.length) {
      ctx.refusals = [...(ctx.refusals ?? []), ...plan.refusals];
      throw deepEpRefusalError(plan, dir, changedSoFar(ctx, dir));
    }
    await writeChanges(dir, plan.changes, ctx.signal);
    const applied = plan.fixes.filter((f) => f.status === 'applied').length;
    io.progress(`${plan.layout} layout: ${applied} applied, ${plan.fixes.length - applied} already present`);
    const result: DeepEpPatchResult = { layout: plan.layout!, fixes: plan.fixes };
    ctx.deepepPatch = result;
    return result;
  },
  restore(ctx, result) {
    const r = result as DeepEpPatchResult;
    ctx.deepepPatch = { ...r, fixes: upToDate(r.fixes) };
    return true;
  },
};
