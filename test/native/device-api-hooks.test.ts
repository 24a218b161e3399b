// The device API's caller hooks (templates/transport_efa_gda/nvshmemx_efa_gda_device_api_hooks.cuh, issue 23) compiled
// by nvcc, without a GPU, against stand-ins of NVSHMEM's transfer API in 3.4.5's and 3.5's shapes
// (device-api-hooks/transfer_api_stand_in.cuh): every call NVSHMEM's headers make in either shape compiles, branches
// between the GDA entry and NVSHMEM's own function, and reaches NVSHMEM's function with its own parameter types. 3.5's
// collectives pass NULL for qp_handle: a hook that forwarded a deduced pack made that a long, which did not compile.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const NVCC = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));
const HERE = path.join(import.meta.dirname, 'device-api-hooks');
const FUNCTIONS = ['rma_p', 'rma_g', 'rma', 'rma_nbi', 'put_signal', 'amo_fetch', 'amo_nonfetch', 'quiet', 'fence'];

/** The PTX of callers.cu through the hooks, in one shape. */
function ptx(defines: string[]): string {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'device-api-hooks-')), 'callers.ptx');
  execFileSync(NVCC!, ['-std=c++17', '-rdc=true', '-arch=sm_90', '-ptx', ...defines, '-I', HERE, '-I', path.join(ROOT, 'templates/transport_efa_gda'),
    path.join(HERE, 'callers.cu'), '-o', out], { stdio: 'pipe' });
  return readFileSync(out, 'utf8');
}
/** Mangled names of the functions the PTX calls or declares, for one prefix. */
const called = (p: string, prefix: string) => new Set([...p.matchAll(new RegExp(`_Z\\d+${prefix}_(\\w+?)I\\w*`, 'g'))].map((m) => m[0].replace(/_param_\d+$/, '')));
const base = (names: Set<string>, prefix: string) => new Set([...names].map((n) => new RegExp(`^_Z\\d+${prefix}_(\\w+?)I`).exec(n)![1]));

describe.skipIf(!NVCC)(skipTitle("the device API's caller hooks (nvcc, no GPU)", !NVCC && 'no nvcc in /usr/local/cuda/bin or /usr/local/bin'), () => {
  it("NVSHMEM 3.4.5's calls: each of the nine transfer functions behind a branch on the slot, its GDA entry on the other side", () => {
    const p = ptx([]);
    expect(p).toMatch(/ld\.const\.u32\s+%r\d+, \[nvshmemi_efa_gda_api_d\+4\]/);
    expect(base(called(p, 'nvshmemi_transfer'), 'nvshmemi_transfer')).toEqual(new Set(FUNCTIONS));
    expect(base(called(p, 'nvshmemi_efa_gda_api'), 'nvshmemi_efa_gda_api')).toEqual(new Set(FUNCTIONS));
  }, 120_000);

  it("NVSHMEM 3.5's calls, NULL qp_handle included: NVSHMEM's functions get their own parameter types, defaults where the caller left them out", () => {
    const p = ptx(['-DSTAND_IN_35']);
    const nvshmem = called(p, 'nvshmemi_transfer');
    // quiet(bool, int pe, nvshmemx_qp_handle_t *, int) and fence(int, nvshmemx_qp_handle_t *, int), every scope called
    expect([...nvshmem].filter((n) => /_Z23nvshmemi_transfer_quietIL13threadgroup_t[013]EEvbiPii$/.test(n)).length).toBe(3);
    expect(nvshmem).toContain('_Z23nvshmemi_transfer_fenceIL13threadgroup_t0EEviPii');
    // put with qp_index: rma_nbi(void *, void *, size_t, int, nvshmemx_qp_handle_t)
    expect(nvshmem).toContain('_Z25nvshmemi_transfer_rma_nbiIL13threadgroup_t0EL13nvshmemi_op_t1EEvPvS2_mii');
    expect(base(nvshmem, 'nvshmemi_transfer')).toEqual(new Set(FUNCTIONS));
    // The entries take the parameters both shapes share, whatever the caller passed.
    expect(called(p, 'nvshmemi_efa_gda_api')).toContain('_Z26nvshmemi_efa_gda_api_quietIL13threadgroup_t3EEvb');
    expect(called(p, 'nvshmemi_efa_gda_api')).toContain('_Z26nvshmemi_efa_gda_api_fenceIL13threadgroup_t0EEvv');
  }, 120_000);
});
