// Whole-process timing of CLI commands against `node -e 0`, as ratios within one run (bench/help-time,
// bench/patch-time): every round runs each command once, in a rotating order, so the drift of a shared machine
// hits all of them alike; each command's median and the median of its per-round ratios to the baseline are quoted.
import { execFileSync, spawnSync } from 'node:child_process';
import os from 'node:os';

/** The baseline every ratio is taken against: Node's own start-up. */
export const BASELINE = { name: 'baseline: node -e 0', args: ['-e', '0'], code: 0 };

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Seconds one command takes, from spawn to exit; a wrong exit status stops the bench (it timed something else). */
function time(c, cwd) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, c.args, { cwd, stdio: 'ignore', env: { ...process.env, NO_COLOR: '1' } });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== (c.code ?? 0)) throw new Error(`${c.name}: exit ${r.status ?? r.signal}, expected ${c.code ?? 0}`);
  return s;
}

/**
 * Runs `warmup + runs` rounds of every command (commands[0] the baseline), in a rotating order; returns each
 * command's counted samples (seconds) and the load average before and after.
 */
export function rounds(commands, { runs, warmup, cwd }) {
  const load0 = os.loadavg()[0];
  const samples = commands.map(() => []);
  for (let round = 0; round < warmup + runs; round++) {
    for (let k = 0; k < commands.length; k++) {
      const i = (k + round) % commands.length; // rotating order: no command always runs first
      const s = time(commands[i], cwd);
      if (round >= warmup) samples[i].push(s);
    }
  }
  return { samples, load0, load1: os.loadavg()[0] };
}

/** Per command: median, min and max seconds, and the median of its per-round ratios to the baseline (samples[0]). */
export function summary(commands, samples) {
  const base = samples[0];
  return commands.map((c, i) => ({
    name: c.name,
    median: median(samples[i]),
    min: Math.min(...samples[i]),
    max: Math.max(...samples[i]),
    overBaselineMedian: median(samples[i]) / median(base),
    pairRatio: median(samples[i].map((s, r) => s / base[r])),
  }));
}

/** The commit of the tree at `dir`, marked when tracked files differ from it. */
export function treeCommit(dir) {
  try {
    let c = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
    if (execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: dir, encoding: 'utf8' }).trim()) c += ' with uncommitted changes';
    return c;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

/** The lines that say where and when a run was made, for the results file. */
export function machineLines({ load0, load1 }, commit, runs, warmup) {
  return [
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), Linux ${os.release()}, Node ${process.version}; ` +
      `load average ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end; tree ${commit}; ${new Date().toISOString().slice(0, 10)}.`,
    // A CA bundle named there is read and parsed by every Node start, the baseline's included (tens of ms).
    `NODE_EXTRA_CA_CERTS ${process.env.NODE_EXTRA_CA_CERTS ? 'set: every Node start, the baseline\'s too, reads it' : 'unset'}.`,
    `${runs} rounds after ${warmup} warm-up round${warmup === 1 ? '' : 's'}; each round runs every command once, in a rotating order.`,
  ];
}
