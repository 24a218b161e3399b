import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashTree } from './hash.ts';

/**
 * Identifies the code this process runs: the bundle file (dist/cli.mjs or a standalone cli.mjs) when it runs
 * bundled, else every file under src/ (run through tsx). What the tool would plan for a tree is a function of
 * that tree and this code, so a result computed by the same code for the same tree can be reused (a patcher's
 * spec digest, which costs a parser start-up, about a second).
 */
let memo: Promise<string> | undefined;
export function codeIdentity(): Promise<string> {
  memo ??= (async () => {
    const here = fileURLToPath(import.meta.url);
    if (!here.endsWith('.ts') && existsSync(here)) return `bundle ${createHash('sha256').update(readFileSync(here)).digest('hex')}`;
    return `src ${await hashTree(path.resolve(path.dirname(here), '..'))}`;
  })();
  return memo;
}
