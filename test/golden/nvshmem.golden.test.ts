import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exportPatches, renderDiff, writeChanges } from '../../src/patchers/engine/apply.ts';
import { display } from '../../src/patchers/engine/bytes.ts';
import { planNvshmem } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';
import { GOLDEN, golden, goldenCases, materialize, refusalText } from '../helpers/golden.ts';
import { libfabricPrefix, needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';



const template = await loadTemplate();

describe.each(goldenCases())('golden $name', (c) => {
  it(`${c.expect === 'patch' ? 'produces the expected patch' : 'is refused with the expected message'} (${c.note})`, async () => {
    const tree = materialize(c);
    const plan = await planNvshmem(tree, template);
    if (c.expect === 'refuse') {
      expect(plan.refusals.length).toBeGreaterThan(0);
      golden(path.join(c.dir, 'expected-refusals.txt'), refusalText(plan));
      return;
    }
    expect(refusalText(plan)).toBe('');
    golden(path.join(c.dir, 'expected.patch'), display(renderDiff(plan.changes)));
  });

  if (c.expect !== 'patch') return;

  it('changes nothing when run a second time', async () => {
    const tree = materialize(c);
    await writeChanges(tree, (await planNvshmem(tree, template)).changes);
    const again = await planNvshmem(tree, template);
    expect(again.changes).toEqual([]);
    expect(again.refusals).toEqual([]);
    expect(new Set(again.fixes.map((f) => f.status))).toEqual(new Set(['already-present']));
  });

  it('exports patches that git apply accepts on the pristine tree and that give the same files', async () => {
    const tree = materialize(c);
    const plan = await planNvshmem(tree, template);
    const out = materialize(c) + '-patches';
    const names = await exportPatches(out, plan.changes);
    execFileSync('git', ['init', '-q'], { cwd: tree });
    for (const n of names) execFileSync('git', ['apply', path.join(out, n)], { cwd: tree });
    for (const ch of plan.changes) expect(readFileSync(path.join(tree, ch.file), 'latin1')).toBe(ch.after);
  });
});

describe('golden cases against each other', () => {
  it('a half-patched tree is completed to exactly the fully patched tree', async () => {
    const full = materialize('v3.4-like');
    await writeChanges(full, (await planNvshmem(full, template)).changes);
    const half = materialize('half-patched');
    await writeChanges(half, (await planNvshmem(half, template)).changes);
    const f = 'src/modules/transport/libfabric/libfabric.cpp';
    expect(readFileSync(path.join(half, f), 'utf8')).toBe(readFileSync(path.join(full, f), 'utf8'));
  });

  it('the already-patched fixture is exactly what patching v3.4-like produces', async () => {
    const full = materialize('v3.4-like');
    const plan = await planNvshmem(full, template);
    const patched = materialize('already-patched');
    for (const ch of plan.changes) expect(readFileSync(path.join(patched, ch.file), 'latin1')).toBe(ch.after);
  });

  it('template sources are part of the patch', async () => {
    const plan = await planNvshmem(materialize('v3.4-like'), template);
    const files = plan.changes.map((ch) => ch.file);
    for (const f of [...template.manifest.sources, ...template.manifest.headers]) expect(files).toContain(`${template.manifest.destination}/${f}`);
  });
});

describe('multi-rail layout', () => {
  const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';

  it('each fixture is planned for the layout its libfabric.h has (none for a shape of neither)', async () => {
    const layout = async (name: string) => (await planNvshmem(materialize(name), template)).layout?.id;
    expect(await layout('v3.4-like')).toBe('single-rail');
    expect(await layout('v3.5-like')).toBe('single-rail');
    expect(await layout('multi-rail')).toBe('multi-rail');
    expect(await layout('multi-rail-anchor-missing')).toBe('multi-rail');
    expect(await layout('fork-like')).toBeUndefined();
    expect(await layout('multi-rail-host-proxy-split')).toBeUndefined();
    expect(await layout('older-layout')).toBeUndefined();
  });

  it('a half-patched multi-rail tree is completed to exactly the fully patched tree', async () => {
    const full = materialize('multi-rail');
    await writeChanges(full, (await planNvshmem(full, template)).changes);
    const half = materialize('multi-rail-half-patched');
    await writeChanges(half, (await planNvshmem(half, template)).changes);
    expect(readFileSync(path.join(half, LIBFABRIC_CPP), 'utf8')).toBe(readFileSync(path.join(full, LIBFABRIC_CPP), 'utf8'));
  });

  it('the multi-rail already-patched fixture is exactly what patching multi-rail produces', async () => {
    const plan = await planNvshmem(materialize('multi-rail'), template);
    const patched = materialize('multi-rail-already-patched');
    for (const ch of plan.changes) expect(readFileSync(path.join(patched, ch.file), 'latin1')).toBe(ch.after);
  });
});

/*
 * The hooks as they run: the patched multi-rail fixture is compiled with a fake libfabric and a recording GDA API
 * (test/golden/harness; the stub header declares nvshmemt_efa_gda_init_rails as the GDA transport defines it).
 */
describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('multi-rail hooks at run time (g++, fake libfabric, recording GDA API)'), () => {
  it("pass prov_infos[1..] in NVSHMEM's NIC order, register after every domain, release after NVSHMEM, fini before anything is freed", async () => {
    const tree = materialize('multi-rail');
    const plan = await planNvshmem(tree, template);
    const cpp = 'src/modules/transport/libfabric/libfabric.cpp';
    writeFileSync(path.join(tree, cpp), plan.changes.find((c) => c.file === cpp)!.after, 'latin1');
    const dir = path.join(tree, 'src/modules/transport/libfabric');
    mkdirSync(path.join(dir, 'efa_gda'), { recursive: true });
    const harness = path.join(path.dirname(GOLDEN), 'harness');
    cpSync(path.join(harness, 'transport_efa_gda_stub.h'), path.join(dir, 'efa_gda/transport_efa_gda.h'));
    const exe = path.join(tree, 'multi_rail_hooks');
    execFileSync('g++', ['-std=c++17', '-o', exe, '-I', dir, '-I', path.join(tree, 'src/include'), '-I', path.join(tree, 'src/modules/transport/common'),
      '-I', path.join(libfabricPrefix!, 'include'), path.join(harness, 'multi_rail_hooks.cpp')], { stdio: 'pipe' });
    const out = execFileSync(exe, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    expect(out).toBe(
      [
        'connect, NICs 2 and 0 selected:',
        // prov_infos is [nic2 (host domain), nic2, nic0]: the rails are the proxy domains, in selection order.
        '  init_rails n=2: nic2 nic0; pe 0 of 1, all-gather adapter ok',
        '  status 0, 3 domains',
        'get_mem_handle, remote:',
        '  register_region 4096 bytes after 3 fi_mr_regattr',
        '  status 0',
        'get_mem_handle, local only:',
        '  status 0',
        'release_mem_handle:',
        '  release_region after 3 MR closes',
        '  status 0',
        'finalize:',
        '  fini after 0 fi_freeinfo, 0 fi_close',
        '  status 0, 1 fi_freeinfo, 12 fi_close',
        'connect, NVSHMEM_LIBFABRIC_MAX_NIC_PER_PE=1:',
        '  init_rails n=1: nic2; pe 0 of 1, all-gather adapter ok',
        '  status 0',
        // GDA failing leaves NVSHMEM's own connection as it was.
        'connect, GDA start-up fails:',
        '  init_rails n=2: nic2 nic0; pe 0 of 1, all-gather adapter ok',
        '  status 0',
        // NVSHMEM's own failure: GDA is not started.
        'connect, the third endpoint fails to enable:',
        '  status 7',
        '',
      ].join('\n'),
    );
  });
});
