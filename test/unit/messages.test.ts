import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBlock, renderBlock } from '../../src/patchers/engine/markers.ts';
import { planPatches, type InsertSpec } from '../../src/patchers/engine/plan.ts';
import { nearestNames } from '../../src/patchers/engine/text.ts';
import { planNvshmem } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { resolveOptions } from '../../src/options.ts';
import { workPaths } from '../../src/steps/index.ts';
import { patchDeepEpStep } from '../../src/steps/patch-deepep.ts';
import type { Ctx } from '../../src/steps/types.ts';
import { cli, ENV, tmp } from '../helpers/cli.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

const spec: InsertSpec = {
  kind: 'insert', id: 'demo', file: 'f.txt', anchor: 'after the line "A"', why: 'demo', parse: 'text', style: 'hash', lines: ['first()', 'second()'],
  locate: (d) => { const i = d.src.indexOf('A\n'); return i < 0 ? { refuse: 'no line "A"' } : { offset: i + 2, indent: '' }; },
};
const tree = (content: string) => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'msg-'));
  writeFileSync(path.join(d, 'f.txt'), content);
  return d;
};

describe('messages', () => {
  it('the rename hint names the nearest function by edit distance, not every name with the same prefix', async () => {
    expect(nearestNames('nvshmemt_libfabric_connect_endpoints', ['nvshmemt_libfabric_log_size', 'nvshmemt_libfabric_progress', 'nvshmemt_libfabric_connect_eps', 'nvshmemt_libfabric_finalize'])).toEqual(['nvshmemt_libfabric_connect_eps']);
    expect(nearestNames('nvshmemt_libfabric_finalize', ['nvshmemt_libfabric_finalize_v2', 'unrelated', 'nvshmemt_libfabric_finalise'])).toEqual(['nvshmemt_libfabric_finalise']);
    expect(nearestNames('connect', ['totally_different_name'])).toEqual([]);
    const plan = await planNvshmem(materialize('anchor-missing'), await loadTemplate());
    const detail = plan.refusals.find((r) => r.id === 'efa-gda-init')!.detail!;
    expect(detail).toContain('nearest: nvshmemt_libfabric_connect_eps(); renamed?');
    expect(detail).not.toContain('nvshmemt_libfabric_log_size');
  });

  it('an edited marker block is refused with the line as found and as expected', async () => {
    const p1 = await planPatches(tree('A\nB\n'), [spec]);
    const edited = p1.changes[0]!.after.replace('second()', 'second(42)');
    const p = await planPatches(tree(edited), [spec]);
    expect(p.refusals[0]!.detail).toContain('line 4: found `second(42)`, expected `second()`');
  });

  it('a duplicated block is reported as appearing twice, not as unbalanced markers', async () => {
    const block = renderBlock('hash', 'demo', ['first()', 'second()'], '');
    const state = findBlock(`A\n${block}x\n${block}`, 'hash', 'demo');
    expect(state).toMatchObject({ kind: 'broken' });
    const reason = (state as { reason: string }).reason;
    expect(reason).toBe("the 'demo' block appears 2 times (lines 2-5, lines 7-10); keep one");
    expect(reason).not.toMatch(/unbalanced/);
    // Truly unbalanced markers are still called that.
    expect((findBlock(`A\n${block}# nvshmem-efa:end demo\n`, 'hash', 'demo') as { reason: string }).reason).toMatch(/unbalanced/);
  });

  it('a failed clone keeps git\'s reason in the message and writes git\'s output to a log', () => {
    const work = tmp();
    const missing = path.join(tmp('no-repo-'), 'nowhere.git');
    const r = cli(['patch', '--nvshmem-ref', 'v3.4.5-0', '--work-dir', work], { ...ENV, NVSHMEM_EFA_NVSHMEM_URL: `file://${missing}` });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/cannot clone NVSHMEM v3\.4\.5-0 from file:\/\/.*nowhere\.git: fatal: .*(does not appear to be a git repository|does not exist|not found)/);
    const log = path.join(work, 'logs/get-nvshmem.log');
    expect(r.stderr).toContain(`full log: ${log}`);
    expect(existsSync(log)).toBe(true);
    expect(readFileSync(log, 'utf8')).toMatch(/^\$ git clone .*\n(.*\n)*fatal: /m);
  });
});

describe('"nothing was changed" is true when printed (item 7)', () => {
  it('a DeepEP refusal that comes after an in-place NVSHMEM patch names the NVSHMEM files that were patched', async () => {
    const deepep = materialize('unknown-layout', GOLDEN_DEEPEP);
    const nv = '/home/u/nvshmem';
    const work = tmp();
    const ctx = {
      opts: resolveOptions('patch', { nvshmemSrc: nv, inPlace: true, deepepSrc: deepep, workDir: work }),
      paths: workPaths(work),
      signal: new AbortController().signal,
      envFixes: [],
      source: { kind: 'local', dir: nv, origin: nv },
      deepep: { kind: 'local', dir: deepep, origin: deepep },
      patch: { changedFiles: ['nvshmem_transport.sym', 'src/CMakeLists.txt'], fixes: [], templateStage: 'implemented', templateNote: '', gdaEnv: 'NVSHMEM_EFA_GDA_ENABLE' },
    } as unknown as Ctx;
    const err = await patchDeepEpStep.run(ctx, { progress: () => {}, logPath: '' }).catch((e: Error) => e);
    expect((err as Error).message).toBe(
      `DeepEP tree ${deepep} does not look as expected; nothing was changed in ${deepep}, but this run patched NVSHMEM in place in ${nv}: nvshmem_transport.sym, src/CMakeLists.txt (in a git checkout, undo with: git checkout -- . && git clean -fd)`,
    );
  });
});

// The git binary is what the clone test needs; it is part of every supported host.
execFileSync('git', ['--version']);
