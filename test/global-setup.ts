import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: plain JavaScript without declarations (bin/ ships no types)
import { sourceHash } from '../bin/source-hash.js';

/**
 * Tests run the CLI as a user does, through bin/nvshmem-efa.js, which in a clone refuses a dist/ bundled from other
 * sources than src/ (exit 4, "run npm run build"). So that an edited tree is tested as it is, dist/ is bundled once
 * before any test when its content stamp differs from src/ or it is missing: what `npm run build` does.
 */
export default function setup(): void {
  const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
  const stamp = path.join(root, 'dist/source-hash.txt');
  if (existsSync(path.join(root, 'dist/cli.mjs')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === (sourceHash(root) as string)) return;
  const r = spawnSync(process.execPath, [path.join(root, 'scripts/bundle.mjs')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`scripts/bundle.mjs failed (exit ${r.status}):\n${r.stderr}`);
}
