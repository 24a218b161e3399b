// bench/device-api/perftest_latency.py: NVSHMEM's latency perftests with the device API switch on and off, read from
// the rank logs selftest's device_api check leaves (issue 23's "perftest latencies with the switch on and off").
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const PYTHON = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);

/** A perftest's PE 0 log: the start-up lines, then one block per scope, then our finalize line. */
function log(blocks: Record<string, [number, number][]>): string {
  const body = Object.entries(blocks).map(([scope, rows]) => `#shmem_put_latency\nsize(B)     scope     latency (us)    \n${rows.map(([s, l]) => `${s}           ${scope}    ${l}      `).join('\n')}\n`);
  return `Runtime options after parsing command line arguments \nmype: 0 mype_node: 0 device name: NVIDIA H200 bus id: 0 \n${body.join('')}nvshmem-efa: PE 0: NVSHMEM device API proxy operations 52\n`;
}

function results(runs: Record<string, string>): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'perftest-latency-'));
  for (const [dir, text] of Object.entries(runs)) {
    mkdirSync(path.join(d, dir));
    writeFileSync(path.join(d, dir, 'rank0.log'), text);
  }
  return d;
}

describe.skipIf(!PYTHON)(skipTitle('perftest_latency.py', !PYTHON && 'no python3 or python'), () => {
  it('tabulates on, off and on/off per scope at the sizes asked, for programs run both ways only', () => {
    const d = results({
      'device_api.shmem_put_latency.on': log({ Thread: [[8, 10], [4096, 30]], Warp: [[8, 12]] }),
      'device_api.shmem_put_latency.off': log({ Thread: [[8, 20], [4096, 30]], Warp: [[8, 6]] }),
      // On only (no off run): left out, as are the bandwidth programs.
      'device_api.bcast_latency.on': log({ Thread: [[8, 5]] }),
      'device_api.shmem_put_bw.on': log({ Thread: [[8, 5]] }),
      'device_api.shmem_put_bw.off': log({ Thread: [[8, 5]] }),
    });
    const out = execFileSync(PYTHON!, [path.join(ROOT, 'bench/device-api/perftest_latency.py'), d, '8'], { encoding: 'utf8' }).trim().split('\n');
    expect(out.slice(2)).toEqual([
      '| shmem_put_latency | shmem_put_latency | Thread | 8 | 10.0 | 20.0 | 0.50 |',
      '| shmem_put_latency | shmem_put_latency | Warp | 8 | 12.0 | 6.0 | 2.00 |',
    ]);
  });
});
