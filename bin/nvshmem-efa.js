#!/usr/bin/env node
// Starts the CLI from dist/cli.mjs, the bundle: an installed package is dist/ without src/, and runs it as it is
// (nothing checked, nothing written inside the package). In a clone, dist/ is run only while it was bundled from
// the current src/: told by the files' stat first (a few milliseconds; hashing every source cost --help about
// 0.03 s), by their contents only when that differs. A stale or missing dist/ is an error that says to rebuild,
// not a silent start through tsx (a second of CPU, and tsx is a development dependency); NVSHMEM_EFA_NO_BUNDLE=1
// runs src/ through tsx on purpose.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Loading the CLI takes a moment (tsx, when asked for, a second or more): a signal meanwhile has nothing to stop
// yet, and still ends the way every interrupt does (exit 130, said), not with Node's default (143, 129, 131, no word). The
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
const clone = existsSync(path.join(root, 'src'));
const stamp = path.join(root, 'dist', 'source-hash.txt');
const statStamp = path.join(root, 'dist', 'source-stat.txt');
const current = async () => {
  if (!existsSync(bundle) || !existsSync(stamp)) return false;
  const { sourceStat } = await import('./source-stat.js');
  const stat = sourceStat(root);
  if (existsSync(statStamp) && readFileSync(statStamp, 'utf8') === stat) return true;
  const { sourceHash } = await import('./source-hash.js');
  if (readFileSync(stamp, 'utf8') !== sourceHash(root)) return false;
  // Same contents, other mtimes (touched files, a fresh checkout): the next start is fast again.
  try {
    writeFileSync(`${statStamp}.${process.pid}`, stat);
    renameSync(`${statStamp}.${process.pid}`, statStamp);
  } catch {
    /* a read-only clone: the content check stays */
  }
  return true;
};
let main;
if (clone && process.env.NVSHMEM_EFA_NO_BUNDLE === '1') {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli.ts'));
} else if (!clone || (await current())) {
  ({ main } = await import(bundle));
} else {
  // Exit 4, a required part missing: the bundle of these sources.
  const what = existsSync(bundle) ? 'dist/ was bundled from other sources than src/ as it is now' : 'dist/ has no bundle (dist/cli.mjs)';
  process.stderr.write(`error: ${what}\nfix: run \`npm run build\` in ${root} (or set NVSHMEM_EFA_NO_BUNDLE=1 to run src/ through tsx, slower)\n`);
  process.exit(4);
}
process.exitCode = await main(process.argv);
