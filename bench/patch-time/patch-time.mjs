#!/usr/bin/env node
/**
 * How long `nvshmem-efa patch --dry-run` of a real NVSHMEM tree takes, against Node's own start-up (`node -e 0`),
 * as a ratio within one run (issue 38, item 3: at most 4x). Every round runs each command once, in a rotating
 * order, so the machine's drift (a shared machine, other jobs) hits all of them alike; the medians and the median
 * of each round's ratio to `node -e 0` are quoted.
 *
 * The CLI runs as the container runs it: the standalone bundle (`node scripts/bundle.mjs --standalone DIR`), built
 * from the tree first into a temporary directory (not timed). With --before DIR, a second tree (e.g.
 * `git worktree add /tmp/patch-before <commit>`, with a node_modules: a symlink to this clone's will do) is built
 * and timed in the same rounds. A dry run writes nothing, so every round plans the same pristine tree. With --bundle
 * DIR, a standalone bundle built beforehand is timed instead of this tree's (a host with no node_modules: the GPU host,
 * which gets the carried bundle; its commit is the bundle's, not this tree's).
 *
 *   node bench/patch-time/patch-time.mjs --nvshmem-src DIR [--runs N] [--before DIR | --bundle DIR] [--out FILE]
 *
 * Prints a Markdown table (and writes it to FILE); bench/results/patch-time.md records runs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASELINE, machineLines, rounds, summary, treeCommit } from '../lib/rotating-rounds.mjs';
const here = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const argv = process.argv.slice(2);
const flag = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const runs = Number(flag('--runs') ?? 5);
const before = flag('--before');
const out = flag('--out');
const bundle = flag('--bundle');
const tree = flag('--nvshmem-src');
if (!tree || (bundle && before)) {
  console.error('usage: node bench/patch-time/patch-time.mjs --nvshmem-src DIR [--runs N] [--before DIR | --bundle DIR] [--out FILE]');
  process.exit(2);
}
const WARMUP = 1;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'patch-time-'));
// The dry run's default work dir (.nvshmem-efa) is relative to the current directory: an empty one of its own.
const cwd = mkdtempSync(path.join(scratch, 'cwd-'));

/** Builds a tree's standalone bundle into the scratch directory; returns the command to time. */
function prepare(label, root) {
  if (!existsSync(path.join(root, 'node_modules'))) throw new Error(`${root} has no node_modules (npm ci there, or symlink this clone's)`);
  const sa = path.join(scratch, label);
  execFileSync(process.execPath, [path.join(root, 'scripts/bundle.mjs'), '--standalone', sa], { stdio: 'inherit' });
  return dryRun(label, sa);
}

const dryRun = (label, sa) => ({ name: `${label}: standalone patch --dry-run`, args: [path.join(sa, 'nvshmem-efa.mjs'), 'patch', '--dry-run', '--nvshmem-src', path.resolve(tree)], code: 0 });
const commands = bundle
  ? [BASELINE, dryRun('carried bundle', path.resolve(bundle))]
  : [BASELINE, ...(before ? [prepare('before', path.resolve(before))] : []), prepare('after', here)];
const run = rounds(commands, { runs, warmup: WARMUP, cwd });
rmSync(scratch, { recursive: true, force: true });
const rows = summary(commands, run.samples).map(
  (r) => `| ${r.name} | ${r.median.toFixed(3)} | ${r.min.toFixed(3)} | ${r.max.toFixed(3)} | ${r.pairRatio.toFixed(2)} |`,
);
const text = [
  `Command: \`node bench/patch-time/patch-time.mjs --nvshmem-src ${tree} --runs ${runs}${before ? ` --before ${before}` : ''}${bundle ? ` --bundle ${bundle}` : ''}\``,
  '',
  ...machineLines(run, treeCommit(here), runs, WARMUP),
  '',
  '| command | median s | min s | max s | median of per-round ratios to node -e 0 |',
  '|---|---|---|---|---|',
  ...rows,
  '',
].join('\n');
process.stdout.write(text);
if (out) writeFileSync(out, text);
