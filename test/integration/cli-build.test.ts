import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ReportSchema } from '../../src/core/report.ts';
import { materialize } from '../helpers/golden.ts';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'nvshmem-efa.js');
const ENV = { ...process.env, CI: 'true', NO_COLOR: '1' };

function cli(args: string[]): { code: number; stdout: string; stderr: string } {
  try {
    const stdout = execFileSync(process.execPath, [BIN, ...args], { env: ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { code: 0, stdout, stderr: '' };
  } catch (e) {
    const x = e as { status: number; stdout: string; stderr: string };
    return { code: x.status, stdout: x.stdout, stderr: x.stderr };
  }
}

const report = (work: string) => ReportSchema.parse(JSON.parse(readFileSync(path.join(work, 'report.json'), 'utf8')));
const stepStatus = (work: string) => Object.fromEntries(report(work).steps.map((s) => [s.id, s.status]));

describe('nvshmem-efa build on the miniature NVSHMEM project (real cmake + g++)', () => {
  const src = materialize('v3.4-like');
  const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));

  it('patches, configures, compiles and installs the transport with the EFA GDA template', () => {
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work, '--jobs', '2']);
    expect(r.stderr + r.stdout).not.toMatch(/error:/);
    expect(r.code).toBe(0);
    const rep = report(work);
    expect(rep.ok).toBe(true);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done' });
    const so = path.join(work, 'install/nvshmem/lib/nvshmem_transport_libfabric.so');
    const exported = execFileSync('nm', ['-D', '--defined-only', so], { encoding: 'utf8' });
    expect(exported).toMatch(/ T nvshmemx_efa_gda_status$/m);
    expect(exported).not.toMatch(/nvshmemt_efa_gda_init/);
    // The module build gets the template sources too.
    expect(existsSync(path.join(work, 'build/nvshmem/src/share/src/transport-plugins/libfabric/efa_gda/transport_efa_gda.cpp'))).toBe(true);
    const ids = rep.fixes.map((f) => `${f.id}:${f.status}`);
    expect(ids).toContain('efa-gda-init:applied');
    expect(ids).toContain('efa-gda-cmake:applied');
    // Without a driver (CI, this machine) the tool must have generated the link stub; with one it is not needed.
    const envLibcuda = (rep.environment as { libcuda: { kind: string } }).libcuda.kind;
    if (envLibcuda === 'none') expect(ids).toContain('cuda-driver-link-stub:applied');
    expect(rep.gda.status).toBe('not-implemented');
    expect(rep.runtimeEnv).toMatchObject({ NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_LIBFABRIC_PROVIDER: 'efa', FI_EFA_ENABLE_SHM_TRANSFER: '0', NVSHMEM_EFA_GDA_ENABLE: '0' });
    expect(readFileSync(path.join(work, 'report.md'), 'utf8')).toContain('| applied | efa-gda-init |');
    // The user's tree is never touched without --in-place.
    expect(readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8')).not.toContain('nvshmem-efa:begin');
  });

  it('skips every step but detection on a rerun with nothing changed', () => {
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work]);
    expect(r.code).toBe(0);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'skipped', 'patch-nvshmem': 'skipped', 'build-nvshmem': 'skipped' });
  });

  it('resumes from the unfinished step after the run is killed', async () => {
    const child = spawn(process.execPath, [BIN, 'build', '--nvshmem-src', src, '--work-dir', work, '--force'], { env: ENV, stdio: 'ignore', detached: true });
    const log = path.join(work, 'logs/build-nvshmem.log');
    const before = existsSync(log) ? readFileSync(log, 'utf8').length : 0;
    // Kill the whole process group once the build step has started writing its log.
    for (let i = 0; i < 600 && !(existsSync(log) && readFileSync(log, 'utf8').length > before); i++) await new Promise((r) => setTimeout(r, 50));
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((r) => child.on('exit', r));
    const state = JSON.parse(readFileSync(path.join(work, 'state.json'), 'utf8'));
    expect(Object.keys(state.steps).sort()).toEqual(['get-nvshmem', 'patch-nvshmem']);
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', work]);
    expect(r.code).toBe(0);
    expect(stepStatus(work)).toEqual({ detect: 'done', 'get-nvshmem': 'skipped', 'patch-nvshmem': 'skipped', 'build-nvshmem': 'done' });
  });

  it('report prints the last report', () => {
    const r = cli(['report', '--work-dir', work]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('# nvshmem-efa build report');
  });
});

describe('nvshmem-efa patch', () => {
  it('--dry-run prints a diff and changes nothing', () => {
    const src = materialize('v3.4-like');
    const before = readFileSync(path.join(src, 'src/CMakeLists.txt'), 'utf8');
    const r = cli(['patch', '--nvshmem-src', src, '--dry-run', '--work-dir', path.join(src, '.w')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^diff --git a\/nvshmem_transport.sym/);
    expect(r.stdout).toContain('+    nvshmemt_efa_gda_fini();');
    expect(readFileSync(path.join(src, 'src/CMakeLists.txt'), 'utf8')).toBe(before);
    expect(existsSync(path.join(src, '.w'))).toBe(false);
  });

  it('--in-place patches the tree, and a second run changes nothing', () => {
    const src = materialize('v3.4-like');
    const work = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-work-'));
    expect(cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work]).code).toBe(0);
    const after = readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8');
    expect(after).toContain('/* nvshmem-efa:begin efa-gda-init */');
    expect(cli(['patch', '--nvshmem-src', src, '--in-place', '--work-dir', work, '--force']).code).toBe(0);
    expect(readFileSync(path.join(src, 'src/modules/transport/libfabric/libfabric.cpp'), 'utf8')).toBe(after);
    expect(report(work).fixes.filter((f) => f.file).every((f) => f.status === 'already-present')).toBe(true);
  });

  it('exits 3 naming the file and the function when connect_endpoints is renamed', () => {
    const src = materialize('anchor-missing');
    const r = cli(['patch', '--nvshmem-src', src, '--work-dir', path.join(src, '.w')]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('src/modules/transport/libfabric/libfabric.cpp: no definition of nvshmemt_libfabric_connect_endpoints() found');
    expect(r.stderr).toMatch(/^fix: /m);
    expect(report(path.join(src, '.w')).ok).toBe(false);
  });

  it('exits 2 on a usage error, with the fix', () => {
    const r = cli(['build', '--nvshmem-src', 'a', '--nvshmem-ref', 'v3.4.5-0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('fix: pass --nvshmem-src DIR');
  });
});
