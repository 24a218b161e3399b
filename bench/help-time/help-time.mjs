#!/usr/bin/env node
/**
 * How long `nvshmem-efa --help` (and a usage mistake) takes, against Node's own start-up (`node -e 0`), as a ratio
 * within one run: every round runs each command once, in a rotating order, so the machine's drift (a shared
 * machine, other jobs) hits all of them alike; the medians and the median of each round's ratio are quoted.
 *
 * The CLI runs as users run it: the standalone bundle (`node scripts/bundle.mjs --standalone DIR`, what the
 * container runs) and `bin/nvshmem-efa.js` over a dist/ bundle (what `npx nvshmem-efa` runs in a clone), both
 * built from the tree first into a temporary directory (not timed; the tree's own dist/ is left alone).
 * With --before DIR, a second tree (e.g. `git worktree add /tmp/help-before HEAD`, with a node_modules, a symlink
 * to this clone's will do) is built and timed in the same rounds: before and after under the same load.
 *
 *   node bench/help-time/help-time.mjs [--runs N] [--before DIR] [--out FILE]
 *
 * Prints a Markdown table (and writes it to FILE); bench/results/help-time.md records a run.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASELINE, machineLines, rounds, summary, treeCommit } from '../lib/rotating-rounds.mjs';
const here = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const argv = process.argv.slice(2);
const flag = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const runs = Number(flag('--runs') ?? 30);
const before = flag('--before');
const out = flag('--out');
const WARMUP = 3;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'help-time-'));

/** Builds a tree's two forms of the CLI into the scratch directory; returns the commands to time. */
function prepare(label, root) {
  if (!existsSync(path.join(root, 'node_modules'))) throw new Error(`${root} has no node_modules (npm ci there, or symlink this clone's)`);
  const sa = path.join(scratch, label, 'standalone');
  execFileSync(process.execPath, [path.join(root, 'scripts/bundle.mjs'), '--standalone', sa], { stdio: 'inherit' });
  // A copy of what bin/nvshmem-efa.js needs, bundled into its own dist/ (the stamp then matches its src/).
  const pkg = path.join(scratch, label, 'pkg');
  for (const d of ['bin', 'src', 'scripts', 'package.json']) cpSync(path.join(root, d), path.join(pkg, d), { recursive: true });
  symlinkSync(realpathSync(path.join(root, 'node_modules')), path.join(pkg, 'node_modules'));
  execFileSync(process.execPath, [path.join(pkg, 'scripts/bundle.mjs')], { stdio: 'inherit' });
  const saBin = path.join(sa, 'nvshmem-efa.mjs');
  return [
    { name: `${label}: standalone --help`, args: [saBin, '--help'], code: 0 },
    { name: `${label}: standalone build --help`, args: [saBin, 'build', '--help'], code: 0 },
    { name: `${label}: standalone selftest --help`, args: [saBin, 'selftest', '--help'], code: 0 },
    { name: `${label}: standalone build --no-such-option (usage error)`, args: [saBin, 'build', '--no-such-option'], code: 2 },
    { name: `${label}: bin/nvshmem-efa.js --help (dist/)`, args: [path.join(pkg, 'bin/nvshmem-efa.js'), '--help'], code: 0 },
  ];
}

const commands = [BASELINE, ...(before ? prepare('before', path.resolve(before)) : []), ...prepare('after', here)];
const run = rounds(commands, { runs, warmup: WARMUP });
rmSync(scratch, { recursive: true, force: true });
const rows = summary(commands, run.samples).map(
  (r) => `| ${r.name} | ${r.median.toFixed(3)} | ${r.min.toFixed(3)} | ${r.max.toFixed(3)} | ${r.overBaselineMedian.toFixed(2)} | ${r.pairRatio.toFixed(2)} |`,
);
const text = [
  `Command: \`node bench/help-time/help-time.mjs --runs ${runs}${before ? ` --before ${before}` : ''}\``,
  '',
  ...machineLines(run, treeCommit(here), runs, WARMUP),
  '',
  '| command | median s | min s | max s | median / baseline median | median of per-round ratios |',
  '|---|---|---|---|---|---|',
  ...rows,
  '',
].join('\n');
process.stdout.write(text);
if (out) writeFileSync(out, text);
