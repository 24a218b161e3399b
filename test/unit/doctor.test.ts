import { describe, expect, it } from 'vitest';
import { doctorChecks, doctorVerdict } from '../../src/commands/doctor.ts';
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

  it('reports pip NVSHMEM shadowing from the package or LD_LIBRARY_PATH', () => {
    const c = run({ ...good, LD_LIBRARY_PATH: '/venv/lib/python3.12/site-packages/nvidia/nvshmem/lib:/usr/lib' }, { pipNvshmem: '/venv/lib/python3.12/site-packages/nvidia/nvshmem' });
    expect(c['pip-nvshmem']?.status).toBe('warn');
    expect(c['pip-nvshmem']?.evidence).toContain('pip package at /venv');
    expect(c['pip-nvshmem']?.evidence).toContain('LD_LIBRARY_PATH has');
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
