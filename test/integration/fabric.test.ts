import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, ENV, IO_DEFS, report, spawnCli, stepStatus, tmp, type CliResult } from '../helpers/cli.ts';
import { commitAndTag, fabricLock, fakeFabtestsTree, fakeLibfabricTree, fakeRdmaCoreTree, serveDir, SYSTEM_FILE, tarball } from '../helpers/fake-fabric.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';
import { needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';

/**
 * The libfabric / rdma-core steps end to end with the real CLI, real cmake, make and cc, on miniature
 * projects of ours served from 127.0.0.1 (never the network), through a lock that pins their checksums as
 * third_party/libfabric/lock.json pins the real archives. The NVSHMEM build is the miniature's (real cmake +
 * g++), so "GDA compiled in" is checked in the transport it links.
 */
const { LIBFABRIC_HOME: _unused, ...BASE } = ENV;
/** The CLI in the background: the archive server runs in this process, which spawnSync would block. */
async function run(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const r = spawnCli(args, env);
  const { code } = await r.exited;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}
const strings = (f: string) => execFileSync('strings', [f], { encoding: 'utf8', maxBuffer: 64 << 20 });

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('libfabric and rdma-core from pinned sources'), () => {
  let archives: string;
  let server: Awaited<ReturnType<typeof serveDir>>;
  let lock: string;
  let env: NodeJS.ProcessEnv;
  let sums: { libfabric: string; rdmaCore: string; fabtests: string };
  const sysroot = tmp('nvshmem-efa-sysroot-'); // no /opt/amazon, no rdma-core: both are built
  const src = materialize('v3.4-like');
  const work = tmp();

  beforeAll(async () => {
    archives = tmp('nvshmem-efa-archives-');
    const lf = tarball(fakeLibfabricTree(tmp('nvshmem-efa-lf-')), 'libfabric-2.3.0', path.join(archives, 'libfabric-2.3.0.tar.bz2'));
    const rc = tarball(fakeRdmaCoreTree(tmp('nvshmem-efa-rc-')), 'rdma-core-60.1', path.join(archives, 'rdma-core-60.1.tar.gz'));
    const ft = tarball(fakeFabtestsTree(tmp('nvshmem-efa-ft-')), 'fabtests-2.3.0', path.join(archives, 'fabtests-2.3.0.tar.bz2'));
    sums = { libfabric: lf.sha256, rdmaCore: rc.sha256, fabtests: ft.sha256 };
    server = await serveDir(archives);
    lock = fabricLock({ libfabric: { sha256: lf.sha256 }, rdmaCore: { sha256: rc.sha256 }, fabtests: { sha256: ft.sha256 }, baseUrl: server.url });
    env = { ...BASE, NVSHMEM_EFA_FABRIC_LOCK: lock, NVSHMEM_EFA_SYSROOT: sysroot };
  });
  afterAll(async () => server?.close());

  it('build --libfabric-ref v2.3.0 builds rdma-core (none here >= 59) and libfabric with the GDA ops, verified by sha256, and NVSHMEM with GDA compiled in against them; the report lists what was built', async () => {
    const r = await run(['build', '--nvshmem-src', src, '--work-dir', work, '--libfabric-ref', 'v2.3.0', '--jobs', '2', '--efa-io-defs', IO_DEFS], env);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(server.requests.sort()).toEqual(['/fabtests-2.3.0.tar.bz2', '/libfabric-2.3.0.tar.bz2', '/rdma-core-60.1.tar.gz']);
    expect(stepStatus(work)).toMatchObject({ 'rdma-core': 'done', libfabric: 'done', fabtests: 'done', 'build-nvshmem': 'done' });
    const rep = report(work);
    const lf = rep.fabric?.find((f) => f.package === 'libfabric');
    const rc = rep.fabric?.find((f) => f.package === 'rdma-core');
    expect(rc).toMatchObject({ action: 'built', version: '60.1', ref: 'v60.1', verified: `sha256 ${sums.rdmaCore}`, prefix: path.join(work, 'install/rdma-core') });
    expect(rc?.why).toMatch(/no rdma-core on this host/);
    expect(lf).toMatchObject({ action: 'built', version: '2.3.0', ref: 'v2.3.0', verified: `sha256 ${sums.libfabric}`, prefix: path.join(work, 'install/libfabric') });
    for (const d of ['HAVE_EFA', 'HAVE_EFADV_QUERY_QP_WQS', 'HAVE_EFADV_QUERY_CQ', 'HAVE_EFA_DATA_PATH_DIRECT', 'HAVE_CAPS_CQ_WITH_EXT_MEM_DMABUF', 'HAVE_EFADV_CQ_EX']) expect(lf?.features?.[d], d).toBe(true);
    expect(rep.fixes.map((f) => `${f.id}:${f.status}`)).toEqual(expect.arrayContaining(['rdma-core-source:applied', 'libfabric-source:applied', 'fabtests:applied']));
    // fabtests, from their own pinned tarball, built against this libfabric and installed into its bin/ (where
    // selftest looks), beside libfabric's own files.
    for (const t of ['fi_rdm_pingpong', 'fi_rma_bw']) {
      expect(execFileSync(path.join(work, 'install/libfabric/bin', t), { encoding: 'utf8' })).toMatch(new RegExp(`^${t} \\(plain\\) on libfabric \\d+`));
    }
    expect(existsSync(path.join(work, 'install/libfabric/lib/libfabric.so'))).toBe(true);
    expect(rep.fixes.find((f) => f.id === 'fabtests')?.detail).toContain(`sha256 ${sums.fabtests}`);
    // NVSHMEM was configured against the built libfabric, and its transport has the GDA path compiled in.
    expect(rep.nvshmem.cmakeArgs).toContain(`-DLIBFABRIC_HOME=${path.join(work, 'install/libfabric')}`);
    expect(rep.gda.status).toBe('available');
    const so = strings(path.join(work, 'install/nvshmem/lib/nvshmem_transport_libfabric.so'));
    expect(so).toContain('efa gda ops');
    expect(so).not.toContain('without FI_EFA_GDA_OPS');
    // Jobs find the rdma-core built here before the host's older one.
    expect(rep.runtimeEnv.LD_LIBRARY_PATH).toContain(path.join(work, 'install/rdma-core/lib'));
    expect(rep.runtimeEnv.NVSHMEM_EFA_GDA_ENABLE).toBe('1');
    const md = readFileSync(path.join(work, 'report.md'), 'utf8');
    expect(md).toMatch(/- libfabric: 2\.3\.0 built from http:\/\/127\.0\.0\.1:\d+\/libfabric-2\.3\.0\.tar\.bz2 \(sha256 [0-9a-f]{64}\)/);
    expect(md).toMatch(/- rdma-core: 60\.1 built from/);
    // rdma-core's install asks for a system path by absolute name: staged, never written, reported.
    expect(existsSync(SYSTEM_FILE)).toBe(false);
    expect(rep.fixes.find((f) => f.id === 'rdma-core-install-outside-prefix')?.detail).toContain(SYSTEM_FILE);
    // The archives are kept for reruns and --offline.
    expect(readdirSync(path.join(work, 'downloads')).sort()).toEqual(['fabtests-2.3.0.tar.bz2', 'libfabric-2.3.0.tar.bz2', 'rdma-core-60.1.tar.gz']);
  });

  it('a rerun is a no-op (nothing fetched, nothing rebuilt); --offline --force rebuilds from the cached archives without the server', async () => {
    const before = server.requests.length;
    const r = await run(['build', '--nvshmem-src', src, '--work-dir', work, '--libfabric-ref', 'v2.3.0', '--efa-io-defs', IO_DEFS], env);
    expect(r.code, r.stderr).toBe(0);
    expect(stepStatus(work)).toMatchObject({ 'rdma-core': 'skipped', libfabric: 'skipped', fabtests: 'skipped', 'build-nvshmem': 'skipped' });
    expect(report(work).gda.status).toBe('available');
    expect(report(work).fixes.map((f) => `${f.id}:${f.status}`)).toContain('fabtests:applied');
    expect(server.requests.length).toBe(before);
    const off = cli(['build', '--nvshmem-src', src, '--work-dir', work, '--libfabric-ref', 'v2.3.0', '--efa-io-defs', IO_DEFS, '--offline', '--force', '--jobs', '2'], { ...env, NVSHMEM_EFA_FABRIC_LOCK: fabricLock({ libfabric: { sha256: sums.libfabric }, rdmaCore: { sha256: sums.rdmaCore }, fabtests: { sha256: sums.fabtests }, baseUrl: 'http://127.0.0.1:9' }) });
    expect(off.code, off.stderr).toBe(0);
    // The rebuilt libfabric replaced its prefix: fabtests were rebuilt into it, from the cached archive.
    expect(stepStatus(work)).toMatchObject({ 'rdma-core': 'done', libfabric: 'done', fabtests: 'done' });
    expect(existsSync(path.join(work, 'install/libfabric/bin/fi_rma_bw'))).toBe(true);
    expect(server.requests.length).toBe(before);
  });

  it('--offline with nothing cached: exit 4 before anything is written, naming what to fetch and how to provide it', () => {
    const w = path.join(tmp(), 'new');
    const r = cli(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--offline', '--efa-io-defs', IO_DEFS], env);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/--offline, and the pinned sources to build are not cached/);
    expect(r.stderr).toContain(`libfabric v2.3.0 (${server.url}/libfabric-2.3.0.tar.bz2, sha256 ${sums.libfabric})`);
    expect(r.stderr).toContain('rdma-core v60.1');
    expect(r.stderr).toContain(`fabtests v2.3.0 (${server.url}/fabtests-2.3.0.tar.bz2, sha256 ${sums.fabtests})`);
    expect(r.stderr).toMatch(/fix: download .* and pass NVSHMEM_EFA_LIBFABRIC_URL=file:\/\/\/path\/to\/libfabric-2\.3\.0\.tar\.bz2/);
    expect(existsSync(w)).toBe(false);
  });

  it('an archive whose sha256 is not the pin is refused (exit 5) naming both checksums, and is not cached', async () => {
    const bad = path.join(tmp('nvshmem-efa-bad-'), 'libfabric-2.3.0.tar.bz2');
    tarball(fakeLibfabricTree(tmp('nvshmem-efa-lf-'), { version: '2.3.1' }), 'libfabric-2.3.0', bad);
    const w = tmp();
    const r = await run(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--efa-io-defs', IO_DEFS], { ...env, NVSHMEM_EFA_LIBFABRIC_URL: `file://${bad}` });
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toMatch(new RegExp(`is not the pinned libfabric v2\\.3\\.0 archive: sha256 [0-9a-f]{64}, expected ${sums.libfabric}`));
    expect(readdirSync(path.join(w, 'downloads'))).not.toContain('libfabric-2.3.0.tar.bz2');
    expect(report(w).ok).toBe(false);
  });

  it('a git checkout without configure (NVSHMEM_EFA_LIBFABRIC_GIT) runs autogen.sh; the tag must be the pinned commit (else exit 5)', async () => {
    const repo = fakeLibfabricTree(tmp('nvshmem-efa-lfgit-'), { layout: 'checkout' });
    // libfabric's repository carries its fabtests: the build takes them from the verified clone, no tarball.
    fakeFabtestsTree(path.join(repo, 'fabtests'), { marker: 'from-git' });
    const commit = commitAndTag(repo, 'v2.3.0', 'fake libfabric');
    const w = tmp();
    const genv = { ...env, NVSHMEM_EFA_LIBFABRIC_GIT: repo, NVSHMEM_EFA_FABRIC_LOCK: fabricLock({ libfabric: { sha256: sums.libfabric, commit }, rdmaCore: { sha256: sums.rdmaCore }, fabtests: { sha256: sums.fabtests }, baseUrl: server.url }) };
    const fetched = server.requests.length;
    const r = await run(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--jobs', '2', '--efa-io-defs', IO_DEFS], genv);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(execFileSync(path.join(w, 'install/libfabric/bin/fi_rdm_pingpong'), { encoding: 'utf8' })).toContain('(from-git)');
    expect(server.requests.slice(fetched)).not.toContain('/fabtests-2.3.0.tar.bz2');
    expect(report(w).fixes.find((f) => f.id === 'fabtests')?.detail).toContain(`commit ${commit}`);
    expect(readFileSync(path.join(w, 'logs/libfabric.log'), 'utf8')).toContain('autogen: configure generated');
    expect(report(w).fabric?.find((f) => f.package === 'libfabric')).toMatchObject({ action: 'built', origin: repo, verified: `commit ${commit}` });
    // The same tag moved to another commit: refused.
    writeFileSync(path.join(repo, 'NEWS.md'), 'moved\n');
    commitAndTag(repo, 'v2.3.0', 'moved');
    const w2 = tmp();
    const bad = await run(['build', '--nvshmem-src', src, '--work-dir', w2, '--libfabric-ref', 'v2.3.0', '--efa-io-defs', IO_DEFS], genv);
    expect(bad.code, bad.stderr).toBe(5);
    expect(bad.stderr).toContain(`but the pin says ${commit}`);
  });

  it('another source of the same pin is built from scratch, never linked from the last one\'s objects', async () => {
    const w = tmp();
    // (With fabtests switched off: the step is skipped, saying why, and nothing of theirs is installed.)
    const first = await run(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--jobs', '2', '--efa-io-defs', IO_DEFS], { ...env, NVSHMEM_EFA_FABTESTS: '0' });
    expect(first.code, first.stderr).toBe(0);
    expect(report(w).steps.find((s) => s.id === 'fabtests')).toMatchObject({ status: 'skipped', reason: expect.stringMatching(/NVSHMEM_EFA_FABTESTS=0/) });
    expect(existsSync(path.join(w, 'install/libfabric/bin/fi_rma_bw'))).toBe(false);
    // A mirror's archive whose files are older than the objects just built: make alone would keep those.
    const tree = fakeLibfabricTree(tmp('nvshmem-efa-lf-'), { marker: 'second-source' });
    execFileSync('find', [tree, '-exec', 'touch', '-h', '-d', '2001-01-01', '{}', '+']);
    const b = tarball(tree, 'libfabric-2.3.0', path.join(tmp('nvshmem-efa-b-'), 'libfabric-2.3.0.tar.bz2'));
    const benv = { ...env, NVSHMEM_EFA_LIBFABRIC_URL: `file://${b.file}`, NVSHMEM_EFA_FABRIC_LOCK: fabricLock({ libfabric: { sha256: b.sha256 }, rdmaCore: { sha256: sums.rdmaCore }, baseUrl: server.url }) };
    const second = await run(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--jobs', '2', '--efa-io-defs', IO_DEFS], benv);
    expect(second.code, second.stderr).toBe(0);
    expect(stepStatus(w).libfabric).toBe('done');
    expect(strings(path.join(w, 'install/libfabric/lib/libfabric.so.1'))).toContain('second-source');
    // (A lock whose pin names no fabtests archive: none built, and the report says so.)
    expect(report(w).fixes.find((f) => f.id === 'fabtests')).toMatchObject({ status: 'warned', detail: expect.stringMatching(/names no fabtests archive/) });
  });

  it('refuses an unpinned --libfabric-ref and --libfabric-home with --libfabric-ref (exit 2), before writing anything', () => {
    const w = path.join(tmp(), 'new');
    const a = cli(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v1.22.0'], env);
    expect(a.code).toBe(2);
    expect(a.stderr).toMatch(/libfabric ref 'v1\.22\.0' is not pinned \(pinned: v2\.3\.0\)/);
    const b = cli(['build', '--nvshmem-src', src, '--work-dir', w, '--libfabric-ref', 'v2.3.0', '--libfabric-home', '/usr'], env);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/mutually exclusive/);
    expect(existsSync(w)).toBe(false);
  });

  it('env prints the export block of the report (the same lines), a JSON form, and refuses a missing build (exit 4)', () => {
    const r = cli(['env', '--work-dir', work], env);
    expect(r.code, r.stderr).toBe(0);
    const md = readFileSync(path.join(work, 'report.md'), 'utf8');
    const block = md.slice(md.indexOf('```sh\n') + 6, md.indexOf('```', md.indexOf('```sh\n') + 6)).trimEnd();
    expect(r.stdout.trimEnd()).toBe(block);
    const sh = execFileSync('bash', ['-c', `unset LD_LIBRARY_PATH; export NVSHMEM_EFA_GDA_ENABLE=0; eval "$(cat)"; echo "$NVSHMEM_REMOTE_TRANSPORT|$NVSHMEM_EFA_GDA_ENABLE|$LD_LIBRARY_PATH"`], { input: r.stdout, encoding: 'utf8' }).trim();
    expect(sh).toBe(`libfabric|1|${path.join(work, 'install/nvshmem/lib')}:${path.join(work, 'install/libfabric/lib')}:${path.join(work, 'install/rdma-core/lib')}`);
    const keep = cli(['env', '--work-dir', work, '--keep-set'], env).stdout;
    expect(execFileSync('bash', ['-c', 'export NVSHMEM_EFA_GDA_ENABLE=0 LD_LIBRARY_PATH=/x; eval "$(cat)"; echo "$NVSHMEM_EFA_GDA_ENABLE|$LD_LIBRARY_PATH"'], { input: keep, encoding: 'utf8' }).trim()).toMatch(/^0\|.*rdma-core\/lib:\/x$/);
    const j = JSON.parse(cli(['env', '--work-dir', work, '--json'], env).stdout);
    expect(j).toMatchObject({ schema: 'nvshmem-efa-env/1', gda: 'available', set: { NVSHMEM_REMOTE_TRANSPORT: 'libfabric', NVSHMEM_LIBFABRIC_PROVIDER: 'efa', FI_EFA_ENABLE_SHM_TRANSFER: '0' } });
    expect(j.prepend.LD_LIBRARY_PATH).toHaveLength(3);
    const none = cli(['env', '--work-dir', tmp()], env);
    // No build in the work dir: exit 4 in every command that reads one (issue 39, item 6).
    expect(none.code).toBe(4);
    expect(none.stderr).toMatch(/no report in .*\nfix: run nvshmem-efa build first/);
  });

  it('env refuses a build that failed (exit 1, naming the report) and one whose install is gone (exit 4: no build)', () => {
    const t = fakeToolchain();
    // A cmake whose build step fails, in front of the fake one.
    const bin = tmp('nvshmem-efa-failing-');
    writeFileSync(path.join(bin, 'cmake'), `#!/bin/sh\ncase "$1" in --build) echo "error: the compiler failed"; exit 1 ;; esac\nexec ${t.bin}/cmake "$@"\n`, { mode: 0o755 });
    const w = tmp();
    // --offline: efa_io_defs.h is not what this is about (without it a failed download would stop the build first).
    const args = ['build', '--nvshmem-src', src, '--work-dir', w, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--offline'];
    expect(cli(args, { ...t.env, PATH: `${bin}:${t.env.PATH}` }).code).toBe(1);
    const e = cli(['env', '--work-dir', w], t.env);
    expect(e.code).toBe(1);
    expect(e.stderr).toContain(`the last build in ${w} failed: cmake failed (exit code 1) (report: ${path.join(w, 'report.md')})`);
    expect(cli(args, t.env).code).toBe(0);
    expect(cli(['env', '--work-dir', w], t.env).code).toBe(0);
    rmSync(path.join(w, 'install'), { recursive: true });
    const gone = cli(['env', '--work-dir', w], t.env);
    expect(gone.code).toBe(4);
    expect(gone.stderr).toMatch(/is incomplete: .*install\/nvshmem\/lib no longer exist/);
  });
});

describe('the EFA installer and the host rdma-core decide what is built (build --dry-run)', () => {
  const t = fakeToolchain();
  const src = materialize('v3.4-like');
  const { LIBFABRIC_HOME: _u, ...tenv } = t.env;
  const installer = (version: string, lfVersion: string, gda: boolean) => {
    const root = tmp('nvshmem-efa-sysroot-');
    const efa = path.join(root, 'opt/amazon/efa/include/rdma');
    execFileSync('mkdir', ['-p', efa]);
    const [a, b, c] = lfVersion.split('.');
    writeFileSync(path.join(efa, 'fabric.h'), `#define FI_MAJOR_VERSION ${a}\n#define FI_MINOR_VERSION ${b}\n#define FI_REVISION_VERSION ${c}\n`);
    if (gda) writeFileSync(path.join(efa, 'fi_ext_efa.h'), '#define FI_EFA_GDA_OPS "efa gda ops"\n');
    writeFileSync(path.join(root, 'opt/amazon/efa_installed_packages'), `# EFA installer version: ${version}\n# Debug packages installed: no\n# Packages installed:\nlibfabric-aws_${lfVersion}amzn1.0_amd64 rdma-core_60.0-1_amd64\n`);
    return root;
  };
  const dry = (root: string, extra: string[] = []) =>
    cli(['build', '--dry-run', '--nvshmem-src', src, '--work-dir', path.join(tmp(), 'w'), '--cuda-home', t.cudaHome, ...extra], { ...tenv, NVSHMEM_EFA_SYSROOT: root });

  it('uses /opt/amazon/efa when its libfabric has the GDA ops, and says which installer', () => {
    const root = installer('1.50.0', '2.6.0', true);
    const r = dry(root);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`# libfabric: use ${path.join(root, 'opt/amazon/efa')} (the EFA installer 1.50.0's libfabric suffices: libfabric 2.6.0 declares FI_EFA_GDA_OPS)`);
    expect(r.stdout).toContain(`-DLIBFABRIC_HOME=${path.join(root, 'opt/amazon/efa')}`);
  });

  it('builds a pinned libfabric when the installer\'s is too old for GDA, naming the installer and why', () => {
    const root = installer('1.38.0', '1.22.0', false);
    const r = dry(root);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/# libfabric: build v2\.3\.0 from pinned sources \(the libfabric found \(1\.22\.0 at .*opt\/amazon\/efa, EFA installer 1\.38\.0\) cannot do EFA GDA: .*no rdma\/fi_ext_efa\.h/);
    // No rdma-core under this sysroot: it is built too.
    expect(r.stdout).toMatch(/# rdma-core: build v60\.1 from pinned sources \(no rdma-core on this host/);
  });

  it('--libfabric-home keeps a libfabric without GDA, and the report says how to get GDA', () => {
    const r = dry(installer('1.38.0', '1.22.0', false), ['--libfabric-home', t.libfabricHome]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`-DLIBFABRIC_HOME=${t.libfabricHome}`);
    expect(r.stdout).toMatch(/# warned: libfabric-gda-ops: GDA unavailable: .*\(from --libfabric-home\)\. Fix: leave --libfabric-home and LIBFABRIC_HOME unset/);
    expect(r.stdout).not.toContain('# libfabric: build');
  });
});
