import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { doctorChecks, doctorVerdict, nvshmemTreeCheck } from '../../src/commands/doctor.ts';
import { cli } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';
import type { DetectedEnv } from '../../src/core/environment.ts';

const detected: DetectedEnv = {
  cuda: { home: '/usr/local/cuda', nvcc: '/usr/local/cuda/bin/nvcc', version: '13.0' },
  cmake: { path: '/usr/bin/cmake', version: '3.25.1' },
  ninja: '/usr/bin/ninja',
  gpus: [],
  cudaArch: '90',
  libfabric: { home: '/opt/amazon/efa', version: '2.3.0', gda: { available: true, reason: 'libfabric 2.3.0 declares FI_EFA_GDA_OPS' } },
  gdrcopy: { home: '/usr' },
  libcuda: { kind: 'system' },
  nvml: '/usr/include/nvml.h',
};
const survey = { parts: detected, blockers: [] };
const good = { NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_LIBFABRIC_PROVIDER: 'efa', FI_EFA_ENABLE_SHM_TRANSFER: '0' };
const run = (env: NodeJS.ProcessEnv, extra: Partial<Parameters<typeof doctorChecks>[0]> = {}) =>
  Object.fromEntries(doctorChecks({ env, survey, nodeVersion: 'v20.20.2', ...extra }).map((c) => [c.id, c]));

describe('doctor', () => {
  it('passes a correctly set up EFA environment', () => {
    const checks = doctorChecks({ env: good, survey, nodeVersion: 'v20.20.2', torch: '2.11.0' });
    expect(checks.filter((c) => c.status !== 'pass')).toEqual([]);
    expect(doctorVerdict(checks)).toBe('ready');
  });

  it('says that an unset provider means cxi, and what to export', () => {
    const c = run({ ...good, NVSHMEM_LIBFABRIC_PROVIDER: undefined });
    expect(c['env-provider']).toMatchObject({ status: 'warn', fix: 'export NVSHMEM_LIBFABRIC_PROVIDER=efa' });
    expect(c['env-provider']?.evidence).toContain('cxi');
  });

  it('flags build-time CMake names set in a job environment, SHM transfer on, IBGDA asked for, a bad GDA switch', () => {
    const c = run({ ...good, NVSHMEM_LIBFABRIC_SUPPORT: '1', NVSHMEM_USE_GDRCOPY: '1', FI_EFA_ENABLE_SHM_TRANSFER: '1', NVSHMEM_IB_ENABLE_IBGDA: '1', NVSHMEM_EFA_GDA_ENABLE: 'maybe' });
    expect(c['env-build-time']?.evidence).toContain('NVSHMEM_LIBFABRIC_SUPPORT, NVSHMEM_USE_GDRCOPY set');
    expect(c['env-shm']?.status).toBe('warn');
    expect(c['env-ibgda']?.status).toBe('warn');
    expect(c['env-gda']?.evidence).toContain("'maybe'");
  });

  it('flags an NVSHMEM_EFA_GDA_RAILS or NVSHMEM_EFA_GDA_OWNED_QUEUES the GDA transport would refuse, and not a valid one', () => {
    const bad = run({ ...good, NVSHMEM_EFA_GDA_RAILS: 'two', NVSHMEM_EFA_GDA_OWNED_QUEUES: '99' });
    expect(bad['env-gda-rails']).toMatchObject({ status: 'warn', fix: 'export NVSHMEM_EFA_GDA_RAILS=N with N in 1..4 (or unset it)' });
    expect(bad['env-gda-rails']?.evidence).toContain("'two' is not a number of rails in [1, 4]");
    expect(bad['env-gda-owned']?.evidence).toContain("'99' is not a number of owned queues per rail in [0, 32]: the GDA transport turns GDA off");
    expect(run({ ...good, NVSHMEM_EFA_GDA_RAILS: '0' })['env-gda-rails']?.status).toBe('warn');
    const ok = run({ ...good, NVSHMEM_EFA_GDA_RAILS: '2', NVSHMEM_EFA_GDA_OWNED_QUEUES: '0' });
    expect(ok['env-gda-rails']).toBeUndefined();
    expect(ok['env-gda-owned']).toBeUndefined();
    expect(run({ ...good, NVSHMEM_EFA_GDA_OWNED_QUEUES: '+8' })['env-gda-owned']).toBeUndefined(); // strtol takes it
  });

  it('reports pip NVSHMEM shadowing from the package or LD_LIBRARY_PATH', () => {
    const c = run({ ...good, LD_LIBRARY_PATH: '/venv/lib/python3.12/site-packages/nvidia/nvshmem/lib:/usr/lib' }, { pipNvshmem: '/venv/lib/python3.12/site-packages/nvidia/nvshmem' });
    expect(c['pip-nvshmem']?.status).toBe('warn');
    expect(c['pip-nvshmem']?.evidence).toContain('pip package at /venv');
    expect(c['pip-nvshmem']?.evidence).toContain('LD_LIBRARY_PATH has');
  });

  it('pip NVSHMEM that torch requires: keep it and preload the build\'s library (uninstalling it breaks import torch)', () => {
    const pkg = { pipNvshmem: '/venv/lib/python3.12/site-packages/nvidia/nvshmem' };
    expect(run(good, pkg)['pip-nvshmem']?.fix).toMatch(/^pip uninstall nvidia-nvshmem-cu12 nvidia-nvshmem-cu13/);
    const kept = run(good, { ...pkg, torchRequiresNvshmem: 'nvidia-nvshmem-cu13==3.4.5' })['pip-nvshmem'];
    expect(kept?.status).toBe('warn');
    expect(kept?.fix).toBe("keep it: torch requires nvidia-nvshmem-cu13==3.4.5 and cannot be imported without it. Start the job's Python processes with LD_PRELOAD=<work dir>/install/nvshmem/lib/libnvshmem_host.so.3, so that this NVSHMEM is the one loaded");
  });

  it('fails on an old Node and on a missing build tool, with the fix', () => {
    const { cmake: _, ...rest } = detected;
    const checks = doctorChecks({ env: good, survey: { parts: rest, blockers: [{ id: 'cmake', message: 'cmake not found on PATH', fix: 'apt-get install cmake' }] }, nodeVersion: 'v18.19.0' });
    const c = Object.fromEntries(checks.map((x) => [x.id, x]));
    expect(c['node']).toMatchObject({ status: 'fail' });
    expect(c['cmake']).toMatchObject({ status: 'fail', evidence: 'cmake not found on PATH', fix: 'apt-get install cmake' });
    expect(doctorVerdict(checks)).toMatch(/^not ready/);
  });

  it('reports every blocker the build would stop on, a missing nvml.h included, not only the first', () => {
    const { nvml: _, ...noNvml } = detected;
    const blockers = [
      { id: 'nvml', message: 'nvml.h not found (in /usr/local/cuda/include, /usr/include, /usr/local/include), and NVSHMEM includes it', fix: 'apt-get install libnvidia-ml-dev' },
      { id: 'compiler', message: 'no host C++ compiler (c++, g++, clang++ not found)', fix: 'apt-get install g++' },
    ];
    const checks = doctorChecks({ env: good, survey: { parts: noNvml, blockers }, nodeVersion: 'v20.20.2', torch: '2.11.0' });
    const failed = checks.filter((x) => x.status === 'fail').map((x) => x.id);
    expect(failed).toEqual(['nvml', 'compiler']);
    expect(checks.find((x) => x.id === 'nvml')?.fix).toContain('libnvidia-ml-dev');
    expect(doctorVerdict(checks)).toMatch(/^not ready/);
  });
});

describe('doctor --nvshmem-src', () => {
  it('names a multi-rail 3.5.7 tree\'s version and layout and that every patch applies', async () => {
    const { check, facts } = await nvshmemTreeCheck(materialize('multi-rail'));
    expect(check).toMatchObject({ id: 'nvshmem-tree', status: 'pass' });
    expect(check.evidence).toMatch(/^NVSHMEM 3\.5\.7\.0 at .*; NVSHMEM libfabric layout: multi-rail \(per-PE domains vector, up to NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE NICs/);
    expect(check.evidence).toMatch(/; 34 patch\(es\) to apply, 0 already present; the device API hooks apply too \(3[0-9] more patches; --no-device-api leaves them out\)$/);
    expect(facts).toEqual({ version: '3.5.7.0', layout: { id: 'multi-rail', summary: expect.stringContaining('multi-rail') } });
  });

  it('names a single-rail 3.4.5 tree\'s layout, and counts patches already present', async () => {
    const tree = materialize('already-patched');
    const { check, facts } = await nvshmemTreeCheck(tree);
    expect(check.status).toBe('pass');
    expect(facts).toMatchObject({ version: '3.4.5.0', layout: { id: 'single-rail' } });
    expect(check.evidence).toMatch(/NVSHMEM libfabric layout: single-rail .*; 0 patch\(es\) to apply, 36 already present; the device API hooks apply too/);
  });

  it('fails a tree the device API hooks (on by default) do not fit, saying to build it with --no-device-api', async () => {
    const tree = materialize('v3.4-like');
    rmSync(path.join(tree, 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in'));
    const { check, facts } = await nvshmemTreeCheck(tree);
    expect(check.status).toBe('fail');
    expect(check.evidence).toMatch(/; 36 patch\(es\) to apply, 0 already present; but the device API hooks, on by default, would be refused \([0-9]+ of their patches\): device-api-no-caller-hook: src\/include\/non_abi\/device\/pt-to-pt\/transfer_device.cuh.in not found; /);
    expect(check.fix).toMatch(/^build with --no-device-api /);
    expect(facts).toMatchObject({ version: '3.4.5.0', layout: { id: 'single-rail' } });
  });

  it('fails a tree patch would refuse, with the refusal and the fix', async () => {
    const { check, facts } = await nvshmemTreeCheck(materialize('multi-rail-host-proxy-split'));
    expect(check.status).toBe('fail');
    expect(check.evidence).toContain('patch would refuse it: libfabric-state-shape: nvshmemt_libfabric_state_t matches neither layout');
    expect(check.fix).toMatch(/single-rail.*multi-rail/);
    expect(facts).toEqual({ version: '3.5.7.0' });
  });

  it('warns on a version outside the tested range, and fails what is no NVSHMEM tree', async () => {
    const tree = materialize('multi-rail');
    const cm = path.join(tree, 'CMakeLists.txt');
    writeFileSync(cm, readFileSync(cm, 'utf8').replace('VERSION 3.5.7.0', 'VERSION 3.7.0.0'));
    const newer = await nvshmemTreeCheck(tree);
    expect(newer.check.status).toBe('warn');
    expect(newer.check.evidence).toMatch(/NVSHMEM 3\.7\.0\.0 is outside the tested/);
    const empty = await nvshmemTreeCheck(mkdtempSync(path.join(os.tmpdir(), 'not-nvshmem-')));
    expect(empty.check).toMatchObject({ status: 'fail', evidence: expect.stringContaining('is not an NVSHMEM source tree (it has no src/ directory)') });
  });

  it('the CLI prints the check and, with --json, the tree\'s version and layout', () => {
    const tree = materialize('multi-rail');
    const text = cli(['doctor', '--nvshmem-src', tree]);
    expect(text.stdout).toMatch(/pass +NVSHMEM source tree \(--nvshmem-src\) +NVSHMEM 3\.5\.7\.0 at .*multi-rail/);
    const doc = JSON.parse(cli(['doctor', '--nvshmem-src', tree, '--json']).stdout) as { nvshmem: unknown; checks: { id: string }[] };
    expect(doc.nvshmem).toEqual({ dir: tree, version: '3.5.7.0', layout: { id: 'multi-rail', summary: expect.stringContaining('NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE') } });
    expect(doc.checks.map((c) => c.id)).toContain('nvshmem-tree');
  });
});
