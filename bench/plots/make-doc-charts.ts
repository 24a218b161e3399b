/**
 * The charts of docs/benchmarks.md, made from results recorded in bench/results/ with the chart module bench uses
 * (src/core/svg-chart.ts):
 *   - docs/img/put-bandwidth-efaemu-h200x2.svg: the put table of `bench.sh` on 2x H200 through efaemu, drawn by
 *     the same code as `nvshmem-efa bench`'s own put-bandwidth.svg;
 *   - docs/img/build-time-h100.svg: the build-time comparison on one H100 host (build-time-h100.md's first table).
 *
 *   npx tsx bench/plots/make-doc-charts.ts           write them
 *   npx tsx bench/plots/make-doc-charts.ts --check   exit 1 when one differs from what is written (a test does this)
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parsePutTable, putChartSvg } from '../../src/commands/bench.ts';
import { barChart, type Bar } from '../../src/core/svg-chart.ts';

export interface DocChart {
  /** Where it goes, relative to the repository root. */
  file: string;
  /** The recorded result it is drawn from. */
  source: string;
  /** The machine, as the caption says it. */
  machine: string;
  throughEfaemu: boolean;
  svg: string;
}

const PUT_SOURCE = 'bench/results/efaemu-gpu-h200x2/run6/put.txt';
const BUILD_SOURCE = 'bench/results/build-time-h100.md';

/** The put chart: bench's own plot of the recorded report, with the source in its footnote. */
function putChart(root: string): DocChart {
  const t = parsePutTable(readFileSync(path.join(root, PUT_SOURCE), 'utf8'));
  if (!t?.rows.length) throw new Error(`${PUT_SOURCE} has no put table`);
  const when = t.meta?.split(';')[0] ?? '';
  const svg = putChartSvg(t, `source: ${PUT_SOURCE} (bench.sh --bytes-per-size 16777216, ${when}), 2x NVIDIA H200`);
  return { file: 'docs/img/put-bandwidth-efaemu-h200x2.svg', source: PUT_SOURCE, machine: '2x NVIDIA H200', throughEfaemu: t.fabric === 'efaemu', svg };
}

/** The first `| build | seconds | what |` table of build-time-h100.md (its latest run): label, seconds, what. */
export function buildTimeRows(md: string): Array<{ label: string; seconds: number; what: string }> {
  const lines = md.split('\n');
  const h = lines.findIndex((l) => l.startsWith('| build | seconds | what |'));
  if (h < 0) throw new Error(`${BUILD_SOURCE} has no "| build | seconds | what |" table`);
  const rows: Array<{ label: string; seconds: number; what: string }> = [];
  for (const l of lines.slice(h + 2)) {
    const cells = l.split('|').slice(1, -1).map((x) => x.trim());
    if (!l.startsWith('|') || cells.length < 3) break;
    const plain = (s: string) => s.replace(/\*\*|`/g, '');
    rows.push({ label: plain(cells[0]!), seconds: Number(plain(cells[1]!)), what: cells[2]! });
  }
  return rows;
}

/** The build-time bars: the recipe, the tool (with its ratio to the recipe), without overlap, the rebuild. */
function buildTimeChart(root: string): DocChart {
  const rows = buildTimeRows(readFileSync(path.join(root, BUILD_SOURCE), 'utf8'));
  const recipe = rows.find((r) => r.label === 'recipe');
  if (!recipe) throw new Error(`${BUILD_SOURCE}: no recipe row`);
  const colors: Record<string, string> = { recipe: '#6e6e6e', tool: '#1f77b4', 'tool, --no-overlap': '#6baed6', 'template-only rebuild': '#1b9e77' };
  const bars: Bar[] = rows.map((r) => {
    let note: string | undefined;
    if (r === recipe) {
      // "NVSHMEM ... (375.8 s, ...), then upstream DeepEP against it (81.5 s, ...)"
      const parts = [...r.what.matchAll(/\(([\d.]+) s\b/g)].map((m) => m[1]);
      if (parts.length === 2) note = `NVSHMEM ${parts[0]} s, then DeepEP ${parts[1]} s`;
    } else if (r.label.startsWith('tool')) {
      note = `${(r.seconds / recipe.seconds).toFixed(3)} of the recipe`;
    } else if (r.label === 'template-only rebuild') {
      note = 'one line of the GDA template changed';
    }
    return { label: r.label, value: r.seconds, ...(note ? { note } : {}), ...(colors[r.label] ? { color: colors[r.label] } : {}) };
  });
  const svg = barChart({
    title: 'Cold build of NVSHMEM + DeepEP: nvshmem-efa vs the common recipe',
    subtitle: 'one H100 80GB HBM3 host, 16 cores, jobs 16, no ccache; all four on one machine (2026-11-23)',
    footnote: `source: ${BUILD_SOURCE} (second run)`,
    valueLabel: 'seconds (wall clock)',
    unit: ' s',
    valueDecimals: 1,
    bars,
  });
  return { file: 'docs/img/build-time-h100.svg', source: BUILD_SOURCE, machine: 'one H100', throughEfaemu: false, svg };
}

/** Every chart of docs/benchmarks.md, made in memory from the recorded results under `root`. */
export function docCharts(root: string): DocChart[] {
  return [putChart(root), buildTimeChart(root)];
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const c of docCharts(root)) {
    const p = path.join(root, c.file);
    const same = existsSync(p) && readFileSync(p, 'utf8') === c.svg;
    if (check) {
      if (!same) {
        stale++;
        console.error(`${c.file}: differs from what ${c.source} gives`);
      }
    } else if (!same) {
      mkdirSync(path.dirname(p), { recursive: true });
      writeFileSync(p, c.svg);
      console.log(`wrote ${c.file} (from ${c.source})`);
    } else {
      console.log(`${c.file}: up to date`);
    }
  }
  process.exitCode = stale ? 1 : 0;
}
