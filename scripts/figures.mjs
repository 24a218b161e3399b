#!/usr/bin/env node
// The README's figures, generated from docs/benchmarks.md's "Figures and goals" table (issue 38 item 5): one fact in
// one place. The table sits between <!-- figures:begin --> and <!-- figures:end --> there; the README's list between
// the same markers is rewritten from it.
//   node scripts/figures.mjs           rewrite README.md's block
//   node scripts/figures.mjs --check   exit 1 when README.md's block is not what the table gives
// ROOT (default: this checkout) lets the test run it on a copy.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BEGIN = '<!-- figures:begin -->';
const END = '<!-- figures:end -->';

/** The text between the markers, and where it sits; a file without both markers is an error that names it. */
export function block(text, file) {
  const i = text.indexOf(BEGIN);
  const j = text.indexOf(END);
  if (i < 0 || j < i) throw new Error(`${file} has no ${BEGIN} ... ${END} block`);
  return { start: i + BEGIN.length, end: j, inner: text.slice(i + BEGIN.length, j) };
}

/** The table's rows as objects keyed by its header; a row with another cell count is refused. */
export function parseTable(inner) {
  const lines = inner.split('\n').filter((l) => l.startsWith('|'));
  const cells = (l) => l.slice(1, -1).split(' | ').map((c) => c.trim());
  const [head, , ...rows] = lines;
  if (!head) throw new Error('the figures table has no header');
  const keys = cells(head);
  return rows.map((r) => {
    const c = cells(r);
    if (c.length !== keys.length) throw new Error(`figures row has ${c.length} cells, the header ${keys.length}: ${r}`);
    return Object.fromEntries(keys.map((k, n) => [k, c[n]]));
  });
}

/** The README's list: each figure, measured against its goal, linked to its results (links made relative to the root). */
export function render(rows) {
  const fromRoot = (md) => md.replaceAll('](../', '](');
  const out = [''];
  for (const r of rows) {
    const verdict = r.met === 'yes' ? 'met' : 'not met';
    out.push(`  - ${r.figure}: ${r.measured}; goal ${r.goal}, ${verdict} (${fromRoot(r.results)})`);
  }
  out.push('  - every figure with its command: [docs/benchmarks.md](docs/benchmarks.md#figures-and-goals)');
  return `${out.join('\n')}\n`;
}

/** README.md's text with its block regenerated from docs/benchmarks.md. */
export function regenerate(root) {
  const bench = readFileSync(path.join(root, 'docs/benchmarks.md'), 'utf8');
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const rows = parseTable(block(bench, 'docs/benchmarks.md').inner);
  const b = block(readme, 'README.md');
  return { readme, next: readme.slice(0, b.start) + render(rows) + readme.slice(b.end) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = process.env.ROOT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const { readme, next } = regenerate(root);
  if (process.argv.includes('--check')) {
    if (readme !== next) {
      console.error('README.md\'s figures are not those of docs/benchmarks.md\'s table: run node scripts/figures.mjs');
      process.exit(1);
    }
  } else if (readme !== next) writeFileSync(path.join(root, 'README.md'), next);
}
