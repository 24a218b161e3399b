import { execFileSync } from 'node:child_process';
import { linkSync, lstatSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openForAppend, openFresh, writeDurable, writeFileAtomic, writeFileAtomicSync } from '../../src/core/fs-atomic.ts';

/** Issue 36, class 3: what the tool writes is created fresh, never written through a link put at its name. */
function dir(): { d: string; victim: string } {
  const d = mkdtempSync(path.join(os.tmpdir(), 'fs-atomic-'));
  const victim = path.join(d, 'victim.txt');
  writeFileSync(victim, 'the user\'s file\n');
  return { d, victim };
}

describe('fs-atomic', () => {
  it('writeFileAtomic and writeFileAtomicSync replace a hard link or a symbolic link at the name, and one at their temporary name', async () => {
    const { d, victim } = dir();
    const a = path.join(d, 'state.json');
    linkSync(victim, a);
    // The temporary name is predictable (pid): a link planted there must not be followed either.
    symlinkSync(victim, `${a}.nvshmem-efa-tmp-${process.pid}`);
    await writeFileAtomic(a, 'ours\n');
    const b = path.join(d, 'marker.json');
    symlinkSync(victim, b);
    linkSync(victim, `${b}.nvshmem-efa-tmp-${process.pid}`);
    writeFileAtomicSync(b, 'ours too\n');
    expect(readFileSync(victim, 'utf8')).toBe('the user\'s file\n');
    expect(readFileSync(a, 'utf8')).toBe('ours\n');
    expect(lstatSync(b).isSymbolicLink()).toBe(false);
    expect(statSync(victim).nlink).toBe(1);
  });

  it('writeDurable and openFresh unlink what stands at the name (a link, a FIFO), never its target', async () => {
    const { d, victim } = dir();
    const staged = path.join(d, 'x.cpp.nvshmem-efa-new');
    symlinkSync(victim, staged);
    await writeDurable(staged, 'patched\n');
    const fifo = path.join(d, 'fifo');
    execFileSync('mkfifo', [fifo]);
    await (await openFresh(fifo)).close();
    expect(readFileSync(victim, 'utf8')).toBe('the user\'s file\n');
    expect(readFileSync(staged, 'utf8')).toBe('patched\n');
    expect(statSync(fifo).isFile()).toBe(true);
  });

  it('openForAppend appends to its own plain file, and replaces a hard link, a symbolic link or a FIFO without waiting', async () => {
    const { d, victim } = dir();
    const own = path.join(d, 'own.log');
    await writeFile(own, 'first run\n');
    const linked = path.join(d, 'hard.log');
    linkSync(victim, linked);
    const sym = path.join(d, 'sym.log');
    symlinkSync(victim, sym);
    const fifo = path.join(d, 'fifo.log');
    execFileSync('mkfifo', [fifo]);
    for (const f of [own, linked, sym, fifo]) {
      const fh = await openForAppend(f);
      await fh.writeFile('more\n');
      await fh.close();
    }
    expect(readFileSync(own, 'utf8')).toBe('first run\nmore\n');
    for (const f of [linked, sym, fifo]) expect(readFileSync(f, 'utf8')).toBe('more\n');
    expect(readFileSync(victim, 'utf8')).toBe('the user\'s file\n');
  });
});
