import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';
// @ts-expect-error plain ES module without types (scripts/ is run by node as it is)
import { AREAS } from '../../scripts/mutate-areas.mjs';
// @ts-expect-error plain ES module without types
import { scoreOf, survivorsOf } from '../../scripts/mutate-score.mjs';

/**
 * `npm run mutate` (issue 37) is too slow for every CI run; this checks, in milliseconds, that what it would run
 * exists: every area's source and test files, and a Stryker config that loads for each area.
 */
type Area = { mutate: string[]; tests: string[]; why: string };
const areas = AREAS as Record<string, Area>;

/** The folder part of a glob before its first wildcard, or the path itself. */
/** The config as Stryker loads it, evaluated afresh (a query of its own) under the MUTATE_AREA set now. */
const loadConfig = (tag: string) => import(/* @vite-ignore */ `${pathToFileURL(path.join(ROOT, 'stryker.config.mjs')).href}?area=${tag}`);

const fixedPart = (g: string) => g.split('/').filter((_, i, a) => !a.slice(0, i + 1).some((p) => /[*?{[]/.test(p))).join('/');

describe('npm run mutate', () => {
  it('names the areas of issue 37, each with source that exists and test files that exist', () => {
    expect(Object.keys(areas)).toEqual(['engine', 'reliability', 'specs', 'stamps', 'selftest']);
    for (const [name, a] of Object.entries(areas)) {
      expect(a.mutate.length, name).toBeGreaterThan(0);
      expect(a.tests.length, name).toBeGreaterThan(0);
      for (const m of a.mutate) expect(existsSync(path.join(ROOT, fixedPart(m))), `${name}: ${m}`).toBe(true);
      for (const t of a.tests) expect(statSync(path.join(ROOT, t)).isFile(), `${name}: ${t}`).toBe(true);
      // A test that spawns the CLI cannot kill a mutant (the child runs the original code): none is listed.
      for (const t of a.tests) expect(t, name).not.toMatch(/^test\/integration\//);
    }
  });

  it('loads the Stryker config for every area, one at a time, with its files, incremental and at most 2 runners', async () => {
    const saved = process.env.MUTATE_AREA;
    try {
      for (const [name, a] of Object.entries(areas)) {
        process.env.MUTATE_AREA = name;
        const c = (await loadConfig(name)).default;
        expect(c.mutate).toEqual(a.mutate);
        expect(c.testFiles).toEqual(a.tests);
        expect(c.incremental).toBe(true);
        expect(c.incrementalFile).toBe(`reports/mutation/${name}.incremental.json`);
        expect(c.jsonReporter.fileName).toBe(`reports/mutation/${name}.json`);
        expect(c.concurrency).toBeLessThanOrEqual(2);
        expect(c.testRunner).toBe('vitest');
      }
      process.env.MUTATE_AREA = 'nowhere';
      await expect(loadConfig('nowhere')).rejects.toThrow(/MUTATE_AREA=nowhere is not an area; the areas are engine, /);
    } finally {
      if (saved === undefined) delete process.env.MUTATE_AREA;
      else process.env.MUTATE_AREA = saved;
    }
  });

  it('is a script of its own, in neither npm test nor .ci/run', () => {
    const scripts = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;
    expect(scripts.mutate).toBe('node scripts/mutate.mjs');
    expect(scripts.test).not.toMatch(/stryker|mutate/);
    expect(readFileSync(path.join(ROOT, '.ci/run'), 'utf8')).not.toMatch(/stryker|mutate/);
  });

  it('scores killed and timed-out mutants over those a test could have caught', () => {
    const m = (status: string, n: number) => Array.from({ length: n }, () => ({ status }));
    const r = scoreOf({ files: { a: { mutants: [...m('Killed', 6), ...m('Timeout', 3)] }, b: { mutants: [...m('Survived', 2), ...m('NoCoverage', 1), ...m('Ignored', 5), ...m('CompileError', 4)] } } });
    expect(r.score).toBe(75);
    expect(r.line).toBe('75.0%  killed 6, timeout 3, survived 2, no coverage 1, errors 4, ignored 5');
    expect(Number.isNaN(scoreOf({ files: {} }).score)).toBe(true);
  });

  it('lists the mutants no test caught, by file and position, survivors and uncovered ones', () => {
    const at = (line: number, column: number) => ({ start: { line, column } });
    const report = {
      files: {
        'src/b.ts': { mutants: [{ status: 'Survived', location: at(9, 2), mutatorName: 'ConditionalExpression', replacement: 'true' }] },
        'src/a.ts': {
          mutants: [
            { status: 'Killed', location: at(1, 1), mutatorName: 'StringLiteral', replacement: '""' },
            { status: 'NoCoverage', location: at(7, 3), mutatorName: 'BlockStatement', replacement: '{\n}' },
            { status: 'Survived', location: at(3, 5), mutatorName: 'EqualityOperator', replacement: 'a <= b' },
          ],
        },
      },
    };
    expect(survivorsOf(report)).toEqual([
      'src/a.ts:3:5 EqualityOperator: a <= b',
      'src/a.ts:7:3 [no coverage] BlockStatement: { }',
      'src/b.ts:9:2 ConditionalExpression: true',
    ]);
  });
});
