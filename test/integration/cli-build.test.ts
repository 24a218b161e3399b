import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ReportSchema } from '../../src/core/report.ts';
import { spawnCli } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { HOST_LIBFABRIC_ENV, needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = path.join(ROOT, 'bin', 'nvshmem-efa.js');
// CI cannot download rdma-core's efa_io_defs.h: the runs vendor our own test header instead, through a lock
// that pins its checksum the way third_party/efa_gda/lock.json pins the upstream file.
const IO_DEFS = path.join(ROOT, 'test/efa_abi/efa_io_defs.h');
const LOCK = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-lock-')), 'lock.json');
writeFileSync(
  LOCK,
  JSON.stringify({
    ...JSON.parse(readFileSync(path.join(ROOT, 'third_party/efa_gda/lock.json'), 'utf8')),
    sha256: createHash('sha256').update(readFileSync(IO_DEFS)).digest('hex'),
  }),
);
const ENV: NodeJS.ProcessEnv = { ...process.env, ...HOST_LIBFABRIC_ENV, CI: 'true', NO_COLOR: '1', NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
const NVCC = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));

function cli(args: string[], env = ENV): { code: number; stdout: string; stderr: string } {
  // stderr kept on success too: the progress lines are there.
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
}

// Without --deepep-src / --deepep-ref the DeepEP steps are listed as skipped, with the reason.
// With the host's libfabric named (LIBFABRIC_HOME), rdma-core and libfabric are not built: skipped, with the reason.
const NO_DEEPEP = { 'get-deepep': 'skipped', 'patch-deepep': 'skipped', 'build-deepep': 'skipped', 'rdma-core': 'skipped', libfabric: 'skipped', fabtests: 'skipped', gdrcopy: 'skipped' };
const report = (work: string) => ReportSchema.parse(JSON.parse(readFileSync(path.join(work, 'report.json'), 'utf8')));
const stepStatus = (work: string) => Object.fromEntries(report(work).steps.map((s) => [s.id, s.status]));

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('nvshmem-efa build on the miniature NVSHMEM project (real cmake + g++)'), () => {
  const src = materialize('v3.4-like');
  const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));

  it('patches, configures, compiles and installs the transport with the EFA GDA template', () => {
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work, '--jobs', '2', '--efa-io-defs', IO_DEFS]);
    expect(r.stderr + r.stdout).not.toMatch(/error:/);
    expect(r.code).toBe(0);
    const rep = report(work);
    expect(rep.ok).toBe(true);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'done', 'vendor-efa-io-defs': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done', probe: 'done', ...NO_DEEPEP });
    // Progress a person can read (CI=true: the log renderer): the compile as percentages with elapsed time, and
    // every step's duration at the end.
    expect(r.stdout + r.stderr).toMatch(/\d+% \[\d+\/\d+\] (\d+\.\ds|\d+s|\d+m \d\ds) elapsed/);
    expect(r.stdout).toMatch(/^steps:\n(  \S+ +\S+  [\w-]+.*\n)+/m);
    expect(r.stdout).toMatch(/^  done +(\d+\.\ds|\d+s|\d+m \d\ds)  build-nvshmem$/m);
    // The probe ran on this host (no EFA device here) and its verdict is in the report.
    expect(rep.probe?.verdict).toMatch(/EFA/);
    const so = path.join(work, 'install/nvshmem/lib/nvshmem_transport_libfabric.so');
    const exported = execFileSync('nm', ['-D', '--defined-only', so], { encoding: 'utf8' });
    for (const sym of ['nvshmemx_efa_gda_status', 'nvshmemx_efa_gda_is_active', 'nvshmemx_efa_gda_get_device_state']) {
      expect(exported).toMatch(new RegExp(` T ${sym}$`, 'm'));
    }
    expect(exported).not.toMatch(/nvshmemt_efa_gda_init/);
    // The GDA public and device headers are installed with NVSHMEM's, next to the vendored efa_io_defs.h.
    const inc = path.join(work, 'install/nvshmem/include/nvshmem_efa');
    // Every one the manifest lists (the device API is split in parts the umbrella header includes).
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'templates/transport_efa_gda/manifest.json'), 'utf8')) as { installHeaders: string[] };
    expect(manifest.installHeaders).toEqual(expect.arrayContaining(['nvshmemx_efa_gda.h', 'nvshmemx_efa_gda_wqe.h', 'nvshmemx_efa_gda_device.cuh', 'efa_io_defs.h']));
    for (const h of manifest.installHeaders) {
      expect(existsSync(path.join(inc, h)), h).toBe(true);
    }
    expect(rep.fixes.find((f) => f.id === 'vendor-efa-io-defs')?.status).toBe('applied');
    // The module build gets the template sources too.
    expect(existsSync(path.join(work, 'build/nvshmem/src/share/src/transport-plugins/libfabric/efa_gda/transport_efa_gda.cpp'))).toBe(true);
    const ids = rep.fixes.map((f) => `${f.id}:${f.status}`);
    expect(ids).toContain('efa-gda-init:applied');
    expect(ids).toContain('efa-gda-cmake:applied');
    // Without a driver (CI, this machine) the tool must have generated the link stub; with one it is not needed.
    const envLibcuda = (rep.environment as { libcuda: { kind: string } }).libcuda.kind;
    if (envLibcuda === 'none') expect(ids).toContain('cuda-driver-link-stub:applied');
    // Debian's libfabric 1.17 has no GDA ops: the transport is built with GDA compiled out, and says why.
    expect(rep.gda.status).toBe('unavailable');
    expect(rep.gda.reason).toMatch(/libfabric 1\.17.*2\.3\.0/);
    expect(rep.runtimeEnv).toMatchObject({ NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_LIBFABRIC_PROVIDER: 'efa', FI_EFA_ENABLE_SHM_TRANSFER: '0', NVSHMEM_EFA_GDA_ENABLE: '0' });
    expect(readFileSync(path.join(work, 'report.md'), 'utf8')).toContain('| applied | efa-gda-init |');
    // The user's tree is never touched without --in-place.
    expect(readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8')).not.toContain('nvshmem-efa:begin');
  });

  it.skipIf(!NVCC)(skipTitle('a kernel compiles against the installed GDA device header (nvcc, sm_90)', !NVCC && 'no nvcc in /usr/local/cuda/bin or /usr/local/bin'), () => {
    const inc = path.join(work, 'install/nvshmem/include/nvshmem_efa');
    const cu = path.join(work, 'user_kernel.cu');
    writeFileSync(
      cu,
      [
        '#include <nvshmemx_efa_gda_device.cuh>',
        '__global__ void k(nvshmemx_efa_gda_device_state_t *s, char *dst, const char *src, int *err) {',
        '    int e = efa_gda_put_nbi_warp(s, dst, src, 4096, 1);',
        '    if ((threadIdx.x & 31) == 0) *err = e ? e : efa_gda_quiet(s);',
        '}',
        '',
      ].join('\n'),
    );
    execFileSync(NVCC!, ['-std=c++17', '-arch=sm_90', '-c', cu, '-I', inc, '-o', path.join(work, 'user_kernel.o')], { stdio: 'pipe' });
    expect(existsSync(path.join(work, 'user_kernel.o'))).toBe(true);
  });

  it('skips every step but detection on the first rerun with nothing changed', () => {
    // NVSHMEM's build writes these into its source tree (so does the miniature's): outputs, not edits.
    for (const f of ['git_commit.txt', 'version.txt']) expect(existsSync(path.join(work, 'sources/nvshmem', f)), f).toBe(true);
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work, '--efa-io-defs', IO_DEFS]);
    expect(r.code).toBe(0);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'skipped', 'vendor-efa-io-defs': 'skipped', 'patch-nvshmem': 'skipped', 'build-nvshmem': 'skipped', probe: 'skipped', ...NO_DEEPEP });
  });

  it('refuses an efa_io_defs.h whose checksum differs from the lock (exit 5), naming both checksums', () => {
    const wrong = path.join(work, 'wrong_efa_io_defs.h');
    writeFileSync(wrong, readFileSync(IO_DEFS, 'utf8') + '\n/* edited */\n');
    const w2 = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', w2, '--efa-io-defs', wrong]);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/is not the pinned efa_io_defs.h: sha256 [0-9a-f]{64}, expected [0-9a-f]{64}/);
    expect(r.stderr).toMatch(/^fix: use exactly providers\/efa\/efa_io_defs.h of linux-rdma\/rdma-core at v60.0/m);
  });

  it('offline without --efa-io-defs still patches, and the report says the device headers lack efa_io_defs.h', () => {
    const w2 = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', w2, '--offline']);
    expect(r.code).toBe(0);
    const fix = report(w2).fixes.find((f) => f.id === 'vendor-efa-io-defs');
    expect(fix?.status).toBe('warned');
    expect(fix?.detail).toContain('--efa-io-defs PATH');
    expect(existsSync(path.join(w2, 'sources/nvshmem/src/modules/transport/libfabric/efa_gda/efa_io_defs.h'))).toBe(false);
  });

  it('resumes from the unfinished step after the run is killed', async () => {
    const child = spawn(process.execPath, [BIN, 'build', '--nvshmem-src', src, '--work-dir', work, '--force', '--efa-io-defs', IO_DEFS], { env: ENV, stdio: 'ignore', detached: true });
    const log = path.join(work, 'logs/build-nvshmem.log');
    const before = existsSync(log) ? readFileSync(log, 'utf8').length : 0;
    // Kill the whole process group once the build step has started writing its log.
    for (let i = 0; i < 600 && !(existsSync(log) && readFileSync(log, 'utf8').length > before); i++) await new Promise((r) => setTimeout(r, 50));
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((r) => child.on('exit', r));
    const state = JSON.parse(readFileSync(path.join(work, 'state.json'), 'utf8'));
    // Finished steps keep their stamps (the probe's from the first run); build-nvshmem's was removed when it started.
    expect(Object.keys(state.steps).sort()).toEqual(['get-nvshmem', 'patch-nvshmem', 'probe', 'vendor-efa-io-defs']);
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work, '--efa-io-defs', IO_DEFS]);
    expect(r.code).toBe(0);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'skipped', 'vendor-efa-io-defs': 'skipped', 'patch-nvshmem': 'skipped', 'build-nvshmem': 'done', probe: 'skipped', ...NO_DEEPEP });
  });

  it('report prints the last report', () => {
    const r = cli(['report', '--work-dir', work]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('# nvshmem-efa build report');
  });
});

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric("NVSHMEM 3.4's combined static library (real cmake + g++)"), () => {
  const src = materialize('v3.4-like');
  const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-static-'));
  const lib = (f: string) => path.join(work, 'install/nvshmem', f);
  const staticFix = () => report(work).fixes.find((f) => f.id === 'nvshmem-static-lib');
  const build = (extra: string[] = []) => cli(['build', '--nvshmem-src', src, '--work-dir', work, '--jobs', '2', '--efa-io-defs', IO_DEFS, ...extra]);

  it('is not built by default, and the report says what was left out, why, and the flag that builds it', () => {
    const r = build();
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(lib('lib/libnvshmem_host.so'))).toBe(true);
    expect(existsSync(lib('lib/libnvshmem.a'))).toBe(false);
    expect(existsSync(lib('bin/nvshmem-info'))).toBe(false);
    expect(existsSync(path.join(work, 'build/nvshmem/src/libnvshmem.a'))).toBe(false);
    expect(staticFix()).toMatchObject({ status: 'applied' });
    expect(staticFix()?.detail).toMatch(/not built: lib\/libnvshmem\.a and bin\/nvshmem-info.*--nvshmem-static/);
    expect(report(work).fixes.map((f) => `${f.id}:${f.status}`)).toEqual(expect.arrayContaining(['nvshmem-static-lib-switch:applied', 'nvshmem-static-lib-install:applied']));
    expect(readFileSync(path.join(work, 'report.md'), 'utf8')).toContain('| applied | nvshmem-static-lib |');
  });

  it('--nvshmem-static builds and installs it with nvshmem-info, as NVSHMEM does', () => {
    const r = build(['--nvshmem-static']);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(lib('lib/libnvshmem.a'))).toBe(true);
    expect(existsSync(lib('bin/nvshmem-info'))).toBe(true);
    expect(staticFix()).toMatchObject({ status: 'already-present' });
  });

  it('a default build after it removes the installed copies (CMake keeps the cache and never deletes installed files)', () => {
    const r = build();
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(lib('lib/libnvshmem.a'))).toBe(false);
    expect(existsSync(lib('bin/nvshmem-info'))).toBe(false);
    expect(readFileSync(path.join(work, 'build/nvshmem/CMakeCache.txt'), 'utf8')).toMatch(/^NVSHMEM_EFA_NO_STATIC_LIB:[A-Z]+=ON$/m);
  });

  it('--nvshmem-static on a tree without the library (the AWS 3.5.7 shape) warns there is none to build and passes no switch', () => {
    const t = fakeToolchain();
    const w = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-static-none-'));
    const r = cli(['build', '--nvshmem-src', materialize('multi-rail'), '--work-dir', w, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome,
      '--efa-io-defs', IO_DEFS, '--nvshmem-static'], { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK });
    expect(r.code, r.stderr).toBe(0);
    const rep = report(w);
    expect(rep.fixes.find((f) => f.id === 'nvshmem-static-lib')).toMatchObject({ status: 'warned', detail: expect.stringMatching(/no combined static library to build/) });
    expect(rep.fixes.map((f) => f.id)).not.toContain('nvshmem-static-lib-switch');
    expect(JSON.stringify(rep)).not.toContain('NVSHMEM_EFA_NO_STATIC_LIB=');
  });
});

describe('nvshmem-efa patch', () => {
  it('--dry-run prints a diff and changes nothing', () => {
    const src = materialize('v3.4-like');
    const before = readFileSync(path.join(src, 'src/CMakeLists.txt'), 'utf8');
    const w = path.join(mkdtempSync(path.join(os.tmpdir(), 'w-')), '.w');
    const r = cli(['patch', '--nvshmem-src', src, '--dry-run', '--work-dir', w]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^diff --git a\/nvshmem_transport.sym/);
    expect(r.stdout).toContain('+    nvshmemt_efa_gda_fini();');
    expect(readFileSync(path.join(src, 'src/CMakeLists.txt'), 'utf8')).toBe(before);
    expect(existsSync(w)).toBe(false);
  });

  it('--in-place patches the tree, and a second run changes nothing', () => {
    const src = materialize('v3.4-like');
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    expect(cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--offline']).code).toBe(0);
    const after = readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8');
    expect(after).toContain('/* nvshmem-efa:begin efa-gda-init */');
    expect(cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--force', '--offline']).code).toBe(0);
    expect(readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8')).toBe(after);
    expect(report(work).fixes.filter((f) => f.file && f.id !== 'vendor-efa-io-defs').every((f) => f.status === 'already-present')).toBe(true);
  });

  it('--dry-run names the layout after the diff, --json carries it with the version, --export names it', () => {
    const w = path.join(mkdtempSync(path.join(os.tmpdir(), 'w-')), '.w');
    const multi = cli(['patch', '--nvshmem-src', materialize('multi-rail'), '--dry-run', '--work-dir', w]);
    expect(multi.code).toBe(0);
    expect(multi.stdout).toMatch(/^diff --git /);
    expect(multi.stdout).toContain('+        if (nvshmemt_efa_gda_init_rails(efa_gda_rails > 0 ? state->prov_infos.data() + 1 : NULL, efa_gda_rails,');
    expect(multi.stdout.trimEnd().split('\n').pop()).toBe(
      "# NVSHMEM 3.5.7.0; NVSHMEM libfabric layout: multi-rail (per-PE domains vector, up to NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE NICs, as in AWS's devel-aws-2025-11-25)",
    );
    const single = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--dry-run', '--work-dir', w]);
    expect(single.stdout.trimEnd().split('\n').pop()).toMatch(/^# NVSHMEM 3\.4\.5\.0; NVSHMEM libfabric layout: single-rail /);
    // The single-rail hook passes NVSHMEM's one fi_info (the templates themselves define init_rails too).
    expect(single.stdout).toContain('+        if (nvshmemt_efa_gda_init(state->prov_info, &efa_gda_boot) != 0) {');
    expect(single.stdout).not.toContain('prov_infos.data()');
    const json = JSON.parse(cli(['patch', '--nvshmem-src', materialize('multi-rail'), '--dry-run', '--json', '--work-dir', w]).stdout);
    expect(json).toMatchObject({ version: '3.5.7.0', layout: { id: 'multi-rail' } });
    expect(json.diff).toContain('nvshmemt_efa_gda_init_rails');
    const exported = cli(['patch', '--nvshmem-src', materialize('multi-rail'), '--export', path.join(mkdtempSync(path.join(os.tmpdir(), 'x-')), 'out'), '--work-dir', w]);
    expect(exported.stdout).toContain('nvshmem: planned for the NVSHMEM libfabric layout: multi-rail (');
    expect(existsSync(w)).toBe(false);
  });

  it('patches a multi-rail tree, names its layout in the output, report.json and report.md, and changes nothing the second time', () => {
    const src = materialize('multi-rail');
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const first = cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--offline']);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('NVSHMEM libfabric layout: multi-rail (per-PE domains vector');
    expect(report(work).nvshmem.layout?.id).toBe('multi-rail');
    expect(report(work).nvshmem.source?.version).toBe('3.5.7.0');
    expect(readFileSync(path.join(work, 'report.md'), 'utf8')).toContain('- NVSHMEM libfabric layout: multi-rail (per-PE domains vector, up to NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE NICs');
    const after = readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8');
    expect(cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--force', '--offline']).code).toBe(0);
    expect(readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8')).toBe(after);
    expect(report(work).fixes.filter((f) => f.file && f.id !== 'vendor-efa-io-defs').every((f) => f.status === 'already-present')).toBe(true);
    expect(report(work).nvshmem.layout?.id).toBe('multi-rail');
  });

  it('exits 3 on a libfabric state of neither layout, naming both and what it found', () => {
    const r = cli(['patch', '--nvshmem-src', materialize('multi-rail-host-proxy-split'), '--work-dir', mkdtempSync(path.join(os.tmpdir(), 'w-')), '--offline']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('libfabric-state-shape: nvshmemt_libfabric_state_t matches neither layout nvshmem-efa patches');
    expect(r.stderr).toContain('num_host_domains/num_proxy_domains split');
    expect(r.stderr).toMatch(/^fix: .*single-rail.*multi-rail/m);
  });

  it('exits 3 naming the file and the function when connect_endpoints is renamed', () => {
    const src = materialize('anchor-missing');
    const w = mkdtempSync(path.join(os.tmpdir(), 'w-'));
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', w, '--offline']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('src/modules/transport/libfabric/libfabric.cpp: no definition of nvshmemt_libfabric_connect_endpoints() found');
    expect(r.stderr).toMatch(/^fix: /m);
    expect(report(w).ok).toBe(false);
  });

  it('exits 2 on a usage error, with the fix', () => {
    const r = cli(['build', '--nvshmem-src', 'a', '--nvshmem-ref', 'v3.4.5-0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('fix: pass --nvshmem-src DIR');
  });
});

describe('nvshmem-efa --nvshmem-ref (real git clone from a file:// mirror)', () => {
  it('clones the pinned tag, and refuses a tree whose commit is not the pinned one (exit 5), naming both commits', () => {
    const tree = materialize('v3.4-like');
    const git = (...a: string[]) => execFileSync('git', a, { cwd: tree, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
    git('init', '-q');
    git('add', '-A');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'fixture');
    git('tag', 'v3.4.5-0');
    const head = git('rev-parse', 'HEAD');
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const env = { ...ENV, NVSHMEM_EFA_NVSHMEM_URL: `file://${tree}` };
    let r: { code: number; stderr: string };
    try {
      execFileSync(process.execPath, [BIN, 'patch', '--nvshmem-ref', 'v3.4.5-0', '--work-dir', work, '--offline'], { env, stdio: 'pipe', encoding: 'utf8' });
      r = { code: 0, stderr: '' };
    } catch (e) {
      r = { code: (e as { status: number }).status, stderr: (e as { stderr: string }).stderr };
    }
    // --offline with nothing cached: exit 4 and the way out.
    expect(r.code).toBe(4);
    try {
      execFileSync(process.execPath, [BIN, 'patch', '--nvshmem-ref', 'v3.4.5-0', '--work-dir', work], { env, stdio: 'pipe', encoding: 'utf8' });
      r = { code: 0, stderr: '' };
    } catch (e) {
      r = { code: (e as { status: number }).status, stderr: (e as { stderr: string }).stderr };
    }
    expect(r.code).toBe(5);
    expect(r.stderr).toContain(`v3.4.5-0 resolved to ${head}, but the pin says 131da55f643ac87c810ba0bc51d359258bf433a1`);
    // Nothing half-fetched is left behind.
    expect(existsSync(path.join(work, 'sources/nvshmem-v3.4.5-0'))).toBe(false);
    expect(existsSync(path.join(work, 'sources/nvshmem-v3.4.5-0.partial'))).toBe(false);
  });

  it('refuses a ref that is not pinned (exit 2)', () => {
    const r = cli(['patch', '--nvshmem-ref', 'v9.9.9', '--work-dir', mkdtempSync(path.join(os.tmpdir(), 'w-'))]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("NVSHMEM ref 'v9.9.9' is not pinned (pinned: v3.4.5-0)");
  });
});

describe('nvshmem-efa with DeepEP (--deepep-src)', () => {
  const deepep = materialize('v1', GOLDEN_DEEPEP);

  it('patch applies the DeepEP fixes after NVSHMEM and lists them in the report', () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', deepep, '--work-dir', work, '--offline']);
    expect(r.code).toBe(0);
    expect(stepStatus(work)).toMatchObject({ 'get-deepep': 'done', 'patch-deepep': 'done' });
    const rep = report(work);
    expect(rep.deepep?.layout).toBe('v1');
    const ids = rep.fixes.map((f) => `${f.id}:${f.status}`);
    for (const id of ['deepep-shim-include:internode.cu', 'deepep-shim-init', 'deepep-drop-ibgda-header', 'deepep-drop-mlx5dv', 'deepep-ibgda-env', 'deepep-cccl-include', 'deepep-shim-file']) {
      expect(ids).toContain(`${id}:applied`);
    }
    // The user's checkout is not touched.
    expect(readFileSync(path.join(deepep, 'csrc/kernels/internode.cu'), 'utf8')).not.toContain('nvshmem-efa:begin');
  });

  it('refuses a tree that is not a known DeepEP layout (exit 3), naming what it found', () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    const r = cli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', materialize('unknown-layout', GOLDEN_DEEPEP), '--work-dir', work, '--offline']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('not a DeepEP layout nvshmem-efa patches');
  });

  it.skipIf(!!NO_LIBFABRIC)(needsLibfabric('build checks the NVSHMEM install before building DeepEP against it (exit 4, naming what is missing)'), () => {
    // The miniature project installs no nvshmem.h: DeepEP's setup.py could not compile against it, and the
    // build step says so instead of failing in the link half an hour later.
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    // A Python that has torch (the preflight checks it before any long step; this host may have none).
    const r = cli(['build', '--nvshmem-src', materialize('v3.4-like'), '--deepep-src', deepep, '--work-dir', work, '--jobs', '2', '--efa-io-defs', IO_DEFS], { ...ENV, PYTHON: fakeToolchain().python });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("lacks include/nvshmem.h, which DeepEP's setup.py links against");
    expect(stepStatus(work)).toMatchObject({ 'build-nvshmem': 'done', 'patch-deepep': 'done', 'build-deepep': 'failed' });
  });
});

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('a build without efa_io_defs.h (real cmake + g++, a local HTTP server as the download)'), () => {
  /** Quoted includes of each installed header that name a file not installed (what a user's nvcc would hit). */
  const brokenIncludes = (dir: string) =>
    readdirSync(dir).flatMap((h) => [...readFileSync(path.join(dir, h), 'utf8').matchAll(/^\s*#\s*include\s*"([^"]+)"/gm)].map((m) => m[1]!).filter((inc) => !existsSync(path.join(dir, inc))).map((inc) => `${h} -> ${inc}`));

  it('a failed download stops the build (exit 4, nothing built); --offline builds without efa_io_defs.h, installs no device header that cannot compile and says the device API is unavailable and off; the download is retried on the next run', async () => {
    let serve = false;
    const server = http.createServer((_, res) => {
      if (!serve) return void res.writeHead(503).end('busy');
      res.writeHead(200).end(readFileSync(IO_DEFS));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/efa_io_defs.h`;
    try {
      const src = materialize('v3.4-like');
      const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
      const env = { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_URL: url };
      const run = async (extra: string[], want: number) => {
        const r = spawnCli(['build', '--nvshmem-src', src, '--work-dir', work, '--jobs', '2', ...extra], env);
        const { code } = await r.exited;
        expect(code, r.stderr()).toBe(want);
        return r;
      };
      // Issue 39: this was exit 0 with a warning among the fixes and a report that said the device API was on.
      const failed = await run([], 4);
      expect(failed.stderr()).toContain(`error: cannot download efa_io_defs.h from ${url}: HTTP 503`);
      expect(failed.stderr()).toMatch(/^fix: set NVSHMEM_EFA_EFA_IO_DEFS_URL .*--efa-io-defs PATH.*--offline/m);
      expect(stepStatus(work)).toMatchObject({ 'vendor-efa-io-defs': 'failed', 'build-nvshmem': 'not-run' });
      await run(['--offline'], 0);
      const inc = path.join(work, 'install/nvshmem/include/nvshmem_efa');
      expect(brokenIncludes(inc)).toEqual([]);
      expect(existsSync(path.join(inc, 'nvshmemx_efa_gda.h'))).toBe(true);
      expect(existsSync(path.join(inc, 'nvshmemx_efa_gda_device.cuh'))).toBe(false);
      const rep = report(work);
      expect(rep.gda.reason).toContain('GDA device API unavailable: efa_io_defs.h could not be had (--offline and no --efa-io-defs)');
      expect(rep.gda.reason).toMatch(/fix: pass --efa-io-defs PATH/);
      expect(rep.nvshmemDeviceApi?.status).toBe('off');
      expect(rep.fixes.find((f) => f.id === 'efa-gda-device-api')?.status).toBe('warned');
      // The download works now: the next run without --offline gets it and builds the device API.
      serve = true;
      await run([], 0);
      expect(stepStatus(work)).toMatchObject({ 'vendor-efa-io-defs': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done' });
      expect(brokenIncludes(inc)).toEqual([]);
      for (const h of ['nvshmemx_efa_gda_device.cuh', 'nvshmemx_efa_gda_wqe.h', 'efa_io_defs.h']) expect(existsSync(path.join(inc, h)), h).toBe(true);
      expect(report(work).gda.reason).not.toContain('device API unavailable');
      expect(report(work).nvshmemDeviceApi?.status).toBe('on');
    } finally {
      server.close();
    }
  });
});
