#!/usr/bin/env node
// Starts the CLI from dist/cli.mjs when that bundle was built from the current src/ (fast start-up), else
// runs the TypeScript sources through tsx, so `npm install && npx nvshmem-efa` needs no compile step and an
// edited tree never runs a stale bundle. Whether it is current is asked of the files' stat first (a few
// milliseconds; hashing every source cost --help about 0.03 s), and of their contents only when that differs.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceStat } from './source-stat.js';

// Loading the CLI takes a second or more (tsx compiles the sources): a signal meanwhile has nothing to stop yet, and
// still ends the way every interrupt does (exit 130, said), not with Node's default (143, 129, 131, no word). The
// CLI's main replaces these with its own first thing (src/core/signals.ts).
const starting = (sig) => {
  process.stderr.write(`\nerror: interrupted by ${sig} while nvshmem-efa was starting (nothing had been started)\nfix: rerun the same command\n`);
  process.exit(130);
};
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) process.on(sig, starting);

// A current directory removed under the shell: Node's loaders (tsx's among them) ask for it and crashed with a stack
// trace (issue 36, class 9). Relative paths cannot mean anything then, so nothing runs: exit 6, the file system's.
try {
  process.cwd();
} catch (e) {
  process.stderr.write(`error: the current directory no longer exists (${e.code}), so relative paths mean nothing\nfix: cd to a directory that exists and rerun\n`);
  process.exit(6);
}

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundle = path.join(root, 'dist', 'cli.mjs');
const stamp = path.join(root, 'dist', 'source-hash.txt');
const statStamp = path.join(root, 'dist', 'source-stat.txt');
const current = async () => {
  if (!existsSync(bundle) || !existsSync(stamp)) return false;
  const stat = sourceStat(root);
  if (existsSync(statStamp) && readFileSync(statStamp, 'utf8') === stat) return true;
  const { sourceHash } = await import('./source-hash.js');
  if (readFileSync(stamp, 'utf8') !== sourceHash(root)) return false;
  // Same contents, other mtimes (touched files, a package unpacked from a tarball): the next start is fast again.
  try {
    writeFileSync(`${statStamp}.${process.pid}`, stat);
    renameSync(`${statStamp}.${process.pid}`, statStamp);
  } catch {
    /* a read-only install: the content check stays */
  }
  return true;
};
let main;
if (process.env.NVSHMEM_EFA_NO_BUNDLE !== '1' && (await current())) {
  ({ main } = await import(bundle));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli.ts'));
}
process.exitCode = await main(process.argv);
