import { WorkDirBusyError } from '../core/errors.ts';
import { describeHolder, lockHolder } from '../core/lock.ts';
import { applyClean, planClean } from '../core/work-dir.ts';
import type { Options } from '../options.ts';

/**
 * Removes what nvshmem-efa created in the work dir (recorded in its marker when it was created), never the
 * user's files, and the directory itself only when nvshmem-efa made it and nothing else is left in it. What it
 * keeps it names, with the reason where there is one worth knowing.
 */
/** The schema of `clean --json`. */
export const CLEAN_JSON = 'nvshmem-efa-clean/1';

export async function cleanCommand(opts: Options, out: (s: string) => void): Promise<number> {
  const dir = opts.workDir;
  const plan = await planClean(dir);
  const reasons = [...(plan?.ignored ? [plan.ignored] : []), ...(plan?.notes ?? []).map((n) => `kept ${n.path}: ${n.why}`)];
  // --json: one document whatever happened: what was (or, with --dry-run, would be) removed and kept, and why.
  const doc = (removed: readonly string[], removedDir: boolean) =>
    JSON.stringify({ schema: CLEAN_JSON, workDir: dir, dryRun: opts.dryRun, removed, removedDir, kept: plan?.keep ?? [], notes: [...(plan?.ignored ? [{ path: dir, why: plan.ignored }] : []), ...(plan?.notes ?? [])] }, null, 2);
  if (!plan || plan.remove.length === 0) {
    if (opts.json) out(doc([], false));
    else {
      out(`${dir}: nothing to clean`);
      for (const r of reasons) out(r);
    }
    return 0;
  }
  const holder = await lockHolder(dir);
  if (holder) throw new WorkDirBusyError(`work dir ${dir} is in use by another nvshmem-efa run: ${describeHolder(holder)}`, 'wait for it to finish, then clean');
  const kept = plan.keep.length ? ` (kept ${plan.keep.length} entr${plan.keep.length === 1 ? 'y' : 'ies'} nvshmem-efa did not create: ${plan.keep.join(', ')})` : '';
  if (opts.dryRun) {
    if (opts.json) out(doc(plan.remove, plan.removeDir));
    else {
      out(`would remove ${plan.remove.join(', ')}${plan.removeDir ? ` and ${dir}` : ''}${kept}`);
      for (const r of reasons) out(r.replace(/^kept/, 'would keep'));
    }
    return 0;
  }
  await applyClean(dir, plan);
  if (opts.json) out(doc(plan.remove, plan.removeDir));
  else {
    out(`removed ${plan.removeDir ? dir : plan.remove.join(', ')}${kept}`);
    for (const r of reasons) out(r);
  }
  return 0;
}
