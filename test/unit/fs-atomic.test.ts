import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, closeSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openForAppend, openForAppendSync, openFresh, openFreshSync, writeDurable, writeFileAtomic, writeFileAtomicSync } from '../../src/core/fs-atomic.ts';
import { skipTitle } from '../helpers/skip-title.ts';

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

/**
 * The rest of fs-atomic in process (issue 37): the synchronous variants (the lock's exit handler, the marker), the
 * modes a replacement keeps, and the errors that are raised rather than papered over.
 */
const root = process.geteuid?.() === 0;
const modeOf = (f: string) => lstatSync(f).mode & 0o7777;
const tmpsIn = (d: string) => readdirSync(d).filter((n) => n.includes('.nvshmem-efa-tmp-'));
const errCode = async (p: Promise<unknown>) => ((await p.then(() => undefined, (e: unknown) => e)) as NodeJS.ErrnoException | undefined)?.code;
const errCodeSync = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
  return undefined;
};

describe('fs-atomic: modes, errors, synchronous variants', () => {
  it('writeFileAtomic makes the missing directories, keeps the mode of the file it replaces, and leaves no temporary file', async () => {
    const { d } = dir();
    const f = path.join(d, 'a', 'b', 'state.json');
    await writeFileAtomic(f, 'one\n');
    expect(readFileSync(f, 'utf8')).toBe('one\n');
    expect(modeOf(f)).toBe(0o666 & ~process.umask());
    chmodSync(f, 0o640);
    await writeFileAtomic(f, new TextEncoder().encode('two\n'));
    expect(readFileSync(f, 'utf8')).toBe('two\n');
    expect(modeOf(f)).toBe(0o640);
    chmodSync(f, 0o4750);
    await writeFileAtomic(f, 'three\n');
    expect(modeOf(f)).toBe(0o4750);
    expect(tmpsIn(path.dirname(f))).toEqual([]);
    // A link at the name has no mode to keep: the new file gets the default one, not its target's.
    const { d: e, victim } = dir();
    chmodSync(victim, 0o600);
    const l = path.join(e, 'l.json');
    symlinkSync(victim, l);
    await writeFileAtomic(l, 'x');
    expect(modeOf(l)).toBe(0o666 & ~process.umask());
  });

  it('writeFileAtomic that cannot rename into place raises, removes its temporary file and leaves what was there', async () => {
    const { d } = dir();
    const f = path.join(d, 'busy');
    mkdirSync(f);
    writeFileSync(path.join(f, 'inside'), 'x');
    expect(await errCode(writeFileAtomic(f, 'data'))).toMatch(/^(EISDIR|ENOTEMPTY|EEXIST)$/);
    expect(tmpsIn(d)).toEqual([]);
    expect(readdirSync(f)).toEqual(['inside']);
  });

  it('writeFileAtomicSync keeps the mode of the file it replaces, and on a failed rename raises and removes its temporary file', () => {
    const { d } = dir();
    const f = path.join(d, 'marker.json');
    writeFileAtomicSync(f, 'one\n');
    expect(readFileSync(f, 'utf8')).toBe('one\n');
    expect(modeOf(f)).toBe(0o666 & ~process.umask());
    chmodSync(f, 0o600);
    writeFileAtomicSync(f, 'two\n');
    expect(readFileSync(f, 'utf8')).toBe('two\n');
    expect(modeOf(f)).toBe(0o600);
    const busy = path.join(d, 'busy');
    mkdirSync(busy);
    writeFileSync(path.join(busy, 'inside'), 'x');
    expect(errCodeSync(() => writeFileAtomicSync(busy, 'data'))).toMatch(/^(EISDIR|ENOTEMPTY|EEXIST)$/);
    expect(tmpsIn(d)).toEqual([]);
    // In a directory that does not exist: raised (ENOENT), nothing made.
    expect(errCodeSync(() => writeFileAtomicSync(path.join(d, 'no', 'x'), 'data'))).toBe('ENOENT');
    expect(readdirSync(d).sort()).toEqual(['busy', 'marker.json', 'victim.txt']);
  });

  it('writeFileAtomicSync over a symbolic link gives the new file the default mode, not the link\'s', () => {
    const { d, victim } = dir();
    chmodSync(victim, 0o600);
    const l = path.join(d, 'l.json');
    symlinkSync(victim, l);
    writeFileAtomicSync(l, 'x');
    expect(lstatSync(l).isFile()).toBe(true);
    expect(modeOf(l)).toBe(0o666 & ~process.umask());
  });

  it('every write closes the files it opens', async () => {
    const { d } = dir();
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    for (let i = 0; i < 10; i++) {
      await writeFileAtomic(path.join(d, 'a'), 'x');
      await writeDurable(path.join(d, 'b'), 'x');
      writeFileAtomicSync(path.join(d, 'c'), 'x');
    }
    expect(fds()).toBeLessThan(before + 5);
  });

  it('writeDurable sets the mode asked for (set-id bits kept, type bits dropped) and an owner, on a fresh file', async () => {
    const { d, victim } = dir();
    const f = path.join(d, 'staged');
    linkSync(victim, f);
    await writeDurable(f, 'x', { mode: 0o100755 });
    expect(readFileSync(f, 'utf8')).toBe('x');
    expect(modeOf(f)).toBe(0o755);
    expect(statSync(victim).nlink).toBe(1);
    await writeDurable(f, 'y', { mode: 0o2750, owner: { uid: process.getuid!(), gid: process.getgid!() } });
    expect(readFileSync(f, 'utf8')).toBe('y');
    expect(modeOf(f)).toBe(0o2750);
    await writeDurable(f, 'z');
    expect(modeOf(f)).toBe(0o666 & ~process.umask());
  });

  it.skipIf(!root)(skipTitle('writeDurable gives the file the owner asked for', !root && 'needs root to give a file away'), async () => {
    const { d } = dir();
    const f = path.join(d, 'owned');
    await writeDurable(f, 'x', { owner: { uid: 4242, gid: 4343 }, mode: 0o644 });
    expect(lstatSync(f)).toMatchObject({ uid: 4242, gid: 4343 });
    expect(modeOf(f)).toBe(0o644);
  });

  it('openFresh and openFreshSync create with the flags and mode given, and raise for a directory at the name', async () => {
    const { d } = dir();
    const a = path.join(d, 'a');
    const fh = await openFresh(a, 0, 0o600);
    await fh.writeFile('a');
    await fh.close();
    expect(modeOf(a)).toBe(0o600);
    const b = path.join(d, 'b');
    writeFileSync(b, 'old');
    const fd = openFreshSync(b, 0, 0o640);
    writeSync(fd, 'new');
    closeSync(fd);
    expect(readFileSync(b, 'utf8')).toBe('new');
    expect(modeOf(b)).toBe(0o640);
    const c = path.join(d, 'c');
    closeSync(openFreshSync(c));
    expect(modeOf(c)).toBe(0o666 & ~process.umask());
    const sub = path.join(d, 'sub');
    mkdirSync(sub);
    expect(await errCode(openFresh(sub))).toMatch(/^(EISDIR|EPERM)$/);
    expect(errCodeSync(() => openFreshSync(sub))).toMatch(/^(EISDIR|EPERM)$/);
    expect(lstatSync(sub).isDirectory()).toBe(true);
    // A missing directory on the way is raised, not retried.
    expect(await errCode(openFresh(path.join(d, 'no', 'x')))).toBe('ENOENT');
    expect(errCodeSync(() => openFreshSync(path.join(d, 'no', 'x')))).toBe('ENOENT');
  });

  it('openForAppendSync appends to its own plain file, replaces a hard link, a symbolic link or a FIFO, and creates a missing one', () => {
    const { d, victim } = dir();
    const own = path.join(d, 'own.log');
    writeFileSync(own, 'first run\n');
    const linked = path.join(d, 'hard.log');
    linkSync(victim, linked);
    const sym = path.join(d, 'sym.log');
    symlinkSync(victim, sym);
    const fifo = path.join(d, 'fifo.log');
    execFileSync('mkfifo', [fifo]);
    const missing = path.join(d, 'new.log');
    for (const f of [own, linked, sym, fifo, missing]) {
      const fd = openForAppendSync(f);
      writeSync(fd, 'more\n');
      closeSync(fd);
    }
    expect(readFileSync(own, 'utf8')).toBe('first run\nmore\n');
    for (const f of [linked, sym, fifo, missing]) expect(readFileSync(f, 'utf8')).toBe('more\n');
    expect(readFileSync(victim, 'utf8')).toBe('the user\'s file\n');
    // Appending: a second open writes after the first.
    const fd = openForAppendSync(missing);
    writeSync(fd, 'again\n');
    closeSync(fd);
    expect(readFileSync(missing, 'utf8')).toBe('more\nagain\n');
  });

  it('openForAppend creates a missing file and keeps appending; a directory at the name is raised', async () => {
    const { d } = dir();
    const f = path.join(d, 'new.log');
    for (const line of ['a\n', 'b\n']) {
      const fh = await openForAppend(f);
      await fh.write(line);
      await fh.close();
    }
    expect(readFileSync(f, 'utf8')).toBe('a\nb\n');
    const sub = path.join(d, 'sub.log');
    mkdirSync(sub);
    expect(await errCode(openForAppend(sub))).toBe('EISDIR');
    expect(errCodeSync(() => openForAppendSync(sub))).toBe('EISDIR');
    expect(lstatSync(sub).isDirectory()).toBe(true);
  });

  it.skipIf(!root)(skipTitle("openForAppend replaces another user's file instead of appending to it", !root && 'needs root to give a file away'), async () => {
    const { d } = dir();
    for (const sync of [false, true]) {
      const f = path.join(d, `theirs-${sync}.log`);
      writeFileSync(f, 'theirs\n');
      chownSync(f, 4242, 4242);
      if (sync) {
        const fd = openForAppendSync(f);
        writeSync(fd, 'ours\n');
        closeSync(fd);
      } else {
        const fh = await openForAppend(f);
        await fh.write('ours\n');
        await fh.close();
      }
      expect(readFileSync(f, 'utf8')).toBe('ours\n');
      expect(lstatSync(f).uid).toBe(0);
    }
  });
});
