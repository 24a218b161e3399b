import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NVCC = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));

function build(cuda: boolean): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'softefa-'));
  const args = ['-S', path.join(ROOT, 'native/softefa'), '-B', dir, `-DSOFTEFA_CUDA=${cuda ? 'ON' : 'OFF'}`];
  if (cuda) args.push(`-DCMAKE_CUDA_COMPILER=${NVCC}`);
  execFileSync('cmake', args, { stdio: 'pipe' });
  execFileSync('cmake', ['--build', dir, '-j', '2'], { stdio: 'pipe' });
  return dir;
}

describe('software EFA (CPU)', () => {
  const dir = build(false);

  it('executes correct WQE streams and flags every protocol violation', () => {
    const out = execFileSync(path.join(dir, 'softefa_cpu_test'), { encoding: 'utf8' });
    const lines = out.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(lines.at(-1)).toBe('0 failed');
    // Every strictness rule the issue names has its own case.
    for (const rule of [
      'wrong phase is rejected',
      'a doorbell going backwards is a violation',
      'a doorbell covering more than max_batch new WQEs is a violation',
      'a doorbell covering an unwritten slot is a violation',
      'a slot overwritten before its completion is a violation',
      'more than max_batch WQEs staged past the doorbell is a violation',
      'NIC errors complete with the EFA status and move no data',
      'the encoder writes the fields at the upstream positions',
    ]) {
      expect(lines).toContain(`ok ${rule}`);
    }
    expect(lines.filter((l) => l.startsWith('ok ')).length).toBeGreaterThanOrEqual(26);
  });
});

describe.skipIf(!NVCC)('EFA GDA device code (nvcc, sm_90, our test header)', () => {
  it('the GPU proof program with the device header compiles', () => {
    const dir = build(true);
    expect(existsSync(path.join(dir, 'efa_gda_proof'))).toBe(true);
  });
});

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('EFA GDA host code (C++11, g++)'), () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gda-host-'));
  const cuInc = NVCC ? path.join(path.dirname(path.dirname(NVCC)), 'include') : '/usr/local/cuda/include';
  const harness = (name: string, extra: string[]) => {
    const exe = path.join(tmp, name);
    execFileSync('g++', ['-std=c++11', '-Wall', '-Wextra', '-Werror', ...extra, '-I', path.join(ROOT, 'templates/transport_efa_gda'), '-I', cuInc,
      path.join(ROOT, 'templates/transport_efa_gda/transport_efa_gda.cpp'), path.join(ROOT, 'test/native/harness/gda_host_harness.cpp'),
      '-lfabric', '-ldl', '-o', exe], { stdio: 'pipe' });
    return execFileSync(exe, { encoding: 'utf8', env: { ...process.env, NVSHMEM_EFA_GDA_ENABLE: '1' } });
  };

  it('with GDA ops (our fi_ext_efa.h): on a host without EFA, init joins the all-gather, fails with the reason, and leaves nothing', () => {
    const out = harness('with_gda', ['-I', path.join(ROOT, 'test/efa_abi/include')]);
    expect(out).toContain('init=-1 gathers=1 active=0 state=(nil)');
    expect(out).toMatch(/status: EFA GDA off: no efa-direct fabric for this NIC \(fi_getinfo: .*\): needs an EFA device and libfabric >= 2\.3\.0/);
    expect(out).toContain('after fini: gathers=1 active=0');
  });

  it('against a libfabric without GDA ops (Debian 1.17): GDA is compiled out and says how to get it', () => {
    const out = harness('without_gda', []);
    expect(out).toContain('init=-1 gathers=0 active=0');
    expect(out).toContain('without FI_EFA_GDA_OPS (needs libfabric >= 2.3.0');
  });
});
