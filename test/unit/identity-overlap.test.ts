import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { copyTree, replaceWithCopy } from '../../src/core/copy-tree.ts';
import { stagedInstall } from '../../src/core/fabric-source.ts';
import { mountsAtOrBelow, pathsOf, placeOf, readMounts, regionOf } from '../../src/core/mounts.ts';
import { overlapOf } from '../../src/core/overlap.ts';
import { skipTitle } from '../helpers/skip-title.ts';

// A mount table as /proc/self/mountinfo gives it: the root file system, a data disk at /data (8:1), its folder
// /work bind-mounted inside a source tree, and a tmpfs whose name needs an escape.
const TABLE = [
  '22 1 8:0 / / rw - ext4 /dev/sda rw',
  '30 22 8:1 / /data rw - ext4 /dev/sdb rw',
  '31 30 8:1 /work /data/src/nvshmem/mnt rw - ext4 /dev/sdb rw',
  '32 22 0:40 / /scratch\\040space rw - tmpfs tmpfs rw',
].join('\n');
const M = readMounts(TABLE);

describe('the mount table: where a folder can be reached', () => {
  it('reads device, root and mount point, octal escapes undone', () => {
    expect(M).toHaveLength(4);
    expect(M[3]).toEqual({ dev: '0:40', root: '/', at: '/scratch space' });
  });

  it('a path is a folder of the file system of the topmost mount above it, seen at every mount that shows it', () => {
    expect(placeOf('/data/work/x', M)).toEqual({ dev: '8:1', inFs: '/work/x' });
    expect(pathsOf({ dev: '8:1', inFs: '/work/x' }, M).sort()).toEqual(['/data/src/nvshmem/mnt/x', '/data/work/x']);
    expect(placeOf('/home/u', M)).toEqual({ dev: '8:0', inFs: '/home/u' });
  });

  it("a tree's region holds what is mounted below it", () => {
    expect(regionOf('/data/src/nvshmem', M)).toEqual([{ dev: '8:1', inFs: '/src/nvshmem' }, { dev: '8:1', inFs: '/work' }]);
    expect(mountsAtOrBelow('/data/src', M)).toEqual(['/data/src/nvshmem/mnt']);
    expect(mountsAtOrBelow('/home', M)).toEqual([]);
  });

  it('overlap by mounts: a work dir bind-mounted inside the source, whichever path is named', () => {
    expect(overlapOf('/data/work', '/data/src/nvshmem', M)).toMatchObject({ relation: 'is inside', via: expect.stringContaining('/data/src/nvshmem/mnt') });
    expect(overlapOf('/data/src/nvshmem', '/data/work/new', M)).toMatchObject({ relation: 'contains' });
    expect(overlapOf('/data/work', '/data/other', M)).toBeUndefined();
    expect(overlapOf('/home/a', '/home/b', M)).toBeUndefined();
  });

  it('without a mount table (not Linux) paths and inodes still decide', () => {
    expect(overlapOf('/x/y', '/x', [])).toEqual({ relation: 'is inside' });
    expect(overlapOf('/x/y', '/z', [])).toBeUndefined();
  });
});

const root = process.getuid?.() === 0;
const mounted: string[] = [];
afterEach(() => {
  for (const m of mounted.splice(0).reverse()) spawnSync('umount', ['-l', m]);
});

describe.skipIf(!root)(skipTitle('by identity on this host (root: bind mounts)', !root && 'needs root for bind mounts'), () => {
  const bind = (from: string, to: string) => {
    mkdirSync(to, { recursive: true });
    expect(spawnSync('mount', ['--bind', from, to]).status).toBe(0);
    mounted.push(to);
  };

  it('a bind-mount alias of a tree, and a new path below it, are the tree', () => {
    const t = mkdtempSync(path.join(os.tmpdir(), 'identity-'));
    mkdirSync(path.join(t, 'src'));
    bind(path.join(t, 'src'), path.join(t, 'alias'));
    expect(overlapOf(path.join(t, 'alias'), path.join(t, 'src'))?.relation).toBe('is the same directory as');
    expect(overlapOf(path.join(t, 'alias', 'new', 'w'), path.join(t, 'src'))?.relation).toBe('is inside');
    expect(overlapOf(path.join(t, 'src'), path.join(t, 'other'))).toBeUndefined();
  });

  it('the copy never walks into its destination, even when nothing checked before it', async () => {
    const t = mkdtempSync(path.join(os.tmpdir(), 'identity-'));
    const src = path.join(t, 'src');
    mkdirSync(path.join(src, 'a'), { recursive: true });
    writeFileSync(path.join(src, 'a', 'f.h'), 'x\n');
    const dst = path.join(t, 'work', 'copy');
    mkdirSync(dst, { recursive: true });
    // The work dir shows up inside the source: a copy that followed it would copy the copy forever.
    bind(path.join(t, 'work'), path.join(src, 'z-mnt'));
    // Told to skip the work dir (as the copy steps are): refused where the work dir shows up, nothing of it copied.
    await expect(copyTree(src, dst, [path.join(t, 'work')])).rejects.toThrow(/z-mnt is the same directory as .*work \(a bind mount or a link\).*copying would copy the copy/);
    expect(existsSync(path.join(dst, 'z-mnt'))).toBe(false);
    // Told nothing: refused at the destination itself. The first try copied a/ before it was refused, and a copy
    // never writes over a file (it creates each fresh), so the destination starts empty again, as a copy step's does.
    rmSync(path.join(dst, 'a'), { recursive: true, force: true });
    await expect(copyTree(src, dst, [])).rejects.toThrow(/z-mnt\/copy is the same directory as .*copy/);
    expect(existsSync(path.join(dst, 'z-mnt', 'copy'))).toBe(false);
    expect(readdirSync(path.join(src, 'z-mnt'))).toEqual(['copy']);
  });

  it("a step that replaces one of its directories whole never deletes across a mount in it (copy, install prefix)", async () => {
    const t = mkdtempSync(path.join(os.tmpdir(), 'identity-'));
    const mine = path.join(t, 'mine');
    mkdirSync(mine);
    writeFileSync(path.join(mine, 'lib.so'), 'the user library\n');
    const src = path.join(t, 'src');
    mkdirSync(src);
    writeFileSync(path.join(src, 'a.h'), 'x\n');
    bind(mine, path.join(t, 'work/sources/nvshmem/mnt'));
    await expect(replaceWithCopy(src, path.join(t, 'work/sources/nvshmem'), [])).rejects.toThrow(/mnt is a mount point at or inside .*sources\/nvshmem/);
    const prefix = path.join(t, 'work/install/libfabric');
    bind(mine, prefix);
    let installed = false;
    await expect(stagedInstall(prefix, path.join(t, 'work/build/libfabric-stage'), async () => void (installed = true))).rejects.toThrow(/libfabric is a mount point at or inside/);
    expect(installed).toBe(false);
    expect(readdirSync(mine)).toEqual(['lib.so']);
  });
});
