import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { cli, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 20, item 5 and item 11: trees that look patchable but are not. Hooks whose marker comments were
 * stripped (by hand, or by a formatter that drops comments) must not be inserted a second time; a tree with
 * AWS's own GDA transport is not patched silently; a no-op rerun does not claim to have applied anything.
 * Each test drives the real CLI (`patch` needs no toolchain).
 */
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const CPP_HOOKS = ['efa-gda-include', 'efa-gda-init', 'efa-gda-register-region', 'efa-gda-release-region', 'efa-gda-fini'];
const CMAKE_HOOKS = ['efa-gda-cmake', 'efa-gda-cmake-exports', 'efa-gda-cmake-module', 'efa-gda-symbols'];
const STATIC_LIB_HOOKS = ['nvshmem-static-lib-switch', 'nvshmem-static-lib-install'];

const files = (d: string, rel = ''): string[] =>
  readdirSync(path.join(d, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(d, `${rel}${e.name}/`) : [`${rel}${e.name}`],
  );

/** Removes every nvshmem-efa marker line from `file` (or from every file of the tree). */
function stripMarkers(tree: string, only?: string): void {
  for (const f of only ? [only] : files(tree)) {
    const p = path.join(tree, f);
    const text = readFileSync(p, 'utf8');
    const stripped = text.replace(/^[ \t]*(\/\* nvshmem-efa:(begin|end) [^\n]* \*\/|# nvshmem-efa:(begin|end) [^\n]*)\n/gm, '');
    if (stripped !== text) writeFileSync(p, stripped);
  }
}

function patchInPlace(src: string) {
  return cli(['patch', '--nvshmem-src', src, '--in-place', '--offline', '--work-dir', tmp()]);
}

describe('hooks present without their markers (item 5)', () => {
  for (const layout of ['v3.4-like', 'multi-rail'] as const) {
    it(`${layout}: markers stripped from libfabric.cpp only: refused (exit 3) naming each hook, nothing written, no hook twice`, async () => {
      const src = materialize(layout);
      expect(patchInPlace(src).code).toBe(0);
      stripMarkers(src, LIBFABRIC_CPP);
      const before = await hashTree(src);
      const r = patchInPlace(src);
      expect(r.code).toBe(3);
      for (const id of CPP_HOOKS) expect(r.stderr).toMatch(new RegExp(`^  - ${id}: ${LIBFABRIC_CPP}:\\d+: the '${id}' hook .* is there without its nvshmem-efa markers`, 'm'));
      expect(r.stderr).toMatch(/^fix: .*git checkout -- src\/modules\/transport\/libfabric\/libfabric\.cpp.*re-add/m);
      expect(await hashTree(src)).toBe(before);
      const text = readFileSync(path.join(src, LIBFABRIC_CPP), 'utf8');
      expect(text.split('nvshmemt_efa_gda_fini();').length).toBe(2);
    });
  }

  it('v3.4-like: every marker stripped: every hook is named, CMake and version script included', async () => {
    const src = materialize('v3.4-like');
    expect(patchInPlace(src).code).toBe(0);
    stripMarkers(src);
    const before = await hashTree(src);
    const r = patchInPlace(src);
    expect(r.code).toBe(3);
    for (const id of [...CPP_HOOKS, ...CMAKE_HOOKS, ...STATIC_LIB_HOOKS]) expect(r.stderr).toMatch(new RegExp(`^  - ${id}: .* without its nvshmem-efa markers`, 'm'));
    expect(r.stderr).not.toMatch(/expected exactly one target_link_libraries/);
    expect(await hashTree(src)).toBe(before);
  });
});

describe("AWS's own GDA transport (item 11)", () => {
  it('a tree with NVSHMEM_EFAGDA_SUPPORT in its CMake is refused (exit 3) and left as it was', async () => {
    const src = materialize('v3.4-like');
    const top = path.join(src, 'CMakeLists.txt');
    writeFileSync(top, readFileSync(top, 'utf8') + 'option(NVSHMEM_EFAGDA_SUPPORT "Enable the EFA GDA transport" OFF)\n');
    const before = await hashTree(src);
    const r = patchInPlace(src);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^  - aws-efa-gda-transport: CMakeLists\.txt:\d+: `option\(NVSHMEM_EFAGDA_SUPPORT .*AWS's own EFA GDA transport/m);
    expect(r.stderr).toMatch(/^fix: .*efa-gda/m);
    expect(await hashTree(src)).toBe(before);
  });
});

describe('a no-op rerun says so (item 11)', () => {
  it('no fix is printed as applied when the patch step is up to date, in place or in a work dir', () => {
    for (const inPlace of [true, false]) {
      const src = materialize('v3.4-like');
      const work = tmp();
      const args = ['patch', '--nvshmem-src', src, '--offline', '--work-dir', work, ...(inPlace ? ['--in-place'] : [])];
      const first = cli(args);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/^ {2}applied {3}efa-gda-init/m);
      const again = cli(args);
      expect(again.code).toBe(0);
      expect(again.stdout).not.toMatch(/^ {2}applied /m);
      // A rerun in a new work dir plans the patched tree again: every fix already present.
      if (inPlace) expect(cli(['patch', '--nvshmem-src', src, '--offline', '--in-place', '--work-dir', tmp()]).stdout).not.toMatch(/^ {2}applied /m);
    }
  });
});
