// Bundles src/ into dist/cli.mjs (dependencies stay in node_modules) so the CLI starts without transpiling
// TypeScript. bin/nvshmem-efa.js uses the bundle only while dist/source-hash.txt matches src/; otherwise it
// runs the sources through tsx, so a stale bundle is never executed. Runs on `npm install` (prepare).
import { build } from 'esbuild';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceHash } from '../bin/source-hash.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
await build({
  entryPoints: [path.join(root, 'src/cli.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  outfile: path.join(root, 'dist/cli.mjs'),
  logLevel: 'warning',
});
writeFileSync(path.join(root, 'dist/source-hash.txt'), sourceHash(root));
