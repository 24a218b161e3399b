import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli, ENV, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 20, item 6: a SIGKILL (or a crash, or power loss) between the renames of an --in-place patch must not
 * leave the user's tree half patched. The commit writes a journal first; the next run completes or rolls back
 * what it lists, and `doctor` reports it. The kill is real: NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES makes the CLI
 * SIGKILL itself after N renames of its commit (0: after staging, before the first rename).
 */
const KILL = 'NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES';
const JOURNAL = '.nvshmem-efa-journal.json';
const STAGED = '.nvshmem-efa-new';

const files = (d: string, rel = ''): string[] =>
  readdirSync(path.join(d, rel), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? files(d, `${rel}${e.name}/`) : [`${rel}${e.name}`]))
    .sort();
const contents = (d: string) => Object.fromEntries(files(d).map((f) => [f, readFileSync(path.join(d, f), 'utf8')]));

const patch = (src: string, env: NodeJS.ProcessEnv = ENV) => cli(['patch', '--nvshmem-src', src, '--in-place', '--offline', '--work-dir', tmp()], env);

let reference: Record<string, string>;
let pristine: Record<string, string>;
beforeAll(() => {
  const src = materialize('v3.4-like');
  pristine = contents(src);
  expect(patch(src).code).toBe(0);
  reference = contents(src);
});

function killedAfter(n: number): string {
  const src = materialize('v3.4-like');
  const r = patch(src, { ...ENV, [KILL]: String(n) });
  expect(r.code).toBe(137); // 128 + SIGKILL
  return src;
}

describe('an --in-place patch killed (SIGKILL) during its commit (item 6)', () => {
  for (const n of [0, 1, 5]) {
    it(`after ${n} rename(s): a journal and staged files are left; doctor fails the tree; the next run completes it, byte-identical to a clean patch`, () => {
      const src = killedAfter(n);
      const left = files(src);
      expect(left).toContain(JOURNAL);
      expect(left.filter((f) => f.endsWith(STAGED)).length).toBeGreaterThan(0);
      if (n > 0) expect(contents(src)).not.toEqual(pristine);

      const doc = cli(['doctor', '--nvshmem-src', src, '--json']);
      const check = (JSON.parse(doc.stdout) as { checks: { id: string; status: string; evidence: string; fix: string }[] }).checks.find((c) => c.id === 'nvshmem-tree')!;
      expect(check.status).toBe('fail');
      expect(check.evidence).toMatch(new RegExp(`interrupted nvshmem-efa patch .*${n} of \\d+ files replaced`));
      expect(check.fix).toMatch(/rerun nvshmem-efa patch .*completes it/);
      expect(files(src)).toEqual(left); // doctor only looks

      const again = patch(src);
      expect(again.code).toBe(0);
      expect(again.stdout).toMatch(/^ {2}warned {4}patch-journal \(\.nvshmem-efa-journal\.json\): .*completed it/m);
      expect(contents(src)).toEqual(reference);
    });
  }

  it('with a staged file gone (lost before the kill): the next run rolls the commit back, says so, then patches cleanly', () => {
    const src = killedAfter(2);
    const staged = files(src).filter((f) => f.endsWith(STAGED));
    rmSync(path.join(src, staged[0]!));
    const again = patch(src);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^ {2}warned {4}patch-journal \(\.nvshmem-efa-journal\.json\): .*rolled it back/m);
    expect(contents(src)).toEqual(reference);
    expect(existsSync(path.join(src, JOURNAL))).toBe(false);
  });
});
