/**
 * The fault campaign (issue 20): every case of cases.ts against the real CLI, a table of what happened and a
 * count line. Rerun it any time:
 *
 *   npx tsx test/faults/campaign.ts [--only ID|CLASS,...] [--json] [--jobs N]
 *
 * Needs root (tmpfs and read-only bind mounts, runs as nobody) and Linux; exit 1 when any fault was not
 * handled as the README promises. test/faults/campaign.test.ts runs it in CI.
 */
import os from 'node:os';
import { CASES } from './cases.ts';
import { countLine, runCase, table, type Case, type Outcome } from './runner.ts';

export async function campaign(only?: readonly string[], jobs = Math.max(1, Math.min(4, os.availableParallelism())), onDone?: (o: Outcome) => void): Promise<Outcome[]> {
  const chosen: Case[] = only?.length ? CASES.filter((c) => only.includes(c.id) || only.includes(c.cls)) : [...CASES];
  const outcomes: Outcome[] = new Array(chosen.length);
  const byIndex = chosen.map((c, i) => [c, i] as const);
  const pool = async (cases: (readonly [Case, number])[], n: number) => {
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const [c, i] = cases[next++]!;
        outcomes[i] = await runCase(c);
        onDone?.(outcomes[i]!);
      }
    };
    await Promise.all(Array.from({ length: n }, worker));
  };
  await pool(byIndex.filter(([c]) => !c.alone), jobs);
  await pool(byIndex.filter(([c]) => c.alone), 1);
  return outcomes;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const arg = (k: string) => {
    const i = process.argv.indexOf(k);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const only = arg('--only')?.split(',').filter(Boolean);
  const jobs = arg('--jobs') ? Number(arg('--jobs')) : undefined;
  const json = process.argv.includes('--json');
  const outcomes = await campaign(only, jobs, (o) => process.stderr.write(`${o.ok ? 'ok    ' : 'BROKEN'} ${o.cls} / ${o.id} (${(o.ms / 1000).toFixed(1)} s)\n`));
  process.stdout.write((json ? JSON.stringify({ outcomes, summary: countLine(outcomes) }, null, 2) : table(outcomes)) + '\n');
  process.exitCode = outcomes.every((o) => o.ok) ? 0 : 1;
}
