import { spawn } from 'node:child_process';
import { childEnded, childStarted } from '../core/kill-tree.ts';
import { closeSync, existsSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { openForAppendSync, writeFileAtomicSync } from '../core/fs-atomic.ts';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError, NoBuildError, UsageError } from '../core/errors.ts';
import { packageRoot } from '../core/paths.ts';
import { STATE_FILE } from '../core/state.ts';
import { shellQuote } from '../core/shell-quote.ts';
import { formatBytes, lineChart } from '../core/svg-chart.ts';
import { buildEfaemu, EFAEMU_PROVIDER, efaemuBuildIn, isEfaemuBuild } from './efaemu-build.ts';
import { withInterrupts } from './run-pipeline.ts';

/**
 * `nvshmem-efa bench`: what GPU-initiated networking buys, in one run on a host with 2 GPUs. The work is done by
 * bench/gda-signals/bench.sh (it runs without Node.js on GPU hosts): a put table, EFA GDA vs NVSHMEM's CPU proxy,
 * over 256 B .. 64 MiB, and DeepEP's low-latency dispatch and combine with the shim's signals over GDA vs
 * through the proxy, with their ratio. This command finds the build in the work dir and hands it over.
 */
export interface BenchOptions {
  workDir: string;
  nvshmemHome?: string;
  deepepDir?: string;
  fabric: string;
  efaemuBuild?: string;
  libfabricHome?: string;
  results?: string;
  sizes?: string;
  bytesPerSize?: string;
  deepepArgs?: string;
  put: boolean;
  deepep: boolean;
  dryRun: boolean;
  /** Print one JSON document on stdout; the script's own output goes to stderr. */
  json?: boolean;
}

export const BENCH_SCRIPT = path.join('bench', 'gda-signals', 'bench.sh');

/** What the work dir's last build produced: the NVSHMEM prefix, the DeepEP module, the libfabric it used. */
export function builtInWorkDir(workDir: string): { prefix?: string; deepepDir?: string; libfabricHome?: string; deviceApi?: boolean } {
  let steps: Record<string, { result?: unknown }> = {};
  try {
    steps = JSON.parse(readFileSync(path.join(workDir, STATE_FILE), 'utf8')).steps ?? {};
  } catch {
    return {};
  }
  const b = steps['build-nvshmem']?.result as { prefix?: string; cmakeArgs?: string[] } | undefined;
  const d = steps['build-deepep']?.result as { module?: string } | undefined;
  const p = steps['patch-nvshmem']?.result as { nvshmemDeviceApi?: boolean } | undefined;
  const lf = b?.cmakeArgs?.find((a) => a.startsWith('-DLIBFABRIC_HOME='))?.slice('-DLIBFABRIC_HOME='.length);
  return { prefix: b?.prefix, deepepDir: d?.module ? path.dirname(d.module) : undefined, libfabricHome: lf, deviceApi: p?.nvshmemDeviceApi === true };
}

/** efaemu to build before the script runs (no --efaemu-build given): against which libfabric, where, its log. */
export interface EfaemuToBuild {
  libfabricHome: string;
  dir: string;
  logPath: string;
}

export interface BenchInvocation {
  script: string;
  args: string[];
  env: Record<string, string>;
  efaemuToBuild?: EfaemuToBuild;
}

/** The script, its arguments and environment for these options; refuses what cannot run with the fix to try. */
export function benchInvocation(o: BenchOptions, root = packageRoot()): BenchInvocation {
  if (o.fabric !== 'efaemu' && o.fabric !== 'efa') throw new UsageError(`--fabric ${o.fabric}: expected efaemu or efa`, 'pass --fabric efaemu (the emulated NIC) or --fabric efa (a host with EFA NICs)');
  if (o.sizes !== undefined && !/^[1-9]\d*[KkMm]?(,[1-9]\d*[KkMm]?)*$/.test(o.sizes)) throw new UsageError(`--sizes ${o.sizes}: expected a comma-separated list of sizes of at least 1 byte, like 256,4K,1M`, 'pass e.g. --sizes 256,4K,64K,1M,64M');
  if (o.bytesPerSize !== undefined && !/^[1-9]\d*$/.test(o.bytesPerSize)) throw new UsageError(`--bytes-per-size must be a positive integer, got '${o.bytesPerSize}'`, 'pass e.g. --bytes-per-size 67108864');
  const built = builtInWorkDir(o.workDir);
  const nvshmemHome = o.nvshmemHome ?? built.prefix;
  if (!nvshmemHome || !existsSync(path.join(nvshmemHome, 'lib'))) {
    throw new NoBuildError(
      nvshmemHome ? `the NVSHMEM install ${nvshmemHome} has no lib/` : `no NVSHMEM build in ${o.workDir}`,
      `run nvshmem-efa build --work-dir ${o.workDir} first, or pass --nvshmem-home DIR`,
    );
  }
  const env: Record<string, string> = { NVSHMEM_HOME: nvshmemHome };
  // The put table's device API column: NVSHMEM's own put over GDA, which a build with --no-device-api lacks.
  if (o.nvshmemHome) env.DEVICE_API_WHY = `--nvshmem-home ${o.nvshmemHome}: not a build of this work dir, so not known to have the device API hooks`;
  else if (built.deviceApi) env.DEVICE_API = '1';
  else env.DEVICE_API_WHY = `the build in ${o.workDir} has no device API hooks (built with --no-device-api, or by an nvshmem-efa from before they were the default): rebuild without --no-device-api to measure NVSHMEM put calls over GDA`;
  const deepepDir = o.deepepDir ?? built.deepepDir;
  if (deepepDir && o.deepep) env.DEEPEP_DIR = deepepDir;
  const results = o.results ?? path.join(o.workDir, 'bench');
  let efaemuToBuild: EfaemuToBuild | undefined;
  if (o.fabric === 'efaemu') {
    const lf = o.libfabricHome ?? built.libfabricHome;
    if (o.efaemuBuild) {
      if (!isEfaemuBuild(o.efaemuBuild)) {
        throw new EnvironmentError(`--efaemu-build ${o.efaemuBuild} has no ${EFAEMU_PROVIDER}`, 'pass the dir efaemu was built in, or leave --efaemu-build out (bench builds efaemu, as selftest does), or --fabric efa on a host with EFA NICs');
      }
      if (!lf) throw new EnvironmentError('--fabric efaemu needs the libfabric efaemu was built against', 'pass --libfabric-home DIR');
      env.EFAEMU_BUILD = o.efaemuBuild;
    } else {
      // As selftest does: built from this package's native/efaemu, in the results dir (incremental next time).
      if (!lf || !existsSync(path.join(lf, 'include', 'rdma', 'fabric.h'))) {
        throw new EnvironmentError(
          `--fabric efaemu needs the emulated NIC (--efaemu-build), or a libfabric to build it against: ${lf ? `${lf} has no include/rdma/fabric.h` : `none given, and the build in ${o.workDir} names none`}`,
          'pass --libfabric-home DIR (libfabric >= 2.3.0; bench builds efaemu against it), or --efaemu-build DIR, or --fabric efa on a host with EFA NICs',
        );
      }
      efaemuToBuild = { libfabricHome: lf, ...efaemuBuildIn(path.resolve(results)) };
      env.EFAEMU_BUILD = efaemuToBuild.dir;
    }
    env.LIBFABRIC_HOME = lf;
  }
  env.RESULTS = results;
  const args = ['--fabric', o.fabric];
  if (o.sizes) args.push('--sizes', o.sizes);
  if (o.bytesPerSize) args.push('--bytes-per-size', o.bytesPerSize);
  if (o.deepepArgs) args.push('--deepep-args', o.deepepArgs);
  if (!o.put) args.push('--no-put');
  if (!o.deepep) args.push('--no-deepep');
  const script = path.join(root, BENCH_SCRIPT);
  if (!existsSync(script)) throw new EnvironmentError(`${script} is missing from this copy of nvshmem-efa`, 'reinstall nvshmem-efa (its package ships bench/gda-signals/), or run the script from a checkout');
  return { script, args, env, ...(efaemuToBuild ? { efaemuToBuild } : {}) };
}

/** The put table's plot, next to gda-signals.md in the results dir. */
export const PUT_PLOT = 'put-bandwidth.svg';
/** The schema name of `bench --json`. */
export const BENCH_JSON = 'nvshmem-efa-bench/1';

/** The put table of a bench report (gda-signals.md, or the script's stdout): GB/s per size for each path. */
export interface PutTable {
  /** From the report's heading: through efaemu or over EFA (absent: the heading says neither). */
  fabric?: 'efaemu' | 'efa';
  /** The line under the heading: date, host, GPUs. */
  meta?: string;
  /** Sizes in the table's order; a path's GB/s absent where the table has "-". */
  rows: Array<{ bytes: number; gda?: number; api?: number; proxy?: number }>;
  /** Why the GDA column is empty, as the report says ("GDA column empty: GDA is not active (WHY)"). */
  gdaOff?: string;
  /** Why the device API column is empty ("device API column empty: WHY"). */
  apiOff?: string;
}

/** The table's GB/s columns, by their header. */
const PUT_COLUMNS = { gda: 'GDA GB/s', api: 'device API GB/s', proxy: 'proxy GB/s' } as const;

const UNIT: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };

/** Reads the put table out of a report bench.sh printed; undefined when it has none (--no-put). */
export function parsePutTable(report: string): PutTable | undefined {
  const lines = report.split('\n');
  const cells = (l: string) => l.split('|').slice(1, -1).map((c) => c.trim());
  const header = lines.findIndex((l) => l.startsWith('| size | GDA GB/s |'));
  if (header < 0) return undefined;
  // By header name: reports from before the device API column have no such column.
  const names = cells(lines[header]!);
  const col = Object.fromEntries(Object.entries(PUT_COLUMNS).map(([k, h]) => [k, names.indexOf(h)])) as Record<keyof typeof PUT_COLUMNS, number>;
  const t: PutTable = { rows: [] };
  const h = lines.findIndex((l) => l.startsWith('# nvshmem-efa bench:'));
  if (h >= 0) {
    if (lines[h]!.includes('(through efaemu')) t.fabric = 'efaemu';
    else if (lines[h]!.includes('(over EFA)')) t.fabric = 'efa';
    const meta = lines.slice(h + 1).find((l) => l.trim() !== '');
    if (meta && !meta.startsWith('#') && !meta.startsWith('|')) t.meta = meta.trim();
  }
  const num = (s: string) => (/^\d+(\.\d+)?$/.test(s.trim()) ? Number(s.trim()) : undefined);
  for (const l of lines.slice(header + 2)) {
    const m = /^\| ([\d.]+) (B|KiB|MiB|GiB) \|/.exec(l);
    if (!m) break;
    const c = cells(l);
    const row: PutTable['rows'][number] = { bytes: Math.round(Number(m[1]) * UNIT[m[2]!]!) };
    for (const k of ['gda', 'api', 'proxy'] as const) {
      const v = col[k] >= 0 ? num(c[col[k]] ?? '') : undefined;
      if (v !== undefined) row[k] = v;
    }
    t.rows.push(row);
  }
  const off = lines.find((l) => l.startsWith('GDA column empty: GDA is not active ('));
  if (off) t.gdaOff = off.slice('GDA column empty: GDA is not active ('.length).replace(/\)$/, '');
  const apiOff = lines.find((l) => l.startsWith('device API column empty: '));
  if (apiOff) t.apiOff = apiOff.slice('device API column empty: '.length);
  return t;
}

/**
 * The put table as a line chart: GB/s against message size (log2), GDA and the proxy. A path without numbers is
 * only in the legend, with why. `footnote`: where the numbers come from (default: the report's date/host line).
 */
export function putChartSvg(t: PutTable, footnote = t.meta): string {
  const via = t.fabric === 'efaemu' ? ' through efaemu' : t.fabric === 'efa' ? ' over EFA' : '';
  const detail = { gda: 'efa_gda_put_nbi_warp, then efa_gda_quiet', api: 'nvshmemx_putmem_nbi_warp, then nvshmem_quiet, over GDA', proxy: 'nvshmemx_putmem_nbi_warp, then nvshmem_quiet' };
  const missing = { gda: `not measured${t.gdaOff ? `, GDA not active (${t.gdaOff})` : ''}`, api: `not measured${t.apiOff ? ` (${t.apiOff})` : ''}`, proxy: 'not measured' };
  // The device API is a series only where the table has it: plots of older reports stay as they were.
  const keys = t.rows.some((r) => r.api !== undefined) || t.apiOff ? (['gda', 'api', 'proxy'] as const) : (['gda', 'proxy'] as const);
  const series = keys.map((k) => ({
    name: k === 'gda' ? 'GDA' : k === 'api' ? 'device API' : 'proxy', detail: detail[k], missing: missing[k],
    points: t.rows.flatMap((r) => (r[k] === undefined ? [] : [{ x: r.bytes, y: r[k]! }])),
  }));
  return lineChart({
    title: `Put bandwidth${via}: EFA GDA vs NVSHMEM's CPU proxy`,
    subtitle: `PE 0 → PE 1, one warp posting, then quiet${t.fabric === 'efaemu' ? '; measures our device path and the emulator, not EFA' : ''}`,
    footnote,
    xLabel: 'message size (log2 scale)',
    yLabel: 'GB/s',
    xScale: 'log2',
    xTickLabel: formatBytes,
    yUnit: ' GB/s',
    series,
  });
}

/**
 * After the script: the put table of <results>/gda-signals.md drawn into <results>/put-bandwidth.svg, and a line
 * saying where (or why not) on stdout and at the end of the report. No table (--no-put) or no rows: no plot, and an
 * earlier run's plot is removed, so the one there always belongs to the report beside it.
 */
export function writePutPlot(results: string, put: boolean, out: (s: string) => void): { svg?: string; why?: string; report?: string; table?: PutTable } {
  const svg = path.join(results, PUT_PLOT);
  const reportPath = path.join(results, 'gda-signals.md');
  let report: string | undefined;
  try {
    report = readFileSync(reportPath, 'utf8');
  } catch {
    /* the script stopped before writing it: nothing to plot */
  }
  const t = put && report !== undefined ? parsePutTable(report) : undefined;
  // What was read, for bench --json: the report's path and its put table (read once, before the line below is added).
  const read = { ...(report !== undefined ? { report: reportPath } : {}), ...(t ? { table: t } : {}) };
  const say = (line: string) => {
    out(line);
    try {
      // Only to the report as a plain file of ours: a link in its place is replaced, never written through.
      const fd = openForAppendSync(reportPath);
      try {
        writeSync(fd, `${line}\n`);
      } finally {
        closeSync(fd);
      }
    } catch {
      /* no report to add to */
    }
  };
  const drop = (why?: string) => {
    try {
      rmSync(svg, { force: true });
    } catch {
      /* a plot that cannot be removed is one that could not have been written either */
    }
    if (why) say(`Put plot: not written (${why})`);
    return why === undefined ? read : { ...read, why };
  };
  if (!t) return drop(put && report ? 'the report has no put table' : undefined);
  if (!t.rows.some((r) => r.gda !== undefined || r.api !== undefined || r.proxy !== undefined)) return drop('the put table has no rows');
  try {
    writeFileAtomicSync(svg, putChartSvg(t));
  } catch (e) {
    return drop(`${svg}: ${(e as Error).message}`);
  }
  const has = (k: 'gda' | 'api' | 'proxy') => t.rows.some((r) => r[k] !== undefined);
  const paths = [has('gda') && 'GDA', has('api') && 'device API', has('proxy') && 'proxy'].filter(Boolean).join(', ');
  const unmeasured = [!has('gda') && 'GDA', !has('api') && t.apiOff !== undefined && 'device API', !has('proxy') && 'proxy'].filter(Boolean);
  const what = `${paths}${unmeasured.length ? `; not measured: ${unmeasured.join(', ')}` : ''}`;
  say(`Put plot: ${svg} (GB/s against message size, ${what})`);
  return { ...read, svg };
}

export async function benchCommand(o: BenchOptions, out: (s: string) => void): Promise<number> {
  const inv = benchInvocation(o);
  const line = [...Object.entries(inv.env).map(([k, v]) => `${k}=${shellQuote(v)}`), 'bash', shellQuote(inv.script), ...inv.args.map(shellQuote)].join(' ');
  const b = inv.efaemuToBuild;
  if (o.dryRun) {
    if (o.json) {
      out(JSON.stringify({ schema: BENCH_JSON, dryRun: true, ...(b ? { efaemuBuild: { libfabricHome: b.libfabricHome, dir: b.dir } } : {}), command: line }, null, 2));
      return 0;
    }
    if (b) out(`would build efaemu against ${b.libfabricHome} into ${b.dir}`);
    out(`would run: ${line}`);
    return 0;
  }
  if (b) {
    await withInterrupts(async (signal) => {
      await mkdir(path.dirname(b.logPath), { recursive: true });
      process.stderr.write(`building efaemu against ${b.libfabricHome} in ${b.dir} (log ${b.logPath})\n`);
      await buildEfaemu(b.libfabricHome, b.dir, b.logPath, signal);
    });
  }
  process.stderr.write(`running: ${line}\n`);
  const code = await new Promise<number>((resolve, reject) => {
    // With --json, stdout is the JSON document alone: the script's report lines go to stderr.
    const child = spawn('bash', [inv.script, ...inv.args], { stdio: ['inherit', o.json ? process.stderr : 'inherit', 'inherit'], env: { ...process.env, ...inv.env } });
    // Registered: a signal to our pid alone (core/signals.ts) kills the script's tree too, not only us.
    if (child.pid !== undefined) childStarted(child.pid);
    child.on('close', () => child.pid !== undefined && childEnded(child.pid));
    child.on('error', reject);
    // The script's exit codes are the CLI's: 0 passed, 1 a part failed, 2 usage, 4 an input is missing.
    child.on('close', (code, sig) => resolve(sig ? 130 : [0, 1, 2, 4].includes(code ?? 1) ? (code ?? 1) : 1));
  });
  // 0 or 1: the script ran and wrote its report (2, 4, 130: it stopped before, or was stopped).
  const results = inv.env.RESULTS!;
  const plot: ReturnType<typeof writePutPlot> = code === 0 || code === 1 ? writePutPlot(results, o.put, o.json ? (s) => process.stderr.write(`${s}\n`) : out) : { why: `the script stopped (exit ${code}) before its report` };
  if (o.json) {
    const t = plot.table;
    out(JSON.stringify({
      schema: BENCH_JSON, exitCode: code, results, ...(plot.report ? { report: plot.report } : {}),
      ...(t?.fabric ? { fabric: t.fabric } : {}), put: t?.rows ?? [], ...(t?.gdaOff ? { gdaOff: t.gdaOff } : {}),
      ...(plot.svg ? { plot: plot.svg } : { plotNotWritten: plot.why }),
    }, null, 2));
  }
  return code;
}
