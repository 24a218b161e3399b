/**
 * Measures, in one run: the time to plan + apply the NVSHMEM patches on a real tree (goal < 1.5 s, in a
 * fresh process including start-up) and the time of a no-op `build` rerun (goal < 3 s).
 *   npx tsx bench/patch-and-rerun.ts <nvshmem-tree> [<work-dir of a finished build> <its --nvshmem-src> [its other options...]]
 * Without a finished build, the rerun is measured on the miniature fixture (built first, not timed).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin', 'nvshmem-efa.js');
const tree = process.argv[2];
if (!tree) {
  console.error('usage: npx tsx bench/patch-and-rerun.ts <nvshmem-tree> [<work-dir of a finished build> <its --nvshmem-src>]');
  process.exit(2);
}
const env = { ...process.env, CI: 'true' };
const time = (args: string[]) => {
  const t0 = performance.now();
  execFileSync(process.execPath, [bin, ...args], { env, stdio: 'ignore' });
  return (performance.now() - t0) / 1000;
};

const copy = mkdtempSync(path.join(os.tmpdir(), 'bench-tree-'));
cpSync(tree, copy, { recursive: true });
// --offline: the patch time must not include downloading efa_io_defs.h.
const patch = time(['patch', '--nvshmem-src', copy, '--in-place', '--work-dir', path.join(copy, '.w'), '--offline']);
const repatch = time(['patch', '--nvshmem-src', copy, '--in-place', '--work-dir', path.join(copy, '.w'), '--force', '--offline']);

let work = process.argv[3];
let src = process.argv[4];
if (!work || !src) {
  src = path.join(root, 'test/golden/nvshmem/v3.4-like/tree');
  work = mkdtempSync(path.join(os.tmpdir(), 'bench-work-'));
  time(['build', '--nvshmem-src', src, '--work-dir', work]);
}
const rerun = time(['build', '--nvshmem-src', src, '--work-dir', work, ...process.argv.slice(5)]);

console.log('| measurement | seconds | goal | ratio to goal |');
console.log('|---|---|---|---|');
const row = (n: string, s: number, goal: number) => console.log(`| ${n} | ${s.toFixed(2)} | ${goal} | ${(s / goal).toFixed(2)} |`);
row(`patch (fresh process, ${path.basename(tree)})`, patch, 1.5);
row('patch again (all already present)', repatch, 1.5);
row('no-op build rerun', rerun, 3);
