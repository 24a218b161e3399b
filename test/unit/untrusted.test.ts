import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FilesystemError } from '../../src/core/errors.ts';
import { entryKind, isConfinedPath, isOwnDir, isPlainName, readSmallFile, refuseOddOwnFiles } from '../../src/core/untrusted.ts';
import { skipTitle } from '../helpers/skip-title.ts';

/**
 * The checks on files read back from folders others can write (src/core/untrusted.ts), called directly: the CLI
 * tests that reach them run in child processes, where a mutation test cannot see them (issue 37).
 */
/** A block device node in /dev, if this host shows one (containers often show none). */
const blockDevice = readdirSync('/dev').find((n) => {
  try {
    return lstatSync(path.join('/dev', n)).isBlockDevice();
  } catch {
    return false;
  }
});

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'untrusted-'));

describe('untrusted paths and files', () => {
  it('a plain name is one non-empty component of at most 255 bytes, without separator, NUL, . or ..', () => {
    for (const ok of ['a', 'nvshmem', '..a', 'a.', 'x'.repeat(255), 'é'.repeat(127)]) expect(isPlainName(ok), ok).toBe(true);
    for (const bad of ['', '.', '..', 'a/b', '/a', 'a\\b', 'a\0b', 'x'.repeat(256), 'é'.repeat(128), 3, undefined, null]) {
      expect(isPlainName(bad), String(bad)).toBe(false);
    }
  });

  it('a confined path is plain names joined by /, no more than the depth allowed', () => {
    expect(isConfinedPath('a', 1)).toBe(true);
    expect(isConfinedPath('a/b', 2)).toBe(true);
    expect(isConfinedPath('a/b', 1)).toBe(false);
    expect(isConfinedPath('a/b/c', 2)).toBe(false);
    for (const bad of ['/a', 'a//b', 'a/../b', '../a', 'a/', '', 7]) expect(isConfinedPath(bad, 5), String(bad)).toBe(false);
  });

  it('entryKind tells missing, file, dir, link and other, and a link anywhere on the way is a link', () => {
    const d = tmp();
    mkdirSync(path.join(d, 'sub/deep'), { recursive: true });
    writeFileSync(path.join(d, 'sub/f'), 'x');
    symlinkSync(path.join(d, 'sub'), path.join(d, 'via'));
    execFileSync('mkfifo', [path.join(d, 'fifo')]);
    expect(entryKind(d, 'nothing')).toBe('missing');
    expect(entryKind(d, 'sub/nothing/more')).toBe('missing');
    // Below a file: not a directory on the way, so nothing is there.
    expect(entryKind(d, 'sub/f/more')).toBe('missing');
    expect(entryKind(d, 'sub/f')).toBe('file');
    expect(entryKind(d, 'sub')).toBe('dir');
    expect(entryKind(d, 'sub/deep')).toBe('dir');
    expect(entryKind(d, 'via')).toBe('symlink');
    expect(entryKind(d, 'via/f')).toBe('symlink');
    expect(entryKind(d, 'fifo')).toBe('other');
    // Any other lookup error is raised, not taken for "missing".
    expect(() => entryKind(d, 'x'.repeat(300))).toThrow(/ENAMETOOLONG/);
  });

  it('readSmallFile closes what it opens, and names a socket as what it is', async () => {
    const d = tmp();
    const f = path.join(d, 'f');
    writeFileSync(f, 'x');
    const open = () => readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 20; i++) readSmallFile(f);
    expect(open()).toBe(before);
    const sock = path.join(d, 'sock');
    const server = net.createServer().listen(sock);
    await new Promise((r) => server.once('listening', r));
    try {
      // A socket cannot be opened at all (ENXIO); refuseOddOwnFiles names it from lstat.
      expect(() => refuseOddOwnFiles(d, ['sock'], 'write into d')).toThrow(`${sock} is a socket, not the file`);
    } finally {
      server.close();
    }
  });

  it('readSmallFile reads a small file whole, and refuses a link, a directory, a FIFO (without waiting) and a file over the bound', () => {
    const d = tmp();
    const f = path.join(d, 'state.json');
    writeFileSync(f, '{"a":1}\n');
    const got = readSmallFile(f);
    expect(got.kind).toBe('ok');
    if (got.kind !== 'ok') return;
    expect(got.text).toBe('{"a":1}\n');
    expect(got.bytes.length).toBe(8);
    expect(got.mtimeMs).toBeGreaterThan(0);
    // The bound is inclusive: a file of exactly max bytes is read.
    expect(readSmallFile(f, 8).kind).toBe('ok');
    expect(readSmallFile(f, 7)).toEqual({ kind: 'bad', why: '8 bytes, more than the 7 such a file can be', what: 'too-large' });
    expect(readSmallFile(path.join(d, 'none'))).toEqual({ kind: 'missing' });
    const link = path.join(d, 'link');
    symlinkSync(f, link);
    expect(readSmallFile(link)).toEqual({ kind: 'bad', why: 'a symbolic link', what: 'link' });
    expect(readSmallFile(link, 100, { follow: true }).kind).toBe('ok');
    expect(readSmallFile(d)).toEqual({ kind: 'bad', why: 'a directory', what: 'dir' });
    const fifo = path.join(d, 'fifo');
    execFileSync('mkfifo', [fifo]);
    expect(readSmallFile(fifo)).toEqual({ kind: 'bad', why: 'not a regular file (a FIFO)', what: 'special' });
    expect(readSmallFile('/dev/null')).toEqual({ kind: 'bad', why: 'not a regular file (a character device)', what: 'special' });
    // Other errors are the caller's to word.
    expect(() => readSmallFile(path.join(f, 'below-a-file'))).toThrow(/ENOTDIR/);
  });

  it('refuseOddOwnFiles passes regular and missing files and refuses a link, directory or FIFO, naming it and its target', () => {
    const d = tmp();
    writeFileSync(path.join(d, 'state.json'), '{}');
    expect(() => refuseOddOwnFiles(d, ['state.json', 'missing.json'], 'write into d')).not.toThrow();
    // Below a file: nothing there to refuse.
    expect(() => refuseOddOwnFiles(path.join(d, 'state.json'), ['x'], 'write')).not.toThrow();
    expect(() => refuseOddOwnFiles(d, ['x'.repeat(300)], 'write')).toThrow(/ENAMETOOLONG/);
    symlinkSync('/etc/passwd', path.join(d, 'lock'));
    mkdirSync(path.join(d, 'marker'));
    execFileSync('mkfifo', [path.join(d, 'fifo')]);
    const refusal = (n: string) => {
      try {
        refuseOddOwnFiles(d, ['state.json', n], 'write into d');
      } catch (e) {
        return e as FilesystemError;
      }
      throw new Error(`${n} was not refused`);
    };
    const link = refusal('lock');
    expect(link).toBeInstanceOf(FilesystemError);
    expect(link.message).toBe(`${path.join(d, 'lock')} is a symbolic link (to /etc/passwd), not the file nvshmem-efa keeps there; refusing to write into d (nothing was changed, lock was not touched)`);
    expect(link.fix).toContain(`move ${path.join(d, 'lock')} away`);
    expect(link.code).toBe('EINVAL');
    expect(refusal('marker').message).toContain('marker is a directory,');
    expect(refusal('marker').code).toBe('EISDIR');
    expect(refusal('fifo').message).toContain('fifo is a FIFO,');
  });

  it.skipIf(!blockDevice)(skipTitle('refuseOddOwnFiles names a block device as one', !blockDevice && 'this host shows no block device in /dev'), () => {
    expect(() => refuseOddOwnFiles('/dev', [blockDevice!], 'write into /dev')).toThrow(`/dev/${blockDevice} is a block device, not the file`);
  });

  it('isOwnDir: the root and real directories below it, not a link, a file, a path outside or a missing one', () => {
    const d = tmp();
    mkdirSync(path.join(d, 'a/b'), { recursive: true });
    writeFileSync(path.join(d, 'file'), '');
    symlinkSync(path.join(d, 'a'), path.join(d, 'link'));
    expect(isOwnDir(d, d)).toBe(true);
    expect(isOwnDir(d, path.join(d, 'a'))).toBe(true);
    expect(isOwnDir(d, path.join(d, 'a/b'))).toBe(true);
    expect(isOwnDir(d, path.join(d, 'link'))).toBe(false);
    expect(isOwnDir(d, path.join(d, 'link/b'))).toBe(false);
    expect(isOwnDir(d, path.join(d, 'file'))).toBe(false);
    expect(isOwnDir(d, path.join(d, 'none'))).toBe(false);
    expect(isOwnDir(path.join(d, 'a'), d)).toBe(false);
    expect(isOwnDir(path.join(d, 'a'), path.join(d, 'a-sibling'))).toBe(false);
    // An existing sibling directory: outside by name, whatever is there.
    mkdirSync(path.join(d, 'other'));
    expect(isOwnDir(path.join(d, 'a'), path.join(d, 'other'))).toBe(false);
    // The root reached through a link: below it is still inside (real paths compared under the root's real path).
    expect(isOwnDir(path.join(d, 'link'), path.join(d, 'link/b'))).toBe(true);
  });
});
