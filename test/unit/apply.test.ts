import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { PatchRefusedError } from '../../src/core/errors.ts';
import { writeChanges } from '../../src/patchers/engine/apply.ts';
import type { FileChange } from '../../src/patchers/engine/plan.ts';

/** --in-place must never leave the user's tree half patched: writeChanges is one transaction. */
function tree(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'apply-'));
  writeFileSync(path.join(d, 'a.txt'), 'A\n');
  mkdirSync(path.join(d, 'c'));
  writeFileSync(path.join(d, 'c/keep.txt'), 'keep\n');
  return d;
}
const all = (d: string): string[] => readdirSync(d, { recursive: true, encoding: 'utf8' }).sort();

describe('writeChanges', () => {
  it('rolls back when a file cannot be replaced half way: earlier files restored, new files and folders removed', async () => {
    const d = tree();
    const before = await hashTree(d);
    const entries = all(d);
    const changes: FileChange[] = [
      { file: 'a.txt', before: 'A\n', after: 'A patched\n' },
      { file: 'b/new.txt', before: null, after: 'new\n' },
      // A directory stands where the last file goes: its rename fails (EISDIR) after the others succeeded.
      { file: 'c', before: 'c\n', after: 'c patched\n' },
    ];
    await expect(writeChanges(d, changes)).rejects.toThrow(/EISDIR|illegal operation on a directory|is a directory/i);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
    expect(existsSync(path.join(d, 'b'))).toBe(false);
    expect(all(d)).toEqual(entries);
    expect(await hashTree(d)).toBe(before);
  });

  it('writes nothing once the run is interrupted', async () => {
    const d = tree();
    const entries = all(d);
    const ac = new AbortController();
    ac.abort(new Error('interrupted by SIGINT'));
    await expect(writeChanges(d, [{ file: 'a.txt', before: 'A\n', after: 'X\n' }], ac.signal)).rejects.toThrow('interrupted by SIGINT');
    expect(all(d)).toEqual(entries);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
  });

  it('applies every change and keeps file modes: a replaced file keeps its own (0750 here), a new one gets the default', async () => {
    const d = tree();
    chmodSync(path.join(d, 'a.txt'), 0o750);
    await writeChanges(d, [{ file: 'a.txt', before: 'A\n', after: 'A2\n' }, { file: 'x/y/z.txt', before: null, after: 'z\n' }]);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A2\n');
    expect(statSync(path.join(d, 'a.txt')).mode & 0o7777).toBe(0o750);
    // What a file created here by writeFileSync gets (0666 less this process's umask).
    writeFileSync(path.join(d, 'plain.txt'), '');
    expect(statSync(path.join(d, 'x/y/z.txt')).mode & 0o7777).toBe(statSync(path.join(d, 'plain.txt')).mode & 0o7777);
    expect(readFileSync(path.join(d, 'x/y/z.txt'), 'utf8')).toBe('z\n');
    expect(all(d).some((f) => f.endsWith('.nvshmem-efa-new'))).toBe(false);
  });

  // Issue 36, class 1: bytes are bytes (bytes.ts), whatever the file holds.
  it('writes byte strings byte for byte: Latin-1 and invalid UTF-8 kept, CRLF and no final newline too', async () => {
    const d = tree();
    const raw = Buffer.from([0x2f, 0x2f, 0x20, 0xa9, 0xe9, 0xff, 0x0d, 0x0a, 0x78]);
    writeFileSync(path.join(d, 'l.c'), raw);
    const before = raw.toString('latin1');
    await writeChanges(d, [{ file: 'l.c', before, after: `${before}\r\n/* added */` }]);
    expect(readFileSync(path.join(d, 'l.c'))).toEqual(Buffer.concat([raw, Buffer.from('\r\n/* added */')]));
  });

  it('refuses, writing nothing, a change whose text is not bytes (tool text not encoded) or whose file changed since it was planned', async () => {
    const d = tree();
    const entries = all(d);
    await expect(writeChanges(d, [{ file: 'a.txt', before: 'A\n', after: 'A \u2014 dash\n' }])).rejects.toThrow(/U\+2014 .* is not a byte/);
    const changed = await writeChanges(d, [{ file: 'a.txt', before: 'B\n', after: 'C\n' }]).catch((e: unknown) => e);
    expect(changed).toBeInstanceOf(PatchRefusedError);
    expect((changed as PatchRefusedError).message).toBe(
      `${path.join(d, 'a.txt')} changed while nvshmem-efa was patching it (it is no longer the file the patch was planned against); nothing was changed`,
    );
    expect((changed as PatchRefusedError).fix).toBe('rerun once nothing else is writing to the tree');
    expect((changed as PatchRefusedError).refusals).toEqual([]);
    expect(all(d)).toEqual(entries);
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('A\n');
  });
});
