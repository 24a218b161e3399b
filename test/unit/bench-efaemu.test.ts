import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { benchInvocation, type BenchOptions } from '../../src/commands/bench.ts';
import { cli } from '../helpers/cli.ts';

/**
 * Issue 22, part 5: `nvshmem-efa bench --fabric efaemu` builds efaemu when not given --efaemu-build, as
 * `selftest` does (one shared builder, commands/efaemu-build.ts): from the package's native/efaemu, against the
 * build's libfabric, into <results>/efaemu-build. A stand-in cmake records its calls and "builds" the provider;
 * a stand-in bench.sh (in a copy of the package, NVSHMEM_EFA_HOME) says what it was handed.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'bench-efaemu-'));

/** A work dir whose state names an NVSHMEM install and the libfabric it was built with. */
function workDir() {
  const d = tmp();
  const prefix = path.join(d, 'nvshmem');
  const lf = path.join(d, 'libfabric');
  mkdirSync(path.join(prefix, 'lib'), { recursive: true });
  mkdirSync(path.join(lf, 'include', 'rdma'), { recursive: true });
  writeFileSync(path.join(lf, 'include', 'rdma', 'fabric.h'), '#define FI_MAJOR_VERSION 2\n');
  const wd = path.join(d, 'wd');
  mkdirSync(wd);
  writeFileSync(path.join(wd, 'state.json'), JSON.stringify({ version: 1, steps: {
    'build-nvshmem': { stamp: 'x', finishedAt: 'y', result: { prefix, cmakeArgs: [`-DLIBFABRIC_HOME=${lf}`] } } } }));
  return { d, wd, prefix, lf };
}

const opts = (o: Partial<BenchOptions>): BenchOptions => ({ workDir: '/nonexistent', fabric: 'efaemu', put: true, deepep: true, dryRun: false, ...o });

describe('nvshmem-efa bench builds efaemu when not given --efaemu-build, as selftest does', () => {
  it('plans the build against the libfabric of the work dir\'s build, into <results>/efaemu-build, and hands that to the script', () => {
    const w = workDir();
    const inv = benchInvocation(opts({ workDir: w.wd }), ROOT);
    const dir = path.join(w.wd, 'bench', 'efaemu-build');
    expect(inv.efaemuToBuild).toEqual({ libfabricHome: w.lf, dir, logPath: path.join(w.wd, 'bench', 'efaemu-build.log') });
    expect(inv.env).toMatchObject({ EFAEMU_BUILD: dir, LIBFABRIC_HOME: w.lf });
    // --libfabric-home wins over the build's; a given --efaemu-build is used as it is, nothing built.
    const other = workDir();
    expect(benchInvocation(opts({ workDir: w.wd, libfabricHome: other.lf }), ROOT).efaemuToBuild?.libfabricHome).toBe(other.lf);
    const given = path.join(w.d, 'efaemu');
    mkdirSync(path.join(given, 'prov'), { recursive: true });
    writeFileSync(path.join(given, 'prov', 'libefa-fi.so'), '');
    const withBuild = benchInvocation(opts({ workDir: w.wd, efaemuBuild: given }), ROOT);
    expect(withBuild.efaemuToBuild).toBeUndefined();
    expect(withBuild.env.EFAEMU_BUILD).toBe(given);
  });

  it('no libfabric to build against: refused before anything runs, with both ways out', () => {
    const w = workDir();
    const r = cli(['bench', '--work-dir', w.wd, '--libfabric-home', path.join(w.d, 'nvshmem')]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`needs the emulated NIC (--efaemu-build), or a libfabric to build it against: ${path.join(w.d, 'nvshmem')} has no include/rdma/fabric.h`);
    expect(r.stderr).toMatch(/fix: pass --libfabric-home DIR .*bench builds efaemu against it.*or --efaemu-build DIR/);
    expect(existsSync(path.join(w.wd, 'bench'))).toBe(false);
  });

  it('--dry-run says it would build efaemu, then the run with it', () => {
    const w = workDir();
    const r = cli(['bench', '--work-dir', w.wd, '--dry-run']);
    expect(r.code, r.stderr).toBe(0);
    const dir = path.join(w.wd, 'bench', 'efaemu-build');
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe(`would build efaemu against ${w.lf} into ${dir}`);
    expect(lines[1]).toMatch(new RegExp(`^would run: .*EFAEMU_BUILD=${dir} LIBFABRIC_HOME=${w.lf} .*bench\\.sh --fabric efaemu$`));
    // selftest plans the same build the same way (the shared builder's place in a results dir).
    const s = cli(['selftest', '--work-dir', w.wd, '--checks', 'fi_info', '--results', path.join(w.wd, 'bench'), '--dry-run']);
    expect(s.stdout).toContain(`would build efaemu against ${w.lf} into ${dir}`);
  });

  it('builds it with cmake from the package\'s native/efaemu, then runs the script with it', () => {
    const w = workDir();
    // A stand-in cmake: records each call, and "builds" the provider library on --build.
    const bin = path.join(w.d, 'bin');
    mkdirSync(bin);
    const calls = path.join(w.d, 'cmake-calls');
    writeFileSync(path.join(bin, 'cmake'), `#!/bin/sh\necho "$*" >> "${calls}"\n[ "$1" = --build ] && mkdir -p "$2/prov" && touch "$2/prov/libefa-fi.so"\nexit 0\n`);
    chmodSync(path.join(bin, 'cmake'), 0o755);
    // A copy of the package whose bench.sh says what it was handed.
    const pkg = path.join(w.d, 'pkg');
    for (const p of ['package.json', 'templates', 'native/efaemu/CMakeLists.txt']) cpSync(path.join(ROOT, p), path.join(pkg, p), { recursive: true });
    const script = path.join(pkg, 'bench', 'gda-signals', 'bench.sh');
    mkdirSync(path.dirname(script), { recursive: true });
    writeFileSync(script, '#!/usr/bin/env bash\necho "bench.sh: EFAEMU_BUILD=$EFAEMU_BUILD $*"\n[ -f "$EFAEMU_BUILD/prov/libefa-fi.so" ] && echo "bench.sh: the provider is there"\nexit 0\n');
    const r = cli(['bench', '--work-dir', w.wd, '--no-deepep'], { ...process.env, PATH: `${bin}:${process.env.PATH}`, NVSHMEM_EFA_HOME: pkg, CI: 'true', NO_COLOR: '1' });
    expect(r.code, r.stderr).toBe(0);
    const dir = path.join(w.wd, 'bench', 'efaemu-build');
    const made = readFileSync(calls, 'utf8').trim().split('\n');
    expect(made[0]).toMatch(new RegExp(`^-S ${path.join(pkg, 'native', 'efaemu')} -B ${dir} (-G Ninja )?-DLIBFABRIC_PREFIX=${w.lf} -DEFAEMU_TESTS=OFF$`));
    expect(made[1]).toBe(`--build ${dir}`);
    expect(r.stderr).toContain(`building efaemu against ${w.lf} in ${dir}`);
    expect(r.stdout).toContain(`bench.sh: EFAEMU_BUILD=${dir} --fabric efaemu --no-deepep`);
    expect(r.stdout).toContain('bench.sh: the provider is there');
    expect(existsSync(path.join(w.wd, 'bench', 'efaemu-build.log'))).toBe(true);
  });
});
