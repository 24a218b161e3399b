// --deepep-gda (issue 23): `build --deepep-gda device-api` builds DeepEP without the shim's own GDA path (no
// -DNVSHMEM_EFA_SHIM_GDA), so its remote operations are NVSHMEM device API calls that NVSHMEM's device API hooks (on
// by default) route. The option is refused where it could not mean what it says, the report's deepep-gda-path record
// says which path DeepEP takes and why, the choice is in build-deepep's stamp, and the dry run shows it.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.ts';
import { DEFAULT_DEEPEP_GDA, resolveOptions } from '../../src/options.ts';
import { DEEPEP_GDA_PATH_FIX, deepEpGdaPathFix } from '../../src/steps/deepep-setup.ts';
import { cli, IO_DEFS, LOCK, report, stepStatus, tmp } from '../helpers/cli.ts';
import { fakeToolchain, type FakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

const SHIM_FLAG = '-DNVSHMEM_EFA_SHIM_GDA';

/** The fake toolchain's libfabric as one that has GDA (2.3.0, declaring FI_EFA_GDA_OPS): the shim's flag then applies. */
function withGdaLibfabric(t: FakeToolchain): FakeToolchain {
  const rdma = path.join(t.libfabricHome, 'include', 'rdma');
  writeFileSync(path.join(rdma, 'fabric.h'), '#define FI_MAJOR_VERSION 2\n#define FI_MINOR_VERSION 3\n#define FI_REVISION_VERSION 0\n');
  writeFileSync(path.join(rdma, 'fi_ext_efa.h'), '#define FI_EFA_GDA_OPS "efa gda ops"\n');
  return t;
}

/** A `build` (or `build --dry-run`) of the miniature NVSHMEM and DeepEP on a fake toolchain, with `extra` options. */
function builder(t: FakeToolchain) {
  const nvshmem = materialize('v3.4-like');
  const deepep = materialize('v1', GOLDEN_DEEPEP);
  const work = tmp();
  const env = { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
  const args = (extra: string[]) => ['build', '--nvshmem-src', nvshmem, '--deepep-src', deepep, '--work-dir', work,
    '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS, '--jobs', '2', '--cuda-arch', '90', ...extra];
  return { work, build: (extra: string[]) => cli(args(extra), env) };
}

/** The NVCC_APPEND_FLAGS of every setup.py run the fake python logged since the last call (setup.log, cleared). */
function setupFlags(t: FakeToolchain): string[] {
  const log = path.join(t.root, 'setup.log');
  const flags = existsSync(log) ? [...readFileSync(log, 'utf8').matchAll(/ flags=(.*) jobs=/g)].map((m) => m[1]!) : [];
  writeFileSync(log, '');
  return flags;
}

const gdaPath = (work: string) => report(work).fixes.find((f) => f.id === DEEPEP_GDA_PATH_FIX);

describe('--deepep-gda: the option', () => {
  it('shim by default; device-api with the device API hooks (the default, or --device-api) and a DeepEP to build', () => {
    expect(DEFAULT_DEEPEP_GDA).toBe('shim');
    expect(resolveOptions('build', { deepepRef: '567632d' }).deepepGda).toBe('shim');
    expect(resolveOptions('patch', {}).deepepGda).toBe('shim');
    expect(resolveOptions('build', { deepepGda: 'device-api', deviceApi: true, deepepRef: '567632d' }).deepepGda).toBe('device-api');
    expect(resolveOptions('build', { deepepGda: 'device-api', deepepRef: '567632d' })).toMatchObject({ deepepGda: 'device-api', nvshmemDeviceApi: true });
    expect(resolveOptions('build', { deepepGda: 'shim', deepepSrc: 'dp' }, '/base').deepepGda).toBe('shim');
  });

  it.each([
    ['device-api with --no-device-api', 'build', { deepepGda: 'device-api', deviceApi: false, deepepRef: '567632d' }, /--deepep-gda device-api contradicts --no-device-api/, /leave out --no-device-api/],
    ['a value it does not know', 'build', { deepepGda: 'gda', deepepRef: '567632d' }, /--deepep-gda must be shim or device-api, got 'gda'/, /--deepep-gda device-api \(NVSHMEM's device API hooks\)/],
    ['no DeepEP to build', 'build', { deepepGda: 'device-api', deviceApi: true }, /--deepep-gda needs --deepep-src or --deepep-ref/, /add --deepep-ref 567632d/],
    ['a command that builds no DeepEP', 'patch', { deepepGda: 'device-api', deviceApi: true, deepepRef: '567632d' }, /--deepep-gda belongs to the build command/, /nvshmem-efa build --deepep-gda device-api/],
  ] as const)('refuses %s: a usage error (exit 2) with its fix', (_what, command, raw, message, fix) => {
    let err: unknown;
    try {
      resolveOptions(command, raw);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).message).toMatch(message);
    expect((err as UsageError).fix).toMatch(fix);
    expect((err as UsageError).exitCode).toBe(2);
  });

  it('the CLI refuses device-api with --no-device-api before it touches anything: exit 2, the error and the fix', () => {
    const work = path.join(tmp(), 'w');
    const r = cli(['build', '--no-device-api', '--deepep-gda', 'device-api', '--deepep-src', materialize('v1', GOLDEN_DEEPEP), '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^error: --deepep-gda device-api contradicts --no-device-api/m);
    expect(r.stderr).toMatch(/^fix: leave out --no-device-api/m);
    expect(existsSync(work)).toBe(false);
  });
});

describe('--deepep-gda: the report record (deepep-gda-path)', () => {
  it('says which path DeepEP takes and why, and warns where it cannot take GDA', () => {
    const shim = deepEpGdaPathFix({ deepepGda: 'shim', nvshmemGda: true, deviceApiHooks: false });
    expect(shim).toMatchObject({ id: 'deepep-gda-path', status: 'applied', detail: expect.stringMatching(/^compiled in \(--deepep-gda shim\)/) });
    expect(deepEpGdaPathFix({ deepepGda: 'shim', nvshmemGda: false, deviceApiHooks: true })).toMatchObject({ status: 'warned', detail: expect.stringMatching(/^not compiled in: this NVSHMEM has no GDA/) });
    const api = deepEpGdaPathFix({ deepepGda: 'device-api', nvshmemGda: true, deviceApiHooks: true });
    expect(api).toMatchObject({ status: 'applied', detail: expect.stringMatching(/^not compiled in \(--deepep-gda device-api\): DeepEP's remote operations are NVSHMEM device API calls \(nvshmemx_putmem_nbi_warp, .*which NVSHMEM's device API hooks send over GDA/) });
    // Its signals are atomics for NVSHMEM: said, not left to be found.
    expect(api.detail).toMatch(/count and flag are atomic adds there and take NVSHMEM's proxy/);
    expect(deepEpGdaPathFix({ deepepGda: 'device-api', nvshmemGda: false, deviceApiHooks: true })).toMatchObject({ status: 'warned', detail: expect.stringMatching(/but this NVSHMEM has no GDA .*, so every one goes through NVSHMEM's proxy$/) });
    expect(deepEpGdaPathFix({ deepepGda: 'device-api', nvshmemGda: true, deviceApiHooks: false })).toMatchObject({ status: 'warned', detail: expect.stringMatching(/but NVSHMEM was patched without the device API hooks \(rebuild without --no-device-api\)/) });
    expect(new Set([shim.why, api.why]).size).toBe(1);
  });
});

describe('--deepep-gda: the build (fake toolchain)', () => {
  it('with GDA: device-api compiles DeepEP without the shim flag, shim with it; switching reruns build-deepep, an unchanged rerun skips it', () => {
    const t = withGdaLibfabric(fakeToolchain());
    const b = builder(t);
    const api = b.build(['--deepep-gda', 'device-api']);
    expect(api.code, api.stderr).toBe(0);
    // Beside NVSHMEM's build and after its install: the same environment, without the flag.
    expect(setupFlags(t)).toEqual(['none', 'none']);
    expect(gdaPath(b.work)).toMatchObject({ status: 'applied', detail: expect.stringMatching(/^not compiled in \(--deepep-gda device-api\)/) });
    expect(report(b.work).nvshmemDeviceApi?.status).toBe('on');

    // --device-api, the old opt-in, names the default: nothing to redo.
    const again = b.build(['--device-api', '--deepep-gda', 'device-api']);
    expect(again.code, again.stderr).toBe(0);
    expect(stepStatus(b.work)['build-nvshmem']).toBe('skipped');
    expect(stepStatus(b.work)['build-deepep']).toBe('skipped');
    expect(setupFlags(t)).toEqual([]);

    const shim = b.build([]);
    expect(shim.code, shim.stderr).toBe(0);
    expect(stepStatus(b.work)['build-deepep']).toBe('done');
    expect(setupFlags(t)).toEqual([SHIM_FLAG]);
    expect(gdaPath(b.work)).toMatchObject({ status: 'applied', detail: expect.stringMatching(/^compiled in \(--deepep-gda shim\)/) });
  });

  it('without GDA both choices compile alike, yet switching reruns build-deepep: the choice is in its stamp, and the report follows it', () => {
    const t = fakeToolchain(); // libfabric 1.17: no GDA
    const b = builder(t);
    const shim = b.build([]);
    expect(shim.code, shim.stderr).toBe(0);
    expect(setupFlags(t).every((f) => f === 'none')).toBe(true);
    expect(gdaPath(b.work)).toMatchObject({ status: 'warned', detail: expect.stringMatching(/^not compiled in: this NVSHMEM has no GDA/) });

    const api = b.build(['--deepep-gda', 'device-api']);
    expect(api.code, api.stderr).toBe(0);
    expect(stepStatus(b.work)['build-deepep']).toBe('done');
    expect(setupFlags(t)).toEqual(['none']);
    expect(gdaPath(b.work)).toMatchObject({ status: 'warned', detail: expect.stringMatching(/^not compiled in \(--deepep-gda device-api\).*but this NVSHMEM has no GDA/) });
  });

  it('build --dry-run shows the choice: the setup.py command with or without the shim flag, and the deepep-gda-path line', () => {
    const t = withGdaLibfabric(fakeToolchain());
    const b = builder(t);
    const api = b.build(['--dry-run', '--deepep-gda', 'device-api']);
    expect(api.code, api.stderr).toBe(0);
    const setup = (out: string) => out.split('\n').find((l) => l.includes('setup.py build_ext')) ?? '';
    expect(setup(api.stdout)).toMatch(/NVSHMEM_DIR=/);
    expect(setup(api.stdout)).not.toContain(SHIM_FLAG);
    expect(api.stdout).toMatch(/^# applied: deepep-gda-path: not compiled in \(--deepep-gda device-api\): DeepEP's remote operations are NVSHMEM device API calls/m);
    const shim = b.build(['--dry-run']);
    expect(shim.code, shim.stderr).toBe(0);
    expect(setup(shim.stdout)).toContain(`NVCC_APPEND_FLAGS=${SHIM_FLAG}`);
    expect(shim.stdout).toMatch(/^# applied: deepep-gda-path: compiled in \(--deepep-gda shim\)/m);
    expect(existsSync(path.join(b.work, 'report.json'))).toBe(false);
  });
});
