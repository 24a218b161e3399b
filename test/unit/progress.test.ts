import { describe, expect, it } from 'vitest';
import { formatDuration, progressReporter } from '../../src/core/progress.ts';

/** Issue 22, item 6: a long compile reads as percentage, elapsed and what remains; a CI log gets one line per 10%. */
function drive(live: boolean, lines: [number, string][]): string[] {
  let t = 0;
  const out: string[] = [];
  const p = progressReporter((s) => out.push(s), { live, now: () => t });
  for (const [at, s] of lines) {
    t = at;
    p(s);
  }
  return out;
}

describe('progress lines', () => {
  const compile: [number, string][] = Array.from({ length: 200 }, (_, i) => [(i + 1) * 1000, `[${i + 1}/200] Building CUDA object src/f${i}.cu.o`]);

  it('in a log: one counted line per 10% crossed, each with the percentage, the elapsed time and an estimate of what remains', () => {
    const out = drive(false, compile);
    expect(out).toHaveLength(11); // 0% (first line) .. 100%
    expect(out[0]).toBe('0% [1/200] 1.0s elapsed, about 3m 19s left: Building CUDA object src/f0.cu.o');
    expect(out[5]).toBe('50% [100/200] 1m 40s elapsed, about 1m 40s left: Building CUDA object src/f99.cu.o');
    expect(out[10]).toBe('100% [200/200] 3m 20s elapsed: Building CUDA object src/f199.cu.o');
  });

  it('on a terminal: every line, decorated the same way', () => {
    expect(drive(true, compile)).toHaveLength(200);
  });

  it('lines without a count: all on a terminal, at most one per 5 s in a log', () => {
    const plain: [number, string][] = [[0, 'configuring'], [1000, 'a'], [4000, 'b'], [5000, 'c'], [9000, 'd'], [10_500, 'e']];
    expect(drive(false, plain)).toEqual(['configuring', 'c', 'e']);
    expect(drive(true, plain)).toHaveLength(6);
  });

  it('durations read as "42s", "1m 05s" and, below 10 s, "3.4s"', () => {
    expect([formatDuration(42_000), formatDuration(65_000), formatDuration(3_400), formatDuration(0), formatDuration(9_999)]).toEqual(['42s', '1m 05s', '3.4s', '0.0s', '10s']);
  });
});
