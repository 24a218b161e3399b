// Mutation testing (issue 37), one area per run: MUTATE_AREA names it (scripts/mutate-areas.mjs lists them).
// `npm run mutate` runs every area through scripts/mutate.mjs and prints each one's score; it is not part of
// `npm test` or .ci/run (minutes per area).
import { AREAS } from './scripts/mutate-areas.mjs';

const name = process.env.MUTATE_AREA ?? 'engine';
const area = AREAS[name];
if (!area) throw new Error(`MUTATE_AREA=${name} is not an area; the areas are ${Object.keys(AREAS).join(', ')}`);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  // related: false: the area's test files are named below, vitest need not search the module graph for them.
  vitest: { configFile: 'vitest.config.ts', related: false },
  mutate: area.mutate,
  testFiles: area.tests,
  coverageAnalysis: 'perTest',
  // A static mutant (one that runs when a module loads: a top-level constant) needs every test of the area rerun
  // in a fresh process; they are left out (counted as ignored, printed apart) to keep an area to minutes.
  ignoreStatic: true,
  // The machine this runs on has 2 cores shared with CI and other work.
  concurrency: 1,
  // A rerun tests only the mutants whose code or covering tests changed since the last run of this area.
  incremental: true,
  incrementalFile: `reports/mutation/${name}.incremental.json`,
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  htmlReporter: { fileName: `reports/mutation/${name}.html` },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  // A mutant that makes a loop endless is a timeout, which counts as killed. Stryker waits the test's own time
  // (from the dry run) times 1.5 plus this: room for a loaded machine, not so much that each timeout costs a minute.
  timeoutMS: 10_000,
  thresholds: { high: 90, low: 80, break: null },
};
