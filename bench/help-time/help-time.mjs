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
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

const baseline = { name: 'baseline: node -e 0', args: ['-e', '0'], code: 0 };
const commands = [baseline, ...(before ? prepare('before', path.resolve(before)) : []), ...prepare('after', here)];

/** Seconds one command takes, from spawn to exit; a wrong exit status stops the bench (it timed something else). */
function time(c) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, c.args, { stdio: 'ignore', env: { ...process.env, NO_COLOR: '1' } });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== c.code) throw new Error(`${c.name}: exit ${r.status ?? r.signal}, expected ${c.code}`);
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
  return `| ${c.name} | ${median(samples[i]).toFixed(3)} | ${Math.min(...samples[i]).toFixed(3)} | ${Math.max(...samples[i]).toFixed(3)} | ${(median(samples[i]) / median(base)).toFixed(2)} | ${pairRatio.toFixed(2)} |`;
});
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8' }).trim();
  if (execFileSync('git', ['status', '--porcelain'], { cwd: here, encoding: 'utf8' }).trim()) commit += ' with uncommitted changes';
} catch {
  /* not a git checkout */
}
const text = [
  `Command: \`node bench/help-time/help-time.mjs --runs ${runs}${before ? ` --before ${before}` : ''}\``,
  '',
  `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), Linux ${os.release()}, Node ${process.version}; ` +
    `load average ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end; tree ${commit}; ${new Date().toISOString().slice(0, 10)}.`,
  // A CA bundle named there is read and parsed by every Node start, the baseline's included (tens of ms).
  `NODE_EXTRA_CA_CERTS ${process.env.NODE_EXTRA_CA_CERTS ? `set (${process.env.NODE_EXTRA_CA_CERTS}): every Node start, the baseline's too, reads it` : 'unset'}.`,
  `${runs} rounds after ${WARMUP} warm-up rounds; each round runs every command once, in a rotating order.`,
  '',
  '| command | median s | min s | max s | median / baseline median | median of per-round ratios |',
  '|---|---|---|---|---|---|',
  ...rows,
  '',
].join('\n');
process.stdout.write(text);
if (out) writeFileSync(out, text);
