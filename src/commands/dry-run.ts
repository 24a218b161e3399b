import { existsSync } from 'node:fs';
import { EnvironmentError } from '../core/errors.ts';
import { StateStore } from '../core/state.ts';
import type { Options } from '../options.ts';
import { renderDiff } from '../patchers/engine/apply.ts';
import type { FileChange } from '../patchers/engine/plan.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import { planNvshmem } from '../patchers/nvshmem/index.ts';
import { layoutLine } from '../patchers/nvshmem/layout.ts';
import { loadTemplate } from '../patchers/nvshmem/template.ts';
import { nvshmemVersion } from '../core/nvshmem-tree.ts';
import { cmakeArgs } from '../steps/build-nvshmem.ts';
import { headCommit, nvshmemCloneDir, pinFor } from '../steps/get-nvshmem.ts';
import { workPaths } from '../steps/index.ts';
import { deepEpRefusalError } from '../steps/patch-deepep.ts';
import { refusalError } from '../steps/patch-nvshmem.ts';
import type { Ctx } from '../steps/types.ts';
import { exportPatches, type ExportPart } from './export-patches.ts';
import { preflight } from './preflight.ts';

/**
 * The tree a read-only plan looks at: the user's own tree (a copy would be identical), or the verified
 * cached clone of a pinned ref. Nothing is copied, fetched or written.
 */
async function pristineTree(opts: Options): Promise<{ dir: string; note?: string }> {
  if (opts.nvshmemSrc) return { dir: opts.nvshmemSrc };
  const pin = pinFor(opts.nvshmemRef);
  const dir = nvshmemCloneDir(workPaths(opts.workDir), pin);
  if (existsSync(dir) && (await headCommit(dir)) === pin.commit) return { dir, note: `or any checkout of NVSHMEM ${pin.ref}` };
  throw new EnvironmentError(`no verified clone of NVSHMEM ${pin.ref} in ${dir} to plan against`, `run 'nvshmem-efa build' once to fetch it, or pass --nvshmem-src DIR`);
}

/** `patch --dry-run` / `patch --export DIR` / `build --dry-run`: plan against the trees, write nothing to them. */
export async function planOnly(opts: Options, out: (s: string) => void): Promise<number> {
  const found = await preflight(opts);
  const tree = await pristineTree(opts);
  const plan = await planNvshmem(tree.dir, await loadTemplate());
  if (plan.refusals.length) throw refusalError(plan, tree.dir);
  const parts: ExportPart[] = [{ name: 'nvshmem', tree: tree.dir, changes: plan.changes, ...(tree.note ? { note: tree.note } : {}) }];
  let deepepChanges: FileChange[] = [];
  if (opts.deepepSrc) {
    const dp = await planDeepEp(opts.deepepSrc);
    if (dp.refusals.length) throw deepEpRefusalError(dp, opts.deepepSrc);
    plan.fixes.push(...dp.fixes);
    deepepChanges = dp.changes;
    parts.push({ name: 'deepep', tree: opts.deepepSrc, changes: dp.changes });
  }
  if (opts.exportDir) {
    for (const line of await exportPatches(opts.exportDir, parts)) out(line);
    if (plan.layout) out(`nvshmem: planned for the ${layoutLine(plan.layout)}`);
    return 0;
  }
  // In the one diff shown, DeepEP's files go under deepep/ so the two trees cannot be confused.
  const changes = [...plan.changes, ...deepepChanges.map((c) => ({ ...c, file: `deepep/${c.file}` }))];
  const version = await nvshmemVersion(tree.dir);
  const layout = plan.layout ? { id: plan.layout.id, summary: plan.layout.summary } : undefined;
  if (opts.json) out(JSON.stringify({ tree: tree.dir, ...(version ? { version } : {}), ...(layout ? { layout } : {}), fixes: plan.fixes, diff: renderDiff(changes) }, null, 2));
  else {
    out(renderDiff(changes).trimEnd() || `# ${tree.dir}: every patch already present; nothing to change`);
    // After the diff (stdout stays a patch from its first line): what was planned for.
    if (layout) out(`# NVSHMEM ${version ?? '(version not named in CMakeLists.txt)'}; ${layoutLine(layout)}`);
  }
  if (opts.command === 'build' && found.env) {
    const ctx: Ctx = { opts, paths: workPaths(opts.workDir), state: await StateStore.open(opts.workDir), signal: new AbortController().signal, envFixes: found.envFixes, source: { kind: 'local', dir: tree.dir, origin: tree.dir } };
    const fab = found.env.fabric;
    const fabric = fab
      ? [
          ...(fab.rdmaCore ? [`# rdma-core: ${fab.rdmaCore.action === 'build' ? `build ${fab.rdmaCore.ref} from pinned sources` : 'the host\'s'} (${fab.rdmaCore.why})`] : []),
          `# libfabric: ${fab.libfabric.action === 'build' ? `build ${fab.libfabric.ref} from pinned sources` : `use ${fab.libfabric.home}`} (${fab.libfabric.why})`,
        ]
      : [];
    const lines = ['', ...fabric, '# build plan (dry run): cmake ' + cmakeArgs(ctx, found.env).join(' '), ...found.envFixes.map((f) => `# ${f.status}: ${f.id}: ${f.detail ?? f.why}`)];
    if (!opts.json) out(lines.join('\n'));
  }
  return 0;
}
