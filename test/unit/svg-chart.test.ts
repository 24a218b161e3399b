import { describe, expect, it } from 'vitest';
import { barChart, escapeXml, formatBytes, lineChart, linearTicks, log2Ticks, type LineChartSpec } from '../../src/core/svg-chart.ts';

/** Issue 22, part 7: the chart module behind bench's put plot and the docs' charts (hand-written SVG, no deps). */

/** The attributes of every element named `tag` in an SVG string, in order. */
function elements(svg: string, tag: string): Array<Record<string, string>> {
  return [...svg.matchAll(new RegExp(`<${tag}\\b([^>]*)>`, 'g'))].map((m) => Object.fromEntries([...m[1]!.matchAll(/([\w-]+)="([^"]*)"/g)].map((a) => [a[1]!, a[2]!])));
}
/** The text of every <text> or <tspan> element whose class is `cls` (up to its first child element). */
const texts = (svg: string, cls: string) => [...svg.matchAll(new RegExp(`<t(?:ext|span) class="${cls}"[^>]*>([^<]*)<`, 'g'))].map((m) => m[1]);

const spec = (o: Partial<LineChartSpec> = {}): LineChartSpec => ({
  title: 'Put bandwidth',
  xLabel: 'message size',
  yLabel: 'GB/s',
  xScale: 'log2',
  xTickLabel: formatBytes,
  series: [
    { name: 'GDA', points: [{ x: 256, y: 0.5 }, { x: 4096, y: 1 }, { x: 65536, y: 2 }] },
    { name: 'proxy', points: [{ x: 256, y: 0.25 }, { x: 4096, y: 0.75 }, { x: 65536, y: 2.5 }] },
  ],
  ...o,
});

describe('axis ticks', () => {
  it('log2: powers of two covering the data, every other one when there would be more than 12, labelled in bytes', () => {
    expect(log2Ticks(4096, 8 << 20)).toEqual({ ticks: Array.from({ length: 12 }, (_, i) => 4096 * 2 ** i), min: 4096, max: 8 << 20 });
    expect(log2Ticks(4096, 8 << 20).ticks.map(formatBytes)).toEqual(['4 KiB', '8 KiB', '16 KiB', '32 KiB', '64 KiB', '128 KiB', '256 KiB', '512 KiB', '1 MiB', '2 MiB', '4 MiB', '8 MiB']);
    // 256 B .. 64 MiB: 19 powers of two, so every other one (10 ticks), from the smallest size.
    expect(log2Ticks(256, 64 << 20).ticks.map(formatBytes)).toEqual(['256 B', '1 KiB', '4 KiB', '16 KiB', '64 KiB', '256 KiB', '1 MiB', '4 MiB', '16 MiB', '64 MiB']);
    // Sizes between powers of two: the axis reaches the powers around them; a stride that overshoots extends the axis.
    expect(log2Ticks(300, 5000)).toEqual({ ticks: [256, 512, 1024, 2048, 4096, 8192], min: 256, max: 8192 });
    expect(log2Ticks(1, 2 ** 13).max).toBe(2 ** 14);
    // One size only: an axis one power either side.
    expect(log2Ticks(1024, 1024)).toEqual({ ticks: [512, 1024, 2048], min: 512, max: 2048 });
    expect(formatBytes(1 << 30)).toBe('1 GiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
  });

  it('linear: from 0 to a round top, the smallest step of 1, 2, 2.5 or 5 times a power of ten that needs at most 6 steps, labels with a fixed number of decimals', () => {
    expect(linearTicks(2.687)).toEqual({ ticks: [0, 0.5, 1, 1.5, 2, 2.5, 3], labels: ['0.0', '0.5', '1.0', '1.5', '2.0', '2.5', '3.0'], max: 3 });
    expect(linearTicks(457.3)).toEqual({ ticks: [0, 100, 200, 300, 400, 500], labels: ['0', '100', '200', '300', '400', '500'], max: 500 });
    expect(linearTicks(1.4).labels).toEqual(['0.00', '0.25', '0.50', '0.75', '1.00', '1.25', '1.50']);
    expect(linearTicks(0.7).labels).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8']);
    expect(linearTicks(0)).toEqual({ ticks: [0, 1], labels: ['0', '1'], max: 1 });
    // No floating-point residue in ticks (0.1 + 0.2).
    expect(linearTicks(0.55).ticks).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
  });
});

describe('lineChart', () => {
  it('places x on a log2 scale: equal size ratios at equal distances, a point on its tick line', () => {
    const svg = lineChart(spec());
    const gda = elements(svg, 'circle').filter((c) => c['data-series'] === '0');
    expect(gda).toHaveLength(3);
    const cx = gda.map((c) => Number(c.cx));
    // 256 B -> 4 KiB -> 64 KiB: x16 each, so the same distance.
    expect(cx[1]! - cx[0]!).toBeCloseTo(cx[2]! - cx[1]!, 0);
    // The first point is on the y axis (the axis starts at the smallest size), the last at the right end.
    const ticks = elements(svg, 'line').filter((l) => l.class === 'xtick');
    const at = (label: string) => Number(ticks[texts(svg, 'xtick-label').indexOf(label)]!.x1);
    expect(texts(svg, 'xtick-label')).toEqual(['256 B', '512 B', '1 KiB', '2 KiB', '4 KiB', '8 KiB', '16 KiB', '32 KiB', '64 KiB']);
    expect(cx[1]).toBe(at('4 KiB'));
    expect(cx[0]).toBe(at('256 B'));
    expect(cx[2]).toBe(at('64 KiB'));
    // y: linear from 0 at the bottom; 2.5 GB/s is the top tick, 2.0 lies 4/5 of the way up.
    const ylab = texts(svg, 'ytick-label');
    expect(ylab).toEqual(['0.0', '0.5', '1.0', '1.5', '2.0', '2.5']);
    const ylines = elements(svg, 'line').filter((l) => l.class === 'ytick');
    const y0 = Number(ylines[0]!.y1);
    const ytop = Number(ylines[5]!.y1);
    expect(Number(gda[2]!.cy)).toBeCloseTo(y0 + (ytop - y0) * 0.8, 0);
  });

  it('a legend entry per series, in order, with its colour and marker; the title, subtitle and axis labels', () => {
    const svg = lineChart(spec({ subtitle: 'PE 0 to PE 1' }));
    expect(texts(svg, 'legend-label')).toEqual(['GDA', 'proxy']);
    expect(texts(svg, 'title')).toEqual(['Put bandwidth']);
    expect(texts(svg, 'subtitle')).toEqual(['PE 0 to PE 1']);
    expect(texts(svg, 'axis-label')).toEqual(['message size', 'GB/s']);
    const lines = elements(svg, 'polyline');
    expect(lines.map((l) => l['data-series'])).toEqual(['0', '1']);
    expect(lines[0]!.stroke).not.toBe(lines[1]!.stroke);
    // Different markers, so the two are told apart without colour: circles for the first, squares for the second.
    expect(elements(svg, 'circle').map((c) => c['data-series'] ?? c.class)).toEqual(['0', '0', '0', 'legend-marker']);
    expect(elements(svg, 'rect').filter((r) => r['data-series'] === '1')).toHaveLength(3);
    expect(elements(svg, 'rect').filter((r) => r.class === 'legend-marker')).toHaveLength(1);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.endsWith('</svg>\n')).toBe(true);
  });

  it('a series without points: the others are plotted, the legend says it is missing and why, nothing drawn for it', () => {
    const svg = lineChart(spec({ series: [{ name: 'GDA', points: [], missing: 'not measured: GDA not active (EFA GDA off)' }, spec().series[1]!] }));
    expect(texts(svg, 'legend-label')).toEqual(['GDA: not measured: GDA not active (EFA GDA off)', 'proxy']);
    expect(elements(svg, 'polyline').map((l) => l['data-series'])).toEqual(['1']);
    expect(elements(svg, 'circle').filter((c) => c['data-series'] === '0')).toHaveLength(0);
    // The proxy series keeps its own colour and marker (by position), whether or not GDA is there.
    const full = lineChart(spec());
    expect(elements(svg, 'polyline')[0]!.stroke).toBe(elements(full, 'polyline')[1]!.stroke);
    // No series with points at all: still an SVG, with the axes and the legend saying so.
    const none = lineChart(spec({ series: [{ name: 'GDA', points: [] }, { name: 'proxy', points: [] }] }));
    expect(texts(none, 'legend-label')).toEqual(['GDA: no data', 'proxy: no data']);
    expect(elements(none, 'polyline')).toHaveLength(0);
  });

  it('escapes text: <, >, &, quotes in titles, labels, series names and point tooltips', () => {
    const svg = lineChart(spec({ title: 'a < b & "c" > \'d\'', xLabel: '<x>', series: [{ name: 'p&q', points: [{ x: 1024, y: 1 }] }] }));
    expect(texts(svg, 'title')).toEqual(['a &lt; b &amp; &quot;c&quot; &gt; &#39;d&#39;']);
    expect(texts(svg, 'axis-label')[0]).toBe('&lt;x&gt;');
    expect(texts(svg, 'legend-label')).toEqual(['p&amp;q']);
    expect(svg).toContain('<title>p&amp;q, 1 KiB: 1</title>');
    expect(escapeXml('<&>"\'')).toBe('&lt;&amp;&gt;&quot;&#39;');
    // Nothing unescaped between tags: every & starts an entity.
    expect(svg.replace(/&(lt|gt|amp|quot|#39);/g, '')).not.toContain('&');
  });

  it('is deterministic: the same input gives the same bytes, every coordinate with one decimal', () => {
    const a = lineChart(spec({ series: [{ name: 'x', points: [{ x: 256, y: 1 / 3 }, { x: 2048, y: Math.PI }] }] }));
    expect(lineChart(spec({ series: [{ name: 'x', points: [{ x: 256, y: 1 / 3 }, { x: 2048, y: Math.PI }] }] }))).toBe(a);
    const coords = [...a.matchAll(/ (?:x|y|x1|x2|y1|y2|cx|cy|width|height)="([^"]*)"/g)].map((m) => m[1]);
    expect(coords.length).toBeGreaterThan(20);
    for (const c of coords) expect(c).toMatch(/^-?\d+\.\d$/);
    for (const p of elements(a, 'polyline')) expect(p.points).toMatch(/^(\d+\.\d,\d+\.\d ?)+$/);
    // What cannot be placed (a size of 0 on a log axis, a value that is not a number) is left out, never NaN.
    const odd = lineChart(spec({ series: [{ name: 'z', points: [{ x: 0, y: 1 }, { x: 1024, y: Number.NaN }, { x: 2048, y: 2 }] }] }));
    expect(odd).not.toMatch(/NaN|Infinity/);
    expect(elements(odd, 'circle').filter((c) => c['data-series'] === '0')).toHaveLength(1);
  });

  it('a linear x axis when asked', () => {
    const svg = lineChart(spec({ xScale: 'linear', xTickLabel: undefined, series: [{ name: 's', points: [{ x: 0, y: 1 }, { x: 5, y: 2 }, { x: 10, y: 3 }] }] }));
    const cx = elements(svg, 'circle').map((c) => Number(c.cx));
    expect(cx[1]! - cx[0]!).toBeCloseTo(cx[2]! - cx[1]!, 0);
    expect(texts(svg, 'xtick-label')).toEqual(['0', '2', '4', '6', '8', '10']);
  });
});

describe('barChart', () => {
  const bars = [
    { label: 'recipe', value: 457.3 },
    { label: 'tool', value: 148, note: '0.324 of the recipe' },
    { label: 'template-only rebuild', value: 23.6 },
  ];
  it('one bar per value, lengths in proportion from a zero axis, the value (and note) at the end of each bar', () => {
    const svg = barChart({ title: 'Build time', valueLabel: 'seconds', unit: ' s', valueDecimals: 1, bars });
    const rects = elements(svg, 'rect').filter((r) => r.class === 'bar');
    expect(rects).toHaveLength(3);
    const w = rects.map((r) => Number(r.width));
    expect(w[1]! / w[0]!).toBeCloseTo(148 / 457.3, 2);
    expect(w[2]! / w[0]!).toBeCloseTo(23.6 / 457.3, 2);
    // All start at the axis.
    expect(new Set(rects.map((r) => r.x)).size).toBe(1);
    expect(texts(svg, 'bar-label')).toEqual(['recipe', 'tool', 'template-only rebuild']);
    expect(texts(svg, 'bar-value')).toEqual(['457.3 s', '148.0 s', '23.6 s']);
    expect(texts(svg, 'bar-note')).toEqual(['0.324 of the recipe']);
    expect(texts(svg, 'xtick-label')).toEqual(['0', '100', '200', '300', '400', '500']);
    expect(texts(svg, 'axis-label')).toEqual(['seconds']);
    expect(barChart({ title: 'Build time', valueLabel: 'seconds', unit: ' s', valueDecimals: 1, bars })).toBe(svg);
  });
  it('escapes labels and notes', () => {
    const svg = barChart({ title: 'T', valueLabel: 's', bars: [{ label: 'tool, <--no-overlap>', value: 1, note: 'a & b' }] });
    expect(texts(svg, 'bar-label')).toEqual(['tool, &lt;--no-overlap&gt;']);
    expect(texts(svg, 'bar-note')).toEqual(['a &amp; b']);
  });
});
