import { describe, expect, it } from 'vitest';
import { explainFailure } from '../../src/commands/run-pipeline.ts';
import { faultContextOf, filesystemFault, FilesystemError, formatError, PatchRefusedError } from '../../src/core/errors.ts';
import type { StepOutcome } from '../../src/pipeline.ts';
import { workPaths } from '../../src/steps/index.ts';
import type { Ctx } from '../../src/steps/types.ts';

/**
 * What a run adds to a failing step's message (run-pipeline's explainFailure), and which path and which
 * option a file-system fault names (errors.ts), case by case. The CLI-level cases are in
 * test/integration/messages-cli.test.ts.
 */
const errno = (code: string, p: { path?: string; dest?: string }, syscall: string) => Object.assign(new Error(`${code}: ${syscall}`), { code, syscall, ...p });
const outcomes = (s: Record<string, StepOutcome['status']>): StepOutcome[] => Object.entries(s).map(([id, status]) => ({ id, title: id, status, ms: 0 }));

function ctxOf(o: { inPlace: boolean; nvshmem: string; deepep: string; work: string; changed?: string[] }): Ctx {
  return {
    opts: { command: 'patch', inPlace: o.inPlace, nvshmemSrc: o.nvshmem, deepepSrc: o.deepep, workDir: o.work },
    paths: workPaths(o.work),
    source: { kind: 'local', dir: o.inPlace ? o.nvshmem : `${o.work}/sources/nvshmem`, origin: o.nvshmem },
    deepep: { kind: 'local', dir: o.inPlace ? o.deepep : `${o.work}/sources/deepep`, origin: o.deepep },
    patch: { changedFiles: o.changed ?? ['src/CMakeLists.txt', 'src/modules/transport/libfabric/libfabric.cpp'], fixes: [], templateStage: '', templateNote: '', gdaEnv: '' },
  } as unknown as Ctx;
}

describe('a fault in a DeepEP step after NVSHMEM was patched in place says so, with the undo', () => {
  it('names the NVSHMEM files patched in place and how to undo exactly those', () => {
    const ctx = ctxOf({ inPlace: true, nvshmem: '/home/u/nvshmem', deepep: '/home/u/deepep', work: '/tmp/wd' });
    const fault = filesystemFault(errno('EACCES', { path: '/home/u/deepep/csrc/kernels/configs.cuh.nvshmem-efa-new' }, 'open'), faultContextOf(ctx.opts))!;
    const err = explainFailure(ctx, outcomes({ 'patch-nvshmem': 'done', 'get-deepep': 'done', 'patch-deepep': 'failed' }), fault, new Set()) as FilesystemError;
    expect(err.message).toMatch(/; this run had already patched NVSHMEM in place in \/home\/u\/nvshmem: src\/CMakeLists\.txt, src\/modules\/transport\/libfabric\/libfabric\.cpp$/);
    expect(err.fix).toContain('git -C /home/u/nvshmem stash push --include-untracked -- src/CMakeLists.txt src/modules/transport/libfabric/libfabric.cpp');
    expect(err.fix).toMatch(/drop --in-place/);
    expect(err.exitCode).toBe(6);
    expect(formatError(err).split('\n')).toHaveLength(2);
  });

  it('says nothing of NVSHMEM when it was patched in a copy, by an earlier run, or when the message already says it', () => {
    const fault = () => new FilesystemError('x: permission denied [EACCES]', 'fix', 'x', 'EACCES');
    const failed = outcomes({ 'patch-nvshmem': 'done', 'patch-deepep': 'failed' });
    const copy = ctxOf({ inPlace: false, nvshmem: '/n', deepep: '/d', work: '/w' });
    expect((explainFailure(copy, failed, fault(), new Set()) as Error).message).toBe('x: permission denied [EACCES]');
    const inPlace = ctxOf({ inPlace: true, nvshmem: '/n', deepep: '/d', work: '/w' });
    expect((explainFailure(inPlace, outcomes({ 'patch-nvshmem': 'skipped', 'patch-deepep': 'failed' }), fault(), new Set()) as Error).message).toBe('x: permission denied [EACCES]');
    const said = new PatchRefusedError('DeepEP tree /d does not look as expected; nothing was changed in /d, but this run patched NVSHMEM in place in /n: a', 'f', []);
    expect((explainFailure(inPlace, failed, said, new Set()) as Error).message).toBe(said.message);
  });
});

describe('a refusal of the work dir\'s own copy sends the user to --force', () => {
  const ctx = ctxOf({ inPlace: false, nvshmem: '/home/u/nvshmem', deepep: '/home/u/deepep', work: '/tmp/wd' });
  const refused = () => new PatchRefusedError('NVSHMEM tree /tmp/wd/sources/nvshmem does not look as expected; nothing was changed', 'use an NVSHMEM release from NVIDIA', ['r']);

  it('an earlier run patched the copy and this run did not refresh it: --force', () => {
    const err = explainFailure(ctx, outcomes({ 'get-nvshmem': 'skipped', 'patch-nvshmem': 'failed' }), refused(), new Set(['patch-nvshmem'])) as PatchRefusedError;
    expect(err.fix).toBe('rerun with --force: /tmp/wd/sources/nvshmem is the work dir\'s copy of /home/u/nvshmem, which is unchanged; --force copies /home/u/nvshmem again and patches it');
    expect(err.message).toMatch(/\(the work dir's own copy, changed since an earlier run patched it\)$/);
    expect(err.exitCode).toBe(3);
  });

  it('a copy made by this run, or one no run ever patched, keeps the fix about the tree itself', () => {
    for (const [o, before] of [[{ 'get-nvshmem': 'done', 'patch-nvshmem': 'failed' }, new Set(['patch-nvshmem'])], [{ 'get-nvshmem': 'skipped', 'patch-nvshmem': 'failed' }, new Set<string>()]] as const) {
      const err = explainFailure(ctx, outcomes(o), refused(), before) as PatchRefusedError;
      expect(err.fix).toBe('use an NVSHMEM release from NVIDIA');
    }
  });
});

describe('which path a file-system fault names, and which option its fix changes', () => {
  const ctx = faultContextOf({ workDir: '/w', nvshmemSrc: '/src/nv', inPlace: false });

  it('a copy that runs out of space names the destination (the disk written to), never the source', () => {
    const f = filesystemFault(errno('ENOSPC', { path: '/src/nv/a.h', dest: '/w/sources/nvshmem.partial/a.h' }, 'copyfile'), ctx)!;
    expect(f.message).toMatch(/^\/w\/sources\/nvshmem\.partial\/a\.h: no space left on device \[ENOSPC\]/);
    expect(f.fix).toMatch(/^free space on the file system holding \/w\/sources\/nvshmem\.partial\/a\.h/);
    expect(f.fix).toMatch(/--work-dir on another disk/);
    expect(f.path).toBe('/w/sources/nvshmem.partial/a.h');
  });

  it('a directory listing refused is a read: readable, and the tree is only read', () => {
    const f = filesystemFault(errno('EACCES', { path: '/src/nv/src' }, 'scandir'), ctx)!;
    expect(f.message).toBe('/src/nv/src: permission denied [EACCES] (scandir; reading; --nvshmem-src /src/nv)');
    expect(f.fix).toMatch(/^make \/src\/nv\/src readable by this user \(.+\): files need r, directories r and x/);
    expect(f.fix).toMatch(/nvshmem-efa only reads --nvshmem-src$/);
  });

  it('a mkdir refused is a write: writable, naming the directory that exists (the parent)', () => {
    const f = filesystemFault(errno('EACCES', { path: '/nonexistent-parent/w' }, 'mkdir'), faultContextOf({ workDir: '/nonexistent-parent/w', inPlace: false }))!;
    expect(f.fix).toBe('make / writable by this user (ls -ld /), or choose another --work-dir');
  });

  it('an in-place tree on a read-only disk: drop --in-place or make it writable', () => {
    const f = filesystemFault(errno('EROFS', { path: '/src/nv/x.nvshmem-efa-new' }, 'open'), faultContextOf({ workDir: '/w', nvshmemSrc: '/src/nv', inPlace: true }))!;
    expect(f.fix).toMatch(/--in-place patches --nvshmem-src \/src\/nv where it is: make it writable by this user .*, or drop --in-place/);
  });
});
