import { existsSync } from 'node:fs';
import path from 'node:path';
import { detectEnvironment } from '../core/environment.ts';
import { EnvironmentError } from '../core/errors.ts';
import { exportPatches, renderDiff } from '../patchers/engine/apply.ts';
import { planNvshmem } from '../patchers/nvshmem/index.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import { loadTemplate } from '../patchers/nvshmem/template.ts';
import type { Options } from '../options.ts';
import { cmakeArgs } from '../steps/build-nvshmem.ts';
import { headCommit, pinFor } from '../steps/get-nvshmem.ts';
import { workPaths } from '../steps/index.ts';
import { deepEpRefusalError } from '../steps/patch-deepep.ts';
import { refusalError } from '../steps/patch-nvshmem.ts';
import type { Ctx } from '../steps/types.ts';
import { StateStore } from '../core/state.ts';

/**
 * The tree a read-only plan looks at: the user's own tree (a copy would be identical), or the verified
 * cached clone of a pinned ref. Nothing is copied, fetched or written.
 */
async function pristineTree(opts: Options): Promise<string> {
  if (opts.nvshmemSrc) return opts.nvshmemSrc;
  const pin = pinFor(opts.nvshmemRef);
  const dir = path.join(workPaths(opts.workDir).sources, `nvshmem-${pin.ref}`);
  if (existsSync(dir) && (await headCommit(dir)) === pin.commit) return dir;
  throw new EnvironmentError(`no verified clone of NVSHMEM ${pin.ref} in ${dir} to plan against`, `run 'nvshmem-efa build' once to fetch it, or pass --nvshmem-src DIR`);
}

/** `patch --dry-run` / `patch --export DIR` / `build --dry-run`: plan against the tree, write nothing to it. */
export async function planOnly(opts: Options, out: (s: string) => void): Promise<number> {
  const tree = await pristineTree(opts);
  const plan = await planNvshmem(tree, await loadTemplate());
  if (plan.refusals.length) throw refusalError(plan, tree);
  if (opts.deepepSrc) {
    // DeepEP's files go under deepep/ in the diff and the export, so the two trees cannot be confused.
    const dp = await planDeepEp(opts.deepepSrc);
    if (dp.refusals.length) throw deepEpRefusalError(dp, opts.deepepSrc);
    plan.fixes.push(...dp.fixes);
    plan.changes.push(...dp.changes.map((c) => ({ ...c, file: `deepep/${c.file}` })));
  }
  if (opts.exportDir) {
    const names = await exportPatches(opts.exportDir, plan.changes);
    out(`wrote ${names.length} patch file(s) to ${opts.exportDir} (apply with: git apply ${path.join(opts.exportDir, '*.patch')})`);
    return 0;
  }
  if (opts.json) out(JSON.stringify({ tree, fixes: plan.fixes, diff: renderDiff(plan.changes) }, null, 2));
  else out(renderDiff(plan.changes).trimEnd() || `# ${tree}: every patch already present; nothing to change`);
  if (opts.command === 'build') {
    const { env, fixes } = await detectEnvironment({ ...opts, env: process.env });
    const ctx: Ctx = { opts, paths: workPaths(opts.workDir), state: await StateStore.open(opts.workDir), signal: new AbortController().signal, envFixes: fixes, source: { kind: 'local', dir: tree, origin: tree } };
    const lines = ['', '# build plan (dry run): cmake ' + cmakeArgs(ctx, env).join(' '), ...fixes.map((f) => `# ${f.status}: ${f.id}: ${f.detail ?? f.why}`)];
    if (!opts.json) out(lines.join('\n'));
  }
  return 0;
}
