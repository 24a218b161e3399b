// device_api's table (native/efaemu/gpu/checks.sh DEVICE_API_TABLE): the arguments it gives NVSHMEM's programs must
// leave them work to do. ring-reduce splits each size over its blocks and each block's share into chunks; a share
// smaller than a chunk reduces nothing, and the example then reports data errors that are the arguments' doing
// (1x H200: `-b 1048576` with 32 blocks of 256 KiB chunks).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHECKS = readFileSync(path.join(ROOT, 'native/efaemu/gpu/checks.sh'), 'utf8');

/** The table's row for program NAME: its arguments. */
function argsOf(name: string): string[] {
  const row = CHECKS.match(new RegExp(`^\\s*"${name}\\|[a-z]+\\|([^"]*)"$`, 'm'));
  const args = row?.[1];
  if (args === undefined) throw new Error(`no DEVICE_API_TABLE row for ${name}`);
  return args.split(/\s+/).filter(Boolean);
}

/** NVSHMEM 3.4.5 examples/ring-reduce.cu: its options (getopt "b:e:f:n:w:c:t:m:") over its defaults. */
function ringReduce(argv: string[]) {
  const o = { b: 32 << 20, e: 512 << 20, f: 2, c: 32, m: 262144, n: 4, w: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = (argv[i] ?? '').replace(/^-/, ''), value = argv[i + 1];
    if (!(flag in o) || value === undefined) throw new Error(`ring-reduce has no option ${argv[i]} with a value`);
    o[flag as keyof typeof o] = Number(value);
  }
  const sizes: number[] = [];
  for (let size = o.b; size <= o.e; size *= o.f) sizes.push(size);
  // Per size: each block's ints (nreduce / blocks) and its whole chunks; main() asserts the smallest divides evenly.
  return sizes.map((size) => {
    const perBlock = Math.floor(size / 4 / o.c);
    return { size, divides: (o.b / 4) % o.c === 0, chunks: Math.floor(perBlock / (o.m / 4)) };
  });
}

describe('device_api table: programs with work to do', () => {
  it('ring-reduce gives every block at least one chunk at every size', () => {
    const runs = ringReduce(argsOf('ring-reduce'));
    expect(runs.length).toBeGreaterThan(0);
    for (const r of runs) {
      expect(r.divides, `size ${r.size}`).toBe(true);
      expect(r.chunks, `size ${r.size}: chunks per block`).toBeGreaterThanOrEqual(1);
    }
    // What the model says of the arguments that failed on one H200.
    expect(ringReduce(['-b', '1048576', '-e', '8388608'])[0]?.chunks).toBe(0);
  });
});
