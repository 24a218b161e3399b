/**
 * Charts as SVG text, and nothing else: a line chart (log2 or linear x, linear y from 0) and a horizontal bar chart.
 * Hand-written SVG, no dependencies. Every coordinate is printed with one decimal and every tick label with a fixed
 * number of decimals, so the same input gives the same bytes (the docs' charts are checked against a regeneration).
 * Text is sized for 12 px sans-serif; widths of text are estimated (7 px a character), not measured.
 */

/** Text for an SVG text node or attribute value. */
export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** A coordinate: one decimal, never "-0.0". */
function c(n: number): string {
  const s = n.toFixed(1);
  return s === '-0.0' ? '0.0' : s;
}

/** Bytes in binary units: 256 B, 4 KiB, 1.5 MiB, 1 GiB. */
export function formatBytes(b: number): string {
  const units: Array<[number, string]> = [[2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB']];
  for (const [size, unit] of units) {
    if (b >= size) {
      const v = b / size;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
    }
  }
  return `${b} B`;
}

/**
 * A log2 axis over [lo, hi]: the powers of two around the data, every one when that makes at most `maxTicks`,
 * else every 2nd, 3rd, ... from the lowest (the axis then extends to the next tick above the data).
 */
export function log2Ticks(lo: number, hi: number, maxTicks = 12): { ticks: number[]; min: number; max: number } {
  let e0 = Math.floor(Math.log2(lo));
  let e1 = Math.ceil(Math.log2(hi));
  if (e1 === e0) {
    e0 -= 1;
    e1 += 1;
  }
  let stride = 1;
  while ((e1 - e0) / stride + 1 > maxTicks) stride++;
  e1 = e0 + stride * Math.ceil((e1 - e0) / stride);
  const ticks: number[] = [];
  for (let e = e0; e <= e1; e += stride) ticks.push(2 ** e);
  return { ticks, min: 2 ** e0, max: 2 ** e1 };
}

/** Decimals that print `step` exactly (0.25: 2, 0.5: 1, 100: 0). */
function decimalsOf(step: number): number {
  for (let d = 0; d < 10; d++) if (Math.abs(Math.round(step * 10 ** d) - step * 10 ** d) < 1e-9) return d;
  return 10;
}

/**
 * A linear axis from 0 to a round top above `hi`: the smallest step of 1, 2, 2.5 or 5 times a power of ten that
 * needs at most `maxSteps` steps; labels all with the step's decimals.
 */
export function linearTicks(hi: number, maxSteps = 6): { ticks: number[]; labels: string[]; max: number } {
  if (!(hi > 0)) return { ticks: [0, 1], labels: ['0', '1'], max: 1 };
  let mag = 10 ** Math.floor(Math.log10(hi / maxSteps));
  let step = mag;
  for (;;) {
    const m = [1, 2, 2.5, 5].find((k) => Math.ceil(hi / (k * mag) - 1e-9) <= maxSteps);
    if (m !== undefined) {
      step = m * mag;
      break;
    }
    mag *= 10;
  }
  const d = decimalsOf(step);
  const n = Math.ceil(hi / step - 1e-9);
  const ticks = Array.from({ length: n + 1 }, (_, i) => Number((i * step).toFixed(d)));
  return { ticks, labels: ticks.map((t) => t.toFixed(d)), max: ticks[n]! };
}

const PALETTE = ['#1f77b4', '#d95f02', '#7570b3', '#1b9e77', '#e7298a'];
type Marker = 'circle' | 'square' | 'triangle' | 'diamond';
const MARKERS: Marker[] = ['circle', 'square', 'triangle', 'diamond'];

/** A marker at (x, y); `attr` names it (data-series="i" on the plot, class="legend-marker" in the legend); `tip`: its tooltip. */
function marker(kind: Marker, x: number, y: number, color: string, attr: string, tip?: string): string {
  const t = tip === undefined ? '' : `<title>${escapeXml(tip)}</title>`;
  const close = tip === undefined ? '/>' : `>${t}</${kind === 'circle' ? 'circle' : kind === 'square' ? 'rect' : 'polygon'}>`;
  const r = 4;
  switch (kind) {
    case 'circle':
      return `<circle ${attr} cx="${c(x)}" cy="${c(y)}" r="${c(r)}" fill="${color}"${close}`;
    case 'square':
      return `<rect ${attr} x="${c(x - r)}" y="${c(y - r)}" width="${c(2 * r)}" height="${c(2 * r)}" fill="${color}"${close}`;
    case 'triangle':
      return `<polygon ${attr} points="${c(x)},${c(y - r - 1)} ${c(x + r + 1)},${c(y + r)} ${c(x - r - 1)},${c(y + r)}" fill="${color}"${close}`;
    case 'diamond':
      return `<polygon ${attr} points="${c(x)},${c(y - r - 1)} ${c(x + r + 1)},${c(y)} ${c(x)},${c(y + r + 1)} ${c(x - r - 1)},${c(y)}" fill="${color}"${close}`;
  }
}

const STYLE = '<style>text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:12px;fill:#222}' +
  '.title{font-size:15px;font-weight:bold}.subtitle,.footnote,.bar-note{fill:#555}.footnote{font-size:10px}' +
  '.axis-label{font-size:13px}.legend-label{font-size:12px}</style>';

/** The opening of a chart: the svg element, style, white background, title, subtitle. */
function head(width: number, height: number, title: string, subtitle?: string): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${c(width)}" height="${c(height)}" viewBox="0 0 ${width} ${height}" role="img">`,
    `<title>${escapeXml(title)}</title>`,
    STYLE,
    `<rect x="0.0" y="0.0" width="${c(width)}" height="${c(height)}" fill="#ffffff"/>`,
    `<text class="title" x="${c(width / 2)}" y="24.0" text-anchor="middle">${escapeXml(title)}</text>`,
    ...(subtitle ? [`<text class="subtitle" x="${c(width / 2)}" y="43.0" text-anchor="middle">${escapeXml(subtitle)}</text>`] : []),
  ];
}

const foot = (width: number, height: number, footnote?: string) =>
  footnote ? [`<text class="footnote" x="${c(width - 8)}" y="${c(height - 6)}" text-anchor="end">${escapeXml(footnote)}</text>`] : [];

export interface LineSeries {
  /** Short name: the legend's first word and the tooltips'. */
  name: string;
  /** Said after the name in the legend. */
  detail?: string;
  points: Array<{ x: number; y: number }>;
  /** Why there are no points; the legend says it in place of the detail ("no data" when not given). */
  missing?: string;
}

export interface LineChartSpec {
  title: string;
  subtitle?: string;
  /** Small text at the bottom right: where the numbers come from. */
  footnote?: string;
  xLabel: string;
  yLabel: string;
  /** log2 (default): powers of two at equal distances; linear: from 0. */
  xScale?: 'log2' | 'linear';
  xTickLabel?: (x: number) => string;
  /** Appended to y values in tooltips, e.g. " GB/s". */
  yUnit?: string;
  series: LineSeries[];
  width?: number;
  /** Of the plot area (default 300); the chart adds title, axes, legend and footnote around it. */
  height?: number;
}

/**
 * A line chart: one line with markers per series (colour and marker shape by position, so a series keeps its look
 * whether or not the ones before it have points), a legend under the plot, grid lines at the ticks. A series
 * without points is only in the legend, with why.
 */
export function lineChart(spec: LineChartSpec): string {
  const W = spec.width ?? 760;
  // The plot, then under it the tick labels, the axis label, the legend (a line per series), the footnote.
  const plotH = spec.height ?? 300;
  const left = 72;
  const right = 28;
  const top = spec.subtitle ? 62 : 48;
  const X0 = left;
  const X1 = W - right;
  const Y1 = top;
  const Y0 = top + plotH;
  const legendY = Y0 + 66;
  const H = legendY + spec.series.length * 20 + (spec.footnote ? 16 : 0);
  const log = (spec.xScale ?? 'log2') === 'log2';
  // What can be drawn: finite points, and on a log axis only sizes above 0.
  const drawable = (s: LineSeries) => s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y) && (!log || p.x > 0));
  const series = spec.series.map((s) => ({ ...s, points: drawable(s) }));
  const pts = series.flatMap((s) => s.points);
  const xs = pts.map((p) => p.x);
  const xTickLabel = spec.xTickLabel ?? ((x: number) => String(x));
  let xTicks: number[];
  let xPos: (x: number) => number;
  if (log) {
    const ax = log2Ticks(xs.length ? Math.min(...xs) : 1, xs.length ? Math.max(...xs) : 2);
    xTicks = ax.ticks;
    const [l0, l1] = [Math.log2(ax.min), Math.log2(ax.max)];
    xPos = (x) => X0 + ((Math.log2(x) - l0) / (l1 - l0)) * (X1 - X0);
  } else {
    const ax = linearTicks(xs.length ? Math.max(...xs) : 1);
    xTicks = ax.ticks;
    xPos = (x) => X0 + (x / ax.max) * (X1 - X0);
  }
  const ya = linearTicks(pts.length ? Math.max(...pts.map((p) => p.y)) : 0);
  const yPos = (y: number) => Y0 - (y / ya.max) * (Y0 - Y1);

  const out = head(W, H, spec.title, spec.subtitle);
  // Grid and ticks.
  ya.ticks.forEach((t, i) => {
    const y = yPos(t);
    out.push(`<line class="ytick" x1="${c(X0)}" y1="${c(y)}" x2="${c(X1)}" y2="${c(y)}" stroke="${i === 0 ? '#222222' : '#e3e3e3'}" stroke-width="1"/>`);
    out.push(`<text class="ytick-label" x="${c(X0 - 8)}" y="${c(y + 4)}" text-anchor="end">${escapeXml(ya.labels[i]!)}</text>`);
  });
  for (const t of xTicks) {
    const x = xPos(t);
    out.push(`<line class="xtick" x1="${c(x)}" y1="${c(Y1)}" x2="${c(x)}" y2="${c(Y0 + 5)}" stroke="#e3e3e3" stroke-width="1"/>`);
    out.push(`<text class="xtick-label" x="${c(x)}" y="${c(Y0 + 20)}" text-anchor="middle">${escapeXml(xTickLabel(t))}</text>`);
  }
  out.push(`<line x1="${c(X0)}" y1="${c(Y1)}" x2="${c(X0)}" y2="${c(Y0)}" stroke="#222222" stroke-width="1"/>`);
  out.push(`<text class="axis-label" x="${c((X0 + X1) / 2)}" y="${c(Y0 + 42)}" text-anchor="middle">${escapeXml(spec.xLabel)}</text>`);
  out.push(`<text class="axis-label" x="${c(18)}" y="${c((Y0 + Y1) / 2)}" text-anchor="middle" transform="rotate(-90 ${c(18)} ${c((Y0 + Y1) / 2)})">${escapeXml(spec.yLabel)}</text>`);
  // Series: the line, then its markers on top.
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const color = PALETTE[i % PALETTE.length]!;
    const kind = MARKERS[i % MARKERS.length]!;
    const sorted = [...s.points].sort((a, b) => a.x - b.x);
    out.push(`<polyline data-series="${i}" points="${sorted.map((p) => `${c(xPos(p.x))},${c(yPos(p.y))}`).join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const p of sorted) out.push(marker(kind, xPos(p.x), yPos(p.y), color, `data-series="${i}"`, `${s.name}, ${xTickLabel(p.x)}: ${p.y}${spec.yUnit ?? ''}`));
  });
  // Legend: under the axis label, a line per series (so it never covers the data).
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const y = legendY + i * 20;
    const has = s.points.length > 0;
    const label = has ? (s.detail ? `${s.name}: ${s.detail}` : s.name) : `${s.name}: ${s.missing ?? 'no data'}`;
    if (has) {
      out.push(`<line x1="${c(X0)}" y1="${c(y)}" x2="${c(X0 + 24)}" y2="${c(y)}" stroke="${color}" stroke-width="2"/>`);
      out.push(marker(MARKERS[i % MARKERS.length]!, X0 + 12, y, color, 'class="legend-marker"'));
    } else {
      out.push(`<line x1="${c(X0)}" y1="${c(y)}" x2="${c(X0 + 24)}" y2="${c(y)}" stroke="#999999" stroke-width="2" stroke-dasharray="3 3"/>`);
    }
    out.push(`<text class="legend-label" x="${c(X0 + 32)}" y="${c(y + 4)}"${has ? '' : ' fill="#777777"'}>${escapeXml(label)}</text>`);
  });
  out.push(...foot(W, H, spec.footnote), '</svg>');
  return out.join('\n') + '\n';
}

export interface Bar {
  label: string;
  value: number;
  /** Said in grey after the value, e.g. "0.324 of the recipe". */
  note?: string;
  color?: string;
}

export interface BarChartSpec {
  title: string;
  subtitle?: string;
  footnote?: string;
  /** The value axis' label, e.g. "seconds". */
  valueLabel: string;
  /** Appended to each bar's value, e.g. " s". */
  unit?: string;
  /** Decimals of the values at the bars' ends (default: as given). */
  valueDecimals?: number;
  bars: Bar[];
  width?: number;
}

/**
 * Horizontal bars from a zero axis, one a row, labelled on the left, with the value (and note) past each bar's end;
 * the plot is made narrow enough for every value and note to fit.
 */
export function barChart(spec: BarChartSpec): string {
  const W = spec.width ?? 760;
  const top = spec.subtitle ? 62 : 48;
  const barH = 26;
  const gap = 14;
  const X0 = 16 + Math.max(...spec.bars.map((b) => b.label.length), 4) * 7;
  const n = spec.bars.length;
  const Y1 = top + 4;
  const Y0 = Y1 + n * (barH + gap);
  const H = Y0 + (spec.footnote ? 66 : 58);
  const ax = linearTicks(Math.max(0, ...spec.bars.map((b) => b.value)));
  const valueText = (b: Bar) => `${spec.valueDecimals === undefined ? String(b.value) : b.value.toFixed(spec.valueDecimals)}${spec.unit ?? ''}`;
  // Plot width P: the axis' top 24 px from the right edge at most, and every bar's value (7 px a character) past
  // its end within 12 px of it. A note goes after the value where it fits, else inside the bar where it fits.
  const CH = 7;
  let P = W - 24 - X0;
  for (const b of spec.bars) if (b.value > 0) P = Math.min(P, (W - 12 - X0 - 6 - valueText(b).length * CH) / (b.value / ax.max));
  const X1 = X0 + P;
  const xPos = (v: number) => X0 + (v / ax.max) * P;
  const out = head(W, H, spec.title, spec.subtitle);
  ax.ticks.forEach((t, i) => {
    const x = xPos(t);
    out.push(`<line class="xtick" x1="${c(x)}" y1="${c(Y1)}" x2="${c(x)}" y2="${c(Y0 + 5)}" stroke="${i === 0 ? '#222222' : '#e3e3e3'}" stroke-width="1"/>`);
    out.push(`<text class="xtick-label" x="${c(x)}" y="${c(Y0 + 20)}" text-anchor="middle">${escapeXml(ax.labels[i]!)}</text>`);
  });
  out.push(`<line x1="${c(X0)}" y1="${c(Y0)}" x2="${c(X1)}" y2="${c(Y0)}" stroke="#222222" stroke-width="1"/>`);
  out.push(`<text class="axis-label" x="${c((X0 + X1) / 2)}" y="${c(Y0 + 42)}" text-anchor="middle">${escapeXml(spec.valueLabel)}</text>`);
  spec.bars.forEach((b, i) => {
    const y = Y1 + gap / 2 + i * (barH + gap);
    const value = valueText(b);
    const ty = c(y + barH / 2 + 4);
    out.push(`<text class="bar-label" x="${c(X0 - 8)}" y="${ty}" text-anchor="end">${escapeXml(b.label)}</text>`);
    out.push(`<rect class="bar" x="${c(X0)}" y="${c(y)}" width="${c(xPos(b.value) - X0)}" height="${c(barH)}" fill="${b.color ?? PALETTE[0]}"><title>${escapeXml(`${b.label}: ${value}${b.note ? ` (${b.note})` : ''}`)}</title></rect>`);
    const end = xPos(b.value);
    const outside = b.note !== undefined && end + 6 + (value.length + 1) * CH + 8 + b.note.length * CH <= W - 12;
    const inside = b.note !== undefined && !outside && b.note.length * CH + 12 <= end - X0;
    const note = b.note && !inside ? `<tspan class="bar-note" dx="8">${escapeXml(b.note)}</tspan>` : '';
    out.push(`<text class="bar-value" x="${c(end + 6)}" y="${ty}">${escapeXml(value)}${note}</text>`);
    if (inside) out.push(`<text class="bar-note" x="${c(end - 6)}" y="${ty}" text-anchor="end" style="fill:#ffffff">${escapeXml(b.note!)}</text>`);
  });
  out.push(...foot(W, H, spec.footnote), '</svg>');
  return out.join('\n') + '\n';
}
