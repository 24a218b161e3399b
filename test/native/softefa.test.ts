import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

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
