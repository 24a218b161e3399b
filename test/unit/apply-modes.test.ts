import { chmodSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeChanges } from '../../src/patchers/engine/apply.ts';

/**
 * A patched file keeps its permission bits, and a rolled-back one gets them back (issue 37: dropping the mode
 * from writeChanges survived every test). Staged files are created 0666 & ~umask, so a file with other bits
 * shows a loss at once.
 */
const mode = (f: string) => statSync(f).mode & 0o7777;

describe('writeChanges and file modes', () => {
  it('a replaced file keeps its mode (executable, group-only, setgid), a new file gets the default mode', async () => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'apply-modes-'));
    const files = { 'run.sh': 0o755, 'private.h': 0o600, 'sgid.txt': 0o2750 };
    for (const [f, m] of Object.entries(files)) {
      writeFileSync(path.join(d, f), `${f}\n`);
      chmodSync(path.join(d, f), m);
    }
    await writeChanges(d, [...Object.keys(files).map((f) => ({ file: f, before: `${f}\n`, after: `${f} patched\n` })), { file: 'sub/new.txt', before: null, after: 'new\n' }]);
    for (const [f, m] of Object.entries(files)) {
      expect(readFileSync(path.join(d, f), 'utf8')).toBe(`${f} patched\n`);
      expect(mode(path.join(d, f)).toString(8), f).toBe(m.toString(8));
    }
    const umask = process.umask();
    expect(mode(path.join(d, 'sub/new.txt')).toString(8)).toBe((0o666 & ~umask).toString(8));
  });

  it('a file rolled back after a failed commit has its mode back', async () => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'apply-modes-'));
    writeFileSync(path.join(d, 'a.sh'), 'A\n');
    chmodSync(path.join(d, 'a.sh'), 0o750);
    // A directory where the second, new file goes: its rename fails (EISDIR) after a.sh was replaced. (A change
    // with a `before` there would fail earlier, reading it, before anything is replaced or rolled back.)
    mkdirSync(path.join(d, 'z'));
    await expect(writeChanges(d, [{ file: 'a.sh', before: 'A\n', after: 'A2\n' }, { file: 'z', before: null, after: 'z2\n' }])).rejects.toThrow(/EISDIR|is a directory/i);
    expect(readFileSync(path.join(d, 'a.sh'), 'utf8')).toBe('A\n');
    expect(mode(path.join(d, 'a.sh')).toString(8)).toBe('750');
  });
});
