import { PatchRefusedError } from '../core/errors.ts';
import { hashJson, hashTree } from '../core/hash.ts';
import { NVSHMEM_BUILD_OUTPUTS, TESTED_VERSIONS } from '../core/nvshmem-tree.ts';
import { toolVersion } from '../core/paths.ts';
import { renderDiff, writeChanges } from '../patchers/engine/apply.ts';
import { display } from '../patchers/engine/bytes.ts';
import { reuseTimes } from '../core/copy-tree.ts';
import { upToDate, type FixRecord } from '../patchers/engine/fix.ts';
import { JOURNAL, recoverJournal } from '../patchers/engine/journal.ts';
import { unmarkedHooksFix } from '../patchers/engine/markers.ts';
import { AWS_GDA_FIX, DEVICE_API_LEFTOVER_FIX, DEVICE_API_LEFTOVER_ID, nvshmemSpecDigest, planNvshmem, type NvshmemPatchChoice, type NvshmemPlan } from '../patchers/nvshmem/index.ts';
import { loadTemplate, type VendoredFile } from '../patchers/nvshmem/template.ts';
import { readFile } from 'node:fs/promises';
import { requireSource } from './get-nvshmem.ts';
import { codeIdentity } from '../core/code-identity.ts';
import type { Ctx, PatchResult, Step } from './types.ts';

/** What the step keeps: its result and the spec digest its stamp may reuse. */
interface KeptPatch extends PatchResult {
  specMemo?: { key: string; digest: string };
}

export function refusalError(plan: NvshmemPlan, treeDir: string): PatchRefusedError {
  const general = `use an NVSHMEM release from NVIDIA (tested: ${TESTED_VERSIONS.text}, single-rail; e.g. --nvshmem-ref v3.4.5-0) or a multi-rail tree shaped like AWS's devel-aws-2025-11-25 (NVSHMEM 3.5.7); if the tree was patched by hand, restore it (git checkout -- .) and rerun`;
  const unmarked = plan.unmarked ?? [];
  const leftover = plan.refusals.some((r) => r.id === DEVICE_API_LEFTOVER_ID);
  // The most specific fix first: the whole-tree reason, then hooks without markers, then device API hooks left
  // from an earlier run, then the general advice for whatever other refusals remain.
  const others = plan.refusals.length - unmarked.length - (plan.awsGda ? 1 : 0) - (leftover ? 1 : 0);
  const fix = [
    ...(plan.awsGda ? [AWS_GDA_FIX] : []),
    ...(unmarked.length ? [unmarkedHooksFix(unmarked)] : []),
    ...(leftover ? [DEVICE_API_LEFTOVER_FIX] : []),
    ...(others > 0 || (!plan.awsGda && !unmarked.length && !leftover) ? [general] : []),
  ].join('; otherwise ');
  return new PatchRefusedError(
    `NVSHMEM tree ${treeDir} does not look as expected; nothing was changed`,
    fix,
    plan.refusals.map((r) => `${r.id}: ${r.detail}`),
  );
}

/**
 * A run killed while committing its patch to this tree (SIGKILL, a crash, a power loss) left a journal: its
 * commit is completed or rolled back before the tree is planned, and the report says which.
 */
export async function recoverCommit(ctx: Ctx, dir: string, io: { progress(s: string): void }): Promise<void> {
  const r = await recoverJournal(dir);
  if (!r) return;
  io.progress(r.message);
  ctx.envFixes.push({
    id: 'patch-journal',
    file: JOURNAL,
    anchor: `${JOURNAL} at the root of the tree`,
    why: 'a run stopped outright while writing its patch leaves a journal, so the next run finishes or undoes that patch instead of building a half-patched tree',
    status: 'warned',
    detail: r.message,
  });
}

/** The user's choices the patch depends on. */
export function choiceOf(ctx: Ctx): NvshmemPatchChoice {
  return { nvshmemDeviceApi: ctx.opts.nvshmemDeviceApi };
}

async function vendoredFiles(ctx: Ctx): Promise<VendoredFile[]> {
  const v = ctx.vendored;
  return v ? [{ name: v.file, content: await readFile(v.path, 'utf8'), origin: v.origin }] : [];
}

export const patchNvshmemStep: Step = {
  id: 'patch-nvshmem',
  title: 'Patch NVSHMEM with the EFA GDA transport',
  enabled: () => true,
  restampAfterRun: true,
  async stamp(ctx) {
    const t = await loadTemplate();
    const dir = requireSource(ctx).dir;
    const tree = await hashTree(dir, { generated: NVSHMEM_BUILD_OUTPUTS });
    const template = hashJson(t.files);
    // The spec digest costs a parser start-up (about a second): the last run's is reused when the same code
    // computed it for the same tree and template (the memo's key), which is exactly when it cannot differ.
    const key = hashJson([tree, template, await codeIdentity(), choiceOf(ctx)]);
    const memo = (ctx.state.get('patch-nvshmem')?.result as KeptPatch | undefined)?.specMemo;
    const specs = memo?.key === key ? memo.digest : hashJson(await nvshmemSpecDigest(dir, t, [], choiceOf(ctx)));
    return { tree, template, vendored: ctx.vendored?.sha256 ?? null, specs, tool: toolVersion(), nvshmemDeviceApi: ctx.opts.nvshmemDeviceApi };
  },
  async run(ctx, io) {
    const dir = requireSource(ctx).dir;
    await recoverCommit(ctx, dir, io);
    const t = await loadTemplate();
    const plan = await planNvshmem(dir, t, await vendoredFiles(ctx), choiceOf(ctx));
    if (plan.refusals.length) {
      ctx.refusals = plan.refusals;
      throw refusalError(plan, dir);
    }
    ctx.diff = display(renderDiff(plan.changes));
    // One transaction, checked against the abort signal: an interrupted --in-place run leaves the user's
    // tree either untouched or fully patched.
    await writeChanges(dir, plan.changes, ctx.signal);
    // A file rewritten with the content it had in the last build keeps that build's time stamp (a template
    // change then recompiles the template, not libfabric.cpp and not what a reconfigure would touch).
    await reuseTimes(ctx.treeSnapshot, plan.changes.map((c) => c.file));
    const applied = plan.fixes.filter((f) => f.status === 'applied').length;
    io.progress(`${plan.layout?.id ?? 'unknown'} layout: ${applied} applied, ${plan.fixes.length - applied} already present`);
    const result: PatchResult = {
      ...(plan.layout ? { layout: { id: plan.layout.id, summary: plan.layout.summary } } : {}),
      changedFiles: plan.changes.map((c) => c.file),
      fixes: plan.fixes,
      templateStage: t.manifest.stage,
      templateNote: t.manifest.stageNote,
      gdaEnv: t.manifest.enableEnv,
      deviceHeaders: ctx.vendored ? 'complete' : 'without-efa-io-defs',
      nvshmemDeviceApi: ctx.opts.nvshmemDeviceApi,
    };
    ctx.patch = result;
    // The memo for the next run's stamp: the patched tree (restampAfterRun stamps it) and its spec digest, the
    // parser already warm.
    const tree = await hashTree(dir, { generated: NVSHMEM_BUILD_OUTPUTS });
    const specMemo = { key: hashJson([tree, hashJson(t.files), await codeIdentity(), choiceOf(ctx)]), digest: hashJson(await nvshmemSpecDigest(dir, t, [], choiceOf(ctx))) };
    const kept: KeptPatch = { ...result, specMemo };
    return kept;
  },
  restore(ctx, result) {
    const { specMemo: _memo, ...r } = result as KeptPatch;
    ctx.patch = { ...r, fixes: upToDate(r.fixes) };
    return true;
  },
};
