import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.ts';
import { readMounts } from '../../src/core/mounts.ts';
import { skipTitle } from '../helpers/skip-title.ts';
import { checkDisjoint, overlapOf, realPathLoose, refuseMountsInside, relation } from '../../src/core/overlap.ts';

/**
 * Overlap checks (src/core/overlap.ts) in process, without root: a symbolic link gives one directory two paths the
 * way a bind mount does, and a mount table is given as text. The CLI tests (test/integration/) cannot kill a mutant.
 */
const root = process.geteuid?.() === 0;
const tmp = () => realpathSync(mkdtempSync(path.join(os.tmpdir(), 'overlap-')));

/** A directory `y` (with `y/sub`) and a link `l` to it in another directory. */
function linked() {
  const y = tmp();
  mkdirSync(path.join(y, 'sub'));
  const l = path.join(tmp(), 'l');
  symlinkSync(y, l);
  return { y, l, sub: path.join(y, 'sub') };
}

const caught = (f: () => void): UsageError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return e as UsageError;
  }
  throw new Error('did not throw');
};

describe('overlap by path', () => {
  it('relation: the same, inside, containing, or neither (a name prefix is not a parent)', () => {
    expect(relation('/x', '/x')).toBe('is the same directory as');
    expect(relation('/x/y', '/x')).toBe('is inside');
    expect(relation('/x', '/x/y')).toBe('contains');
    expect(relation('/x/y', '/x/')).toBe('is inside');
    expect(relation('/x/', '/x/y')).toBe('contains');
    expect(relation('/x/y', '/')).toBe('is inside');
    expect(relation('/xy', '/x')).toBeUndefined();
    expect(relation('/x', '/xy')).toBeUndefined();
    expect(relation('/a/b', '/a/c')).toBeUndefined();
  });

  it('realPathLoose resolves links, and for a path not there yet its nearest existing ancestor, the rest kept in order', () => {
    const { y, l } = linked();
    expect(realPathLoose(l)).toBe(y);
    expect(realPathLoose(path.join(l, 'new', 'deeper', 'x'))).toBe(path.join(y, 'new', 'deeper', 'x'));
    expect(realPathLoose('/nonexistent-overlap-test/a/b')).toBe('/nonexistent-overlap-test/a/b');
    expect(realPathLoose('relative/new')).toBe(path.resolve('relative/new'));
  });
});

describe('overlap by device and inode (a second path of one directory)', () => {
  it('the same directory, inside it, containing it, each with the path that shows it', () => {
    const { y, l, sub } = linked();
    expect(overlapOf(l, y, [])).toEqual({ relation: 'is the same directory as', via: `by device and inode, ${l} is ${y}` });
    expect(overlapOf(sub, l, [])).toEqual({ relation: 'is inside', via: `by device and inode, ${y} is ${l}` });
    expect(overlapOf(l, sub, [])).toEqual({ relation: 'contains', via: `by device and inode, ${y} is ${l}` });
    expect(overlapOf(path.join(l, 'sub'), y, [])).toEqual({ relation: 'is inside', via: `by device and inode, ${l} is ${y}` });
  });

  it('a path that does not exist yet is judged by its nearest existing ancestor: inside, never containing', () => {
    const { y, l, sub } = linked();
    const fresh = path.join(l, 'new', 'work');
    expect(overlapOf(fresh, y, [])).toEqual({ relation: 'is inside', via: `by device and inode, ${l} is ${y}` });
    expect(overlapOf(y, fresh, [])).toEqual({ relation: 'contains', via: `by device and inode, ${l} is ${y}` });
    expect(overlapOf(fresh, sub, [])).toBeUndefined();
    expect(overlapOf(sub, fresh, [])).toBeUndefined();
    // Two new paths below one directory share nothing yet.
    expect(overlapOf(path.join(l, 'a'), path.join(y, 'b'), [])).toBeUndefined();
  });

  it('unrelated directories, and siblings, do not overlap', () => {
    const a = tmp();
    const b = tmp();
    expect(overlapOf(a, b, [])).toBeUndefined();
    mkdirSync(path.join(a, 's1'));
    mkdirSync(path.join(a, 's2'));
    expect(overlapOf(path.join(a, 's1'), path.join(a, 's2'), [])).toBeUndefined();
  });
});

describe('overlap by the mount table', () => {
  // 8:1 mounted at /mnt-t; its folder /work bind-mounted inside a tree; two bind mounts of one folder and of a
  // folder below it, inside /mnt-t/p and /mnt-t/q (whose own folders do not overlap).
  const M = readMounts(
    [
      '22 1 8:0 / / rw - ext4 /dev/sda rw',
      '30 22 8:1 / /mnt-t rw - ext4 /dev/sdb rw',
      '31 30 8:1 /work /mnt-t/src/tree/mnt rw - ext4 /dev/sdb rw',
      '32 30 8:1 /shared /mnt-t/p/m1 rw - ext4 /dev/sdb rw',
      '33 30 8:1 /shared/sub /mnt-t/q/m2 rw - ext4 /dev/sdb rw',
    ].join('\n'),
  );

  it('one folder at two mount points is the same directory, and the message says where else it is', () => {
    expect(overlapOf('/mnt-t/work', '/mnt-t/src/tree/mnt', M)).toEqual({ relation: 'is the same directory as', via: 'through a mount, /mnt-t/src/tree/mnt is also at /mnt-t/work' });
  });

  it('a folder mounted inside the other: inside, or containing', () => {
    expect(overlapOf('/mnt-t/work', '/mnt-t/src/tree', M)).toEqual({ relation: 'is inside', via: 'through a mount, /mnt-t/work is also at /mnt-t/src/tree/mnt' });
    expect(overlapOf('/mnt-t/src/tree', '/mnt-t/work/new', M)).toEqual({ relation: 'contains', via: 'through a mount, /mnt-t/work/new is also at /mnt-t/src/tree/mnt/new' });
  });

  it('only folders mounted below each overlap: part of one is inside the other', () => {
    expect(overlapOf('/mnt-t/p', '/mnt-t/q', M)).toEqual({ relation: 'contains', via: 'through a mount, /mnt-t/q/m2 is also at /mnt-t/shared/sub' });
    expect(overlapOf('/mnt-t/q', '/mnt-t/p', M)).toEqual({ relation: 'is inside', via: 'through a mount, /mnt-t/q/m2 is also at /mnt-t/shared/sub' });
  });

  it('no overlap: other folders of one file system, other file systems, or a path no mount shows', () => {
    expect(overlapOf('/mnt-t/work', '/mnt-t/other', M)).toBeUndefined();
    expect(overlapOf('/mnt-t/p/x', '/mnt-t/q/y', M)).toBeUndefined();
    expect(overlapOf('/home/a', '/mnt-t/work', M)).toBeUndefined();
    expect(overlapOf('/home/a', '/mnt-t/work', readMounts('30 22 8:1 / /mnt-t rw - ext4 /dev/sdb rw'))).toBeUndefined();
    expect(overlapOf('/mnt-t/work', '/home/a', readMounts('30 22 8:1 / /mnt-t rw - ext4 /dev/sdb rw'))).toBeUndefined();
  });

  it('one folder name on two file systems is two folders', () => {
    expect(overlapOf('/mnt-t/qq', '/qq', M)).toBeUndefined();
    expect(overlapOf('/qq/sub', '/mnt-t/qq', M)).toBeUndefined();
    expect(overlapOf('/mnt-t/qq', '/qq/sub', M)).toBeUndefined();
  });

  it('the second path named is one that is neither inside nor above the path named', () => {
    // 8:1's /x is seen at /mnt-t/x, at /mnt-t/x/y (a bind mount inside itself) and at /mnt-t/z.
    const T = readMounts(['22 1 8:0 / / rw - ext4 /dev/sda rw', '30 22 8:1 / /mnt-t rw - ext4 /dev/sdb rw', '31 30 8:1 /x /mnt-t/x/y rw - ext4 /dev/sdb rw', '32 30 8:1 /x /mnt-t/z rw - ext4 /dev/sdb rw'].join('\n'));
    expect(overlapOf('/mnt-t/z', '/mnt-t/x/y', T)).toEqual({ relation: 'is the same directory as', via: 'through a mount, /mnt-t/x/y is also at /mnt-t/z' });
  });

  it("a tree whose mounts show a whole file system contains another tree of it, named by that tree's own folder", () => {
    // Below /mnt-t/a the whole of 8:1 is mounted; below /mnt-t/b a folder inside /mnt-t/a is.
    const T = readMounts(['22 1 8:0 / / rw - ext4 /dev/sda rw', '30 22 8:1 / /mnt-t rw - ext4 /dev/sdb rw', '41 30 8:1 / /mnt-t/a/all rw - ext4 /dev/sdb rw', '42 30 8:1 /a/k /mnt-t/b/m rw - ext4 /dev/sdb rw'].join('\n'));
    expect(overlapOf('/mnt-t/a', '/mnt-t/b', T)).toEqual({ relation: 'contains', via: 'through a mount, /mnt-t/b is also at /mnt-t/a/all/b' });
  });
});

describe('refusals', () => {
  it('checkDisjoint passes separate directories and names the two that overlap, with a fix for the work dir', () => {
    const a = tmp();
    const b = tmp();
    expect(() => checkDisjoint([{ flag: '--nvshmem-src', dir: a }, { flag: '--work-dir', dir: b }, { flag: '--export', dir: path.join(b + '-x', 'e') }])).not.toThrow();
    const inside = caught(() => checkDisjoint([{ flag: '--nvshmem-src', dir: a }, { flag: '--deepep-src', dir: b }, { flag: '--work-dir', dir: path.join(a, 'w') }]));
    expect(inside.message).toBe(`--nvshmem-src ${a} contains --work-dir ${path.join(a, 'w')}; they must not overlap`);
    expect(inside.fix).toBe(`pass a --work-dir outside the source trees (and not mounted inside one), e.g. --work-dir ${path.join(path.dirname(a), 'nvshmem-efa-work')}`);
    const first = caught(() => checkDisjoint([{ flag: '--work-dir', dir: path.join(b, 'w') }, { flag: '--deepep-src', dir: b }]));
    expect(first.message).toBe(`--work-dir ${path.join(b, 'w')} is inside --deepep-src ${b}; they must not overlap`);
    expect(first.fix).toBe(`pass a --work-dir outside the source trees (and not mounted inside one), e.g. --work-dir ${path.join(path.dirname(b), 'nvshmem-efa-work')}`);
    const same = caught(() => checkDisjoint([{ flag: '--nvshmem-src', dir: a }, { flag: '--deepep-src', dir: a }]));
    expect(same.message).toBe(`--nvshmem-src ${a} is the same directory as --deepep-src ${a}; they must not overlap`);
    expect(same.fix).toBe('pass separate directories for --nvshmem-src and --deepep-src');
  });

  it('checkDisjoint shows the real path of a linked directory, and how the overlap was found', () => {
    const { y, l } = linked();
    const e = caught(() => checkDisjoint([{ flag: '--nvshmem-src', dir: y }, { flag: '--work-dir', dir: path.join(l, 'w') }]));
    expect(e.message).toBe(`--nvshmem-src ${y} contains --work-dir ${path.join(l, 'w')} (${path.join(y, 'w')}); they must not overlap`);
    const rel = path.relative(process.cwd(), y);
    const r = caught(() => checkDisjoint([{ flag: '--a', dir: rel }, { flag: '--b', dir: y }]));
    expect(r.message).toBe(`--a ${rel} is the same directory as --b ${y}; they must not overlap`);
  });

  it.skipIf(!root)(skipTitle('checkDisjoint says how an overlap the paths do not show was found (a bind mount)', !root && 'needs root for bind mounts'), () => {
    const y = tmp();
    const x = tmp();
    const r = spawnSync('mount', ['--bind', y, x]);
    expect(r.status, r.stderr?.toString()).toBe(0);
    try {
      const e = caught(() => checkDisjoint([{ flag: '--nvshmem-src', dir: y }, { flag: '--work-dir', dir: x }]));
      expect(e.message).toMatch(new RegExp(`^--nvshmem-src ${y} is the same directory as --work-dir ${x} \\((by device and inode|through a mount), .+\\); they must not overlap$`));
    } finally {
      spawnSync('umount', ['-l', x]);
    }
  });

  it('refuseMountsInside refuses a directory with a mount at or below it, and passes one without', () => {
    expect(() => refuseMountsInside([tmp(), path.join(tmp(), 'new')], 'is replaced')).not.toThrow();
    const e = caught(() => refuseMountsInside([tmp(), '/proc'], 'the copy step replaces'));
    expect(e.message).toMatch(/^\/proc\S* is a mount point at or inside \/proc, which the copy step replaces; that would delete what the mount shows$/);
    expect(e.fix).toMatch(/^unmount it \(umount \/proc\S*\), then rerun$/);
  });
});
