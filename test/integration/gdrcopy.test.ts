import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GDRCOPY_PREFIXES } from '../../src/core/gdrcopy-prefixes.ts';
import { cli, IO_DEFS, report, spawnCli, stepStatus, tmp, type CliResult } from '../helpers/cli.ts';
import { commitAndTag, serveDir, tarball } from '../helpers/fake-fabric.ts';
import { fakeGdrcopyTree, gdrcopyLock, gdrdrvSysroot } from '../helpers/fake-gdrcopy.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 22, part 3: GDRCopy's user library built from its pinned source when the host has none, with the real
 * CLI, make and cc on a miniature gdrcopy project of ours served from 127.0.0.1 (never the network) through a
 * lock that pins its checksum as third_party/gdrcopy/lock.json pins the real archive. NVSHMEM's build is the fake
 * toolchain's (fast): what it was configured with is in the report's cmake arguments.
 */
const HOST_GDRCOPY = GDRCOPY_PREFIXES.find((h) => existsSync(path.join(h, 'include', 'gdrapi.h')));
const t = fakeToolchain();
// Nothing of the caller's environment decides where GDRCopy comes from.
const { LIBFABRIC_HOME: _lf, CUDA_HOME: _ch, CUDA_PATH: _cp, GDRCOPY_HOME: _gh, NVSHMEM_EFA_GDRCOPY: _g0, NVSHMEM_EFA_GDRCOPY_URL: _gu, NVSHMEM_EFA_GDRCOPY_GIT: _gg, ...BASE } = t.env;
const src = materialize('v3.4-like');
const args = (work: string, extra: string[] = []) => ['build', '--nvshmem-src', src, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS, ...extra];

/** The CLI in the background: the archive server runs in this process, which spawnSync would block. */
async function run(a: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const r = spawnCli(a, env);
  const { code } = await r.exited;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

describe.skipIf(!!HOST_GDRCOPY)(`GDRCopy from pinned sources${HOST_GDRCOPY ? ` [skipped: this host has GDRCopy at ${HOST_GDRCOPY}]` : ''}`, () => {
  let server: Awaited<ReturnType<typeof serveDir>>;
  let sum: string;
  let env: NodeJS.ProcessEnv;
  const work = tmp();
  const prefix = path.join(work, 'install/gdrcopy');

  beforeAll(async () => {
    const archives = tmp('nvshmem-efa-archives-');
    sum = tarball(fakeGdrcopyTree(tmp('nvshmem-efa-gdr-')), 'gdrcopy-2.5.1', path.join(archives, 'gdrcopy-2.5.1.tar.gz')).sha256;
    server = await serveDir(archives);
    env = { ...BASE, NVSHMEM_EFA_GDRCOPY_LOCK: gdrcopyLock({ sha256: sum, baseUrl: server.url }) };
  });
  afterAll(async () => server?.close());

  it('build on a host without gdrapi.h builds libgdrapi from the pinned source, configures NVSHMEM with it, puts its lib/ on LD_LIBRARY_PATH and reports the fix', async () => {
    const r = await run(args(work, ['--jobs', '2']), env);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(server.requests).toEqual(['/gdrcopy-2.5.1.tar.gz']);
    expect(stepStatus(work)).toMatchObject({ gdrcopy: 'done', 'build-nvshmem': 'done' });
    // Before the builds that use it.
    const ids = report(work).steps.map((s) => s.id);
    expect(ids.indexOf('gdrcopy')).toBeLessThan(ids.indexOf('libfabric'));
    expect(ids.indexOf('gdrcopy')).toBeLessThan(ids.indexOf('build-nvshmem'));
    for (const f of ['lib/libgdrapi.so', 'lib/libgdrapi.so.2', 'include/gdrapi.h']) expect(existsSync(path.join(prefix, f)), f).toBe(true);
    expect(execFileSync('nm', ['-D', '--defined-only', path.join(prefix, 'lib/libgdrapi.so')], { encoding: 'utf8' })).toMatch(/ T gdr_open$/m);
    const rep = report(work);
    expect(rep.nvshmem.cmakeArgs).toContain('-DNVSHMEM_USE_GDRCOPY=ON');
    expect(rep.nvshmem.cmakeArgs).toContain(`-DGDRCOPY_HOME=${prefix}`);
    expect((rep.environment as { gdrcopy?: { home: string } }).gdrcopy).toEqual({ home: prefix, build: true });
    // A dry run shows the configure line the build ran (the GDRCopy it is going to build).
    const dry = cli([...args(work), '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(`-DGDRCOPY_HOME=${prefix}`);
    expect(dry.stdout).toContain(`# gdrcopy: build libgdrapi from pinned sources (third_party/gdrcopy/lock.json) into ${prefix}`);
    expect(rep.runtimeEnv.LD_LIBRARY_PATH?.split(':')).toContain(path.join(prefix, 'lib'));
    const fix = rep.fixes.find((f) => f.id === 'gdrcopy-source');
    expect(fix).toMatchObject({ status: 'applied', anchor: expect.stringContaining('gdrcopy v2.5.1') });
    expect(fix?.detail).toContain(`${server.url}/gdrcopy-2.5.1.tar.gz (sha256 ${sum})`);
    expect(fix?.detail).toContain(prefix);
    // Built, so not the old warning that NVSHMEM goes without it.
    expect(rep.fixes.map((f) => f.id)).not.toContain('gdrcopy-missing');
    // Kept for reruns and --offline, under a name that says what it is.
    expect(readdirSync(path.join(work, 'downloads'))).toEqual(['gdrcopy-2.5.1.tar.gz']);
  });

  it('a rerun fetches and rebuilds nothing, and the report still has the fix and the library path', async () => {
    const before = server.requests.length;
    const r = await run(args(work), env);
    expect(r.code, r.stderr).toBe(0);
    expect(server.requests.length).toBe(before);
    expect(stepStatus(work)).toMatchObject({ gdrcopy: 'skipped', 'build-nvshmem': 'skipped' });
    const rep = report(work);
    expect(rep.steps.find((s) => s.id === 'gdrcopy')?.reason).toBe('up to date');
    expect(rep.fixes.find((f) => f.id === 'gdrcopy-source')?.status).toBe('applied');
    expect(rep.nvshmem.cmakeArgs).toContain(`-DGDRCOPY_HOME=${prefix}`);
    expect(rep.runtimeEnv.LD_LIBRARY_PATH?.split(':')).toContain(path.join(prefix, 'lib'));
  });

  it('an archive whose sha256 is not the pin is refused (exit 5) naming both checksums, and nothing is cached or installed', async () => {
    const bad = path.join(tmp('nvshmem-efa-bad-'), 'gdrcopy-2.5.1.tar.gz');
    tarball(fakeGdrcopyTree(tmp('nvshmem-efa-gdr-'), { marker: 'tampered' }), 'gdrcopy-2.5.1', bad);
    const w = tmp();
    const r = await run(args(w), { ...env, NVSHMEM_EFA_GDRCOPY_URL: `file://${bad}` });
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toMatch(new RegExp(`is not the pinned gdrcopy v2\\.5\\.1 archive: sha256 [0-9a-f]{64}, expected ${sum}`));
    expect(existsSync(path.join(w, 'downloads')) ? readdirSync(path.join(w, 'downloads')) : []).toEqual([]);
    expect(existsSync(path.join(w, 'install/gdrcopy'))).toBe(false);
    expect(report(w).ok).toBe(false);
  });

  it('--offline with nothing cached: exit 4 before anything is written, naming the archive and how to provide it', () => {
    const w = path.join(tmp(), 'new');
    const r = cli([...args(w), '--offline'], env);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toMatch(/--offline, and the pinned sources to build are not cached/);
    expect(r.stderr).toContain(`gdrcopy v2.5.1 (${server.url}/gdrcopy-2.5.1.tar.gz, sha256 ${sum})`);
    expect(r.stderr).toMatch(/fix: download .* and pass NVSHMEM_EFA_GDRCOPY_URL=file:\/\/\/path\/to\/gdrcopy-2\.5\.1\.tar\.gz/);
    expect(r.stderr).toContain('--gdrcopy-home');
    expect(existsSync(w)).toBe(false);
  });

  it('GDRCOPY_HOME or --gdrcopy-home naming a GDRCopy: the step is skipped saying which, nothing fetched, NVSHMEM configured with it', async () => {
    const mine = tmp('nvshmem-efa-mygdr-');
    mkdirSync(path.join(mine, 'include'));
    mkdirSync(path.join(mine, 'lib'));
    writeFileSync(path.join(mine, 'include/gdrapi.h'), '#define GDR_API_MAJOR_VERSION 2\n');
    writeFileSync(path.join(mine, 'lib/libgdrapi.so'), '');
    const before = server.requests.length;
    for (const [extra, e, label] of [
      [[], { ...env, GDRCOPY_HOME: mine }, `GDRCOPY_HOME=${mine}`],
      [['--gdrcopy-home', mine], env, `--gdrcopy-home ${mine}`],
    ] as const) {
      const w = tmp();
      const r = await run(args(w, [...extra]), e);
      expect(r.code, r.stderr).toBe(0);
      const rep = report(w);
      expect(rep.steps.find((s) => s.id === 'gdrcopy')).toMatchObject({ status: 'skipped', reason: expect.stringContaining(label) });
      expect(rep.nvshmem.cmakeArgs).toContain(`-DGDRCOPY_HOME=${mine}`);
      // NVSHMEM and libfabric dlopen libgdrapi.so.2 by name: a GDRCopy off the default paths must be on
      // LD_LIBRARY_PATH (the container image's /opt/gdrcopy was not, found by test/container/image.test.ts).
      expect(rep.runtimeEnv.LD_LIBRARY_PATH?.split(':')).toContain(path.join(mine, 'lib'));
      expect(existsSync(path.join(w, 'install/gdrcopy'))).toBe(false);
    }
    expect(server.requests.length).toBe(before);
  });

  it('NVSHMEM_EFA_GDRCOPY=0: skipped, and the report says that the EFA provider will refuse to start (no silent fallback)', async () => {
    const w = tmp();
    const before = server.requests.length;
    const r = await run(args(w), { ...env, NVSHMEM_EFA_GDRCOPY: '0' });
    expect(r.code, r.stderr).toBe(0);
    const rep = report(w);
    expect(rep.steps.find((s) => s.id === 'gdrcopy')).toMatchObject({ status: 'skipped', reason: expect.stringMatching(/NVSHMEM_EFA_GDRCOPY=0.*EFA provider will refuse to start/) });
    expect(rep.fixes.find((f) => f.id === 'gdrcopy-missing')).toMatchObject({ status: 'warned', detail: expect.stringMatching(/NVSHMEM_EFA_GDRCOPY=0.*EFA Provider requires GDRCopy/) });
    expect(rep.nvshmem.cmakeArgs).toContain('-DNVSHMEM_USE_GDRCOPY=OFF');
    expect(server.requests.length).toBe(before);
  });

  it('a git mirror (NVSHMEM_EFA_GDRCOPY_GIT): built from the clone whose tag is the pinned commit', async () => {
    const repo = fakeGdrcopyTree(tmp('nvshmem-efa-gdrgit-'), { marker: 'from-git' });
    const commit = commitAndTag(repo, 'v2.5.1', 'fake gdrcopy');
    const w = tmp();
    const before = server.requests.length;
    const r = await run(args(w), { ...env, NVSHMEM_EFA_GDRCOPY_GIT: repo, NVSHMEM_EFA_GDRCOPY_LOCK: gdrcopyLock({ sha256: sum, baseUrl: server.url, commit }) });
    expect(r.code, r.stderr).toBe(0);
    expect(server.requests.length).toBe(before);
    expect(readFileSync(path.join(w, 'install/gdrcopy/lib/libgdrapi.so'), 'latin1')).toContain('from-git');
    expect(report(w).fixes.find((f) => f.id === 'gdrcopy-source')?.detail).toContain(`commit ${commit}`);
  });
});

describe('doctor: the gdrdrv kernel module on a host with EFA devices', () => {
  const doctor = (root: string) => {
    const r = cli(['doctor', '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--json'], { ...BASE, NVSHMEM_EFA_SYSROOT: root });
    const doc = JSON.parse(r.stdout) as { checks: { id: string; status: string; evidence: string; fix: string }[]; verdict: string; summary: string };
    return { code: r.code, gdrdrv: doc.checks.find((c) => c.id === 'gdrdrv'), verdict: doc.verdict, summary: doc.summary };
  };

  it('an EFA device and no /dev/gdrdrv: a failure with the fix, not a warning', () => {
    const d = doctor(gdrdrvSysroot({ efa: true }));
    expect(d.gdrdrv).toMatchObject({ status: 'fail', evidence: expect.stringMatching(/rdmap0s6.*no \/dev\/gdrdrv/) });
    expect(d.gdrdrv?.fix).toMatch(/gdrdrv/);
    expect(d.gdrdrv?.fix).toMatch(/make driver/);
    expect(d.gdrdrv?.fix).toMatch(/dkms/);
    expect(d.code).toBe(1);
    expect(d.verdict).toBe('fail');
    expect(d.summary).toMatch(/^not ready/);
  });

  it('a gdrdrv older than 2.4 fails, 2.5 passes; a host without EFA devices has no gdrdrv check', () => {
    const old = doctor(gdrdrvSysroot({ efa: true, dev: true, version: '2.3' }));
    expect(old.gdrdrv).toMatchObject({ status: 'fail', evidence: expect.stringContaining('gdrdrv 2.3') });
    expect(old.gdrdrv?.fix).toMatch(/gdrdrv/);
    expect(doctor(gdrdrvSysroot({ efa: true, dev: true, version: '2.5' })).gdrdrv).toMatchObject({ status: 'pass', evidence: expect.stringContaining('gdrdrv 2.5') });
    expect(doctor(gdrdrvSysroot({ efa: false })).gdrdrv).toBeUndefined();
  });
});
