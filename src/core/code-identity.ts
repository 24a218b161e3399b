import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashTree } from './hash.ts';

/**
 * Identifies the code this process runs: the bundle's files (dist/cli.mjs or a standalone cli.mjs, and the
 * chunks scripts/bundle.mjs writes beside it, one of which holds this module) when it runs bundled, else every
 * file under src/ (run through tsx). What the tool would plan for a tree is a function of
 * that tree and this code, so a result computed by the same code for the same tree can be reused (a patcher's
 * spec digest, which costs a parser start-up, about a second).
 */
let memo: Promise<string> | undefined;
export function codeIdentity(): Promise<string> {
  memo ??= (async () => {
    const here = fileURLToPath(import.meta.url);
    if (!here.endsWith('.ts') && existsSync(here)) {
      // Every .mjs beside this chunk: a patcher changed in another chunk must change the identity too.
      const dir = path.dirname(here);
      const h = createHash('sha256');
      for (const f of readdirSync(dir).filter((n) => n.endsWith('.mjs')).sort()) h.update(f).update('\0').update(readFileSync(path.join(dir, f))).update('\0');
      return `bundle ${h.digest('hex')}`;
    }
    return `src ${await hashTree(path.resolve(path.dirname(here), '..'))}`;
  })();
  return memo;
}
