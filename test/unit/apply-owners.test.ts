// Owners given by writeChanges, as root: kept OUT of the engine mutation area (scripts/mutate-areas.mjs) on
// purpose. A mutant of makeOwnedDirs' stop condition (apply.ts, `d === top` made false) climbs past the tree and
// chowns every directory up to / to the test's made-up owner: under Stryker, at 2026-12-02, it left / and /tmp
// owned by 1111:2222 until put back by hand. Run it with vitest only; it is part of `npm test`.
import { chownSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeChanges } from '../../src/patchers/engine/apply.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const tmp = (p: string) => mkdtempSync(path.join(os.tmpdir(), p));
const isRoot = process.geteuid?.() === 0;

describe('writeChanges: owners', () => {
  it.skipIf(!isRoot)(skipTitle('gives created folders and files the owner of the folder they are made in, a replaced file its own owner', !isRoot && 'needs root to give files away'), async () => {
    const d = tmp('owners-');
    chownSync(d, 1234, 4321);
    mkdirSync(path.join(d, 'u'));
    chownSync(path.join(d, 'u'), 1111, 2222);
    writeFileSync(path.join(d, 'mine.txt'), 'm\n');
    chownSync(path.join(d, 'mine.txt'), 3333, 4444);
    await writeChanges(d, [
      { file: 'mine.txt', before: 'm\n', after: 'm2\n' },
      { file: 'x/y/new.txt', before: null, after: 'n\n' },
      { file: 'u/v/w.txt', before: null, after: 'w\n' },
      { file: 'u/top.txt', before: null, after: 't\n' },
    ]);
    const own = (p: string) => { const s = statSync(path.join(d, p)); return [s.uid, s.gid]; };
    expect(own('mine.txt')).toEqual([3333, 4444]);
    for (const p of ['x', 'x/y', 'x/y/new.txt']) expect(own(p), p).toEqual([1234, 4321]);
    for (const p of ['u/v', 'u/v/w.txt', 'u/top.txt']) expect(own(p), p).toEqual([1111, 2222]);
    expect(own('.')).toEqual([1234, 4321]);
  });
});
