import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectEfaInstaller, detectRdmaCore } from '../../src/core/fabric-host.ts';
import { fabricOrigin, fabricPin, loadFabricLock, versionAtLeastStr } from '../../src/core/fabric-lock.ts';
import { planFabric } from '../../src/core/fabric-plan.ts';
import { exportLines } from '../../src/core/report.ts';
import { splitRuntimeEnv } from '../../src/commands/env.ts';
import { configDefines, GDA_DEFINES, libfabricConfigureArgs } from '../../src/steps/build-libfabric.ts';
import { rdmaCoreCmakeArgs } from '../../src/steps/build-rdma-core.ts';
import { ccacheArgs } from '../../src/steps/build-nvshmem.ts';
import type { DetectedEnv } from '../../src/core/environment.ts';
import { tmp } from '../helpers/cli.ts';

const put = (root: string, rel: string, text = '') => {
  mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  writeFileSync(path.join(root, rel), text);
};
const lock = await loadFabricLock({});
const noGda = { home: '/usr', version: '1.17.0', gda: { available: false, reason: '/usr/include/rdma/fi_ext_efa.h missing' } };
const host = (o: Partial<ReturnType<typeof detectRdmaCore>>) => ({ gdaApi: false, ...o });

describe('the lock (third_party/libfabric/lock.json)', () => {
  it('pins libfabric v2.3.0 (default) and v2.6.0 and rdma-core >= 59 by archive sha256 and commit', () => {
    expect(lock.libfabric.default).toBe('v2.3.0');
    expect(lock.libfabric.pins.map((p) => p.ref)).toEqual(['v2.3.0', 'v2.6.0']);
    expect(fabricPin(lock, 'libfabric', 'v2.3.0')).toMatchObject({ commit: 'ea52cb54cf0313f165a8015e6b93c9248721a15d', archive: { sha256: '1d18fce868f8fef68b42fccd1f5df2555369739e8cb7c148532a0529a308eb09' } });
    expect(fabricPin(lock, 'libfabric', '2.6.0').ref).toBe('v2.6.0');
    const rc = fabricPin(lock, 'rdma-core');
    expect(versionAtLeastStr(rc.version, lock.rdmaCore.minimum)).toBe(true);
    expect(() => fabricPin(lock, 'libfabric', 'v1.22.0')).toThrow(/not pinned \(pinned: v2\.3\.0, v2\.6\.0\)/);
  });

  it('the source is the release archive unless a mirror or a git repository is named', () => {
    const pin = fabricPin(lock, 'libfabric');
    expect(fabricOrigin('libfabric', pin, {})).toEqual({ kind: 'archive', url: pin.archive.url });
    expect(fabricOrigin('libfabric', pin, { NVSHMEM_EFA_LIBFABRIC_URL: 'file:///a/x.tar.bz2' })).toEqual({ kind: 'archive', url: 'file:///a/x.tar.bz2' });
    expect(fabricOrigin('rdma-core', fabricPin(lock, 'rdma-core'), { NVSHMEM_EFA_RDMA_CORE_GIT: '/m/rdma-core' })).toEqual({ kind: 'git', url: '/m/rdma-core' });
  });
});

describe('host detection', () => {
  it('reads the EFA installer version and its rdma-core and libfabric-aws packages', () => {
    const root = tmp('nvshmem-efa-root-');
    expect(detectEfaInstaller(root)).toBeUndefined();
    put(root, 'opt/amazon/efa_installed_packages', '# EFA installer version: 1.43.2\n# Debug packages installed: no\n# Packages installed:\nefa-config_1.17-1_all libfabric-aws_2.3.0amzn1.0_amd64 rdma-core_59.0-1_amd64\n');
    expect(detectEfaInstaller(root)).toEqual({ dir: path.join(root, 'opt/amazon/efa'), version: '1.43.2', rdmaCore: '59.0', libfabricAws: '2.3.0amzn1.0' });
  });

  it('reads the rdma-core release from libefa.so.1.<abi>.<release> and the GDA API from efadv.h', () => {
    const root = tmp('nvshmem-efa-root-');
    expect(detectRdmaCore(root)).toEqual({ gdaApi: false });
    put(root, 'usr/lib/x86_64-linux-gnu/libefa.so.1.2.44.0');
    put(root, 'usr/lib/x86_64-linux-gnu/libefa.so.1.3.50.0');
    expect(detectRdmaCore(root)).toMatchObject({ version: '50.0', gdaApi: false });
    put(root, 'usr/include/infiniband/efadv.h', 'int efadv_query_qp_wqs(struct ibv_qp *qp, void *w);\nint efadv_query_cq (struct ibv_cq *cq, void *a);\n');
    expect(detectRdmaCore(root)).toMatchObject({ version: '50.0', gdaApi: true, prefix: path.join(root, 'usr') });
  });
});

describe('planFabric: use the host libfabric when it can do GDA, else build pinned sources', () => {
  const root = tmp('nvshmem-efa-root-');
  it('uses a libfabric that declares FI_EFA_GDA_OPS', () => {
    const p = planFabric({ lock, sysroot: root, found: { home: '/opt/amazon/efa', version: '2.3.0', gda: { available: true, reason: 'libfabric 2.3.0 declares FI_EFA_GDA_OPS' } } });
    expect(p.libfabric).toMatchObject({ action: 'use', home: '/opt/amazon/efa' });
    expect(p.rdmaCore).toBeUndefined();
  });
  it('builds the default pin when the found one cannot, or none is found, saying why', () => {
    expect(planFabric({ lock, sysroot: root, found: noGda, hostRdmaCore: host({}) }).libfabric).toMatchObject({ action: 'build', ref: 'v2.3.0', why: expect.stringMatching(/1\.17\.0 at \/usr\) cannot do EFA GDA/) });
    expect(planFabric({ lock, sysroot: root, hostRdmaCore: host({}) }).libfabric.why).toMatch(/no libfabric found/);
  });
  it('keeps an explicit --libfabric-home / LIBFABRIC_HOME, with or without GDA', () => {
    expect(planFabric({ lock, sysroot: root, explicitHome: '/usr', explicitFrom: 'LIBFABRIC_HOME', found: noGda }).libfabric).toMatchObject({ action: 'use', home: '/usr', why: 'from LIBFABRIC_HOME' });
  });
  it('builds rdma-core unless the host has >= 59 with headers that declare the GDA calls', () => {
    const rc = (h: ReturnType<typeof host>) => planFabric({ lock, sysroot: root, ref: 'v2.6.0', hostRdmaCore: h }).rdmaCore!;
    expect(rc(host({ version: '44.0' }))).toMatchObject({ action: 'build', ref: 'v60.1', why: expect.stringMatching(/44\.0 is older than 59\.0/) });
    expect(rc(host({ version: '60.0' }))).toMatchObject({ action: 'build', why: expect.stringMatching(/not its development files/) });
    expect(rc(host({ version: '60.0', header: '/usr/include/infiniband/efadv.h', gdaApi: false }))).toMatchObject({ action: 'build', why: expect.stringMatching(/does not declare/) });
    expect(rc(host({ version: '60.0', header: '/usr/include/infiniband/efadv.h', prefix: '/usr', gdaApi: true }))).toMatchObject({ action: 'use', version: '60.0', prefix: '/usr' });
    expect(planFabric({ lock, sysroot: root, ref: 'v2.6.0', hostRdmaCore: host({}) }).libfabric).toMatchObject({ action: 'build', ref: 'v2.6.0', why: '--libfabric-ref v2.6.0' });
  });
});

describe('build arguments', () => {
  const env = { cuda: { home: '/cuda', nvcc: '/cuda/bin/nvcc', version: '13.0' }, ninja: '/usr/bin/ninja', gdrcopy: { home: '/opt/gdrcopy' } } as unknown as DetectedEnv;
  it('rdma-core installs nothing outside its prefix by default paths (systemd, udev, /etc), no pyverbs, no man pages, no libnl', () => {
    const a = rdmaCoreCmakeArgs('/s', '/b', '/w/install/rdma-core', env);
    for (const x of ['-DCMAKE_INSTALL_LIBDIR=lib', '-DCMAKE_INSTALL_SYSCONFDIR=/w/install/rdma-core/etc', '-DCMAKE_INSTALL_SYSTEMD_BINDIR=/w/install/rdma-core/lib/systemd', '-DNO_PYVERBS=1', '-DNO_MAN_PAGES=1', '-DENABLE_RESOLVE_NEIGH=0', '-G']) expect(a).toContain(x);
  });
  it('libfabric: only EFA (+shm), CUDA by dlopen, GDRCopy when found, the built rdma-core as its run path', () => {
    expect(libfabricConfigureArgs('/p', env, '/r')).toEqual(['--prefix=/p', '--disable-static', '--enable-only', '--enable-efa=/r', '--enable-shm', '--with-cuda=/cuda', '--enable-cuda-dlopen', '--with-gdrcopy=/opt/gdrcopy', '--enable-gdrcopy-dlopen', 'LDFLAGS=-L/r/lib -Wl,-rpath,/r/lib', 'CPPFLAGS=-I/r/include']);
    expect(libfabricConfigureArgs('/p', { ...env, gdrcopy: undefined } as DetectedEnv, undefined)).toContain('--enable-efa=yes');
  });
  it('compiles through ccache when it is on PATH', () => {
    const withCcache = { ...env, ccache: '/usr/bin/ccache' } as DetectedEnv;
    expect(ccacheArgs(withCcache)).toEqual(['-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache', '-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache', '-DCMAKE_CUDA_COMPILER_LAUNCHER=/usr/bin/ccache']);
    expect(ccacheArgs(env)).toEqual([]);
    expect(libfabricConfigureArgs('/p', withCcache, undefined)).toContain('CC=/usr/bin/ccache cc');
    expect(rdmaCoreCmakeArgs('/s', '/b', '/p', withCcache)).toContain('-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache');
  });

  it('reads the GDA configure results from config.h', () => {
    const h = GDA_DEFINES.map((d) => `#define ${d} ${d === 'HAVE_EFADV_QUERY_CQ' ? 0 : 1}`).join('\n');
    const got = configDefines(h, GDA_DEFINES);
    expect(Object.entries(got).filter(([, v]) => !v).map(([k]) => k)).toEqual(['HAVE_EFADV_QUERY_CQ']);
  });
});

describe('the run-time export block', () => {
  const rt = { NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_EFA_GDA_ENABLE: '1', LD_LIBRARY_PATH: '/w/a b:/w/c:$LD_LIBRARY_PATH' };
  it('prepends path lists without an empty entry, quotes values, and can keep what is already set', () => {
    expect(exportLines(rt)).toEqual(['export NVSHMEM_REMOTE_TRANSPORT=libfabric', 'export NVSHMEM_EFA_GDA_ENABLE=1', 'export LD_LIBRARY_PATH="/w/a b:/w/c""${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"']);
    expect(exportLines({ LD_LIBRARY_PATH: '/w/a:$LD_LIBRARY_PATH', Y: 'a b' })).toEqual(['export LD_LIBRARY_PATH=/w/a"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"', 'export Y="a b"']);
    expect(exportLines({ X: 'a"$b}' }, true)).toEqual(['export X="${X-a\\"\\$b\\}}"']);
    expect(splitRuntimeEnv(rt)).toEqual({ set: { NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_EFA_GDA_ENABLE: '1' }, prepend: { LD_LIBRARY_PATH: ['/w/a b', '/w/c'] } });
  });
});
