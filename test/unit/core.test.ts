import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { driverSymbols } from '../../src/core/cuda-stub.ts';
import { archFromComputeCaps, findLibfabric, parseCudaArch, versionAtLeast } from '../../src/core/environment.ts';
import { CommandFailedError, formatError, PatchRefusedError, UsageError } from '../../src/core/errors.ts';
import { relevantTail } from '../../src/core/exec.ts';
import { hashTree } from '../../src/core/hash.ts';
import { ReportSchema, renderMarkdown } from '../../src/core/report.ts';
import { StateStore } from '../../src/core/state.ts';
import { resolveOptions } from '../../src/options.ts';
import { pinFor } from '../../src/steps/get-nvshmem.ts';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'core-'));

describe('options', () => {
  it('resolves defaults and paths', () => {
    const o = resolveOptions('build', { workDir: 'w', nvshmemSrc: 'src', jobs: '3' }, '/base');
    expect(o).toMatchObject({ workDir: '/base/w', nvshmemSrc: '/base/src', jobs: 3, nvshmemRef: 'v3.4.5-0', inPlace: false });
  });
  it.each([
    [{ nvshmemSrc: 'a', nvshmemRef: 'v3.4.5-0' }, /mutually exclusive/],
    [{ inPlace: true }, /--in-place needs --nvshmem-src/],
    [{ jobs: '0' }, /--jobs must be an integer from 1 to 4096/],
    [{ jobs: 'many' }, /--jobs must be an integer from 1 to 4096/],
    [{ jobs: '4097' }, /--jobs must be an integer from 1 to 4096, got '4097'/],
  ])('rejects %o', (raw, msg) => {
    expect(() => resolveOptions('build', raw)).toThrow(msg);
    try {
      resolveOptions('build', raw);
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      expect((e as UsageError).exitCode).toBe(2);
      expect((e as UsageError).fix.length).toBeGreaterThan(5);
    }
  });
  it('rejects --export outside patch', () => {
    expect(() => resolveOptions('build', { export: 'x' })).toThrow(/--export belongs to the patch command/);
  });
});

describe('pins', () => {
  it('knows the default pin and refuses unpinned refs with the list', () => {
    expect(pinFor('v3.4.5-0').commit).toBe('131da55f643ac87c810ba0bc51d359258bf433a1');
    expect(() => pinFor('v9.9.9')).toThrow(/not pinned \(pinned: v3.4.5-0\)/);
  });
});

describe('environment detection', () => {
  it('parses CUDA architectures', () => {
    expect(parseCudaArch('90, 100')).toBe('90;100');
    expect(() => parseCudaArch('hopper')).toThrow(/invalid --cuda-arch/);
    expect(archFromComputeCaps('9.0\n9.0\n10.0\n')).toEqual(['90', '100']);
  });
  it('compares versions', () => {
    expect(versionAtLeast('2.3.0', [2, 3, 0])).toBe(true);
    expect(versionAtLeast('2.2.9', [2, 3, 0])).toBe(false);
    expect(versionAtLeast('1.17.0', [2, 3, 0])).toBe(false);
    expect(versionAtLeast('3.25.1', [3, 19])).toBe(true);
  });
  it('reads the libfabric version and whether GDA ops are declared', async () => {
    const mk = (ver: [number, number, number], gda: boolean | null) => {
      const home = tmp();
      mkdirSync(path.join(home, 'include', 'rdma'), { recursive: true });
      writeFileSync(path.join(home, 'include/rdma/fabric.h'), `#define FI_MAJOR_VERSION ${ver[0]}\n#define FI_MINOR_VERSION ${ver[1]}\n#define FI_REVISION_VERSION ${ver[2]}\n`);
      if (gda !== null) writeFileSync(path.join(home, 'include/rdma/fi_ext_efa.h'), gda ? '#define FI_EFA_GDA_OPS "efa gda ops"\n' : '#define FI_EFA_DOMAIN_OPS "efa domain ops"\n');
      return home;
    };
    expect(await findLibfabric([tmp(), mk([2, 3, 0], true)])).toMatchObject({ version: '2.3.0', gda: { available: true } });
    expect((await findLibfabric([mk([2, 2, 0], false)]))?.gda.reason).toMatch(/does not declare FI_EFA_GDA_OPS/);
    expect((await findLibfabric([mk([1, 17, 0], null)]))?.gda.reason).toMatch(/no rdma\/fi_ext_efa.h/);
    expect(await findLibfabric([tmp()])).toBeUndefined();
  });
  it('takes driver symbol names after cuda.h macro renames', () => {
    expect(driverSymbols('CUresult cuInit(unsigned int);\nCUresult  cuMemAlloc_v2 (CUdeviceptr *p, size_t n);\nint cuNot(void);')).toEqual(['cuInit', 'cuMemAlloc_v2']);
  });
});

describe('state', () => {
  it('keeps finished steps, drops a step when it begins, and ignores a corrupt file', async () => {
    const dir = tmp();
    const s = await StateStore.open(dir);
    await s.finish('a', 'stamp1', { x: 1 });
    await s.finish('b', 'stamp2', null);
    await s.begin('b');
    const again = await StateStore.open(dir);
    expect(again.get('a')).toMatchObject({ stamp: 'stamp1', result: { x: 1 } });
    expect(again.get('b')).toBeUndefined();
    writeFileSync(path.join(dir, 'state.json'), '{not json');
    expect((await StateStore.open(dir)).get('a')).toBeUndefined();
  });
  it('hashes trees by content and path, ignoring .git', async () => {
    const d = tmp();
    writeFileSync(path.join(d, 'a'), '1');
    const h1 = await hashTree(d);
    mkdirSync(path.join(d, '.git'));
    writeFileSync(path.join(d, '.git', 'x'), 'y');
    expect(await hashTree(d)).toBe(h1);
    writeFileSync(path.join(d, 'a'), '2');
    expect(await hashTree(d)).not.toBe(h1);
  });
});

describe('errors', () => {
  it('formats the failure, the relevant output, the log and the fix', () => {
    const text = formatError(new CommandFailedError('ninja failed (exit code 1)', 'fix the compiler error', '/w/logs/build.log', relevantTail(['ok', 'foo.cpp:1: error: boom', 'ninja: build stopped'])));
    expect(text).toBe('error: ninja failed (exit code 1)\nlast lines of output:\n  foo.cpp:1: error: boom\nfull log: /w/logs/build.log\nfix: fix the compiler error');
    expect(formatError(new PatchRefusedError('tree refused', 'use 3.4', ['a: b']))).toContain('  - a: b');
    expect(new PatchRefusedError('x', 'y', []).exitCode).toBe(3);
  });
});

describe('report', () => {
  it('validates and renders fixes and the run-time environment', () => {
    const r = ReportSchema.parse({
      schemaVersion: 1, tool: { name: 'nvshmem-efa', version: '0.1.0' }, command: 'build', createdAt: 'now', ok: true,
      nvshmem: { libraries: [], cmakeArgs: ['-DX=1'] }, gda: { status: 'not-implemented', reason: 'r' },
      fixes: [{ id: 'f', anchor: 'a|b', why: 'w', status: 'applied' }], steps: [{ id: 's', title: 'S', status: 'done', ms: 1500 }],
      runtimeEnv: { FI_EFA_ENABLE_SHM_TRANSFER: '0' },
    });
    const md = renderMarkdown(r);
    expect(md).toContain('| applied | f | a\\|b | w |  |');
    expect(md).toContain('export FI_EFA_ENABLE_SHM_TRANSFER=0');
    expect(md).toContain('| S | done | 1.5 s |');
    expect(() => ReportSchema.parse({ ...r, fixes: [{ id: 'f', anchor: 'a', why: 'w', status: 'maybe' }] })).toThrow();
  });
});
