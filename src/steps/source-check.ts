import { existsSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod';
import { isOwnDir } from '../core/untrusted.ts';
import { walkTreeSync } from '../core/walk-tree.ts';
import type { Ctx, SourceResult } from './types.ts';

/**
 * state.json is read back as untrusted: a source step's saved result is put back only if it is what this
 * run would have made. The tree must be the one the options name (in place: the user's tree; otherwise the
 * work dir's own copy or clone, at the path this work dir gives it, not the original's of a copied work dir),
 * a real directory of the work dir with no symbolic link on the way, and a copy must hold no link at all
 * (copies are made without any): a link planted there would carry the patch into whatever it points to.
 * Anything else reruns the step, which replaces what is there.
 */
const Saved = z.object({
  kind: z.enum(['local', 'git']),
  dir: z.string(),
  origin: z.string(),
  ref: z.string().optional(),
  commit: z.string().optional(),
  version: z.string().optional(),
});

export function verifiedSource(ctx: Ctx, saved: unknown, expect: { kind: 'local' | 'git'; dir: string; inPlace: boolean }): SourceResult | undefined {
  const parsed = Saved.safeParse(saved);
  if (!parsed.success) return undefined;
  const r = parsed.data as SourceResult;
  if (r.kind !== expect.kind || path.resolve(r.dir) !== path.resolve(expect.dir) || !existsSync(r.dir)) return undefined;
  if (expect.inPlace) return r;
  if (!isOwnDir(ctx.paths.workDir, r.dir)) return undefined;
  if (r.kind === 'local' && holdsLink(r.dir)) return undefined;
  return r;
}

/** Whether any symbolic link is anywhere in the tree (the walk does not follow links, so it sees every one). */
function holdsLink(dir: string): boolean {
  let found = false;
  walkTreeSync(dir, (e) => {
    if (e.type !== 'symlink') return;
    found = true;
    return 'stop';
  });
  return found;
}
