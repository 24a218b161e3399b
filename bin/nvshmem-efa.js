#!/usr/bin/env node
// Starts the CLI from dist/cli.mjs when that bundle was built from the current src/ (fast start-up), else
// runs the TypeScript sources through tsx, so `npm install && npx nvshmem-efa` needs no compile step and an
// edited tree never runs a stale bundle.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceHash } from './source-hash.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundle = path.join(root, 'dist', 'cli.mjs');
const stamp = path.join(root, 'dist', 'source-hash.txt');
let main;
if (process.env.NVSHMEM_EFA_NO_BUNDLE !== '1' && existsSync(bundle) && existsSync(stamp) && readFileSync(stamp, 'utf8') === sourceHash(root)) {
  ({ main } = await import(bundle));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli.ts'));
}
process.exitCode = await main(process.argv);
