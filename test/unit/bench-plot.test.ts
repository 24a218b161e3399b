import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parsePutTable, putChartSvg, PUT_PLOT } from '../../src/commands/bench.ts';
import { cli, ENV } from '../helpers/cli.ts';
import { FAKE_PUT } from '../helpers/fake-put.ts';

/**
 * Issue 22, part 7: `nvshmem-efa bench` writes its put table as an SVG plot next to the report
 * (<results>/put-bandwidth.svg) and says where. Driven as in bench.test.ts: the real bench.sh with a stand-in for
 * put_bw (PUT_BW), a work dir whose state names an NVSHMEM install, no GPU.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const RECORDED = path.join(ROOT, 'bench/results/efaemu-gpu-h200x2/run6/put.txt');

function rig() {
  const d = mkdtempSync(path.join(os.tmpdir(), 'bench-plot-'));
  for (const p of ['nvshmem/lib', 'efaemu/prov', 'libfabric/lib', 'libfabric/include/rdma', 'wd']) mkdirSync(path.join(d, p), { recursive: true });
  writeFileSync(path.join(d, 'efaemu/prov/libefa-fi.so'), '');
  writeFileSync(path.join(d, 'libfabric/include/rdma/fabric.h'), '#define FI_MAJOR_VERSION 2\n');
  writeFileSync(path.join(d, 'put_bw'), FAKE_PUT);
  chmodSync(path.join(d, 'put_bw'), 0o755);
  writeFileSync(path.join(d, 'wd', 'state.json'), JSON.stringify({ version: 1, steps: {
    'build-nvshmem': { stamp: 'x', finishedAt: 'y', result: { prefix: path.join(d, 'nvshmem'), cmakeArgs: [`-DLIBFABRIC_HOME=${path.join(d, 'libfabric')}`] } } } }));
  return d;
}

function bench(d: string, args: string[], env: Record<string, string> = {}) {
  const results = path.join(d, 'results');
  const r = cli(['bench', '--work-dir', path.join(d, 'wd'), '--results', results, '--sizes', '256,4K,1M,64M', '--no-deepep', ...args],
    { ...ENV, PUT_BW: path.join(d, 'put_bw'), EFAEMU_SYSFS_NS: '1', PRELOAD_UNDER_TEST: '', PART_TIMEOUT: '60', ...env });
  const svgPath = path.join(results, PUT_PLOT);
  return { ...r, results, svgPath, svg: existsSync(svgPath) ? readFileSync(svgPath, 'utf8') : undefined,
    report: existsSync(path.join(results, 'gda-signals.md')) ? readFileSync(path.join(results, 'gda-signals.md'), 'utf8') : '' };
}
const legend = (svg: string) => [...svg.matchAll(/<text class="legend-label"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
const title = (svg: string) => /<text class="title"[^>]*>([^<]*)<\/text>/.exec(svg)?.[1];

describe('parsePutTable: the put table of a bench report', () => {
  it('reads a recorded GPU run (2x H200 through efaemu): sizes in bytes, GB/s of both paths, the fabric', () => {
    const t = parsePutTable(readFileSync(RECORDED, 'utf8'))!;
    expect(t.fabric).toBe('efaemu');
    expect(t.rows).toHaveLength(10);
    expect(t.rows[0]).toEqual({ bytes: 256, gda: 0.008, proxy: 0.015 });
    expect(t.rows[9]).toEqual({ bytes: 64 << 20, gda: 2.687, proxy: 2.629 });
    expect(t.meta).toBe('2026-11-23T02:47:46Z; vm; NVIDIA H200,NVIDIA H200');
    expect(t.gdaOff).toBeUndefined();
  });
  it('a column of dashes is a path not measured; GDA off says why; no table at all: undefined', () => {
    const t = parsePutTable([
      "# nvshmem-efa bench: EFA GDA vs NVSHMEM's CPU proxy (over EFA)", '',
      '| size | GDA GB/s | GDA us | proxy GB/s | proxy us | GDA / proxy |', '|---:|---:|---:|---:|---:|---:|',
      '| 1 KiB | - | - | 0.061 | 16.8 | - |', '', 'GDA column empty: GDA is not active (EFA GDA off: not requested)', ''].join('\n'))!;
    expect(t).toEqual({ fabric: 'efa', rows: [{ bytes: 1024, proxy: 0.061 }], gdaOff: 'EFA GDA off: not requested' });
    expect(parsePutTable('Put table: skipped (--no-put).\n')).toBeUndefined();
  });
  it('the chart of the recorded run: both paths, titled through efaemu, sizes 256 B .. 64 MiB', () => {
    const svg = putChartSvg(parsePutTable(readFileSync(RECORDED, 'utf8'))!);
    expect(title(svg)).toBe('Put bandwidth through efaemu: EFA GDA vs NVSHMEM&#39;s CPU proxy');
    expect(svg).toContain('measures our device path and the emulator, not EFA');
    expect(legend(svg)).toEqual(['GDA: efa_gda_put_nbi_warp, then efa_gda_quiet', 'proxy: nvshmemx_putmem_nbi_warp, then nvshmem_quiet']);
    expect(svg).toContain('>256 B</text>');
    expect(svg).toContain('>64 MiB</text>');
  });
});

describe('nvshmem-efa bench --json', () => {
  it('prints one JSON document on stdout (the script\'s own output on stderr): exit code, results, report, put rows, plot', () => {
    const d = rig();
    const r = bench(d, ['--fabric', 'efa', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ schema: 'nvshmem-efa-bench/1', exitCode: 0, results: r.results, report: path.join(r.results, 'gda-signals.md'), fabric: 'efa', plot: r.svgPath });
    expect(j.put.map((x: { bytes: number }) => x.bytes)).toEqual([256, 4096, 1 << 20, 64 << 20]);
    expect(j.put[0]).toMatchObject({ gda: expect.any(Number), proxy: expect.any(Number) });
    expect(r.stderr).toContain('| size | GDA GB/s |');
    const dry = bench(d, ['--fabric', 'efa', '--json', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ schema: 'nvshmem-efa-bench/1', dryRun: true, command: expect.stringContaining('bench.sh') });
  });
});

describe('nvshmem-efa bench writes the put plot next to the report', () => {
  it('over EFA: <results>/put-bandwidth.svg with both paths, its path on stdout and in gda-signals.md', () => {
    const d = rig();
    const r = bench(d, ['--fabric', 'efa']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.svg, 'no SVG written').toBeDefined();
    expect(r.stdout).toContain(`Put plot: ${r.svgPath} (GB/s against message size, GDA, proxy; not measured: device API)`);
    expect(r.report).toContain(`Put plot: ${r.svgPath}`);
    expect(title(r.svg!)).toBe('Put bandwidth over EFA: EFA GDA vs NVSHMEM&#39;s CPU proxy');
    expect(r.svg).not.toContain('efaemu');
    expect(legend(r.svg!)).toHaveLength(3);  // GDA, the device API (not measured: --no-device-api), proxy
    // 4 sizes per path, each a marker; the data of the table (64 MiB in 2 us: 33554.432 GB/s).
    expect(r.svg!.match(/<circle data-series="0"/g)).toHaveLength(4);
    expect(r.svg!.match(/<polygon data-series="2"/g)).toHaveLength(4);
    expect(r.svg).toContain('<title>GDA, 64 MiB: 33554.432 GB/s</title>');
    expect(r.svg).toContain('<title>proxy, 256 B: 0.032 GB/s</title>');
    // The same table gives the same file.
    expect(putChartSvg(parsePutTable(r.report)!)).toBe(r.svg);
  });

  it('a build with the device API hooks: the device API is a series of its own, between GDA and the proxy', () => {
    const d = rig();
    const state = path.join(d, 'wd', 'state.json');
    const j = JSON.parse(readFileSync(state, 'utf8'));
    j.steps['patch-nvshmem'] = { stamp: 'x', finishedAt: 'y', result: { nvshmemDeviceApi: true } };
    writeFileSync(state, JSON.stringify(j));
    const r = bench(d, ['--fabric', 'efa']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(legend(r.svg!)).toEqual(['GDA: efa_gda_put_nbi_warp, then efa_gda_quiet', 'device API: nvshmemx_putmem_nbi_warp, then nvshmem_quiet, over GDA', 'proxy: nvshmemx_putmem_nbi_warp, then nvshmem_quiet']);
    expect(r.svg).toContain('<title>device API, 256 B: 0.064 GB/s</title>');
    expect(r.stdout).toContain(`Put plot: ${r.svgPath} (GB/s against message size, GDA, device API, proxy)`);
    expect(parsePutTable(r.report)!.rows[0]).toEqual({ bytes: 256, gda: 0.128, api: 0.064, proxy: 0.032 });
  });

  it('through efaemu: the title says so', () => {
    const d = rig();
    const r = bench(d, ['--efaemu-build', path.join(d, 'efaemu')]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(title(r.svg!)).toBe('Put bandwidth through efaemu: EFA GDA vs NVSHMEM&#39;s CPU proxy');
  });

  it('GDA off: the proxy is plotted and the legend says GDA was not measured and why (the run still fails, exit 1)', () => {
    const d = rig();
    const r = bench(d, ['--fabric', 'efa'], { FAKE_NO_GDA: '1' });
    expect(r.code, r.stdout).toBe(1);
    expect(legend(r.svg!)).toEqual(['GDA: not measured, GDA not active (EFA GDA off: not requested)', expect.stringMatching(/^device API: not measured \(the build in .* has no device API hooks \(built with --no-device-api/), 'proxy: nvshmemx_putmem_nbi_warp, then nvshmem_quiet']);
    expect(r.svg!.match(/<polyline /g)).toHaveLength(1);
    expect(r.stdout).toContain(`Put plot: ${r.svgPath} (GB/s against message size, proxy; not measured: GDA, device API)`);
  });

  it('no rows (a PE failed) or --no-put: no plot, an earlier one removed, and the reason said', () => {
    const d = rig();
    const first = bench(d, ['--fabric', 'efa']);
    expect(first.svg).toBeDefined();
    const failed = bench(d, ['--fabric', 'efa'], { FAKE_PUT_FAIL_PE: '0' });
    expect(failed.code).toBe(1);
    expect(failed.svg).toBeUndefined();
    expect(failed.stdout).toContain('Put plot: not written (the put table has no rows)');
    const again = bench(d, ['--fabric', 'efa']);
    expect(again.svg).toBeDefined();
    const none = bench(d, ['--fabric', 'efa', '--no-put']);
    expect(none.code, none.stdout).toBe(0);
    expect(none.svg).toBeUndefined();
    expect(none.stdout).not.toContain('Put plot');
  });
});
