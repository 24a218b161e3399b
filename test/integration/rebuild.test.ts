import { cpSync, existsSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, IO_DEFS, LOCK, ROOT, stepStatus, tmp } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * A template-only change must recompile only the template: the refreshed copy of NVSHMEM keeps the time
 * stamps of every file whose content did not change (libfabric.cpp is rewritten by the patch with the same
 * content) and the files NVSHMEM's configure generated into the tree (nvshmem_version.h and friends, which
 * nearly every translation unit includes; regenerated, they recompile all of NVSHMEM, 39 minutes here).
 */
describe('template-only change: what the incremental build sees', () => {
  it('keeps the time stamps of unchanged and generated files; only the changed template file is new', () => {
    const t = fakeToolchain();
    const src = materialize('v3.4-like');
    const work = tmp();
    const env = { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
    const args = ['build', '--nvshmem-src', src, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS];
    expect(cli(args, env).code).toBe(0);
    const copy = path.join(work, 'sources/nvshmem');
    const efaGda = 'src/modules/transport/libfabric/efa_gda';
    // What NVSHMEM's configure_file() leaves in the tree, and the times of a build long ago.
    writeFileSync(path.join(copy, 'src/include/non_abi/nvshmem_version.h'), '#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n');
    const old = new Date('2020-01-01T00:00:00Z');
    const files = ['src/include/non_abi/nvshmem_version.h', 'src/modules/transport/libfabric/libfabric.cpp', 'src/host/init.cpp', 'src/CMakeLists.txt', `${efaGda}/transport_efa_gda.h`, `${efaGda}/transport_efa_gda.cpp`];
    for (const f of files) utimesSync(path.join(copy, f), old, old);

    // The package with one template file changed.
    const pkg = tmp('nvshmem-efa-pkg-');
    for (const d of ['templates', 'third_party', 'native/probe', 'package.json']) cpSync(path.join(ROOT, d), path.join(pkg, d), { recursive: true });
    const tpl = path.join(pkg, 'templates/transport_efa_gda/transport_efa_gda.cpp');
    writeFileSync(tpl, readFileSync(tpl, 'utf8') + '\n// a template-only change\n');
    const r = cli(args, { ...env, NVSHMEM_EFA_HOME: pkg });
    expect(r.code, r.stderr).toBe(0);
    expect(stepStatus(work)).toMatchObject({ 'get-nvshmem': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done' });

    const mtime = (f: string) => statSync(path.join(copy, f)).mtime.getTime();
    expect(existsSync(path.join(copy, 'src/include/non_abi/nvshmem_version.h'))).toBe(true);
    for (const f of files.slice(0, -1)) expect(mtime(f), f).toBe(old.getTime());
    expect(mtime(`${efaGda}/transport_efa_gda.cpp`)).toBeGreaterThan(old.getTime());
    expect(readFileSync(path.join(copy, `${efaGda}/transport_efa_gda.cpp`), 'utf8')).toContain('// a template-only change');
    expect(existsSync(`${copy}.keep`)).toBe(false);
  });

  it('a probe build dir configured from another copy of the tool is started again, not refused by cmake', () => {
    const t = fakeToolchain();
    const work = tmp();
    const env = { ...t.env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
    expect(cli(['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS], env).code).toBe(0);
    const cache = path.join(work, 'build/probe/CMakeCache.txt');
    writeFileSync(cache, 'CMAKE_HOME_DIRECTORY:INTERNAL=/elsewhere/nvshmem-efa/native/probe\n');
    const r = cli(['probe', '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome], env);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(cache)).toBe(false);
    expect(r.stdout).toContain('fake: no EFA device');
  });
});
