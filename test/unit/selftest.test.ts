// `nvshmem-efa selftest` on the CPU: what it finds (GPUs, unshare, the work dir's build, torch, DeepEP), the
// reasons it gives for every check it skips, the table, --json and the exit status; the checks themselves come
// from a stand-in checks.sh (NVSHMEM_EFA_SELFTEST_SCRIPT). The real checks need 2 GPUs (bench/results).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  diagnoseInitFailure,
  parseResult,
  PATTERN_PROGRAMS,
  renderTable,
  selftestCommand,
  skipReason,
  survey,
  type HostQueries,
  type SelftestOptions,
} from '../../src/commands/selftest.ts';
import { SELFTEST_CHECKS } from '../../src/commands/selftest-checks.ts';
import { parsePesPerGpu, place } from '../../src/commands/selftest-placement.ts';
import { EFAEMU_MODES, modesEnv, parseEfaemuModes } from '../../src/commands/selftest-modes.ts';
import { cli, ENV, killGroup, spawnCli, waitFor } from '../helpers/cli.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'selftest-'));

const host = (over: Partial<{ gpus: number | undefined; unshare: boolean; torch: string | undefined; nvcc: string | undefined; mps: string | undefined; modes: string[] }> = {}): HostQueries => {
  const h = { gpus: 2, unshare: true, torch: '2.11.0', nvcc: '/usr/local/cuda/bin/nvcc', mps: undefined, modes: [] as string[], ...over };
  return { gpuCount: async () => h.gpus, canUnshare: async () => h.unshare, hasTorch: async () => h.torch, nvcc: async () => h.nvcc, mpsDaemon: async () => h.mps, computeModes: async () => h.modes };
};

/** A work dir whose state says NVSHMEM (with the GDA device API) and DeepEP were built, with the files in place. */
function workDir(opts: { deepep?: boolean; deviceApi?: boolean; layout?: 'single-rail' | 'multi-rail'; nvshmemDeviceApi?: boolean } = {}) {
  const wd = tmp();
  const prefix = path.join(wd, 'install', 'nvshmem');
  const lf = path.join(wd, 'libfabric');
  mkdirSync(path.join(prefix, 'lib'), { recursive: true });
  mkdirSync(path.join(prefix, 'include', 'nvshmem_efa'), { recursive: true });
  if (opts.deviceApi !== false) writeFileSync(path.join(prefix, 'include', 'nvshmem_efa', 'nvshmemx_efa_gda_device.cuh'), '');
  mkdirSync(path.join(lf, 'include', 'rdma'), { recursive: true });
  writeFileSync(path.join(lf, 'include', 'rdma', 'fabric.h'), '');
  const deepep = path.join(wd, 'sources', 'deepep');
  mkdirSync(path.join(deepep, 'tests'), { recursive: true });
  writeFileSync(path.join(deepep, 'tests', 'test_low_latency.py'), '');
  const steps: Record<string, unknown> = {
    'build-nvshmem': { stamp: 'x', finishedAt: 'now', result: { prefix, cmakeArgs: [`-DLIBFABRIC_HOME=${lf}`, '-DCMAKE_CUDA_ARCHITECTURES=90'], deviceApi: { available: opts.deviceApi !== false } } },
  };
  if (opts.layout || opts.nvshmemDeviceApi) steps['patch-nvshmem'] = { stamp: 'p', finishedAt: 'now', result: { ...(opts.layout ? { layout: { id: opts.layout, summary: opts.layout } } : {}), nvshmemDeviceApi: !!opts.nvshmemDeviceApi } };
  const source = path.join(wd, 'sources', 'nvshmem');
  mkdirSync(path.join(source, 'perftest'), { recursive: true });
  writeFileSync(path.join(source, 'perftest', 'CMakeLists.txt'), '');
  steps['get-nvshmem'] = { stamp: 'g', finishedAt: 'now', result: { kind: 'local', dir: source, origin: source } };
  if (opts.deepep !== false) steps['build-deepep'] = { stamp: 'y', finishedAt: 'now', result: { module: path.join(deepep, 'deep_ep_cpp.so') } };
  writeFileSync(path.join(wd, 'state.json'), JSON.stringify({ version: 1, steps }));
  const efaemu = path.join(wd, 'efaemu');
  mkdirSync(path.join(efaemu, 'prov'), { recursive: true });
  writeFileSync(path.join(efaemu, 'prov', 'libefa-fi.so'), '');
  const peTest = path.join(wd, 'pe_test');
  writeFileSync(peTest, '');
  const patterns = path.join(wd, 'patterns');
  mkdirSync(patterns);
  for (const p of PATTERN_PROGRAMS) writeFileSync(path.join(patterns, p), '');
  return { wd, prefix, lf, deepep, efaemu, peTest, patterns };
}

const opts = (w: ReturnType<typeof workDir>, extra: Partial<SelftestOptions> = {}): SelftestOptions => ({
  workDir: w.wd, efaemuBuild: w.efaemu, peTest: w.peTest, patternDir: w.patterns, json: false, ...extra,
});

/** A stand-in checks.sh that prints the given RESULT lines and records its arguments and environment. */
/** A stand-in checks.sh that prints LINES (a line starting with ! is a command: "!sleep 1"). */
function script(lines: string[]) {
  const dir = tmp();
  const f = path.join(dir, 'checks.sh');
  writeFileSync(f, `#!/usr/bin/env bash\necho "$@" > "${dir}/args"\nenv > "${dir}/env"\n${lines.map((l) => (l.startsWith('!') ? l.slice(1) : `printf '${l.replace(/\t/g, '\\t')}\\n'`)).join('\n')}\n`);
  chmodSync(f, 0o755);
  return { f, dir };
}

async function runSelftest(o: SelftestOptions, h: HostQueries, lines: string[]) {
  const s = script(lines);
  process.env.NVSHMEM_EFA_SELFTEST_SCRIPT = s.f;
  const out: string[] = [];
  try {
    const code = await selftestCommand(o, (x) => out.push(x), () => {}, h);
    return { code, out: out.join('\n'), dir: s.dir };
  } finally {
    delete process.env.NVSHMEM_EFA_SELFTEST_SCRIPT;
  }
}

describe('selftest: what the host and the work dir offer', () => {
  // Issue 34: a host with one GPU ran 2 of 21 checks ("this host has 1 GPU; the checks run one PE per GPU and need 2").
  it('one GPU: no check is skipped for the GPU count; each is placed on the GPU there is, shared', async () => {
    const w = workDir();
    const s = await survey(opts(w), host({ gpus: 1 }));
    expect(s.hostGpus).toBe(1);
    const gpuChecks = SELFTEST_CHECKS.filter((c) => c.needs.includes('gpus'));
    expect(gpuChecks.length).toBe(21);
    for (const c of gpuChecks) expect(skipReason(c.needs, s) ?? '', c.id).not.toMatch(/GPU/);
    for (const c of gpuChecks) expect(place(c.pes ?? 2, 1, 'auto'), c.id).toEqual({ pes: c.pes ?? 2, gpus: 1, shared: true });
    expect(SELFTEST_CHECKS.find((c) => c.id === 'deepep_shrink')!.pes).toBe(6);
    expect((await survey(opts(w), host({ gpus: 0 }))).missing.gpus).toBe('the NVIDIA driver sees no GPU');
  });

  // On 2x H200: deepep_rails ran out its bound at 1 rail, and neg_signal_other_rail (a signal on the other rail)
  // failed with and without its modes ("GDA on 2 rails: 1 rails"): bench/results/quickstart-gpu.md, calls 2 and 7.
  it('a single-rail NVSHMEM build: the 2-rail checks are skipped up front, saying why', async () => {
    const twoRail = ['gda_rails', 'deepep_rails', 'neg_signal_other_rail'];
    const rails = SELFTEST_CHECKS.filter((c) => twoRail.includes(c.id));
    expect(rails).toHaveLength(3);
    const single = await survey(opts(workDir({ layout: 'single-rail' })), host());
    for (const c of rails) expect(skipReason(c.needs, single)).toMatch(/single-rail libfabric transport .* one NIC per PE/);
    for (const layout of ['multi-rail', undefined] as const) {
      const s = await survey(opts(workDir({ layout })), host());
      for (const c of rails) expect(skipReason(c.needs, s), `${layout}`).toBeUndefined();
      // Every other check is as it would be on any layout.
      for (const c of SELFTEST_CHECKS.filter((x) => !rails.includes(x))) expect(skipReason(c.needs, single) === undefined, c.id).toBe(skipReason(c.needs, s) === undefined);
    }
  });

  it('no unshare, no driver, no torch, no DeepEP build, no device API: each says what is missing and what to do', async () => {
    const w = workDir({ deepep: false, deviceApi: false });
    const s = await survey(opts(w), host({ gpus: undefined, unshare: false, torch: undefined }));
    expect(s.missing.unshare).toMatch(/unshare --mount fails \(needs root or CAP_SYS_ADMIN\)/);
    expect(s.missing.gpus).toMatch(/no NVIDIA driver here/);
    expect(s.missing.deepep).toMatch(/no DeepEP build in .* \(build with --deepep-src or --deepep-ref, or pass --deepep-dir\)/);
    expect(s.missing.gda).toMatch(/has no GDA device API/);
    const withDeepEp = await survey(opts(workDir()), host({ torch: undefined }));
    expect(withDeepEp.missing.deepep).toMatch(/cannot import torch, which DeepEP's tests need \(set PYTHON\)/);
  });

  it('a dir that is not a work dir, or one without a finished NVSHMEM build, says how to make one', async () => {
    const empty = tmp();
    let s = await survey({ workDir: empty, json: false }, host());
    expect(s.missing.nvshmem).toBe(`${empty} is not an nvshmem-efa work dir (no state.json): run nvshmem-efa build --work-dir ${empty} first`);
    writeFileSync(path.join(empty, 'state.json'), JSON.stringify({ version: 1, steps: {} }));
    s = await survey({ workDir: empty, json: false }, host());
    expect(s.missing.nvshmem).toMatch(/no finished NVSHMEM build in .*: run nvshmem-efa build --work-dir/);
    expect(s.missing.efaemu).toMatch(/no libfabric to build efaemu against .*: pass --libfabric-home/);
  });

  it('everything present: nothing is missing, the libfabric and arch come from the build', async () => {
    const w = workDir({ nvshmemDeviceApi: true });
    mkdirSync(path.join(w.wd, 'build', 'nvshmem'), { recursive: true });
    writeFileSync(path.join(w.wd, 'build', 'nvshmem', 'compile_commands.json'), '[]');
    const s = await survey(opts(w), host());
    expect(s.missing).toEqual({ fabtests: expect.stringContaining('fi_rdm_pingpong, fi_rma_bw') });
    expect(s.libfabricHome).toBe(w.lf);
    expect(s.cudaArch).toBe('90');
    expect(s.deepepDir).toBe(w.deepep);
  });
});

describe('selftest: PEs on the GPUs there are (issue 34)', () => {
  it('--pes-per-gpu: auto keeps one PE per GPU where there are enough and shares them where not; N packs N per GPU or says what is missing', () => {
    expect(place(2, 2, 'auto')).toEqual({ pes: 2, gpus: 2, shared: false });
    expect(place(6, 2, 'auto')).toEqual({ pes: 6, gpus: 2, shared: true });
    expect(place(2, 8, 'auto')).toEqual({ pes: 2, gpus: 2, shared: false });
    expect(place(2, 2, 2)).toEqual({ pes: 2, gpus: 1, shared: true });
    expect(place(6, 2, 1)).toEqual({ why: '6 PEs at 1 per GPU need 6 GPUs; this host has 2 (--pes-per-gpu auto shares the GPUs there are)' });
    expect(place(2, 0, 'auto')).toEqual({ why: 'no GPU on this host' });
    expect(parsePesPerGpu(undefined)).toBe('auto');
    expect(parsePesPerGpu('3')).toBe(3);
    for (const bad of ['0', '-1', 'two', '1.5', '']) expect(() => parsePesPerGpu(bad), bad).toThrow(/--pes-per-gpu .*expected auto or a positive integer/);
  });

  // One rule in two languages: checks.sh places the PEs it starts, this module says how in the table.
  it('checks.sh --placement N places as selftest-placement.ts says, for every host size and --pes-per-gpu', () => {
    for (const gpus of [1, 2, 3, 4, 8])
      for (const per of ['auto', 1, 2, 3] as const)
        for (const pes of [2, 4, 6]) {
          const r = spawnSync('bash', [path.join(ROOT, 'native/efaemu/gpu/checks.sh'), '--placement', String(pes)], { encoding: 'utf8', env: { ...process.env, PE_GPUS: String(gpus), PES_PER_GPU: String(per) } });
          const p = place(pes, gpus, per);
          const label = `${pes} PEs, ${gpus} GPUs, ${per} per GPU`;
          if ('why' in p) {
            expect(r.status, label).toBe(1);
            expect(r.stdout.trim(), label).toBe(`unplaceable: ${p.why}`);
          } else {
            expect(r.status, label).toBe(0);
            const lines = r.stdout.trim().split('\n');
            expect(lines[0], label).toBe(`pes=${p.pes} gpus=${p.gpus} shared=${p.shared ? 1 : 0}`);
            expect(lines.slice(1), label).toEqual(Array.from({ length: pes }, (_, i) => `pe${i} gpu${i % p.gpus}`));
          }
        }
  });

  it('one GPU: every check is asked of checks.sh, with the host\'s GPU count and --pes-per-gpu; the header says how the PEs share the GPU', async () => {
    const w = workDir();
    const r = await runSelftest(opts(w, { checks: ['fi_info', 'gda_kernel', 'deepep_ll_4pes', 'deepep_shrink'] }), host({ gpus: 1 }), ['RESULT\tfi_info\tpass\tok', 'RESULT\tgda_kernel\tpass\tok', 'RESULT\tdeepep_ll_4pes\tpass\tok', 'RESULT\tdeepep_shrink\tpass\tok']);
    expect(r.code, r.out).toBe(0);
    expect(readFileSync(path.join(r.dir, 'args'), 'utf8').trim()).toBe('fi_info gda_kernel deepep_ll_4pes deepep_shrink');
    const env = readFileSync(path.join(r.dir, 'env'), 'utf8');
    expect(env).toMatch(/^PE_GPUS=1$/m);
    expect(env).toMatch(/^PES_PER_GPU=auto$/m);
    expect(env).toMatch(/^NO_MPS_DIR=.*\/no-mps$/m);
    // The layout is not recorded in this work dir: the 2-NIC runs of device_api and neg_device_api are asked for.
    expect(env).toMatch(/^DEVICE_API_RAILS=1$/m);
    // A single-rail build: left out (checks.sh says so in their evidence).
    const sr = await runSelftest(opts(workDir({ layout: 'single-rail' }), { checks: ['fi_info'] }), host({ gpus: 1 }), ['RESULT\tfi_info\tpass\tok']);
    expect(readFileSync(path.join(sr.dir, 'env'), 'utf8')).toMatch(/^DEVICE_API_RAILS=0$/m);
    expect(r.out).toContain('PEs (host with 1 GPU, --pes-per-gpu auto): 2 PEs on 1 GPU (time-sliced, each PE a host of its own) for gda_kernel; 4 PEs on 1 GPU (time-sliced, each PE a host of its own) for deepep_ll_4pes; 6 PEs on 1 GPU (time-sliced, each PE a host of its own) for deepep_shrink');
    expect(r.out).toContain("shared GPUs: each check's time is the GPU time-slicer's, not the product's");
    expect(r.out).toMatch(/^4 passed, 0 failed, 0 skipped in \d+ s$/m);
    // Two GPUs: the 2-PE checks keep a GPU each; 6 PEs share them. --pes-per-gpu 1 cannot place 6 PEs there: a skip saying so.
    const two = await runSelftest(opts(w, { checks: ['gda_kernel', 'deepep_shrink'], dryRun: true }), host({ gpus: 2 }), []);
    expect(two.out).toContain('PEs (host with 2 GPUs, --pes-per-gpu auto): 2 PEs, 1 per GPU for gda_kernel; 6 PEs on 2 GPUs (time-sliced, each PE a host of its own) for deepep_shrink');
    const one = await runSelftest(opts(w, { checks: ['gda_kernel', 'deepep_shrink'], dryRun: true, pesPerGpu: '1' }), host({ gpus: 2 }), []);
    expect(one.out).toContain('would skip deepep_shrink: 6 PEs at 1 per GPU need 6 GPUs; this host has 2 (--pes-per-gpu auto shares the GPUs there are)');
    expect(one.out).toContain('2 PEs, 1 per GPU for gda_kernel');
  });

  it('each check\'s wall time, from the result before it, is in the table, the progress lines and the JSON', async () => {
    const w = workDir();
    const errs: string[] = [];
    process.env.NVSHMEM_EFA_SELFTEST_SCRIPT = script(['RESULT\tfi_info\tpass\tok', '!sleep 1.6', 'RESULT\tgda_kernel\tfail\tno']).f;
    try {
      const out: string[] = [];
      await selftestCommand(opts(w, { checks: ['fi_info', 'gda_kernel'], json: true }), (x) => out.push(x), (x) => errs.push(x), host({ gpus: 1 }));
      const rows = JSON.parse(out.join('\n')).checks as { check: string; seconds: number }[];
      expect(rows.map((r) => [r.check, r.seconds])).toEqual([['fi_info', 0], ['gda_kernel', 2]]);
      expect(errs).toContain('gda_kernel (efaemu modes all): fail in 2 s');
    } finally {
      delete process.env.NVSHMEM_EFA_SELFTEST_SCRIPT;
    }
  });

  it('an MPS daemon already running is reported and kept from the PEs; a GPU in an exclusive compute mode is never shared', async () => {
    const w = workDir();
    const mps = await runSelftest(opts(w, { checks: ['gda_kernel'] }), host({ gpus: 1, mps: '12345' }), ['RESULT\tgda_kernel\tpass\tok']);
    expect(mps.out).toMatch(/^MPS: a control daemon answers here \(12345\); no PE uses it \(CUDA_MPS_PIPE_DIRECTORY=.*\/no-mps, an empty directory\): they are time-sliced as without MPS$/m);
    const none = await runSelftest(opts(w, { checks: ['gda_kernel'] }), host({ gpus: 1 }), ['RESULT\tgda_kernel\tpass\tok']);
    expect(none.out).not.toMatch(/MPS/);
    const excl = await runSelftest(opts(w, { checks: ['gda_kernel', 'deepep_shrink'] }), host({ gpus: 2, modes: ['Default', 'Exclusive_Process'] }), ['RESULT\tgda_kernel\tpass\tok']);
    expect(excl.out).toMatch(/^deepep_shrink\s+SKIP\s+(?:-|(?:\d+ m )?\d+ s)\s+-\s+GPU 1 Exclusive_Process: a GPU in that compute mode takes one process, and this check shares 6 PEs on 2 GPUs; set it back with nvidia-smi -c DEFAULT/m);
    expect(excl.out).toMatch(/^gda_kernel\s+PASS/m);
  });

  // 1x H200: NVSHMEM's perftests took 325 s to build before any check ran. They build beside the checks that do not
  // need them; device_api waits for them; a failed build fails only the checks that needed it.
  it('NVSHMEM\'s perftests build with half the cores while the other checks run; device_api runs after; a failed build fails device_api alone', async () => {
    const w = workDir({ nvshmemDeviceApi: true });
    const dir = tmp();
    const build = path.join(dir, 'build.sh');
    writeFileSync(build, `#!/bin/bash\necho "start $(date +%s%N) jobs=$JOBS" >> "${dir}/events"\nsleep 2\n[ -n "$FAKE_BUILD_FAIL" ] && { echo "nvcc: error"; exit 1; }\necho "end $(date +%s%N)" >> "${dir}/events"\n`, { mode: 0o755 });
    const checks = path.join(dir, 'checks.sh');
    writeFileSync(checks, `#!/bin/bash\necho "checks $(date +%s%N) $*" >> "${dir}/events"\nfor c in "$@"; do printf 'RESULT\\t%s\\tpass\\tok\\n' "$c"; done\n`, { mode: 0o755 });
    const run = async (extra: Record<string, string> = {}) => {
      Object.assign(process.env, { NVSHMEM_EFA_SELFTEST_SCRIPT: checks, NVSHMEM_EFA_NVSHMEM_TESTS_BUILD: build, ...extra });
      const out: string[] = [];
      try {
        const code = await selftestCommand(opts(w, { checks: ['gda_kernel', 'deepep_ll', 'device_api'] }), (x) => out.push(x), () => {}, host());
        return { code, out: out.join('\n') };
      } finally {
        for (const k of ['NVSHMEM_EFA_SELFTEST_SCRIPT', 'NVSHMEM_EFA_NVSHMEM_TESTS_BUILD', ...Object.keys(extra)]) delete process.env[k];
      }
    };
    const ok = await run();
    expect(ok.code, ok.out).toBe(0);
    const ev = readFileSync(path.join(dir, 'events'), 'utf8').trim().split('\n').map((l) => l.split(' '));
    const at = (kind: string, i = 0) => Number(ev.filter((e) => e[0] === kind)[i]![1]) / 1e6;
    expect(ev.find((e) => e[0] === 'start')![2]).toBe(`jobs=${Math.max(1, Math.floor(os.availableParallelism() / 2))}`);
    expect(ev.filter((e) => e[0] === 'checks').map((e) => e.slice(2).join(' '))).toEqual(['gda_kernel deepep_ll', 'device_api']);
    expect(at('checks', 0)).toBeLessThan(at('end'));      // the other checks ran while it built
    expect(at('checks', 1)).toBeGreaterThan(at('end'));   // device_api after it was built
    writeFileSync(path.join(dir, 'events'), '');
    const bad = await run({ FAKE_BUILD_FAIL: '1' });
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/^device_api\s+FAIL\s+(?:-|(?:\d+ m )?\d+ s)\s+all\s+building NVSHMEM's perftests and examples failed \(.*; .*nvshmem-tests-build\.log\)$/m);
    expect(bad.out).toMatch(/^gda_kernel\s+PASS/m);
    expect(readFileSync(path.join(dir, 'events'), 'utf8')).not.toMatch(/checks .* device_api/);
  });

  // 1x H200: deepep_pattern's three programs took 43 s before the first check; they build beside the checks now.
  it('deepep_pattern\'s programs build while the checks that do not need them run; a failed build fails the pattern checks alone', async () => {
    const w = workDir();
    const dir = tmp();
    const nvcc = path.join(dir, 'nvcc');
    // A stand-in nvcc: 2 s, then the program named by -o (or an error).
    writeFileSync(nvcc, `#!/bin/bash
echo "nvcc $(date +%s%N)" >> "${dir}/events"
sleep 2
[ -n "$FAKE_NVCC_FAIL" ] && { echo "nvcc: error"; exit 1; }
while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2"; shift; done
`, { mode: 0o755 });
    const checks = path.join(dir, 'checks.sh');
    writeFileSync(checks, `#!/bin/bash
echo "checks $(date +%s%N) $*" >> "${dir}/events"
for c in "$@"; do printf 'RESULT\\t%s\\tpass\\tok\\n' "$c"; done
`, { mode: 0o755 });
    const run = async (extra: Record<string, string> = {}) => {
      Object.assign(process.env, { NVSHMEM_EFA_SELFTEST_SCRIPT: checks, ...extra });
      const out: string[] = [];
      try {
        const code = await selftestCommand(opts(w, { checks: ['gda_kernel', 'll_pattern', 'deepep_ll', 'neg_no_quiet'], patternDir: undefined, peTest: path.join(dir, 'pe_test') }), (x) => out.push(x), () => {}, host({ nvcc }));
        return { code, out: out.join('\n') };
      } finally {
        for (const k of ['NVSHMEM_EFA_SELFTEST_SCRIPT', ...Object.keys(extra)]) delete process.env[k];
      }
    };
    writeFileSync(path.join(dir, 'pe_test'), '');
    const ok = await run();
    expect(ok.code, ok.out).toBe(0);
    const ev = readFileSync(path.join(dir, 'events'), 'utf8').trim().split('\n').map((l) => l.split(' '));
    expect(ev.filter((e) => e[0] === 'checks').map((e) => e.slice(2).join(' '))).toEqual(['gda_kernel deepep_ll', 'll_pattern neg_no_quiet']);
    const nvccAt = ev.filter((e) => e[0] === 'nvcc').map((e) => Number(e[1]) / 1e6);
    const checksAt = ev.filter((e) => e[0] === 'checks').map((e) => Number(e[1]) / 1e6);
    expect(nvccAt).toHaveLength(3);
    expect(Math.max(...nvccAt) - Math.min(...nvccAt)).toBeLessThan(1500); // the three at once
    expect(checksAt[0]).toBeLessThan(Math.min(...nvccAt) + 1500);          // the other checks did not wait for them
    expect(checksAt[1]).toBeGreaterThan(Math.min(...nvccAt) + 1900);       // the pattern checks did
    writeFileSync(path.join(dir, 'events'), '');
    const bad = await run({ FAKE_NVCC_FAIL: '1' });
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/^ll_pattern\s+FAIL\s+-\s+all\s+building deepep_pattern, deepep_pattern_no_quiet, deepep_pattern_other_rail failed \(.*; .*patterns-build\.log\)$/m);
    expect(bad.out).toMatch(/^deepep_ll\s+PASS/m);
    expect(readFileSync(path.join(dir, 'events'), 'utf8')).not.toMatch(/checks .* ll_pattern/);
  });

  it('deepep_counters\' column names the modes it ran under: the run\'s, less the placement ones', async () => {
    const { modesColumn } = await import('../../src/commands/selftest.ts');
    expect(modesColumn('deepep_counters', { label: 'all', modes: [...EFAEMU_MODES] })).toBe('silent,wqe128');
    expect(modesColumn('deepep_counters', { label: 'none', modes: [] })).toBe('none');
    expect(modesColumn('deepep_counters', { label: 'defer', modes: ['defer'] })).toBe('none');
    expect(modesColumn('deepep_counters', { label: 'wqe128', modes: ['wqe128'] })).toBe('wqe128');
    expect(modesColumn('deepep_ll', { label: 'all', modes: [...EFAEMU_MODES] })).toBe('all');
  });

  it('--quick: the GDA kernel test, DeepEP, one negative control and device_api on device_api_order (2 and 4 PEs); not with --checks', async () => {
    const w = workDir();
    const r = await runSelftest(opts(workDir({ nvshmemDeviceApi: true }), { quick: true, dryRun: true }), host(), []);
    expect(r.out).toMatch(/would run: EFAEMU_MODES=place_order,defer,duplicate,silent,wqe128 .* gda_kernel deepep_ll neg_no_quiet\nwould run after building NVSHMEM's perftests and examples: EFAEMU_MODES=place_order,defer,duplicate,silent,wqe128 .* device_api$/m);
    expect(r.out).toContain('2 PEs, 1 per GPU for gda_kernel, deepep_ll, neg_no_quiet; 4 PEs on 2 GPUs (time-sliced, each PE a host of its own) for device_api');
    await expect(selftestCommand(opts(w, { quick: true, checks: ['fi_info'] }), () => {}, () => {}, host())).rejects.toThrow(/--quick and --checks both choose the checks/);
    const q = await runSelftest(opts(w, { quick: true }), host(), ['RESULT\tgda_kernel\tpass\tok']);
    expect(readFileSync(path.join(q.dir, 'args'), 'utf8').trim()).toBe('gda_kernel deepep_ll neg_no_quiet');
    expect(readFileSync(path.join(q.dir, 'env'), 'utf8')).toMatch(/^DEVICE_API_PROGRAMS=device_api_order,device_api_order@4$/m);
  });
});

describe('selftest: table, exit status, JSON', () => {
  it('runs only the checks that can run, passes the build to checks.sh, exits 1 when one fails, shows skips with reasons', async () => {
    const w = workDir();
    const r = await runSelftest(opts(w), host(), [
      'RESULT\tfi_info\tpass\tfi_info -p efa: efa-direct efaemu0-rdm',
      'RESULT\tnvshmem_perf\tpass\tput bandwidth 1.2 GB/s',
      'RESULT\tgda_kernel\tfail\tquiet returned 13',
    ]);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/^gda_kernel\s+FAIL\s+(?:-|(?:\d+ m )?\d+ s)\s+all\s+quiet returned 13$/m);
    expect(r.out).toMatch(/^fi_info\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+-\s+fi_info -p efa: efa-direct efaemu0-rdm$/m);
    expect(r.out).toMatch(/^fabtests\s+SKIP\s+(?:-|(?:\d+ m )?\d+ s)\s+-\s+libfabric's fabtests/m);
    // Checks the script was asked for but did not report are failures, never passes.
    expect(r.out).toMatch(/^deepep_ll\s+FAIL\s+(?:-|(?:\d+ m )?\d+ s)\s+all\s+checks\.sh reported nothing for it/m);
    expect(r.out).toMatch(/2 passed, \d+ failed, 3 skipped in \d+ s \(each says why; a skipped check proves nothing\)/);
    const { readFileSync } = await import('node:fs');
    const args = readFileSync(path.join(r.dir, 'args'), 'utf8').trim().split(' ');
    expect(args).not.toContain('fabtests');
    expect(args).toContain('deepep_ll');
    const env = readFileSync(path.join(r.dir, 'env'), 'utf8');
    expect(env).toContain(`NVSHMEM_HOME=${w.prefix}`);
    expect(env).toContain(`LIBFABRIC_HOME=${w.lf}`);
    expect(env).toContain(`DEEPEP_DIR=${w.deepep}`);
    expect(env).toContain(`PE_TEST=${w.peTest}`);
  });

  it('all selected checks pass: exit 0; --json gives the rows', async () => {
    const w = workDir();
    const r = await runSelftest(opts(w, { checks: ['fi_info', 'gda_kernel'], json: true }), host(), [
      'RESULT\tfi_info\tpass\tok',
      'RESULT\tgda_kernel\tpass\tstatus active on both PEs',
    ]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc.checks.map((c: { check: string; result: string }) => `${c.check}:${c.result}`)).toEqual(['fi_info:pass', 'gda_kernel:pass']);
    expect(doc.checks[1].title).toMatch(/EFA GDA active on both PEs/);
  });

  it('the wrong-provider control passes only with our diagnosis of the failure', async () => {
    const w = workDir();
    const results = tmp();
    writeFileSync(path.join(results, 'neg_wrong_provider.pe0.log'), 'libfabric.cpp:1559: non-zero status: -61 No providers matched fi_getinfo query: -61: No data available\n');
    let r = await runSelftest(opts(w, { checks: ['neg_wrong_provider'], results }), host(), ['RESULT\tneg_wrong_provider\tpass\tinit failed on both PEs']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('Diagnosis: NVSHMEM\'s libfabric transport found no provider: FI_PROVIDER=efa_wrong restricts libfabric to \'efa_wrong\'');
    writeFileSync(path.join(results, 'neg_wrong_provider.pe0.log'), 'something else entirely\n');
    r = await runSelftest(opts(w, { checks: ['neg_wrong_provider'], results }), host(), ['RESULT\tneg_wrong_provider\tpass\tinit failed on both PEs']);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/neg_wrong_provider\s+FAIL\s+(?:-|(?:\d+ m )?\d+ s)\s+-\s+init failed on both PEs; but nvshmem-efa could not diagnose why/);
  });

  it('nothing can run: every check skipped with its reason, no results dir written, exit 0 (nothing failed)', async () => {
    const w = workDir();
    const results = path.join(w.wd, 'never');
    const r = await runSelftest({ workDir: w.wd, json: false, results }, host({ gpus: 0, unshare: false }), []);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/0 passed, 0 failed, 23 skipped/);
    const { existsSync } = await import('node:fs');
    expect(existsSync(results)).toBe(false);
  });

  it('an unknown check is a usage error (exit 2) naming the valid ones', () => {
    const r = cli(['selftest', '--checks', 'fi_info,warp_speed', '--work-dir', tmp()]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown check: warp_speed/);
    expect(r.stderr).toMatch(/choose from: fi_info, fabtests, nvshmem_perf/);
    expect(cli(['selftest', '--timeout', 'soon']).code).toBe(2);
  });

  it('--help names every check and the options', () => {
    const r = cli(['selftest', '--help']);
    expect(r.code).toBe(0);
    for (const c of SELFTEST_CHECKS) expect(r.stdout).toContain(c.id);
    for (const o of ['--work-dir', '--checks', '--libfabric-home', '--efaemu-build', '--pe-test', '--deepep-dir', '--results', '--timeout', '--json',
      '--efaemu-modes', '--pattern-dir', '--dry-run'])
      expect(r.stdout).toContain(o);
  });
});

describe('selftest: pieces', () => {
  it('parses checks.sh result lines and nothing else', () => {
    expect(parseResult('RESULT\tgda_kernel\tpass\tstatus active; 12 GDA bytes')).toEqual({ check: 'gda_kernel', result: 'pass', evidence: 'status active; 12 GDA bytes' });
    expect(parseResult('RESULT gda_kernel pass x')).toBeUndefined();
    expect(parseResult('PE0 ok put')).toBeUndefined();
  });

  it('diagnoses the failures it knows and no others', () => {
    expect(diagnoseInitFailure('No providers matched fi_getinfo query: -61', { FI_PROVIDER: 'tcp' })).toMatch(/FI_PROVIDER=tcp restricts libfabric to 'tcp'.*Fix: unset FI_PROVIDER or set FI_PROVIDER=efa/);
    expect(diagnoseInitFailure('No providers matched fi_getinfo query: -61', { FI_PROVIDER: 'efa' })).toMatch(/no EFA device/);
    expect(diagnoseInitFailure('segfault', {})).toBeUndefined();
  });

  it('renders a table with a summary that counts skips as proving nothing', () => {
    const t = renderTable([
      { check: 'fi_info', title: '', result: 'pass', evidence: 'e1', modes: '-', seconds: 146 },
      { check: 'deepep_ll', title: '', result: 'skip', evidence: 'no torch', modes: 'all' },
    ]);
    expect(t.split('\n')[0]).toMatch(/^check\s+result\s+time\s+efaemu modes\s+evidence$/);
    // A check's wall time, and none for one that did not run.
    expect(t).toMatch(/^fi_info\s+PASS\s+2 m 26 s\s+-\s+e1$/m);
    expect(t).toMatch(/^deepep_ll\s+SKIP\s+-\s+all\s+no torch$/m);
    expect(t).toContain('1 passed, 0 failed, 1 skipped (each says why; a skipped check proves nothing)');
  });
});

/** A stand-in checks.sh that appends "EFAEMU_MODES|RESULTS|args" per call and passes every check it is given. */
function passingScript() {
  const dir = tmp();
  const f = path.join(dir, 'checks.sh');
  writeFileSync(f, `#!/usr/bin/env bash\necho "$EFAEMU_MODES|$RESULTS|$*" >> "${dir}/calls"\nfor c in "$@"; do printf 'RESULT\\t%s\\tpass\\tok under %s\\n' "$c" "$EFAEMU_MODES"; done\n`);
  chmodSync(f, 0o755);
  return { f, dir };
}
async function runWith(o: SelftestOptions) {
  const s = passingScript();
  process.env.NVSHMEM_EFA_SELFTEST_SCRIPT = s.f;
  const out: string[] = [];
  try {
    const code = await selftestCommand(o, (x) => out.push(x), () => {}, host());
    const { existsSync, readFileSync } = await import('node:fs');
    const calls = existsSync(path.join(s.dir, 'calls')) ? readFileSync(path.join(s.dir, 'calls'), 'utf8').trim().split('\n') : [];
    return { code, out: out.join('\n'), calls };
  } finally {
    delete process.env.NVSHMEM_EFA_SELFTEST_SCRIPT;
  }
}

// Issue 21: the unkind efaemu modes for the GDA and DeepEP checks, one pass of checks.sh per mode run.
describe('selftest: efaemu modes', () => {

  it('parses all, none, each and comma lists; an unknown mode is a usage error naming the valid ones', () => {
    expect(parseEfaemuModes(undefined)).toEqual([{ label: 'all', modes: [...EFAEMU_MODES] }]);
    expect(parseEfaemuModes('none')).toEqual([{ label: 'none', modes: [] }]);
    expect(parseEfaemuModes('defer, place_order')).toEqual([{ label: 'place_order,defer', modes: ['place_order', 'defer'] }]);
    const each = parseEfaemuModes('each');
    expect(each.map((r) => r.label)).toEqual([...EFAEMU_MODES, 'all']);
    expect(() => parseEfaemuModes('defer,reorder')).toThrow(/--efaemu-modes: unknown mode reorder/);
    expect(modesEnv({ label: 'none', modes: [] })).toBe('none');
  });

  it('checks.sh knows the same modes, each with its environment, and refuses an unknown one', () => {
    const sh = path.join(ROOT, 'native', 'efaemu', 'gpu', 'checks.sh');
    const listed = execFileSync('bash', [sh, '--modes'], { encoding: 'utf8' }).trim().split('\n').map((l) => l.split('\t')[0]);
    expect(listed).toEqual([...EFAEMU_MODES]);
    const env = execFileSync('bash', [sh, '--modes-env', 'all'], { encoding: 'utf8' }).trim().split(' ');
    expect(env.map((w) => w.split('=')[0]).sort()).toEqual(['EFAEMU_DUPLICATE', 'EFAEMU_PLACE_DEFER_US', 'EFAEMU_PLACE_ORDER', 'EFAEMU_SILENT_AFTER_ERROR', 'EFAEMU_WQE_SIZE']);
    expect(execFileSync('bash', [sh, '--modes-env', 'none'], { encoding: 'utf8' }).trim()).toBe('');
    expect(execFileSync('bash', [sh, '--modes-env', 'wqe128'], { encoding: 'utf8' }).trim()).toBe('EFAEMU_WQE_SIZE=128');
    let e: { status?: number; stderr?: string } = {};
    try {
      execFileSync('bash', [sh, '--modes-env', 'defer,warp'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (x) {
      e = x as typeof e;
    }
    expect(e.status).toBe(2);
    expect(String(e.stderr)).toMatch(/EFAEMU_MODES: unknown mode 'warp'.*place_order, defer, duplicate, silent, wqe128/);
  });

  it('checks.sh runs the same checks, in the same order, as the table', () => {
    const sh = path.join(ROOT, 'native', 'efaemu', 'gpu', 'checks.sh');
    expect(execFileSync('bash', [sh, '--list'], { encoding: 'utf8' }).trim().split('\n')).toEqual(SELFTEST_CHECKS.map((c) => c.id));
  });

  it('default: one pass under every mode; the table says which modes each check ran under', async () => {
    const w = workDir();
    const r = await runWith(opts(w, { checks: ['nvshmem_perf', 'gda_kernel', 'deepep_ll', 'neg_no_quiet', 'normal_mode'] }));
    expect(r.code).toBe(0);
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]).toMatch(/^place_order,defer,duplicate,silent,wqe128\|/);
    expect(r.out).toMatch(/^gda_kernel\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+all\s+ok under place_order,defer,duplicate,silent,wqe128$/m);
    expect(r.out).toMatch(/^nvshmem_perf\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+-\s+ok/m);
    expect(r.out).toMatch(/^neg_no_quiet\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+place_order,defer vs none\s+ok/m);
    expect(r.out).toMatch(/^normal_mode\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+all\s+ok/m);
  });

  it('each: one pass per mode and one with all; only the mode-taking checks run again; a row per check and run; own results dir per pass', async () => {
    const w = workDir();
    const r = await runWith(opts(w, { checks: ['nvshmem_perf', 'gda_kernel', 'deepep_ll', 'deepep_counters'], efaemuModes: 'each', json: true }));
    expect(r.code).toBe(0);
    expect(r.calls.map((c) => c.split('|')[0])).toEqual([...EFAEMU_MODES, 'place_order,defer,duplicate,silent,wqe128']);
    expect(r.calls[0]!.split('|')[2]).toBe('nvshmem_perf gda_kernel deepep_ll deepep_counters');
    for (const c of r.calls.slice(1)) expect(c.split('|')[2]).toBe('gda_kernel deepep_ll deepep_counters');
    expect(new Set(r.calls.map((c) => c.split('|')[1])).size).toBe(6);
    const doc = JSON.parse(r.out);
    expect(doc.efaemuModes).toEqual([...EFAEMU_MODES, 'all']);
    const gda = doc.checks.filter((c: { check: string }) => c.check === 'gda_kernel');
    expect(gda.map((c: { modes: string }) => c.modes)).toEqual([...EFAEMU_MODES, 'all']);
    expect(gda[1].evidence).toBe('ok under defer');
    expect(doc.checks.filter((c: { check: string }) => c.check === 'nvshmem_perf')).toHaveLength(1);
  });

  it('a mode-taking check that fails in one run fails the selftest and says under which modes', async () => {
    const w = workDir();
    const dir = tmp();
    const f = path.join(dir, 'checks.sh');
    writeFileSync(f, `#!/usr/bin/env bash\nfor c in "$@"; do r=pass; [ "$EFAEMU_MODES" = duplicate ] && r=fail; printf 'RESULT\\t%s\\t%s\\tx\\n' "$c" "$r"; done\n`);
    chmodSync(f, 0o755);
    process.env.NVSHMEM_EFA_SELFTEST_SCRIPT = f;
    const out: string[] = [];
    try {
      const code = await selftestCommand(opts(w, { checks: ['gda_kernel'], efaemuModes: 'each' }), (x) => out.push(x), () => {}, host());
      expect(code).toBe(1);
    } finally {
      delete process.env.NVSHMEM_EFA_SELFTEST_SCRIPT;
    }
    expect(out.join('\n')).toMatch(/^gda_kernel\s+FAIL\s+(?:-|(?:\d+ m )?\d+ s)\s+duplicate\s+x$/m);
    expect(out.join('\n')).toMatch(/^gda_kernel\s+PASS\s+(?:-|(?:\d+ m )?\d+ s)\s+defer\s+x$/m);
  });

  it('--dry-run says what it would build and run per mode run, runs nothing, writes nothing', async () => {
    const w = workDir();
    const results = path.join(w.wd, 'dry');
    const r = await runWith(opts(w, { checks: ['gda_kernel', 'll_pattern', 'deepep_shrink'], efaemuModes: 'defer,silent', results, dryRun: true, patternDir: undefined }));
    expect(r.code).toBe(0);
    expect(r.calls).toHaveLength(0);
    const { existsSync } = await import('node:fs');
    expect(existsSync(results)).toBe(false);
    expect(r.out).toMatch(/^would build deepep_pattern, deepep_pattern_no_quiet, deepep_pattern_other_rail against .* into .*\/dry\/patterns, while the checks that do not need them run$/m);
    expect(r.out).toMatch(/^would run: EFAEMU_MODES=defer,silent RESULTS=\S+\/dry bash \S+ gda_kernel deepep_shrink$/m);
    expect(r.out).toMatch(/^would run after building deepep_pattern's programs: EFAEMU_MODES=defer,silent RESULTS=\S+\/dry bash \S+ ll_pattern$/m);
    const j = await runWith(opts(w, { checks: ['gda_kernel'], efaemuModes: 'each', results, dryRun: true, json: true }));
    const doc = JSON.parse(j.out);
    expect(doc.dryRun).toBe(true);
    expect(doc.runs.map((x: { modes: string }) => x.modes)).toEqual([...EFAEMU_MODES, 'all']);
    expect(existsSync(results)).toBe(false);
  });

  // 1x H200: a full selftest stopped by its caller's limit printed nothing of the checks that had ended, and told the
  // user a rerun "resumes from the first unfinished step" (the build's words: selftest runs every check again).
  const noUnshare = spawnSync('unshare', ['--mount', 'true']).status !== 0 && 'unshare --mount is not permitted here (needs root)';
  it.skipIf(noUnshare !== false)(skipTitle('SIGTERM: the checks that ended are in the table, the others named as not run, exit 130, and the fix says what a rerun does', noUnshare), async () => {
    const w = workDir();
    mkdirSync(path.join(w.lf, 'bin'));
    for (const f of ['fi_rdm_pingpong', 'fi_rma_bw']) writeFileSync(path.join(w.lf, 'bin', f), '', { mode: 0o755 });
    const s = script(['RESULT\tfi_info\tpass\tok', '!sleep 60']);
    const r = spawnCli(['selftest', '--work-dir', w.wd, '--efaemu-build', w.efaemu, '--libfabric-home', w.lf, '--checks', 'fi_info,fabtests'], { ...ENV, NVSHMEM_EFA_SELFTEST_SCRIPT: s.f });
    try {
      await waitFor('fi_info\'s result', () => /fi_info \(efaemu modes -\): pass/.test(r.stderr()), 60_000);
      process.kill(r.child.pid!, 'SIGTERM');
      const { code } = await r.exited;
      expect(code, r.stderr()).toBe(130);
      expect(r.stdout()).toMatch(/^fi_info\s+PASS\s+\d+ s\s+-\s+ok$/m);
      expect(r.stdout()).toMatch(/^interrupted after \d+ s; not run: fabtests$/m);
      expect(r.stderr()).toMatch(/SIGTERM: stopping \(the checks that ended are reported\)/);
      expect(r.stderr()).toMatch(/rerun selftest: its checks run again \(--checks LIST runs those not run\)/);
      expect(r.stderr()).not.toMatch(/resumes/);
    } finally {
      killGroup(r);
    }
  }, 90_000);

  it('CLI: an unknown mode exits 2 with the valid ones; the dry run goes through the CLI', () => {
    const r = cli(['selftest', '--efaemu-modes', 'sideways', '--work-dir', tmp()]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown mode sideways/);
    expect(r.stderr).toMatch(/pass all, none, each, or a comma list of: place_order, defer, duplicate, silent, wqe128/);
    const d = cli(['selftest', '--checks', 'fi_info', '--efaemu-modes', 'none', '--dry-run', '--work-dir', tmp()]);
    expect(d.code).toBe(0);
    expect(d.stdout).toMatch(/would (run|skip)/);
  });

  it('without the GDA device API the pattern checks are skipped with that reason; a --pattern-dir without the programs names them', async () => {
    const noGda = await survey(opts(workDir({ deviceApi: false }), { patternDir: undefined }), host());
    expect(noGda.missing.pattern).toMatch(/has no GDA device API/);
    const empty = tmp();
    const s = await survey(opts(workDir(), { patternDir: empty }), host());
    expect(s.missing.pattern).toBe(`--pattern-dir ${empty} lacks deepep_pattern, deepep_pattern_no_quiet, deepep_pattern_other_rail (build them with bench/efaemu/build-gpu-programs.sh)`);
  });
});

describe('selftest: device_api (NVSHMEM\'s own perftests and examples over the device API)', () => {
  it('a --no-device-api build: device_api is skipped, saying to rebuild without it', async () => {
    const s = await survey(opts(workDir()), host());
    expect(s.missing.nvshmem_tests).toMatch(/routes no NVSHMEM device API call over GDA \(built with --no-device-api, or by an nvshmem-efa from before the hooks were the default\): rebuild without --no-device-api/);
  });

  it('a build with the device API hooks: the dry run says it would build the perftests and examples of the build\'s source into the work dir', async () => {
    const w = workDir({ nvshmemDeviceApi: true });
    const s = await survey(opts(w), host());
    expect(s.missing.nvshmem_tests).toBeUndefined();
    expect(s.nvshmemSource).toBe(path.join(w.wd, 'sources', 'nvshmem'));
    const r = await runWith(opts(w, { checks: ['device_api'], efaemuModes: 'none', dryRun: true }));
    expect(r.out).toContain(`would build NVSHMEM's perftests and examples of ${path.join(w.wd, 'sources', 'nvshmem')} against ${w.prefix} into ${path.join(w.wd, 'build', 'nvshmem-tests')}`);
    expect(r.out).toMatch(/^would run after building NVSHMEM's perftests and examples: EFAEMU_MODES=none RESULTS=\S+ bash \S+ device_api$/m);
  });

  it('build-nvshmem-tests.sh configures perftest and examples standalone without MPI against the install, and builds the targets checks.sh names', () => {
    const d = tmp();
    const bin = path.join(d, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'cmake'), `#!/bin/sh\necho "cmake $*" >> "${d}/calls"\nfor a in "$@"; do case $a in -B) ;; esac; done\nexit 0\n`, { mode: 0o755 });
    const cuda = path.join(d, 'cuda');
    mkdirSync(path.join(cuda, 'bin'), { recursive: true });
    writeFileSync(path.join(cuda, 'bin', 'nvcc'), '', { mode: 0o755 });
    const src = path.join(d, 'src');
    for (const f of ['perftest/CMakeLists.txt', 'examples/CMakeLists.txt', 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in']) {
      mkdirSync(path.dirname(path.join(src, f)), { recursive: true });
      writeFileSync(path.join(src, f), f);
    }
    const prefix = path.join(d, 'prefix');
    mkdirSync(path.join(prefix, 'lib', 'cmake', 'nvshmem'), { recursive: true });
    const targets = execFileSync('bash', [path.join(ROOT, 'native/efaemu/gpu/checks.sh'), '--device-api-targets'], { encoding: 'utf8' }).trim().split('\n');
    expect(targets).toEqual(expect.arrayContaining(['perf_device_shmem_put_bw', 'perf_device_shmem_signal_ping_pong_latency', 'perf_device_barrier_latency', 'put-block', 'ring-reduce']));
    const out = path.join(d, 'out');
    execFileSync('bash', [path.join(ROOT, 'native/efaemu/gpu/build-nvshmem-tests.sh'), src, prefix, out, '90', ...targets], {
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, CUDA_HOME: cuda, JOBS: '3' }, encoding: 'utf8',
    });
    const calls = readFileSync(path.join(d, 'calls'), 'utf8').trim().split('\n');
    expect(calls).toHaveLength(4);
    expect(calls[0]).toBe(`cmake -S ${out}/src/perftest -B ${out}/perftest -DCMAKE_BUILD_TYPE=Release -DCMAKE_PROJECT_INCLUDE=${out}/nvshmem-static-stand-in.cmake -DNVSHMEM_PREFIX=${prefix} -DNVSHMEM_MPI_SUPPORT=OFF -DNVSHMEM_SHMEM_SUPPORT=OFF -DNVSHMEM_BUILD_BITCODE_LIBRARY=OFF -DCUDA_HOME=${cuda} -DCMAKE_CUDA_COMPILER=${cuda}/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90`);
    expect(calls[1]).toBe(`cmake --build ${out}/perftest -j 3 --target ${targets.filter((t) => t.startsWith('perf_')).join(' ')}`);
    expect(calls[2]).toMatch(new RegExp(`^cmake -S ${out}/src/examples -B ${out}/examples `));
    expect(calls[3]).toBe(`cmake --build ${out}/examples -j 3 --target ${targets.filter((t) => !t.startsWith('perf_') && !t.startsWith('device_api_order')).join(' ')}`);
    // Ours is built with nvcc by build-device-api-order.sh, not by NVSHMEM's projects.
    expect(targets).toContain('device_api_order');
    // The sources are copied (the perftest project writes into its source dir), the user's tree is not written to.
    expect(readFileSync(path.join(out, 'src/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in'), 'utf8')).toBe('src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in');
  });

  // The negative controls of neg_device_api: transfer_device recompiled with NVSHMEM's own command (compile_commands.json)
  // plus one switch, put into a copy of the install's device library, which the program then links first. A stand-in
  // compiler records its arguments; ar is the real one.
  it('build-device-api-order.sh: a control recompiles transfer_device with the build\'s command plus its switch, into a copy of libnvshmem_device.a the program links first', () => {
    const d = tmp();
    const cuda = path.join(d, 'cuda');
    mkdirSync(path.join(cuda, 'bin'), { recursive: true });
    // Records its arguments and writes its -o file (the member's new content).
    const recorder = (name: string) => `#!/bin/bash\necho "${name} $PWD $*" >> "${d}/calls"\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && echo "compiled by ${name}: $*" > "$2"; shift; done\nexit 0\n`;
    writeFileSync(path.join(cuda, 'bin', 'nvcc'), recorder('nvcc'), { mode: 0o755 });
    const cc = path.join(d, 'build-nvcc');
    writeFileSync(cc, recorder('build-nvcc'), { mode: 0o755 });
    const prefix = path.join(d, 'prefix');
    mkdirSync(path.join(prefix, 'lib'), { recursive: true });
    mkdirSync(path.join(prefix, 'include'));
    const objs = path.join(d, 'objs');
    mkdirSync(objs);
    for (const m of ['init_device.cu.o', 'transfer_device.cu.o']) writeFileSync(path.join(objs, m), `original ${m}\n`);
    execFileSync('ar', ['rcs', path.join(prefix, 'lib', 'libnvshmem_device.a'), 'init_device.cu.o', 'transfer_device.cu.o'], { cwd: objs });
    const build = path.join(d, 'build');
    mkdirSync(path.join(build, 'src'), { recursive: true });
    writeFileSync(path.join(build, 'compile_commands.json'), JSON.stringify([
      { directory: path.join(build, 'src'), command: `${cc} -ccbin g++ -O3 -x cu -rdc=true -c /n/src/device/init/init_device.cu -o CMakeFiles/x/init_device.cu.o`, file: '/n/src/device/init/init_device.cu' },
      { directory: path.join(build, 'src'), command: `${cc} -ccbin g++ -DNVSHMEM_X86_64 -O3 --maxrregcount=32 -x cu -rdc=true -c /n/src/device/comm/transfer_device.cu -o CMakeFiles/x/transfer_device.cu.o`, file: '/n/src/device/comm/transfer_device.cu' },
    ]));
    const out = path.join(d, 'out');
    const script = path.join(ROOT, 'native/efaemu/gpu/build-device-api-order.sh');
    execFileSync('bash', [script, prefix, out, '90;100', 'device_api_order', 'device_api_order_signal_no_wait'], { env: { ...process.env, CUDA_HOME: cuda, NVSHMEM_BUILD: build }, encoding: 'utf8' });
    const calls = readFileSync(path.join(d, 'calls'), 'utf8').trim().split('\n');
    const neg = path.join(out, 'ours', 'neg-signal_no_wait');
    const gencode = '-gencode arch=compute_90,code=sm_90 -gencode arch=compute_100,code=sm_100';
    const prog = `-O2 -std=c++17 -rdc=true ${gencode} -I ${prefix}/include ${path.join(ROOT, 'native/efaemu/gpu/device_api_order.cu')}`;
    const libs = `-L ${prefix}/lib -lnvshmem_host -lnvshmem_device -ldl -Xlinker=-rpath,${prefix}/lib`;
    // The programs build in parallel: the calls in any order, the control's link after its library.
    expect(calls.indexOf(`nvcc ${ROOT} ${prog} -o ${out}/ours/device_api_order_signal_no_wait -L${neg} ${libs}`)).toBeGreaterThan(calls.findIndex((c) => c.startsWith('build-nvcc')));
    expect([...calls].sort()).toEqual([
      `nvcc ${ROOT} ${prog} -o ${out}/ours/device_api_order ${libs}`,
      // NVSHMEM's own command for transfer_device, in its directory, with the switch and a new output only.
      `build-nvcc ${build}/src -DNVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT -ccbin g++ -DNVSHMEM_X86_64 -O3 --maxrregcount=32 -x cu -rdc=true -c /n/src/device/comm/transfer_device.cu -o ${neg}/transfer_device.cu.o`,
      `nvcc ${ROOT} ${prog} -o ${out}/ours/device_api_order_signal_no_wait -L${neg} ${libs}`,
    ].sort());
    // The copy has the recompiled member and NVSHMEM's other objects; the install's library is untouched.
    const member = (lib: string, m: string) => execFileSync('ar', ['p', lib, m], { encoding: 'utf8' });
    expect(member(path.join(neg, 'libnvshmem_device.a'), 'transfer_device.cu.o')).toMatch(/^compiled by build-nvcc: /);
    expect(member(path.join(neg, 'libnvshmem_device.a'), 'init_device.cu.o')).toBe('original init_device.cu.o\n');
    expect(member(path.join(prefix, 'lib', 'libnvshmem_device.a'), 'transfer_device.cu.o')).toBe('original transfer_device.cu.o\n');
    // Without the build's compile commands, a control is refused with the fix.
    const r = spawnSync('bash', [script, prefix, out, '90', 'device_api_order_fence_no_gda_quiet'], { env: { ...process.env, CUDA_HOME: cuda, NVSHMEM_BUILD: path.join(d, 'nowhere') }, encoding: 'utf8' });
    expect(r.status).toBe(4);
    expect(r.stderr).toMatch(/compile_commands\.json is missing: set NVSHMEM_BUILD to an NVSHMEM build configured with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON/);
  });

  it('neg_device_api needs the build\'s compile commands: missing, it is skipped with the fix; present, it is runnable', async () => {
    const w = workDir({ nvshmemDeviceApi: true });
    const s = await survey(opts(w), host());
    expect(s.missing.neg_build).toBe(`${path.join(w.wd, 'build', 'nvshmem', 'compile_commands.json')} is missing (an NVSHMEM build from before nvshmem-efa exported its compile commands): rerun nvshmem-efa build --work-dir ${w.wd}`);
    mkdirSync(path.join(w.wd, 'build', 'nvshmem'), { recursive: true });
    writeFileSync(path.join(w.wd, 'build', 'nvshmem', 'compile_commands.json'), '[]');
    expect((await survey(opts(w), host())).have.neg_build).toBeDefined();
    const r = await runWith(opts(w, { checks: ['device_api', 'neg_device_api'], efaemuModes: 'none', dryRun: true }));
    expect(r.out).toMatch(/^would run after building NVSHMEM's perftests and examples: EFAEMU_MODES=none RESULTS=\S+ bash \S+ device_api neg_device_api$/m);
  });
});
