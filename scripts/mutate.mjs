#!/usr/bin/env node
// `npm run mutate [area ...]`: runs Stryker once per area (all of them without arguments) and prints each area's
// score from its JSON report; reports/mutation/<area>.survivors.txt lists the mutants no test caught. Areas and
// their test files: scripts/mutate-areas.mjs. Options starting with '-' go to Stryker (--mutate, --force).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AREAS } from './mutate-areas.mjs';
import { scoreOf, survivorsOf } from './mutate-score.mjs';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const extra = args.filter((a) => a.startsWith('-'));
const names = args.filter((a) => !a.startsWith('-'));
for (const n of names) {
  if (!AREAS[n]) {
    console.error(`error: ${n} is not an area\nfix: name one of ${Object.keys(AREAS).join(', ')}`);
    process.exit(2);
  }
}
const areas = names.length ? names : Object.keys(AREAS);
const stryker = path.join(root, 'node_modules/@stryker-mutator/core/bin/stryker.js');
const rows = [];
let failed = false;
for (const name of areas) {
  console.log(`\n== ${name}: ${AREAS[name].why}`);
  const r = spawnSync(process.execPath, [stryker, 'run', 'stryker.config.mjs', ...extra], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, MUTATE_AREA: name },
  });
  const report = path.join(root, `reports/mutation/${name}.json`);
  if (r.status !== 0 || !existsSync(report)) {
    failed = true;
    rows.push({ name, line: `stryker exited ${r.status ?? r.signal}; no score` });
    continue;
  }
  const json = JSON.parse(readFileSync(report, 'utf8'));
  // The mutants left alive, for review and for docs/mutation.md.
  writeFileSync(path.join(root, `reports/mutation/${name}.survivors.txt`), survivorsOf(json).map((l) => l + '\n').join(''));
  rows.push({ name, line: scoreOf(json).line });
}
console.log('\nmutation score per area (killed + timeout) / (killed + timeout + survived + no coverage):');
for (const { name, line } of rows) console.log(`  ${name.padEnd(12)} ${line}`);
process.exit(failed ? 1 : 0);
