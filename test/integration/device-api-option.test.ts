// The device API hooks (issue 23): on by default in `patch` and `build`, left out with --no-device-api (--device-api,
// the old opt-in, is still taken); the report says whether the device API takes GDA, a work dir copy follows the
// option, and an in-place tree that has the hooks from an earlier run is refused with --no-device-api (never built
// silently with hooks the command line turned off). The trees are the patch goldens' v3.4-like, which has the device API
// files in NVSHMEM 3.4.5's shapes.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nvshmemDeviceApiStatus } from '../../src/commands/assemble-report.ts';
import { nvshmemSpecDigest, planNvshmem } from '../../src/patchers/nvshmem/index.ts';
import { TRANSFER_DEVICE } from '../../src/patchers/nvshmem/device-api.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import type { Ctx } from '../../src/steps/types.ts';
import { cli, ENV, IO_DEFS, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

const template = await loadTemplate();
describe('the device API hooks: on by default, --no-device-api', () => {
  it('adds the device API patch to the plan and to the spec digest; without it the plan is what it was', async () => {
    const dir = materialize('v3.4-like');
    const off = await planNvshmem(dir, template);
    const on = await planNvshmem(dir, template, [], { nvshmemDeviceApi: true });
    expect(off.refusals).toEqual([]);
    expect(on.refusals).toEqual([]);
    expect(off.changes.map((c) => c.file)).not.toContain(TRANSFER_DEVICE);
    expect(on.changes.map((c) => c.file)).toContain(TRANSFER_DEVICE);
    expect(on.fixes.length).toBeGreaterThan(off.fixes.length + 20);
    expect(on.fixes.filter((f) => !off.fixes.some((g) => g.id === f.id)).every((f) => f.file?.startsWith('src/'))).toBe(true);
    expect(JSON.stringify(await nvshmemSpecDigest(dir, template, [], { nvshmemDeviceApi: true }))).not.toBe(JSON.stringify(await nvshmemSpecDigest(dir, template)));
  });

  it('patch --dry-run shows the hooks (with or without --device-api), not with --no-device-api; patch --in-place then leaves a tree that a run with --no-device-api refuses (exit 3, the fix names both ways out)', () => {
    const src = materialize('v3.4-like');
    const work = () => path.join(tmp(), 'w');
    for (const opt of [[], ['--device-api']]) {
      const dry = cli(['patch', '--dry-run', ...opt, '--nvshmem-src', src, '--work-dir', work(), '--offline', '--efa-io-defs', IO_DEFS], ENV);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain(`+++ b/${TRANSFER_DEVICE}`);
      expect(dry.stdout).toContain('nvshmemi_efa_gda_api_d.on');
    }
    const plain = cli(['patch', '--dry-run', '--no-device-api', '--nvshmem-src', src, '--work-dir', work(), '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain(TRANSFER_DEVICE);

    const w = work();
    const first = cli(['patch', '--in-place', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(first.code, first.stderr).toBe(0);
    expect(readFileSync(path.join(src, TRANSFER_DEVICE), 'utf8')).toContain('nvshmemi_efa_gda_api_d.on');
    const report = readFileSync(path.join(w, 'report.md'), 'utf8');
    expect(report).toMatch(/^- NVSHMEM device API over GDA: on: /m);
    const again = cli(['patch', '--in-place', '--device-api', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(again.code, again.stderr).toBe(0);
    const without = cli(['patch', '--in-place', '--no-device-api', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(without.code, without.stderr).toBe(3);
    expect(without.stderr).toContain('device-api-left-over');
    expect(without.stderr).toMatch(/fix: leave out --no-device-api .*restore the tree \(git checkout -- \.\)/);
  });

  it('a copied tree follows the option: turning it off rebuilds the copy without the hooks', () => {
    const src = materialize('v3.4-like');
    const w = path.join(tmp(), 'w');
    const copied = path.join(w, 'sources/nvshmem', TRANSFER_DEVICE);
    const on = cli(['patch', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(on.code, on.stderr).toBe(0);
    expect(readFileSync(copied, 'utf8')).toContain('nvshmemi_efa_gda_api_d.on');
    const off = cli(['patch', '--no-device-api', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(off.code, off.stderr).toBe(0);
    expect(readFileSync(copied, 'utf8')).not.toContain('nvshmemi_efa_gda_api_d');
    expect(readFileSync(path.join(w, 'report.md'), 'utf8')).toMatch(/^- NVSHMEM device API over GDA: off: --no-device-api: /m);
    const back = cli(['patch', '--nvshmem-src', src, '--work-dir', w, '--offline', '--efa-io-defs', IO_DEFS], ENV);
    expect(back.code, back.stderr).toBe(0);
    expect(readFileSync(copied, 'utf8')).toContain('nvshmemi_efa_gda_api_d.on');
  });

  it('the report line says what decides the path at run time, and when GDA itself is not there', () => {
    const patch = { changedFiles: [], fixes: [], templateStage: 'implemented', templateNote: '', gdaEnv: 'NVSHMEM_EFA_GDA_ENABLE', nvshmemDeviceApi: true };
    const on = nvshmemDeviceApiStatus({ patch, opts: { command: 'patch' } } as unknown as Ctx);
    expect(on?.status).toBe('on');
    expect(on?.reason).toContain('NVSHMEM_EFA_GDA_DEVICE_API=0');
    const noGda = nvshmemDeviceApiStatus({ patch, opts: { command: 'build' }, env: { libfabric: { gda: { available: false, reason: 'libfabric 1.17 has no GDA ops' } } } } as unknown as Ctx);
    expect(noGda?.reason).toMatch(/but GDA is unavailable in this build, so every call takes the proxy path/);
    expect(nvshmemDeviceApiStatus({ patch: { ...patch, nvshmemDeviceApi: false }, opts: { command: 'build' } } as unknown as Ctx)?.status).toBe('off');
    expect(nvshmemDeviceApiStatus({ opts: { command: 'build' } } as unknown as Ctx)).toBeUndefined();
  });
});
