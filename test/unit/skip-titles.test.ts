// Issue 37: no silent skip. A test that may be skipped says so in its title, with the reason, on the runs that skip
// it: its title goes through skipTitle or needsLibfabric, or carries "[skipped: ...]" itself (directly or through a
// constant of its file). A bare it.skip / describe.skip (skipped everywhere, for no stated reason) is refused.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { skipTitle } from '../helpers/skip-title.ts';

const TEST = path.resolve(import.meta.dirname, '..');
const files = (readdirSync(TEST, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => path.join(TEST, f));

/** The lines of TEXT that skip a test without saying why in its title. */
export function silentSkips(text: string): string[] {
  const saying = new Set([...text.matchAll(/^\s*const (\w+)\s*=.*\[skipped/gm)].map((m) => m[1]!));
  const says = (line: string) => /skipTitle\(|needsLibfabric\(|\[skipped/.test(line) ||
    [...line.matchAll(/\$\{(\w+)|\)\((\w+)[,)]/g)].some((m) => saying.has(m[1] ?? m[2]!));
  return text.split('\n').filter((l) => (/\b(it|test|describe)\.(skipIf|runIf)\(/.test(l) && !says(l)) || /\b(it|test|describe)\.skip\(/.test(l));
}

describe('skipped tests say why in their titles', () => {
  it('skipTitle adds the reason only where the test is skipped', () => {
    expect(skipTitle('t', 'no nvcc')).toBe('t [skipped: no nvcc]');
    expect(skipTitle('t', false)).toBe('t');
    expect(skipTitle('t', undefined)).toBe('t');
  });

  it('the check finds a skip without a reason, and accepts the ways this repository gives one', () => {
    expect(silentSkips("  it.skipIf(!NVCC)('compiles', () => {")).toHaveLength(1);
    expect(silentSkips("describe.skip('later', () => {")).toHaveLength(1);
    expect(silentSkips("  it.skipIf(!NVCC)(skipTitle('compiles', !NVCC && 'no nvcc'), () => {")).toEqual([]);
    expect(silentSkips("describe.skipIf(!!X)(needsLibfabric('builds'), () => {")).toEqual([]);
    expect(silentSkips("const title = ok ? 't' : 't [skipped: why]';\ndescribe.skipIf(!ok)(title, () => {")).toEqual([]);
    expect(silentSkips("const note = ok ? '' : ' [skipped: why]';\n  it.skipIf(!ok)(`t${note}`, () => {")).toEqual([]);
  });

  it('no test file of this repository skips silently', () => {
    const found = files.filter((f) => !f.endsWith('skip-titles.test.ts'))
      .flatMap((f) => silentSkips(readFileSync(f, 'utf8')).map((l) => `${path.relative(TEST, f)}: ${l.trim().slice(0, 120)}`));
    expect(found).toEqual([]);
  });
});
