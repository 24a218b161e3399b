// The README's figures come from docs/benchmarks.md's table (issue 38 item 5): one fact in one place.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without types
import { block, parseTable, regenerate, render } from '../../scripts/figures.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCRIPT = path.join(ROOT, 'scripts/figures.mjs');
let tmp = '';
afterEach(() => tmp && rmSync(tmp, { recursive: true, force: true }));

/** A copy of the two files the script reads, in a root of its own. */
function copyRoot(): string {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'figures-'));
  mkdirSync(path.join(tmp, 'docs'));
  cpSync(path.join(ROOT, 'README.md'), path.join(tmp, 'README.md'));
  cpSync(path.join(ROOT, 'docs/benchmarks.md'), path.join(tmp, 'docs/benchmarks.md'));
  return tmp;
}
const check = (root: string) => {
  try {
    execFileSync(process.execPath, [SCRIPT, '--check'], { env: { ...process.env, ROOT: root }, stdio: 'pipe' });
    return 0;
  } catch (e) {
    return (e as { status: number }).status;
  }
};

describe('README figures generated from docs/benchmarks.md', () => {
  it("the README's block is what the table gives (run node scripts/figures.mjs after editing the table)", () => {
    const { readme, next } = regenerate(ROOT);
    expect(next).toBe(readme);
  });

  it('every table row has a measured value, a goal, a verdict, a command and a results link that exists', () => {
    const rows = parseTable(block(readFileSync(path.join(ROOT, 'docs/benchmarks.md'), 'utf8'), 'docs/benchmarks.md').inner);
    expect(rows.length).toBeGreaterThanOrEqual(8);
    for (const r of rows) {
      expect(r.measured).not.toBe('');
      expect(r.goal).toMatch(/^<= /);
      expect(['yes', 'no']).toContain(r.met);
      expect(r.command).toMatch(/`.+`/);
      for (const m of r.results.matchAll(/\]\(\.\.\/([^)]+)\)/g)) expect(() => readFileSync(path.join(ROOT, m[1]!))).not.toThrow();
    }
  });

  it('--check fails on a table edited without regenerating, and passes after the script rewrote the README', () => {
    const root = copyRoot();
    expect(check(root)).toBe(0);
    const bench = path.join(root, 'docs/benchmarks.md');
    writeFileSync(bench, readFileSync(bench, 'utf8').replace(/(\| GDA post through an owned queue \| )[^|]+\|/, '$11.09x (1x H200, median of 3) |'));
    expect(check(root)).toBe(1);
    execFileSync(process.execPath, [SCRIPT], { env: { ...process.env, ROOT: root } });
    expect(check(root)).toBe(0);
    expect(readFileSync(path.join(root, 'README.md'), 'utf8')).toContain('through an owned queue: 1.09x');
  });

  it('renders a verdict from the met column and makes results links relative to the root', () => {
    const out = render([{ figure: 'f', measured: '2 s', goal: '<= 1 s', met: 'no', command: '`x`', results: '[`r.md`](../bench/results/r.md)' }]);
    expect(out).toContain('  - f: 2 s; goal <= 1 s, not met ([`r.md`](bench/results/r.md))');
  });

  it('refuses a row whose cell count is not the header\'s', () => {
    expect(() => parseTable('| a | b |\n|---|---|\n| 1 |\n')).toThrow(/1 cells, the header 2/);
  });
});
