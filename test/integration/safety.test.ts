import { execSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { BIN, cli, ENV, report, stepStatus, tmp } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';
import { skipTitle } from '../helpers/skip-title.ts';

/**
 * Issue 9: nothing of the user's is ever lost. Each test drives the real CLI against our miniature trees
 * (`patch` needs no toolchain; `build` runs on the fake one of test/helpers/fake-toolchain.ts).
 */
const ls = (d: string) => readdirSync(d).sort();
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const noStack = (s: string) => {
  expect(s).not.toMatch(/internal error/);
  expect(s).not.toMatch(/^\s+at .*\(.*:\d+:\d+\)$/m);
};

describe('the work dir is ours or refused (item 1)', () => {
  it('refuses a non-empty directory that is not a work dir (exit 2) and writes nothing into it', () => {
    const home = tmp('home-');
    writeFileSync(path.join(home, 'notes.txt'), 'mine\n');
    mkdirSync(path.join(home, 'projects'));
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', home, '--offline']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--work-dir ${home} is not empty and is not an nvshmem-efa work dir (it holds notes.txt, projects)`);
    expect(r.stderr).toMatch(/^fix: pass a new or empty directory/m);
    expect(ls(home)).toEqual(['notes.txt', 'projects']);
  });

  it('clean deletes only what nvshmem-efa created: user files and a directory it did not make stay', () => {
    const x = tmp('user-dir-');
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', x, '--offline']).code).toBe(0);
    writeFileSync(path.join(x, 'mine.txt'), 'keep me\n');
    const r = cli(['clean', '--work-dir', x]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('kept 1 entry nvshmem-efa did not create');
    expect(existsSync(x)).toBe(true);
    expect(ls(x)).toEqual(['mine.txt']);
    expect(readFileSync(path.join(x, 'mine.txt'), 'utf8')).toBe('keep me\n');
  });

  it('clean removes a work dir it made itself, and only once nothing of the user is left in it', () => {
    const parent = tmp('parent-');
    const made = path.join(parent, 'w');
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', made, '--offline']).code).toBe(0);
    expect(cli(['clean', '--work-dir', made, '--dry-run']).stdout).toMatch(/^would remove .* and /);
    expect(cli(['clean', '--work-dir', made]).code).toBe(0);
    expect(existsSync(made)).toBe(false);
    expect(ls(parent)).toEqual([]);
  });

  it('clean refuses a directory that is not a work dir (exit 2) and deletes nothing', () => {
    const d = tmp('not-ours-');
    writeFileSync(path.join(d, 'a.txt'), 'a');
    const r = cli(['clean', '--work-dir', d]);
    expect(r.code).toBe(2);
    expect(ls(d)).toEqual(['a.txt']);
  });
});

describe('source and work dir never overlap (item 2)', () => {
  const cases: [string, (src: string) => string][] = [
    ['equal to', (src) => src],
    ['inside', (src) => path.join(src, '.nvshmem-efa')],
    ['containing', (src) => path.dirname(src)],
    ['inside, through a symbolic link to the tree', (src) => {
      const link = path.join(tmp('link-'), 'tree');
      symlinkSync(src, link);
      return path.join(link, 'work');
    }],
  ];
  it.each(cases)('--work-dir %s --nvshmem-src is refused (exit 2) before anything is written', async (_, work) => {
    const src = materialize('v3.4-like');
    const before = await hashTree(src);
    const entries = ls(src);
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', work(src), '--offline']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--(work-dir|nvshmem-src) .* (is the same directory as|is inside|(?<!is )contains) --(nvshmem-src|work-dir) .*; they must not overlap/);
    expect(r.stderr).toMatch(/^fix: pass a --work-dir outside the source trees/m);
    expect(ls(src)).toEqual(entries);
    expect(await hashTree(src)).toBe(before);
  });

  it('--deepep-src inside the work dir and --export inside a source tree are refused too', () => {
    const work = tmp();
    const deepep = path.join(work, 'deepep');
    mkdirSync(deepep);
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', deepep, '--work-dir', work, '--offline']).code).toBe(2);
    const src = materialize('v3.4-like');
    const r = cli(['patch', '--nvshmem-src', src, '--export', path.join(src, 'patches'), '--work-dir', tmp()]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--nvshmem-src .* contains --export .*; they must not overlap/);
    expect(existsSync(path.join(src, 'patches'))).toBe(false);
  });
});

describe('copy mode never writes through to the user tree (item 3)', () => {
  it('copies a symbolic link to a directory of the tree as content; the patch lands in the copy only', async () => {
    const src = materialize('v3.4-like');
    // The transport directory moved elsewhere in the tree and linked back with an absolute path.
    const real = path.join(src, 'vendor-libfabric');
    renameSync(path.join(src, 'src/modules/transport/libfabric'), real);
    symlinkSync(real, path.join(src, 'src/modules/transport/libfabric'));
    writeFileSync(path.join(src, 'linked.sym'), 'x');
    rmSync(path.join(src, 'nvshmem_transport.sym'));
    symlinkSync(path.join(src, 'linked.sym'), path.join(src, 'nvshmem_transport.sym'));
    writeFileSync(path.join(src, 'linked.sym'), readFileSync(path.join(materialize('v3.4-like'), 'nvshmem_transport.sym')));
    const before = await hashTree(src);
    const work = tmp();
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', work, '--offline']);
    expect(r.stderr).not.toMatch(/error:/);
    expect(r.code).toBe(0);
    expect(await hashTree(src)).toBe(before);
    expect(readFileSync(path.join(real, 'libfabric.cpp'), 'utf8')).not.toContain('nvshmem-efa:begin');
    expect(existsSync(path.join(real, 'efa_gda'))).toBe(false);
    const copy = path.join(work, 'sources/nvshmem');
    expect(lstatSync(path.join(copy, 'src/modules/transport/libfabric')).isDirectory()).toBe(true);
    expect(lstatSync(path.join(copy, 'nvshmem_transport.sym')).isFile()).toBe(true);
    expect(readFileSync(path.join(copy, LIBFABRIC_CPP), 'utf8')).toContain('nvshmem-efa:begin efa-gda-init');
  });

  it('refuses a link to a directory outside the tree and a dangling link (exit 2), changing nothing', () => {
    const outside = tmp('outside-');
    writeFileSync(path.join(outside, 'private.key'), 'secret');
    const dangling = path.join(tmp('gone-'), 'nowhere');
    for (const target of [outside, dangling]) {
      const src = materialize('v3.4-like');
      symlinkSync(target, path.join(src, 'src/extra'));
      const work = tmp();
      const r = cli(['patch', '--nvshmem-src', src, '--work-dir', work, '--offline']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(target === outside ? /src\/extra links to .* outside the tree/ : /src\/extra is a dangling symbolic link/);
      expect(existsSync(path.join(work, 'sources/nvshmem'))).toBe(false);
      expect(existsSync(path.join(work, 'sources/nvshmem.partial'))).toBe(false);
    }
    expect(ls(outside)).toEqual(['private.key']);
    expect(existsSync(dangling)).toBe(false);
  });
});

describe('only what is needed is copied', () => {
  it('leaves an in-tree build/ directory (and any CMake build tree) out of the copy', () => {
    const src = materialize('v3.4-like');
    mkdirSync(path.join(src, 'build/objs'), { recursive: true });
    writeFileSync(path.join(src, 'build/objs/big.o'), Buffer.alloc(1 << 20));
    mkdirSync(path.join(src, 'out-release'));
    writeFileSync(path.join(src, 'out-release/CMakeCache.txt'), 'CMAKE_BUILD_TYPE:STRING=Release\n');
    const work = tmp();
    expect(cli(['patch', '--nvshmem-src', src, '--work-dir', work, '--offline']).code).toBe(0);
    const copy = path.join(work, 'sources/nvshmem');
    expect(existsSync(path.join(copy, 'build'))).toBe(false);
    expect(existsSync(path.join(copy, 'out-release'))).toBe(false);
    expect(existsSync(path.join(copy, LIBFABRIC_CPP))).toBe(true);
  });

  it('refuses a directory that is not an NVSHMEM tree (exit 3) before copying any of it', () => {
    const home = tmp('home-');
    mkdirSync(path.join(home, 'Documents'));
    writeFileSync(path.join(home, 'Documents/a.txt'), 'a');
    const work = tmp();
    const r = cli(['patch', '--nvshmem-src', home, '--work-dir', work, '--offline']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`--nvshmem-src ${home} is not an NVSHMEM source tree (it has no src/ directory); nothing was copied or changed`);
    expect(ls(work)).toEqual([]);
  });
});

describe('"nothing was changed" is true, and --export applies (item 7)', () => {
  it('a refused DeepEP with --in-place leaves the NVSHMEM tree untouched (refused before it was patched)', async () => {
    const src = materialize('v3.4-like');
    const before = await hashTree(src);
    const r = cli(['patch', '--nvshmem-src', src, '--in-place', '--deepep-src', materialize('unknown-layout', GOLDEN_DEEPEP), '--work-dir', tmp(), '--offline']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/DeepEP tree .* does not look as expected; nothing was changed/);
    expect(await hashTree(src)).toBe(before);
    expect(readFileSync(path.join(src, LIBFABRIC_CPP), 'utf8')).not.toContain('nvshmem-efa:begin');
  });

  it('--export writes nvshmem/ and deepep/ with an apply command each that works, and no stale patch survives a re-export', () => {
    const nv = materialize('v3.4-like');
    const dp = materialize('v1', GOLDEN_DEEPEP);
    const out = path.join(tmp('export-'), 'patches');
    const r = cli(['patch', '--nvshmem-src', nv, '--deepep-src', dp, '--export', out, '--work-dir', tmp()]);
    expect(r.code).toBe(0);
    expect(ls(out)).toEqual(['.nvshmem-efa-export.json', 'deepep', 'nvshmem']);
    const commands = r.stdout.split('\n').filter((l) => l.trim().startsWith('git -C')).map((l) => l.replace(/#.*$/, '').trim());
    expect(commands).toHaveLength(2);
    for (const c of commands) execSync(c, { stdio: 'pipe', shell: '/bin/sh' });
    // Each tree now holds exactly what the patch step would have written.
    const work = tmp();
    expect(cli(['patch', '--nvshmem-src', nv, '--deepep-src', dp, '--in-place', '--work-dir', work, '--offline', '--force']).code).toBe(0);
    const patched = report(work).fixes.filter((f) => f.file && f.id !== 'vendor-efa-io-defs');
    expect(patched.length).toBeGreaterThan(10);
    expect(patched.filter((f) => f.status !== 'already-present')).toEqual([]);
    // Export again without DeepEP: its folder goes, and NVSHMEM's holds only this export's files.
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--export', out, '--work-dir', tmp()]).code).toBe(0);
    expect(ls(out)).toEqual(['.nvshmem-efa-export.json', 'nvshmem']);
    const series = readFileSync(path.join(out, 'nvshmem/series'), 'utf8').trim().split('\n');
    expect(ls(path.join(out, 'nvshmem'))).toEqual([...series, 'series'].sort());
  });

  it('--export refuses a non-empty directory that no export wrote (exit 2)', () => {
    const out = tmp('export-');
    writeFileSync(path.join(out, 'thesis.tex'), 'x');
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--export', out, '--work-dir', tmp()]);
    expect(r.code).toBe(2);
    expect(ls(out)).toEqual(['thesis.tex']);
  });
});

describe('environment faults are errors, not bugs (item 8)', () => {
  it('a file where the work dir should be: exit 6, one line with the path and the fix, no stack', () => {
    const f = path.join(tmp('f-'), 'file');
    writeFileSync(f, 'x');
    for (const work of [path.join(f, 'w'), f]) {
      const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']);
      expect(r.code).toBe(6);
      expect(r.stderr).toContain(f);
      expect(r.stderr).toMatch(/^fix: /m);
      noStack(r.stderr);
    }
  });

  it('a file where the work dir needs a directory (EEXIST/ENOTDIR inside a work dir): exit 6', () => {
    const work = tmp();
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']).code).toBe(0);
    rmSync(path.join(work, 'logs'), { recursive: true });
    writeFileSync(path.join(work, 'logs'), 'in the way');
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline', '--force']);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(new RegExp(`${path.join(work, 'logs')}.*(already exists|file where a directory)`));
    noStack(r.stderr);
  });

  it.skipIf(!existsSync('/sys/kernel'))(skipTitle('a directory the file system will not let us create (/sys): exit 6 naming it', !existsSync('/sys/kernel') && 'no sysfs mounted at /sys'), () => {
    const work = `/sys/nvshmem-efa-test-${process.pid}`;
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(new RegExp(`error: ${work}: (operation not permitted|permission denied|is on a read-only file system)`));
    noStack(r.stderr);
  });

  // Real EACCES and EROFS need a root test run to give up its privileges: without CAP_DAC_OVERRIDE (setpriv)
  // permission bits hold for root too; a read-only bind mount needs a private mount namespace (unshare).
  const DROP_DAC = ['setpriv', '--inh-caps=-dac_override,-dac_read_search', '--bounding-set=-dac_override,-dac_read_search'];
  const lockedDir = () => {
    const d = tmp('locked-');
    chmodSync(d, 0o555);
    return d;
  };
  const canDropDac = spawnSync(DROP_DAC[0]!, [...DROP_DAC.slice(1), 'sh', '-c', `mkdir '${lockedDir()}/x' 2>/dev/null`]).status === 1;
  const canRemount = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', `mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp && ! touch /tmp/.nvshmem-efa-ro-check 2>/dev/null`]).status === 0;
  const runCli = (argv: string[]) => {
    const r = spawnSync(argv[0]!, argv.slice(1), { env: ENV, encoding: 'utf8' });
    return { code: r.status, stderr: r.stderr };
  };

  it.skipIf(!canDropDac)(`permission denied (EACCES, as a user without CAP_DAC_OVERRIDE): exit 6 naming the path${canDropDac ? '' : ' [skipped: setpriv cannot drop CAP_DAC_OVERRIDE here]'}`, () => {
    const work = path.join(lockedDir(), 'w');
    const r = runCli([...DROP_DAC, process.execPath, BIN, 'patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--offline']);
    expect(r.stderr).toMatch(new RegExp(`error: ${work}: permission denied \\[EACCES\\]`));
    expect(r.stderr).toMatch(/^fix: make .* writable by this user/m);
    expect(r.code).toBe(6);
    noStack(r.stderr);
  });

  it.skipIf(!canRemount)(`a read-only file system (EROFS, a read-only bind mount): exit 6 naming the path${canRemount ? '' : ' [skipped: no private mount namespace here]'}`, () => {
    const ro = tmp('ro-');
    const work = path.join(ro, 'w');
    const cmd = `mount --bind '${ro}' '${ro}' && mount -o remount,bind,ro '${ro}' && exec '${process.execPath}' '${BIN}' patch --nvshmem-src '${materialize('v3.4-like')}' --work-dir '${work}' --offline`;
    const r = runCli(['unshare', '-m', '--propagation', 'private', 'sh', '-c', cmd]);
    expect(r.stderr).toMatch(new RegExp(`error: ${work}: is on a read-only file system \\[EROFS\\]`));
    expect(r.stderr).toMatch(/^fix: choose a writable location/m);
    expect(r.code).toBe(6);
    noStack(r.stderr);
  });

  // A log that is a link to /dev/full is replaced, not written through (reliability item 11b), so the full disk is a
  // real one: a tmpfs of 16 KiB, filled, over logs/ in a private mount namespace.
  it.skipIf(!canRemount)(`a full disk (the build log's file system full, ENOSPC): exit 6 naming the log, no crash${canRemount ? '' : ' [skipped: no private mount namespace here]'}`, () => {
    const t = fakeToolchain();
    const work = tmp();
    const args = ['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline'];
    expect(cli(['patch', ...args.slice(1, 5), '--offline']).code).toBe(0);
    const logs = path.join(work, 'logs');
    const cmd = `mount -t tmpfs -o size=16k tmpfs '${logs}' && { dd if=/dev/zero of='${logs}/.filler' bs=4k 2>/dev/null; true; } && exec '${process.execPath}' '${BIN}' ${args.map((a) => `'${a}'`).join(' ')}`;
    const r = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', cmd], { env: { ...ENV, ...t.env }, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(6);
    expect(r.stderr).toMatch(/error: .*logs\/build-nvshmem\.log: no space left on device \[ENOSPC\]/);
    expect(r.stderr).toMatch(/^fix: free space on the file system holding/m);
    noStack(r.stderr);
    expect(stepStatus(work)['build-nvshmem']).toBe('failed');
  });

  it('a build log that is a link to /dev/full is replaced by a fresh file, never written through (item 11b)', () => {
    const t = fakeToolchain();
    const work = tmp();
    const args = ['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline'];
    expect(cli(['patch', ...args.slice(1, 5), '--offline']).code).toBe(0);
    mkdirSync(path.join(work, 'logs'), { recursive: true });
    symlinkSync('/dev/full', path.join(work, 'logs/build-nvshmem.log'));
    const r = cli(args, { ...ENV, ...t.env });
    expect(r.code, r.stderr).toBe(0);
    expect(lstatSync(path.join(work, 'logs/build-nvshmem.log')).isFile()).toBe(true);
  });
});

describe('supported versions', () => {
  it('warns in the report for an NVSHMEM outside the tested 3.2.5 to 3.5.x, and not for one inside', () => {
    const old = materialize('v3.4-like');
    const cm = path.join(old, 'CMakeLists.txt');
    writeFileSync(cm, readFileSync(cm, 'utf8').replace('VERSION 3.4.5.0', 'VERSION 3.1.0.0'));
    const w1 = tmp();
    expect(cli(['patch', '--nvshmem-src', old, '--work-dir', w1, '--offline']).code).toBe(0);
    const warn = report(w1).fixes.find((f) => f.id === 'nvshmem-version');
    expect(warn?.status).toBe('warned');
    expect(warn?.detail).toContain('NVSHMEM 3.1.0.0 is outside the tested 3.2.5 to 3.5.x');
    const w2 = tmp();
    expect(cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', w2, '--offline']).code).toBe(0);
    expect(report(w2).fixes.find((f) => f.id === 'nvshmem-version')).toBeUndefined();
  });

  it('takes a multi-rail 3.5.7 tree from --nvshmem-src with its version and layout and no warning; a multi-rail 3.6 tree with the warning', () => {
    const w1 = tmp();
    expect(cli(['patch', '--nvshmem-src', materialize('multi-rail'), '--work-dir', w1, '--offline']).code).toBe(0);
    expect(report(w1).nvshmem.source).toMatchObject({ kind: 'local', version: '3.5.7.0' });
    expect(report(w1).nvshmem.layout?.id).toBe('multi-rail');
    expect(report(w1).fixes.find((f) => f.id === 'nvshmem-version')).toBeUndefined();
    const newer = materialize('multi-rail');
    const cm = path.join(newer, 'CMakeLists.txt');
    writeFileSync(cm, readFileSync(cm, 'utf8').replace('VERSION 3.5.7.0', 'VERSION 3.6.5.0'));
    const w2 = tmp();
    expect(cli(['patch', '--nvshmem-src', newer, '--work-dir', w2, '--offline']).code).toBe(0);
    expect(report(w2).nvshmem.layout?.id).toBe('multi-rail');
    expect(report(w2).fixes.find((f) => f.id === 'nvshmem-version')?.detail).toContain('NVSHMEM 3.6.5.0 is outside the tested 3.2.5 to 3.5.x');
  });
});

describe('everything checkable is checked before the long steps (item 6)', () => {
  const hostNvml = ['/usr/include/nvml.h', '/usr/local/include/nvml.h'].some(existsSync);
  const t = fakeToolchain({ nvml: false });
  const withNvmlUser = () => {
    const src = materialize('v3.4-like');
    mkdirSync(path.join(src, 'src/host/init'), { recursive: true });
    writeFileSync(path.join(src, 'src/host/init/nvmlwrap.cpp'), '#include <nvml.h>\n');
    return src;
  };
  const noTorch = path.join(tmp('py-'), 'python3');
  writeFileSync(noTorch, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  const cases: { name: string; args: (src: string) => string[]; env?: NodeJS.ProcessEnv; code: number; msg: RegExp; nvmlUser?: boolean }[] = [
    { name: 'a DeepEP path with a typo', args: () => ['--deepep-src', '/nonexistent/DeepEP'], code: 2, msg: /--deepep-src \/nonexistent\/DeepEP does not exist/ },
    { name: 'an unpinned DeepEP ref', args: () => ['--deepep-ref', 'deadbeef'], code: 2, msg: /DeepEP ref 'deadbeef' is not pinned/ },
    { name: 'a DeepEP tree of an unknown layout', args: () => ['--deepep-src', materialize('unknown-layout', GOLDEN_DEEPEP)], code: 3, msg: /not a DeepEP layout nvshmem-efa patches/ },
    { name: 'a bad --cuda-arch', args: () => ['--cuda-arch', 'sm90'], code: 2, msg: /invalid --cuda-arch 'sm90'/ },
    { name: 'a --libfabric-home that does not exist', args: () => ['--libfabric-home', '/nonexistent/efa'], code: 2, msg: /--libfabric-home \/nonexistent\/efa does not exist/ },
    { name: 'an --efa-io-defs with the wrong checksum', args: () => ['--efa-io-defs', path.join(materialize('v3.4-like'), 'CMakeLists.txt')], code: 5, msg: /is not the pinned efa_io_defs.h/ },
    { name: 'no Python with torch for a DeepEP build', args: () => ['--deepep-src', materialize('v1', GOLDEN_DEEPEP)], env: { PYTHON: noTorch }, code: 4, msg: /cannot import torch/ },
  ];
  const nvmlCase = { name: 'no nvml.h while the tree includes it', args: () => [], code: 4, msg: /nvml\.h not found .* and NVSHMEM includes it/, nvmlUser: true };
  const refusedBeforeWriting = (c: (typeof cases)[number]) => {
    const parent = tmp('parent-');
    const work = path.join(parent, 'w');
    const src = c.nvmlUser ? withNvmlUser() : materialize('v3.4-like');
    const args = ['build', '--nvshmem-src', src, '--work-dir', work, '--offline', ...(c.args(src).includes('--libfabric-home') ? [] : ['--libfabric-home', t.libfabricHome]), '--cuda-home', t.cudaHome, ...c.args(src)];
    const r = cli(args, { ...ENV, ...t.env, ...c.env });
    expect(r.stderr).toMatch(c.msg);
    expect(r.code).toBe(c.code);
    expect(ls(parent)).toEqual([]);
  };
  it.each(cases)('$name: refused with its own exit code before anything is written', refusedBeforeWriting);
  it.skipIf(hostNvml)(`${nvmlCase.name}: refused (exit 4) before anything is written${hostNvml ? ' [skipped: this host has nvml.h]' : ''}`, () => refusedBeforeWriting(nvmlCase));

  it.skipIf(hostNvml)(`doctor reports a missing nvml.h as a blocker, and not "the build can run"${hostNvml ? ' [skipped: this host has nvml.h]' : ''}`, () => {
    const r = cli(['doctor', '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--json'], { ...ENV, ...t.env });
    const doc = JSON.parse(r.stdout) as { checks: { id: string; status: string; fix: string }[]; verdict: string; summary: string };
    expect(doc.checks.find((c) => c.id === 'nvml')).toMatchObject({ status: 'fail' });
    expect(doc.checks.find((c) => c.id === 'nvml')?.fix).toContain('libnvidia-ml-dev');
    expect(doc.verdict).toBe('fail');
    expect(doc.summary).toMatch(/^not ready/);
    expect(r.code).toBe(1);
  });
});
