import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docCharts } from '../../bench/plots/make-doc-charts.ts';

/**
 * Issue 22, part 7: docs/benchmarks.md shows charts made from recorded results by bench/plots/make-doc-charts.ts.
 * The SVGs in docs/img/ must be what the script makes from those files today (regenerated in memory here), and the
 * page must show each with a caption naming its source file.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('the charts in docs/benchmarks.md', () => {
  const charts = docCharts(ROOT);
  const page = readFileSync(path.join(ROOT, 'docs/benchmarks.md'), 'utf8');

  it('are the put bandwidth (2x H200 through efaemu) and the build-time comparison (one H100)', () => {
    expect(charts.map((c) => c.file)).toEqual(['docs/img/put-bandwidth-efaemu-h200x2.svg', 'docs/img/build-time-h100.svg']);
    for (const c of charts) expect(existsSync(path.join(ROOT, c.source)), c.source).toBe(true);
  });

  it.each(docCharts(ROOT).map((c) => [c.file, c] as const))('%s is up to date with the script (npx tsx bench/plots/make-doc-charts.ts)', (file, c) => {
    const p = path.join(ROOT, file);
    expect(existsSync(p), `${file} is missing: run npx tsx bench/plots/make-doc-charts.ts`).toBe(true);
    expect(readFileSync(p, 'utf8') === c.svg, `${file} is stale: run npx tsx bench/plots/make-doc-charts.ts`).toBe(true);
  });

  it.each(docCharts(ROOT).map((c) => [c.file, c] as const))('%s is shown in docs/benchmarks.md, its caption naming the source file and machine', (file, c) => {
    const rel = path.relative(path.join(ROOT, 'docs'), path.join(ROOT, file));
    const at = page.indexOf(`](${rel})`);
    expect(at, `docs/benchmarks.md does not show ${rel}`).toBeGreaterThan(0);
    // The caption: the paragraph right after the image.
    const caption = page.slice(at).split('\n\n')[0]!.split('\n').slice(1).join(' ');
    expect(caption).toContain(path.relative(path.join(ROOT, 'docs'), path.join(ROOT, c.source)));
    expect(caption).toContain(c.machine);
    if (c.throughEfaemu) expect(caption).toContain('through efaemu');
  });
});
