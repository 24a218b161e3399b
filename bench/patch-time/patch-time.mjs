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
 * and timed in the same rounds. A dry run writes nothing, so every round plans the same pristine tree.
 *
 *   node bench/patch-time/patch-time.mjs --nvshmem-src DIR [--runs N] [--before DIR] [--out FILE]
 *
 * Prints a Markdown table (and writes it to FILE); bench/results/patch-time.md records runs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const argv = process.argv.slice(2);
const flag = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const runs = Number(flag('--runs') ?? 5);
const before = flag('--before');
const out = flag('--out');
const tree = flag('--nvshmem-src');
if (!tree) {
  console.error('usage: node bench/patch-time/patch-time.mjs --nvshmem-src DIR [--runs N] [--before DIR] [--out FILE]');
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
  return { name: `${label}: standalone patch --dry-run`, args: [path.join(sa, 'nvshmem-efa.mjs'), 'patch', '--dry-run', '--nvshmem-src', path.resolve(tree)] };
}

const baseline = { name: 'baseline: node -e 0', args: ['-e', '0'] };
const commands = [baseline, ...(before ? [prepare('before', path.resolve(before))] : []), prepare('after', here)];

/** Seconds one command takes, from spawn to exit; a failure stops the bench (it timed something else). */
function time(c) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, c.args, { cwd, stdio: 'ignore', env: { ...process.env, NO_COLOR: '1' } });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`${c.name}: exit ${r.status ?? r.signal}`);
  return s;
}

const load0 = os.loadavg()[0];
const samples = commands.map(() => []);
for (let round = 0; round < WARMUP + runs; round++) {
  for (let k = 0; k < commands.length; k++) {
    const i = (k + round) % commands.length; // rotating order: no command always runs first
    const s = time(commands[i]);
    if (round >= WARMUP) samples[i].push(s);
  }
}
const load1 = os.loadavg()[0];
rmSync(scratch, { recursive: true, force: true });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const base = samples[0];
const rows = commands.map((c, i) => {
  const pairRatio = median(samples[i].map((s, r) => s / base[r]));
  return `| ${c.name} | ${median(samples[i]).toFixed(3)} | ${Math.min(...samples[i]).toFixed(3)} | ${Math.max(...samples[i]).toFixed(3)} | ${pairRatio.toFixed(2)} |`;
});
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8' }).trim();
  if (execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: here, encoding: 'utf8' }).trim()) commit += ' with uncommitted changes';
} catch {
  /* not a git checkout */
}
const text = [
  `Command: \`node bench/patch-time/patch-time.mjs --nvshmem-src ${tree} --runs ${runs}${before ? ` --before ${before}` : ''}\``,
  '',
  `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), Linux ${os.release()}, Node ${process.version}; ` +
    `load average ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end; tree ${commit}; ${new Date().toISOString().slice(0, 10)}.`,
  // A CA bundle named there is read and parsed by every Node start, the baseline's included (tens of ms).
  `NODE_EXTRA_CA_CERTS ${process.env.NODE_EXTRA_CA_CERTS ? 'set: every Node start, the baseline\'s too, reads it' : 'unset'}.`,
  `${runs} rounds after ${WARMUP} warm-up round; each round runs every command once, in a rotating order.`,
  '',
  '| command | median s | min s | max s | median of per-round ratios to node -e 0 |',
  '|---|---|---|---|---|',
  ...rows,
  '',
].join('\n');
process.stdout.write(text);
if (out) writeFileSync(out, text);
