import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { BIN, cli, ENV, killGroup, spawnCli, tmp, waitFor } from '../helpers/cli.ts';
import { fakeToolchain, hungPids } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Issue 20, item 9: every message sends the user the right way. Each case drives the real CLI into the
 * fault (a full or read-only tmpfs, a user without permission, a damaged work dir, a running build) and
 * checks what the message blames and what its fix proposes.
 */
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const noStack = (s: string) => {
  expect(s).not.toMatch(/internal error/);
  expect(s).not.toMatch(/^\s+at .*\(.*:\d+:\d+\)$/m);
};
const errorLine = (stderr: string) => stderr.split('\n').find((l) => l.startsWith('error: ')) ?? '';
const fixLine = (stderr: string) => stderr.split('\n').find((l) => l.startsWith('fix: ')) ?? '';

// Small tmpfs mounts make real full and read-only file systems (root, as in CI); elsewhere those cases skip.
const canMount = (() => {
  const d = tmp('mount-check-');
  const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', d]).status === 0;
  if (ok) spawnSync('umount', [d]);
  return ok;
})();
const mountNote = canMount ? '' : ' [skipped: cannot mount a tmpfs here]';

/** A fresh tmpfs of `kib` KiB, unmounted after `fn` whatever happens. */
async function withTmpfs<T>(kib: number, fn: (dir: string) => T | Promise<T>): Promise<T> {
  const dir = tmp('tmpfs-');
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k`, 'tmpfs', dir]);
  try {
    return await fn(dir);
  } finally {
    spawnSync('umount', ['-l', dir]);
  }
}

/** Fills the file system holding `dir` to the last block. */
function fill(dir: string): void {
  spawnSync('dd', ['if=/dev/zero', `of=${path.join(dir, 'filler')}`, 'bs=4k'], { stdio: 'ignore' });
}

// Permission cases run the CLI as nobody: root passes every permission check.
const NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
const canDrop = spawnSync(NOBODY[0]!, [...NOBODY.slice(1), 'true']).status === 0 && spawnSync(NOBODY[0]!, [...NOBODY.slice(1), 'test', '-r', BIN]).status === 0;
function asNobody(args: string[]) {
  // nobody cannot read the test's efa_io_defs lock (a 0700 temporary dir); patch --offline does not need it.
  const { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: _, ...env } = ENV;
  const r = spawnSync(NOBODY[0]!, [...NOBODY.slice(1), process.execPath, BIN, ...args], { env: { ...env, HOME: '/tmp' }, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
/** A directory anyone may write into, for a work dir of nobody's. */
function openDir(): string {
  const d = tmp('open-');
  chmodSync(d, 0o777);
  return d;
}
/** A tree nobody can read, except where the test takes permissions away. */
function readableTree(name = 'v3.4-like', root?: string): string {
  const src = materialize(name, root);
  execFileSync('chmod', ['-R', 'a+rX', src]);
  return src;
}

describe('a full disk: the message names the file system that is full (item 9)', () => {
  it.skipIf(!canMount)(`copying into a work dir on a full disk blames the work dir's file system, not the source's${mountNote}`, async () => {
    const src = materialize('v3.4-like');
    await withTmpfs(64, (mnt) => {
      const r = cli(['patch', '--nvshmem-src', src, '--work-dir', path.join(mnt, 'wd'), '--offline']);
      expect(r.code, r.stderr).toBe(6);
      expect(errorLine(r.stderr)).toMatch(new RegExp(`^error: ${mnt}/wd/sources/.*: no space left on device \\[ENOSPC\\]`));
      expect(fixLine(r.stderr)).toContain(`mounted at ${mnt} (df -h ${mnt})`);
      expect(fixLine(r.stderr)).not.toContain(src);
      noStack(r.stderr);
    });
  });

  it.skipIf(!canMount)(`a write that carries no path (--in-place tree on a full disk) names that disk, not "the work dir"${mountNote}`, async () => {
    await withTmpfs(512, async (mnt) => {
      const src = path.join(mnt, 'nvshmem');
      cpSync(materialize('v3.4-like'), src, { recursive: true });
      fill(mnt);
      const before = await hashTree(src);
      const r = cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', path.join(tmp(), 'wd'), '--offline']);
      expect(r.code, r.stderr).toBe(6);
      expect(errorLine(r.stderr)).toMatch(/no space left on device \[ENOSPC\]/);
      expect(errorLine(r.stderr)).toContain(`mounted at ${mnt}`);
      expect(errorLine(r.stderr)).toContain(`--nvshmem-src ${src}`);
      expect(errorLine(r.stderr)).not.toMatch(/the work dir/);
      expect(fixLine(r.stderr)).toContain(`df -h ${mnt}`);
      noStack(r.stderr);
      // The patch is one transaction: nothing of it stays in the tree.
      expect(await hashTree(src)).toBe(before);
    });
  });
});

describe('permission denied: reading asks for readable, writing for writable (item 9)', () => {
  it.skipIf(!canDrop)(`an unreadable source file or directory: "make it readable by this user"${canDrop ? '' : ' [skipped: cannot run as nobody]'}`, () => {
    const src = readableTree();
    const file = path.join(src, LIBFABRIC_CPP);
    chmodSync(file, 0o000);
    let r = asNobody(['patch', '--nvshmem-src', src, '--work-dir', path.join(openDir(), 'wd'), '--offline']);
    expect(r.code, r.stderr).toBe(6);
    expect(errorLine(r.stderr)).toMatch(new RegExp(`^error: ${file}: permission denied \\[EACCES\\]`));
    expect(fixLine(r.stderr)).toMatch(new RegExp(`^fix: make ${file} readable by this user`));
    expect(r.stderr).not.toMatch(/writable/);
    noStack(r.stderr);

    chmodSync(file, 0o644);
    const dir = path.join(src, 'src/modules/transport');
    chmodSync(dir, 0o000);
    r = asNobody(['patch', '--nvshmem-src', src, '--work-dir', path.join(openDir(), 'wd'), '--offline']);
    expect(r.code, r.stderr).toBe(6);
    expect(errorLine(r.stderr)).toMatch(new RegExp(`^error: ${dir}: permission denied \\[EACCES\\]`));
    expect(fixLine(r.stderr)).toMatch(new RegExp(`^fix: make ${dir} readable by this user`));
    expect(r.stderr).not.toMatch(/writable/);
    chmodSync(dir, 0o755);
  });

  it.skipIf(!canDrop)(`a work dir this user cannot create still asks for a writable parent${canDrop ? '' : ' [skipped: cannot run as nobody]'}`, () => {
    const locked = tmp('locked-');
    chmodSync(locked, 0o755);
    const r = asNobody(['patch', '--nvshmem-src', readableTree(), '--work-dir', path.join(locked, 'wd'), '--offline']);
    expect(r.code, r.stderr).toBe(6);
    expect(fixLine(r.stderr)).toMatch(new RegExp(`^fix: make ${locked} writable by this user`));
    expect(r.stderr).not.toMatch(/readable/);
  });

  it.skipIf(!canDrop)(`an --in-place tree this user cannot write: make it writable or drop --in-place${canDrop ? '' : ' [skipped: cannot run as nobody]'}`, async () => {
    const src = readableTree();
    const before = await hashTree(src);
    const r = asNobody(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', path.join(openDir(), 'wd'), '--offline']);
    expect(r.code, r.stderr).toBe(6);
    expect(fixLine(r.stderr)).toMatch(/writable by this user/);
    expect(fixLine(r.stderr)).toMatch(/drop --in-place/);
    expect(fixLine(r.stderr)).not.toMatch(/choose another --work-dir/);
    expect(await hashTree(src)).toBe(before);
  });
});

describe('a read-only --in-place tree (item 9)', () => {
  it.skipIf(!canMount)(`NVSHMEM on a read-only file system: drop --in-place or make the tree writable, not "choose a --work-dir"${mountNote}`, async () => {
    await withTmpfs(512, async (mnt) => {
      const src = path.join(mnt, 'nvshmem');
      cpSync(materialize('v3.4-like'), src, { recursive: true });
      execFileSync('mount', ['-o', 'remount,ro', mnt]);
      const r = cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', path.join(tmp(), 'wd'), '--offline']);
      expect(r.code, r.stderr).toBe(6);
      expect(errorLine(r.stderr)).toMatch(/read-only file system \[EROFS\]/);
      expect(fixLine(r.stderr)).toMatch(/drop --in-place/);
      expect(fixLine(r.stderr)).toMatch(/writable/);
      expect(fixLine(r.stderr)).not.toMatch(/choose a writable location|e\.g\. --work-dir/);
      noStack(r.stderr);
    });
  });

  it.skipIf(!canMount)(`a read-only DeepEP with --in-place is refused before NVSHMEM is patched in place${mountNote}`, async () => {
    const src = materialize('v3.4-like');
    const before = await hashTree(src);
    await withTmpfs(512, async (mnt) => {
      const deepep = path.join(mnt, 'deepep');
      cpSync(materialize('v1', GOLDEN_DEEPEP), deepep, { recursive: true });
      execFileSync('mount', ['-o', 'remount,ro', mnt]);
      const r = cli(['patch', '--nvshmem-src', src, '--in-place', '--deepep-src', deepep, '--work-dir', path.join(tmp(), 'wd'), '--offline']);
      expect(r.code, r.stderr).toBe(6);
      expect(errorLine(r.stderr)).toContain(`--deepep-src ${deepep}`);
      expect(errorLine(r.stderr)).toMatch(/read-only file system \[EROFS\]/);
      expect(errorLine(r.stderr)).toMatch(/nothing was changed/);
      expect(fixLine(r.stderr)).toMatch(/drop --in-place/);
      noStack(r.stderr);
    });
    expect(await hashTree(src)).toBe(before);
    expect(readFileSync(path.join(src, LIBFABRIC_CPP), 'utf8')).not.toContain('nvshmem-efa:begin');
  });
});

describe('the work dir\'s own copy (item 9)', () => {
  it('a damaged copy in the work dir: the fix is --force, which repairs it', () => {
    const src = materialize('v3.4-like');
    const work = tmp();
    const args = ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline'];
    expect(cli(args).code).toBe(0);
    const copy = path.join(work, 'sources/nvshmem');
    writeFileSync(path.join(copy, 'src/CMakeLists.txt'), 'garbage\n');
    let r = cli(args);
    expect(r.code, r.stderr).toBe(3);
    expect(errorLine(r.stderr)).toContain(copy);
    expect(fixLine(r.stderr)).toMatch(/rerun with --force/);
    expect(fixLine(r.stderr)).toContain(copy);
    expect(fixLine(r.stderr)).not.toMatch(/NVSHMEM release from NVIDIA/);
    r = cli([...args, '--force']);
    expect(r.code, r.stderr).toBe(0);
  });

  it('a tree that is refused as it is (the copy is fresh from it) is not sent to --force, on the first run or the next', () => {
    const src = materialize('anchor-missing');
    const work = tmp();
    const args = ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline'];
    for (let i = 0; i < 2; i++) {
      const r = cli(args);
      expect(r.code, r.stderr).toBe(3);
      expect(fixLine(r.stderr)).not.toMatch(/--force/);
    }
  });
});

describe('report and selftest on a work dir without what they read (item 9)', () => {
  it('report during a running build says a build is running (its pid) and that the report comes when it ends', async () => {
    const t = fakeToolchain();
    const work = tmp();
    const r = spawnCli(['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline'],
      { ...ENV, ...t.env, FAKE_HANG: 'build' });
    try {
      let exited = false;
      void r.exited.then(() => (exited = true));
      await waitFor('the build to hang', () => exited || hungPids(t).filter((p) => p > 0).length === 3, 180_000);
      expect(exited, r.stderr()).toBe(false);
      const rep = cli(['report', '--work-dir', work]);
      expect(rep.code, rep.stderr).toBe(7);
      expect(errorLine(rep.stderr)).toMatch(new RegExp(`a run is in progress .*pid ${r.child.pid}\\b.*nvshmem-efa build`));
      expect(fixLine(rep.stderr)).toMatch(/when it ends/);
      expect(rep.stderr).not.toMatch(/run nvshmem-efa build .*first/);
    } finally {
      killGroup(r);
    }
  }, 300_000);

  it('selftest --work-dir naming no directory: no build there, exit 4 (as report, env, bench) with the fix, not a table of skips', () => {
    const typo = path.join(tmp(), 'no-such-work-dir');
    const r = cli(['selftest', '--work-dir', typo]);
    expect(r.code, r.stdout).toBe(4);
    expect(errorLine(r.stderr)).toBe(`error: selftest --work-dir ${typo} does not exist`);
    expect(fixLine(r.stderr)).toMatch(/--work-dir of a finished nvshmem-efa build/);
    expect(r.stdout).not.toMatch(/skipped/);
    expect(existsSync(typo)).toBe(false);
  });

  it('selftest on a directory that holds no build: exit 4 (as report, env, bench) naming what is missing', () => {
    const empty = tmp();
    let r = cli(['selftest', '--work-dir', empty]);
    expect(r.code, r.stdout).toBe(4);
    expect(errorLine(r.stderr)).toMatch(new RegExp(`${empty} holds no NVSHMEM build .*not an nvshmem-efa work dir`));
    expect(r.stdout).not.toMatch(/skipped/);
    const work = tmp();
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']).code).toBe(0);
    r = cli(['selftest', '--work-dir', work]);
    expect(r.code, r.stdout).toBe(4);
    expect(errorLine(r.stderr)).toMatch(new RegExp(`${work} holds no NVSHMEM build`));
    expect(fixLine(r.stderr)).toContain(`nvshmem-efa build --work-dir ${work}`);
  });
});

describe('smaller messages (item 11)', () => {
  it('overlap messages read as English for every relation', () => {
    const parent = tmp('overlap-');
    const src = path.join(parent, 'nvshmem');
    cpSync(materialize('v3.4-like'), src, { recursive: true });
    const cases: [string, RegExp][] = [
      [parent, new RegExp(`--work-dir ${parent} contains --nvshmem-src ${src};`)],
      [path.join(src, 'wd'), new RegExp(`--work-dir ${src}/wd is inside --nvshmem-src ${src};`)],
      [src, new RegExp(`--work-dir ${src} is the same directory as --nvshmem-src ${src};`)],
    ];
    for (const [work, want] of cases) {
      const r = cli(['patch', '--nvshmem-src', src, '--work-dir', work, '--offline']);
      expect(r.code).toBe(2);
      expect(errorLine(r.stderr)).toMatch(want);
      expect(r.stderr).not.toMatch(/is contains/);
    }
  });

  it('patch says where the patched tree is and how to build it', () => {
    const src = materialize('v3.4-like');
    const deepep = materialize('v1', GOLDEN_DEEPEP);
    const work = tmp();
    let r = cli(['patch', '--nvshmem-src', src, '--deepep-src', deepep, '--work-dir', work, '--offline']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`patched NVSHMEM tree: ${work}/sources/nvshmem (a copy of ${src}, which is unchanged)`);
    expect(r.stdout).toContain(`patched DeepEP tree: ${work}/sources/deepep (a copy of ${deepep}, which is unchanged)`);
    expect(r.stdout).toContain(`build it: nvshmem-efa build --nvshmem-src ${src} --deepep-src ${deepep} --work-dir ${work} --offline`);
    const inPlace = materialize('v3.4-like');
    const work2 = tmp();
    r = cli(['patch', '--nvshmem-src', inPlace, '--in-place', '--work-dir', work2, '--offline']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`patched NVSHMEM tree: ${inPlace} (in place)`);
    expect(r.stdout).toContain(`build it: nvshmem-efa build --nvshmem-src ${inPlace} --in-place --work-dir ${work2} --offline`);
  });
});
