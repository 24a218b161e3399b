import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { benchInvocation, type BenchOptions } from '../../src/commands/bench.ts';
import { EnvironmentError, UsageError } from '../../src/core/errors.ts';
import { cli } from '../helpers/cli.ts';
import { FAKE_PUT } from '../helpers/fake-put.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = path.join(ROOT, 'bench/gda-signals/bench.sh');
const LL = path.join(ROOT, 'bench/gda-signals/deepep_ll.py');
const PYTHON = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);
const NO_UTS = spawnSync('unshare', ['--uts', 'true']).status !== 0 && 'unshare --uts is not permitted here (needs root)';

// Stand-ins for what bench.sh runs on a GPU host: put_bw (one PE of the put table; test/helpers/fake-put.ts) and the
// DeepEP rank driver. Each prints what the real one prints; FAKE_* variables make them misbehave.
const FAKE_LL = `#!/usr/bin/env bash
# Run as "$PYTHON deepep_ll.py DEEPEP_DIR ARGS" with PYTHON=bash.
mode=\${NVSHMEM_EFA_SHIM_SIGNALS:-gda}
if [ "$mode" = gda ] && [ -z "\${FAKE_SHIM_OFF:-}" ]; then echo "nvshmem-efa shim: EFA GDA active; payload over GDA; low-latency signals over GDA (RDMA write after the payload completed)" >&2
elif [ -z "\${FAKE_SHIM_OFF:-}" ]; then echo "nvshmem-efa shim: EFA GDA active; payload over GDA; low-latency signals through NVSHMEM's proxy (NVSHMEM_EFA_SHIM_SIGNALS=proxy)" >&2
else echo "nvshmem-efa shim: EFA GDA not in use (EFA GDA off: not requested); every remote operation goes through NVSHMEM" >&2; fi
echo "args: $*"
[ "$mode" = gda ] && t=(30.00 40.00 75.00) || t=(60.00 90.00 160.00)
echo "[rank $RANK] Dispatch + combine bandwidth: 10.00 GB/s, avg_t=\${t[2]} us, min_t=1.00 us, max_t=2.00 us"
if [ -n "\${FAKE_NO_SNAPSHOT:-}" ]; then echo "WINDOW unavailable this efaemu has no efaemu_stats_snapshot (undefined symbol)"
else
  rdm=$([ "$mode" = gda ] && echo "\${FAKE_GDA_RDM:-0}" || echo 96)
  echo "WINDOW bench-1 rdm_ops=$rdm rdm_send_ops=$rdm rdm_write_bytes=0 gda_write_ops=100 gda_write_bytes=4096"
  echo "WINDOW bench_kineto-2 rdm_ops=0 rdm_send_ops=0 rdm_write_bytes=0 gda_write_ops=50 gda_write_bytes=2048"
fi
echo "[rank $RANK] Dispatch bandwidth: 5.00 GB/s, avg_t=\${t[0]} us | Combine bandwidth: 6.00 GB/s, avg_t=\${t[1]} us"
[ "\${FAKE_LL_FAIL_MODE:-}" = "$mode" ] && [ "$RANK" = 1 ] && { echo "AssertionError: 3 != 4"; exit 1; }
exit 0
`;

function rig() {
  const d = mkdtempSync(path.join(os.tmpdir(), 'bench-'));
  const mk = (...p: string[]) => mkdirSync(path.join(d, ...p), { recursive: true });
  mk('nvshmem', 'lib');
  mk('efaemu', 'prov');
  writeFileSync(path.join(d, 'efaemu/prov/libefa-fi.so'), '');
  mk('libfabric', 'lib');
  mk('libfabric', 'include', 'rdma');
  writeFileSync(path.join(d, 'libfabric/include/rdma/fabric.h'), '#define FI_MAJOR_VERSION 2\n');
  mk('DeepEP', 'tests');
  writeFileSync(path.join(d, 'DeepEP/deep_ep_cpp.cpython-312-x86_64-linux-gnu.so'), '');
  writeFileSync(path.join(d, 'DeepEP/tests/test_low_latency.py'), '');
  for (const [name, body] of [['put_bw', FAKE_PUT], ['deepep_ll', FAKE_LL]] as const) {
    writeFileSync(path.join(d, name), body);
    chmodSync(path.join(d, name), 0o755);
  }
  return d;
}

function bench(d: string, args: string[] = [], env: Record<string, string | undefined> = {}) {
  const base: Record<string, string | undefined> = {
    PATH: process.env.PATH, HOME: process.env.HOME, NVSHMEM_HOME: path.join(d, 'nvshmem'), EFAEMU_BUILD: path.join(d, 'efaemu'),
    LIBFABRIC_HOME: path.join(d, 'libfabric'), EFAEMU_SYSFS_NS: '1', PUT_BW: path.join(d, 'put_bw'), DEEPEP_DIR: path.join(d, 'DeepEP'),
    DEEPEP_LL: path.join(d, 'deepep_ll'), PYTHON: 'bash', RESULTS: path.join(d, 'results'), PRELOAD_UNDER_TEST: '', PART_TIMEOUT: '60',
  };
  const merged = { ...base, ...env };
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  const r = spawnSync('bash', [SCRIPT, '--sizes', '256,4K,1M,64M', ...args], { encoding: 'utf8', env: merged as NodeJS.ProcessEnv, timeout: 120_000 });
  return { ...r, report: existsSync(path.join(d, 'results/gda-signals.md')) ? readFileSync(path.join(d, 'results/gda-signals.md'), 'utf8') : '' };
}

describe('bench/gda-signals/bench.sh (stand-ins for put_bw and the DeepEP ranks)', () => {
  it('prints the put table and the DeepEP comparison with the ratio, labelled as measured through efaemu; exit 0', () => {
    const d = rig();
    const r = bench(d, ['--deepep-args', '--num-tokens 64 --num-experts 16']);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("# nvshmem-efa bench: EFA GDA vs NVSHMEM's CPU proxy (through efaemu: measures our device path and the emulator, not EFA)");
    expect(r.stdout).toContain('| size | GDA GB/s | GDA us | device API GB/s | device API us | proxy GB/s | proxy us | GDA / proxy | device API / proxy |');
    // Sizes in order, human units, GB/s from bytes and us, the ratio of bandwidths; no device API column without
    // DEVICE_API=1, and the line says why.
    expect(r.stdout).toContain('| 256 B | 0.128 | 2.0 | - | - | 0.032 | 8.0 | 4.00x | - |');
    expect(r.stdout).toContain('| 4 KiB | 2.048 | 2.0 | - | - | 0.512 | 8.0 | 4.00x | - |');
    expect(r.stdout).toContain('| 64 MiB | 33554.432 | 2.0 | - | - | 8388.608 | 8.0 | 4.00x | - |');
    expect(r.stdout).toContain('device API column empty: the build has no device API hooks (built with --no-device-api: rebuild without it)');
    expect(r.stdout).toContain('Every put landed byte-exact at PE 1 (8 checks).');
    expect(r.stdout).toContain('| gda | 30.00 | 40.00 | 75.00 | 0 | 300 / 12288 |');
    expect(r.stdout).toContain('| proxy | 60.00 | 90.00 | 160.00 | 192 | 300 / 12288 |');
    expect(r.stdout).toContain('Ratio GDA signals / proxy signals (below 1: GDA is faster): dispatch 0.500, combine 0.444, dispatch + combine 0.469');
    expect(r.stdout).toContain('Result: every part that ran passed');
    // The same report in the results directory, and the DeepEP options reached the test.
    expect(r.report).toBe(r.stdout);
    expect(readFileSync(path.join(d, 'results/deepep-gda.pe0.log'), 'utf8')).toContain('--num-tokens 64 --num-experts 16');
    // Each rank saw only its GPU, NVLink off, GDA on, the emulated provider and the signal switch of its run.
    const pe1 = readFileSync(path.join(d, 'results/deepep-proxy.pe1.log'), 'utf8');
    expect(pe1).toContain('[rank 1]');
  });

  // Issue 34: a host with one GPU. Both PEs on GPU 0, each a host of its own; the report says first that every number is the
  // time-slicer's. A stand-in put_bw records what each PE saw.
  it.skipIf(NO_UTS !== false)(skipTitle('one GPU: both PEs on it, each a host of its own, and the report says the numbers are the time-slicer\'s', NO_UTS), () => {
    const d = rig();
    const put = path.join(d, 'put_bw');
    writeFileSync(put, FAKE_PUT.replace('#!/usr/bin/env bash\n', `#!/usr/bin/env bash\necho "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES" > "${d}/seen.$2"\n`));
    const r = bench(d, ['--no-deepep'], { PE_GPUS: '1' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\*\*Both PEs share 1 GPU\*\* \(time-sliced, each a host of its own\): every time and ratio below is the GPU time-slicer's/m);
    expect(r.stdout.indexOf('Both PEs share 1 GPU')).toBeLessThan(r.stdout.indexOf('| size |'));
    for (const pe of ['0', '1']) expect(readFileSync(path.join(d, `seen.${pe}`), 'utf8').trim()).toBe(`host=${os.hostname()}-pe${pe} gpu=0`);
    const two = bench(d, ['--no-deepep'], { PE_GPUS: '2' });
    expect(two.stdout).not.toContain('share 1 GPU');
    expect(readFileSync(path.join(d, 'seen.1'), 'utf8').trim()).toBe(`host=${os.hostname()} gpu=1`);
  });

  it('says what it measured over real EFA, and skips DeepEP with the reason when there is none (exit 0)', () => {
    const d = rig();
    const r = bench(d, ['--fabric', 'efa'], { DEEPEP_DIR: undefined, EFAEMU_BUILD: undefined });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("(over EFA)");
    expect(r.stdout).not.toContain('efaemu');
    expect(r.stdout).toMatch(/DeepEP low-latency: skipped, no DeepEP built in place \(DEEPEP_DIR=unset; nvshmem-efa build --deepep-ref 567632d builds one\)/);
  });

  it('NIC counters missing from this efaemu: the RDM column says "not measured" and why, the run still passes', () => {
    const d = rig();
    const r = bench(d, ['--no-put'], { FAKE_NO_SNAPSHOT: '1' });
    expect(r.status, r.stdout).toBe(0);
    expect(r.stdout).toContain('Put table: skipped (--no-put).');
    expect(r.stdout).toContain('NIC counters for the gda run: this efaemu has no efaemu_stats_snapshot (undefined symbol)');
    expect(r.stdout).toContain('| gda | 30.00 | 40.00 | 75.00 | not measured | - / - |');
  });

  it.each([
    ['RDM (proxy) operations during the timed GDA-signal iterations', { FAKE_GDA_RDM: '3' }, 'DeepEP with GDA signals: the NIC counted 6 RDM (proxy) operations (rank 0: 3, rank 1: 3) and 12288 GDA write bytes in the timed windows (want 0 and > 0)'],
    ['a byte that did not land', { FAKE_BAD: 'gda' }, 'byte check: CHECK 256 gda bad 3;CHECK 4096 gda bad 3;CHECK 1048576 gda bad 3 (logs:'],
    ['a PE that fails', { FAKE_PUT_FAIL_PE: '1' }, 'put table: rc 0/1'],
    ['GDA not active for the put table', { FAKE_NO_GDA: '1' }, 'GDA column empty: GDA is not active (EFA GDA off: not requested)'],
    ['a DeepEP check that fails with proxy signals', { FAKE_LL_FAIL_MODE: 'proxy' }, 'DeepEP with proxy signals: rc 0/1; AssertionError: 3 != 4'],
    ['the shim not on GDA (the comparison would be meaningless)', { FAKE_SHIM_OFF: '1' }, 'the shim did not report signals over GDA (it said: nvshmem-efa shim: EFA GDA not in use'],
  ])('fails (exit 1) on %s', (_what, env, message) => {
    const d = rig();
    const r = bench(d, [], env);
    expect(r.status, r.stdout).toBe(1);
    expect(r.stdout).toContain(message);
    expect(r.stdout).toContain('Result: FAILED');
  });

  it('a PE that fails while the other waits for it forever: the waiting one is stopped, the run fails instead of hanging', () => {
    const d = rig();
    const t0 = Date.now();
    const r = bench(d, ['--no-deepep'], { FAKE_PUT_FAIL_PE: '1', FAKE_PUT_HANG_PE: '0', PAIR_GRACE: '1' });
    expect(r.status, r.stdout).toBe(1);
    expect(r.stdout).toMatch(/FAIL: put table: rc killed\(\d+\)\/1, 0 rows/);
    expect(Date.now() - t0).toBeLessThan(20_000);
  });

  it('refuses bad usage (exit 2) and missing inputs (exit 4) before running anything', () => {
    const d = rig();
    expect(bench(d, ['--fabric', 'ib']).status).toBe(2);
    expect(bench(d, ['--bogus']).status).toBe(2);
    const r = bench(d, [], { NVSHMEM_HOME: path.join(d, 'nowhere') });
    expect(r.status).toBe(4);
    expect(r.stderr).toContain('is not an NVSHMEM install: run nvshmem-efa build first');
    expect(bench(d, [], { EFAEMU_BUILD: undefined }).stderr).toContain('--fabric efaemu needs EFAEMU_BUILD');
    const ns = bench(d, [], { EFAEMU_SYSFS_NS: undefined, EFAEMU_SYSFS_NS_SCRIPT: path.join(d, 'no-such-script') });
    expect(ns.status).toBe(4);
    expect(ns.stderr).toContain("efaemu's namespace script");
    expect(existsSync(path.join(d, 'results'))).toBe(false);
  });
});

describe('nvshmem-efa bench: finding the build', () => {
  const opts = (o: Partial<BenchOptions>): BenchOptions => ({ workDir: '/nonexistent', fabric: 'efaemu', put: true, deepep: true, dryRun: false, ...o });
  it('takes NVSHMEM, DeepEP and libfabric from the work dir state', () => {
    const d = rig();
    const wd = path.join(d, 'wd');
    mkdirSync(wd);
    writeFileSync(path.join(wd, 'state.json'), JSON.stringify({ version: 1, steps: {
      'build-nvshmem': { stamp: 'x', finishedAt: 'y', result: { prefix: path.join(d, 'nvshmem'), cmakeArgs: [`-DLIBFABRIC_HOME=${path.join(d, 'libfabric')}`] } },
      'build-deepep': { stamp: 'x', finishedAt: 'y', result: { module: path.join(d, 'DeepEP/deep_ep_cpp.cpython-312-x86_64-linux-gnu.so') } },
    } }));
    const inv = benchInvocation(opts({ workDir: wd, efaemuBuild: path.join(d, 'efaemu'), sizes: '256,4K' }), ROOT);
    expect(inv.script).toBe(SCRIPT);
    expect(inv.args).toEqual(['--fabric', 'efaemu', '--sizes', '256,4K']);
    expect(inv.env).toEqual({ NVSHMEM_HOME: path.join(d, 'nvshmem'), DEEPEP_DIR: path.join(d, 'DeepEP'), EFAEMU_BUILD: path.join(d, 'efaemu'),
      LIBFABRIC_HOME: path.join(d, 'libfabric'), RESULTS: path.join(wd, 'bench'),
      DEVICE_API_WHY: `the build in ${wd} has no device API hooks (built with --no-device-api, or by an nvshmem-efa from before they were the default): rebuild without --no-device-api to measure NVSHMEM put calls over GDA` });
    // A build with the device API hooks: the device API column is measured.
    writeFileSync(path.join(wd, 'state.json'), JSON.stringify({ version: 1, steps: {
      'patch-nvshmem': { stamp: 'x', finishedAt: 'y', result: { nvshmemDeviceApi: true } },
      'build-nvshmem': { stamp: 'x', finishedAt: 'y', result: { prefix: path.join(d, 'nvshmem'), cmakeArgs: [] } } } }));
    expect(benchInvocation(opts({ workDir: wd, fabric: 'efa' }), ROOT).env).toMatchObject({ DEVICE_API: '1' });
    expect(benchInvocation(opts({ workDir: wd, fabric: 'efa' }), ROOT).env.DEVICE_API_WHY).toBeUndefined();
  });

  it('the device API column: NVSHMEM\'s put in processes with the switch on, the proxy column with it off; a run where it was not on fails', () => {
    const d = rig();
    const r = bench(d, [], { DEVICE_API: '1' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('| 256 B | 0.128 | 2.0 | 0.064 | 4.0 | 0.032 | 8.0 | 4.00x | 2.00x |');
    expect(r.stdout).toContain('Every put landed byte-exact at PE 1 (12 checks).');
    expect(r.stdout).not.toContain('device API column empty');
    // Two runs: gda and proxy with the switch off; the device API alone with it on.
    expect(readFileSync(path.join(d, 'results/put.pe0.log'), 'utf8')).toContain('NVSHMEM device API over GDA off (NVSHMEM_EFA_GDA_DEVICE_API=0)');
    expect(readFileSync(path.join(d, 'results/put_api.pe0.log'), 'utf8')).toContain('NVSHMEM device API over GDA on');
    expect(readFileSync(path.join(d, 'results/put_api.pe0.log'), 'utf8')).not.toMatch(/^ROW \d+ (gda|proxy) /m);
    const off = bench(d, [], { DEVICE_API: '1', FAKE_API_OFF: '1' });
    expect(off.status).toBe(1);
    expect(off.stdout).toContain('device API column empty: the device API was not on in its run (NVSHMEM device API over GDA off (GDA inactive))');
    const bad = bench(d, [], { DEVICE_API: '1', FAKE_BAD: 'api' });
    expect(bad.status).toBe(1);
    expect(bad.stdout).toMatch(/FAIL: put table: .*byte check: CHECK \d+ api bad 3/);
  });
  it('the CLI: --dry-run prints the script it would run with the build it found; no build: exit 4 with the fix', () => {
    const d = rig();
    const wd = path.join(d, 'wd');
    mkdirSync(wd);
    writeFileSync(path.join(wd, 'state.json'), JSON.stringify({ version: 1, steps: {
      'build-nvshmem': { stamp: 'x', finishedAt: 'y', result: { prefix: path.join(d, 'nvshmem'), cmakeArgs: [] } } } }));
    const dry = cli(['bench', '--work-dir', wd, '--fabric', 'efa', '--deepep-args', '--num-tokens 64', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout.trim()).toBe(`would run: NVSHMEM_HOME=${path.join(d, 'nvshmem')} DEVICE_API_WHY='the build in ${wd} has no device API hooks (built with --no-device-api, or by an nvshmem-efa from before they were the default): rebuild without --no-device-api to measure NVSHMEM put calls over GDA' RESULTS=${path.join(wd, 'bench')} bash ${SCRIPT} --fabric efa --deepep-args '--num-tokens 64'`);
    const none = cli(['bench', '--work-dir', path.join(d, 'empty')]);
    expect(none.code).toBe(4);
    expect(none.stderr).toContain(`no NVSHMEM build in ${path.join(d, 'empty')}`);
    expect(none.stderr).toContain('fix: run nvshmem-efa build --work-dir');
    expect(cli(['bench', '--work-dir', wd, '--fabric', 'ib']).code).toBe(2);
  });

  it('ships with the package and the standalone bundle (GPU hosts run it from there)', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('bench/gda-signals');
    expect(readFileSync(path.join(ROOT, 'scripts/bundle.mjs'), 'utf8')).toMatch(/for \(const d of \[[^\]]*'bench\/gda-signals'/);
    expect(() => benchInvocation(opts({ nvshmemHome: path.join(rig(), 'nvshmem'), fabric: 'efa' }), '/nonexistent-copy')).toThrow(/missing from this copy/);
  });

  it('refuses with the fix to try', () => {
    expect(() => benchInvocation(opts({}))).toThrow(EnvironmentError);
    expect(() => benchInvocation(opts({}))).toThrow(/no NVSHMEM build in \/nonexistent/);
    expect(() => benchInvocation(opts({ fabric: 'ib' }))).toThrow(UsageError);
    expect(() => benchInvocation(opts({ sizes: '1G,x' }))).toThrow(/--sizes 1G,x/);
    const d = rig();
    expect(() => benchInvocation(opts({ nvshmemHome: path.join(d, 'nvshmem') }))).toThrow(/needs the emulated NIC \(--efaemu-build\)/);
    expect(benchInvocation(opts({ nvshmemHome: path.join(d, 'nvshmem'), fabric: 'efa', deepep: false, put: false })).args).toEqual(['--fabric', 'efa', '--no-put', '--no-deepep']);
  });
});

// The DeepEP rank driver's NIC windows, against a stand-in provider library that implements the snapshot call
// efaemu is asked for: efaemu_stats_snapshot(label) writes <EFAEMU_STATS>/efaemu-<pid>.<label>.json.
describe.skipIf(!PYTHON)(skipTitle('bench/gda-signals/deepep_ll.py: timed windows from efaemu snapshots', !PYTHON && 'no python3 or python'), () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'deepep-ll-'));
  const lib = path.join(d, 'libefa-fi.so');
  writeFileSync(path.join(d, 'fake.c'), `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static unsigned long calls;
/* Each snapshot reports 5 more RDM sends in the first window only, and 10 more GDA write ops of 64 bytes each. */
int efaemu_stats_snapshot(const char *label) {
    char path[512];
    const char *dir = getenv("EFAEMU_STATS");
    if (!dir) return -1;
    calls++;
    snprintf(path, sizeof path, "%s/efaemu-%d.%s.json", dir, (int)getpid(), label);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    unsigned long rdm = calls >= 2 ? 5 : 0, gda = calls * 10;
    fprintf(f, "{\\"paths\\": {\\"rdm\\": {\\"write\\": {\\"ops\\": 0, \\"bytes\\": 0}, \\"send\\": {\\"ops\\": %lu, \\"bytes\\": 0}, \\"recv\\": {\\"ops\\": %lu}},"
               " \\"gda\\": {\\"write\\": {\\"ops\\": %lu, \\"bytes\\": %lu}}}}\\n", rdm, rdm, gda, gda * 64);
    return fclose(f);
}
`);
  writeFileSync(path.join(d, 'nosnap.c'), 'int efaemu_other(void) { return 0; }\n');
  execFileSync('gcc', ['-shared', '-fPIC', '-o', lib, path.join(d, 'fake.c')]);
  mkdirSync(path.join(d, 'old'));
  execFileSync('gcc', ['-shared', '-fPIC', '-o', path.join(d, 'old', 'libefa-fi.so'), path.join(d, 'nosnap.c')]);
  const py = (code: string, env: Record<string, string> = {}) =>
    execFileSync(PYTHON!, ['-c', `import ctypes, sys; sys.path.insert(0, ${JSON.stringify(path.dirname(LL))}); import deepep_ll as m\n${code}`],
      { encoding: 'utf8', env: { ...process.env, ...env } });

  it('prints what the NIC carried during each timed call (RDM ops this rank initiated, messages that arrived, GDA write ops and bytes)', () => {
    const stats = mkdtempSync(path.join(d, 'stats-'));
    const out = py(`ctypes.CDLL(${JSON.stringify(lib)}, mode=ctypes.RTLD_GLOBAL)
w = m.Windows(lambda: None)
f = w.wrap('bench', lambda x: x * 2)
assert f(21) == 42
f(1)`, { EFAEMU_STATS: stats });
    // First window: snapshots 1 and 2; second: 3 and 4.
    expect(out).toBe(
      'WINDOW bench-1 rdm_ops=5 rdm_recv_ops=5 rdm_send_ops=5 rdm_write_bytes=0 gda_write_ops=10 gda_write_bytes=640\n' +
      'WINDOW bench-2 rdm_ops=0 rdm_recv_ops=0 rdm_send_ops=0 rdm_write_bytes=0 gda_write_ops=10 gda_write_bytes=640\n');
  });

  it('says why there are no windows: not over efaemu, no EFAEMU_STATS, or an efaemu without the snapshot call', () => {
    const run = (pre: string, env: Record<string, string> = {}) => py(`${pre}
w = m.Windows(lambda: None)
w.wrap('bench', lambda: 1)()
w.wrap('bench', lambda: 1)()`, env);
    expect(run('')).toBe('WINDOW unavailable the efaemu provider is not loaded in this process (not over efaemu)\n');
    expect(run(`ctypes.CDLL(${JSON.stringify(lib)})`)).toBe('WINDOW unavailable EFAEMU_STATS is not set\n');
    expect(run(`ctypes.CDLL(${JSON.stringify(path.join(d, 'old', 'libefa-fi.so'))})`, { EFAEMU_STATS: d })).toMatch(
      /^WINDOW unavailable this efaemu has no efaemu_stats_snapshot \(.*undefined symbol: efaemu_stats_snapshot\)\n$/);
  });
});
