import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.ts';
import { applyClean, claimWorkDir, MARKER_FILE, planClean } from '../../src/core/work-dir.ts';

const dir = () => mkdtempSync(path.join(os.tmpdir(), 'wd-'));

describe('work-dir ownership (item 1)', () => {
  it('adopts the work dir of an earlier nvshmem-efa (its state.json), and clean then spares the user\'s files there', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'state.json'), JSON.stringify({ version: 1, steps: {} }));
    mkdirSync(path.join(d, 'logs'));
    writeFileSync(path.join(d, 'todo.txt'), 'mine');
    await claimWorkDir(d);
    expect(readdirSync(d)).toContain(MARKER_FILE);
    const plan = (await planClean(d))!;
    expect(plan.keep).toEqual([path.join(d, 'todo.txt')]);
    expect(plan.removeDir).toBe(false);
    await applyClean(d, plan);
    expect(readdirSync(d)).toEqual(['todo.txt']);
  });

  it('refuses a directory holding a state.json that is not ours, like any other non-empty directory', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'state.json'), '{"kind":"someone else"}');
    await expect(claimWorkDir(d)).rejects.toBeInstanceOf(UsageError);
    expect(readdirSync(d)).toEqual(['state.json']);
  });

  it('an empty directory is claimed, but never removed by clean (nvshmem-efa did not make it)', async () => {
    const d = dir();
    await claimWorkDir(d);
    mkdirSync(path.join(d, 'sources'));
    const plan = (await planClean(d))!;
    expect(plan.removeDir).toBe(false);
    await applyClean(d, plan);
    expect(readdirSync(d)).toEqual([]);
  });
});
