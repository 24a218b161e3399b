// native/efaemu/gpu/checks.sh on the CPU, for issue 34: PEs placed on the GPUs there are (several PEs time-sliced on
// one GPU, each a host of its own, outside any MPS daemon), the checks that need 4 and 6 PEs, the negative controls'
// wider windows on a shared GPU, and a rank that outlives SIGKILL. Stand-ins for the programs record what each PE
// got (host name, GPU, environment, arguments) and report what the real ones would; NS_DEVICES names a PCI function
// as the host's "GPU" (PE_GPUS says how many the host has).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHECKS = path.join(ROOT, 'native/efaemu/gpu/checks.sh');
const canUnshare = spawnSync('unshare', ['--mount', 'true']).status === 0;
const pci = existsSync('/sys/bus/pci/devices') ? readdirSync('/sys/bus/pci/devices')[0] : undefined;
const skip = !canUnshare ? 'unshare --mount is not permitted here (needs root)' : !pci ? 'no PCI device under /sys/bus/pci/devices' : undefined;

/** A scratch dir with what every check needs to exist (an "efaemu build", a libfabric with headers). */
function scratch() {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'checks-placement-'));
  mkdirSync(path.join(tmp, 'lf/include/rdma'), { recursive: true });
  mkdirSync(path.join(tmp, 'efaemu'));
  return tmp;
}

function standIn(file: string, body: string) {
  writeFileSync(file, `#!/bin/bash\n${body}`, { mode: 0o755 });
  return file;
}

function checks(tmp: string, names: string[], extra: Record<string, string | undefined> = {}, timeout = 120_000) {
  const env: Record<string, string | undefined> = {
    ...process.env, RESULTS: path.join(tmp, 'results'), NVSHMEM_HOME: tmp, EFAEMU_BUILD: path.join(tmp, 'efaemu'), LIBFABRIC_HOME: path.join(tmp, 'lf'),
    PRELOAD_UNDER_TEST: '', NO_MPS_DIR: path.join(tmp, 'no-mps'), CHECK_TIMEOUT: '60', NS_DEVICES: `/sys/bus/pci/devices/${pci}`, ...extra,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const r = spawnSync('bash', [CHECKS, ...names], { encoding: 'utf8', timeout, env });
  return { out: `${r.stdout}${r.stderr}`, stdout: r.stdout, status: r.status };
}

const seen = (tmp: string, name: string) => readFileSync(path.join(tmp, name), 'utf8').trim();

describe.skipIf(!!skip)(skipTitle('gpu/checks.sh: PEs on the GPUs there are (CPU, stand-ins)', skip), () => {
  // A pe_test stand-in: what the PE saw, and NVSHMEM's init status (FAKE_STATUS, default initialized).
  const peTest = (tmp: string) => standIn(path.join(tmp, 'pe_test'), `
echo "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES mps=$CUDA_MPS_PIPE_DIRECTORY world=$WORLD_SIZE" > "${tmp}/seen.$RANK"
echo "PE$RANK RESULT init_status \${FAKE_STATUS:-initialized}"
echo "PE$RANK ok put of 4194304 bytes from PE 0 landed byte-exact"
`);

  it('one GPU: both PEs on it, each a host of its own, kept from any MPS daemon; an MPG run in NVSHMEM fails the check', () => {
    const tmp = scratch();
    const env = { PE_TEST: peTest(tmp) };
    const one = checks(tmp, ['nvshmem_perf'], env);
    expect(one.stdout).toMatch(/^RESULT\tnvshmem_perf\tpass\t.*; 2 PEs on 1 GPU \(time-sliced, each PE a host of its own\)$/m);
    for (const r of [0, 1]) expect(seen(tmp, `seen.${r}`)).toBe(`host=${os.hostname()}-pe${r} gpu=0 mps=${path.join(tmp, 'no-mps')} world=2`);
    expect(existsSync(path.join(tmp, 'no-mps'))).toBe(true);
    // NVSHMEM saw several PEs of one host on one GPU: the checks would not be what they claim.
    const mpg = checks(tmp, ['nvshmem_perf'], { ...env, FAKE_STATUS: 'limited_mpg' });
    expect(mpg.stdout).toMatch(/^RESULT\tnvshmem_perf\tfail\trc 0\/0 +NVSHMEM's init status on the shared GPU: limited_mpg x2; /m);
    // Two GPUs: a PE each, on the host's own name, as before.
    const two = checks(tmp, ['nvshmem_perf'], { ...env, PE_GPUS: '2' });
    expect(two.stdout).toMatch(/^RESULT\tnvshmem_perf\tpass\t.*; 2 PEs, 1 per GPU$/m);
    for (const r of [0, 1]) expect(seen(tmp, `seen.${r}`)).toBe(`host=${os.hostname()} gpu=${r} mps=${path.join(tmp, 'no-mps')} world=2`);
    // --pes-per-gpu 2 on two GPUs: both on GPU 0, shared.
    checks(tmp, ['nvshmem_perf'], { ...env, PE_GPUS: '2', PES_PER_GPU: '2' });
    for (const r of [0, 1]) expect(seen(tmp, `seen.${r}`)).toBe(`host=${os.hostname()}-pe${r} gpu=0 mps=${path.join(tmp, 'no-mps')} world=2`);
  });

  it('the 2-rail checks on one GPU: each PE a host of its own with both NICs at the one GPU', () => {
    const tmp = scratch();
    standIn(path.join(tmp, 'pe_test'), `
{ echo "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES"; for n in 0 1; do echo "nic$n=$(readlink -f /sys/class/infiniband/efaemu$n/device)"; done; } > "${tmp}/rails.$RANK"
echo "PE$RANK ok GDA runs on 2 rails (nvshmemx_efa_gda_rails)"; echo "PE$RANK RESULT gda_rails 2"
printf '{"per_nic": {"efaemu0": {"gda": {"write": {"bytes": 64}}}, "efaemu1": {"gda": {"write": {"bytes": 64}}}}, "faults": {"gda_cqe_out_of_order": 1}}' > "$EFAEMU_STATS/efaemu-$$.json"
`);
    const r = checks(tmp, ['gda_rails'], { PE_TEST: path.join(tmp, 'pe_test') });
    expect(r.stdout, r.out).toMatch(/^RESULT\tgda_rails\tpass\t/m);
    const real = spawnSync('readlink', ['-f', `/sys/bus/pci/devices/${pci}`], { encoding: 'utf8' }).stdout.trim();
    for (const rank of [0, 1]) expect(seen(tmp, `rails.${rank}`)).toBe(`host=efaemu-node${rank} gpu=0\nnic0=${real}\nnic1=${real}`);
  });

  // Issue 35: device_api_order+rails through the real nvshmem-efa launch, PE_RAILS=2 in --pe-exec.
  it('device_api_order+rails: each PE of the launch a host of its own with both NICs at the one GPU (EFAEMU_NICS=2), the 2-NIC tests named', () => {
    const tmp = scratch();
    const tests = path.join(tmp, 'nvshmem-tests', 'ours');
    mkdirSync(tests, { recursive: true });
    standIn(path.join(tests, 'device_api_order'), `
{ echo "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES nics=$EFAEMU_NICS order=$CUDA_DEVICE_ORDER args=$*"; for n in 0 1; do echo "nic$n=$(readlink -f /sys/class/infiniband/efaemu$n/device)"; done; } > "${tmp}/dao.$PMI_RANK"
printf '{"paths":{"gda":{"write":{"bytes":4096},"read":{"bytes":0}},"rdm":{"write":{"bytes":0,"gpu_bytes":0},"read":{"bytes":0}}}}' > "$EFAEMU_STATS/efaemu-$$.json"
echo "nvshmem-efa: PE $PMI_RANK at finalize: EFA GDA active on 2 rails (efaemu0, efaemu1); NVSHMEM device API over GDA on"
`);
    const r = checks(tmp, ['device_api'], {
      NVSHMEM_TESTS: path.join(tmp, 'nvshmem-tests'), DEVICE_API_PROGRAMS: 'device_api_order+rails',
      NVSHMEM_EFA_LAUNCH: `${process.execPath} ${path.join(ROOT, 'bin/nvshmem-efa.js')}`,
    }, 180_000);
    expect(r.stdout, r.out).toMatch(/^RESULT\tdevice_api\tpass\t1 runs: device_api_order\+rails on: ok \d+s, GDA w\/r 8192\/0 B/m);
    const real = spawnSync('readlink', ['-f', `/sys/bus/pci/devices/${pci}`], { encoding: 'utf8' }).stdout.trim();
    for (const rank of [0, 1])
      expect(seen(tmp, `dao.${rank}`)).toBe(`host=efaemu-node${rank} gpu=0 nics=2 order=PCI_BUS_ID args=100 fence signal xwarp_p xwarp_signal proxy_fence_gda\nnic0=${real}\nnic1=${real}`);
  }, 300_000);

  // 1x H200, gda_kernel under modes all with both PEs on the GPU: a credit refresh of 513 writes outlasted the 5 s GPU
  // wait bound at about 13 ms a write, none lost (the emulator's CUDA copies wait for timeslices).
  it('gda_kernel and gda_rails on a shared GPU bound their GPU waits at 60 s; one PE per GPU keeps the product\'s default', () => {
    const tmp = scratch();
    standIn(path.join(tmp, 'pe_test'), `echo "bound=\${NVSHMEM_EFA_GDA_TIMEOUT_MS:-default}" > "${tmp}/bound.$RANK"; echo "PE$RANK RESULT init_status initialized"; exit 1\n`);
    const env = { PE_TEST: path.join(tmp, 'pe_test') };
    checks(tmp, ['gda_kernel'], env);
    expect(seen(tmp, 'bound.0')).toBe('bound=60000');
    checks(tmp, ['gda_kernel'], { ...env, PE_GPUS: '2' });
    expect(seen(tmp, 'bound.1')).toBe('bound=default');
    checks(tmp, ['gda_rails'], { ...env, SHARED_GDA_TIMEOUT_MS: '90000' });
    expect(seen(tmp, 'bound.1')).toBe('bound=90000');
  });

  // DeepEP's test as a stand-in interpreter: what each rank got; ranks 1, 3 and 5 of a shrink test "fail" as DeepEP's do.
  const python = (tmp: string) => standIn(path.join(tmp, 'python'), `
case "$*" in *test_low_latency.py*) ;; *) exec python3 "$@" ;; esac
all="$*"
echo "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES rank=$RANK world=$WORLD_SIZE recv_ms=\${NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS:-} bench=\${DEEPEP_BENCH_ITERS:-} args=\${all#*--disable-nvlink } refuse=\${EFAEMU_FAIL_AS_TARGET:-} peer_errors=\${NVSHMEM_EFA_SHIM_PEER_ERRORS:-}" > "${tmp}/deepep.$RANK"
case "$*" in *--shrink-test*) case $RANK in 1) echo "Rank 1 failed when first calling dispatch communication API, exit..." ;; 3) echo "Rank 3 failed when first calling combine communication API, exit..." ;; 5) echo "Rank 5 failed when first calling clean communication API, exit..." ;; esac ;; esac
[ "$RANK" = 0 ] && echo "nvshmem-efa shim: EFA GDA active on 1 rail" && echo "[rank 0] Dispatch + combine bandwidth: 1.00 GB/s"
refused=0; [ "\${EFAEMU_FAIL_AS_TARGET:-}" = gda ] && refused=5
printf '{"paths": {"gda": {"write": {"bytes": 4096}}, "rdm": {"write": {"gpu_bytes": 0}}}, "faults": {"refused": %d}}' $refused > "$EFAEMU_STATS/efaemu-$$.json"
`);

  it('deepep_shrink runs on 6 PEs (24 experts, the shim\'s receive bound), deepep_ll_4pes on 4, each rank a host of its own on the one GPU, DeepEP\'s benchmarks cut', () => {
    const tmp = scratch();
    mkdirSync(path.join(tmp, 'lib'));
    mkdirSync(path.join(tmp, 'tests'));
    const env = { PYTHON: python(tmp), DEEPEP_DIR: tmp, DEEPEP_ARGS: undefined };
    const shrink = checks(tmp, ['deepep_shrink'], { ...env, SHRINK_REFUSE: '1' });
    expect(shrink.stdout, shrink.out).toMatch(/^RESULT\tdeepep_shrink\tpass\t--shrink-test passed on 6 PEs on 1 GPU \(time-sliced, each PE a host of its own\): failed Rank 1 at dispatch,Rank 3 at combine,Rank 5 at clean, masked by the others; rank 1 refusing GDA \(EFAEMU_FAIL_AS_TARGET=gda, 5 refused\), the shim's peer errors mask \(0 masks said\); GDA bytes 24576, GPU-sourced RDM write bytes 0; receive bound 10000 ms; /m);
    // Rank 1 alone refuses GDA (issue 35); every rank's shim masks a failed peer.
    for (let r = 0; r < 6; r++)
      expect(seen(tmp, `deepep.${r}`)).toBe(`host=${os.hostname()}-pe${r} gpu=0 rank=${r} world=6 recv_ms=10000 bench=3 args=--shrink-test --num-experts 16 --num-tokens 32 --hidden 2048 --num-topk 4 --num-experts 24 refuse=${r === 1 ? 'gda' : ''} peer_errors=mask`);
    // By default no rank refuses (a refusing rank fails NVSHMEM's own flush before a proxy signal: checks.sh says so).
    const plain = checks(tmp, ['deepep_shrink'], env);
    expect(plain.stdout, plain.out).toMatch(/^RESULT\tdeepep_shrink\tpass\t.*masked by the others; no rank refusing \(SHRINK_REFUSE=0\); /m);
    expect(seen(tmp, 'deepep.1')).toContain(' refuse= peer_errors=mask');
    const four = checks(tmp, ['deepep_ll_4pes'], env);
    expect(four.stdout, four.out).toMatch(/^RESULT\tdeepep_ll_4pes\tpass\ttest_low_latency\.py --disable-nvlink, 4 x 1 GPU \(4 PEs on 1 GPU \(time-sliced, each PE a host of its own\)\): passed over the shim's own GDA path/m);
    for (let r = 0; r < 4; r++) expect(seen(tmp, `deepep.${r}`)).toMatch(new RegExp(`^host=${os.hostname()}-pe${r} gpu=0 rank=${r} world=4 recv_ms= bench=3 `));
    expect(four.stdout).toMatch(/^RESULT\tdeepep_ll_4pes\tpass\t.*; DeepEP's benchmarks cut to 3 iterations \(DEEPEP_BENCH_ITERS: a shared GPU times its time-slicer\)/m);
    // A GPU per PE: DeepEP's own benchmark counts, and the row names none.
    const own = checks(tmp, ['deepep_ll_4pes'], { ...env, PE_GPUS: '4' });
    expect(seen(tmp, 'deepep.3')).toMatch(/ bench= args=/);
    expect(own.stdout).toMatch(/^RESULT\tdeepep_ll_4pes\tpass\t/m);
    expect(own.stdout).not.toContain('DEEPEP_BENCH_ITERS');
    // With 6 GPUs, one each; with 2 and --pes-per-gpu 1, 6 PEs cannot be placed: a skip that says so.
    expect(checks(tmp, ['deepep_shrink'], { ...env, PE_GPUS: '2', PES_PER_GPU: '1' }).stdout).toMatch(/^RESULT\tdeepep_shrink\tskip\t6 PEs at 1 per GPU need 6 GPUs; this host has 2/m);
  });

  // 1x H200, modes all: with GDA off (NVSHMEM's own proxy path) DeepEP's dispatch check failed after writes placed out
  // of order, late and twice; deepep_counters counts bytes per path, and runs GDA off without the placement modes.
  it('deepep_counters runs GDA off under the run\'s modes less the placement ones, and says so', () => {
    const tmp = scratch();
    mkdirSync(path.join(tmp, 'tests'));
    mkdirSync(path.join(tmp, 'results', 'stats-deepep_ll'), { recursive: true });
    writeFileSync(path.join(tmp, 'results', 'stats-deepep_ll', 'efaemu-1.json'), '{"paths": {"gda": {"write": {"bytes": 4096, "small_bytes": 0}}}}');
    standIn(path.join(tmp, 'python'), `
case "$*" in *test_low_latency.py*) ;; *) exec python3 "$@" ;; esac
echo "order=\${EFAEMU_PLACE_ORDER:-} defer=\${EFAEMU_PLACE_DEFER_US:-} dup=\${EFAEMU_DUPLICATE:-} wqe=\${EFAEMU_WQE_SIZE:-} gda=$NVSHMEM_EFA_GDA_ENABLE" > "${tmp}/modes.$RANK"
printf '{"paths": {"rdm": {"write": {"gpu_bytes": 2048, "small_gpu_bytes": 0}}, "gda": {"write": {"ops": 0}}}}' > "$EFAEMU_STATS/efaemu-$$.json"
`);
    const r = checks(tmp, ['deepep_counters'], { PYTHON: path.join(tmp, 'python'), DEEPEP_DIR: tmp, EFAEMU_MODES: 'all', PE_GPUS: '2' });
    expect(seen(tmp, 'modes.0')).toBe('order= defer= dup= wqe=128 gda=0');
    expect(r.stdout, r.out).toMatch(/^RESULT\tdeepep_counters\tpass\tGDA off: passed; the RDM path carried 4096 .*; GDA off under EFAEMU_SILENT_AFTER_ERROR=1 EFAEMU_WQE_SIZE=128 \(not the placement modes: NVSHMEM's own proxy path does not survive them\)$/m);
  });

  it('device_api runs device_api_order on 4 PEs through nvshmem-efa launch, each a host of its own on the one GPU', () => {
    const tmp = scratch();
    const tests = path.join(tmp, 'nvshmem-tests', 'ours');
    mkdirSync(tests, { recursive: true });
    standIn(path.join(tests, 'device_api_order'), `
echo "host=$(cat /proc/sys/kernel/hostname) gpu=$CUDA_VISIBLE_DEVICES size=$PMI_SIZE args=$*" > "${tmp}/dao.$PMI_SIZE.$PMI_RANK"
printf '{"paths":{"gda":{"write":{"bytes":4096},"read":{"bytes":0}},"rdm":{"write":{"bytes":0,"gpu_bytes":0},"read":{"bytes":0}}}}' > "$EFAEMU_STATS/efaemu-$$.json"
echo "nvshmem-efa: PE $PMI_RANK at finalize: EFA GDA active; NVSHMEM device API over GDA on"
echo "PE$PMI_RANK ok barrier: 100 rounds"
`);
    const r = checks(tmp, ['device_api'], {
      NVSHMEM_TESTS: path.join(tmp, 'nvshmem-tests'), DEVICE_API_PROGRAMS: 'device_api_order,device_api_order@4',
      NVSHMEM_EFA_LAUNCH: `${process.execPath} ${path.join(ROOT, 'bin/nvshmem-efa.js')}`,
    }, 180_000);
    expect(r.stdout, r.out).toMatch(/^RESULT\tdevice_api\tpass\t2 runs: device_api_order on: ok \d+s, GDA w\/r 8192\/0 B.*; device_api_order@4 on: ok \d+s, GDA w\/r 16384\/0 B/m);
    for (let rank = 0; rank < 4; rank++) expect(seen(tmp, `dao.4.${rank}`)).toBe(`host=${os.hostname()}-pe${rank} gpu=0 size=4 args=100 barrier barrier_lone`);
    expect(seen(tmp, 'dao.2.1')).toBe(`host=${os.hostname()}-pe1 gpu=0 size=2 args=100`);
    // A program whose fixed round trips cost minutes of timeslices is not run on a shared GPU, and the row says so;
    // with a GPU per PE, or DEVICE_API_SHARED_ALL=1, it runs.
    const perf = path.join(tmp, 'nvshmem-tests', 'perftest', 'device', 'pt-to-pt');
    mkdirSync(perf, { recursive: true });
    standIn(path.join(perf, 'shmem_put_atomic_ping_pong_latency'), `
echo ran >> "${tmp}/atomic.ran"
printf '{"paths":{"gda":{"write":{"bytes":64},"read":{"bytes":0}},"rdm":{"write":{"bytes":0,"gpu_bytes":0},"read":{"bytes":0}}}}' > "$EFAEMU_STATS/efaemu-$$.json"
echo "nvshmem-efa: PE $PMI_RANK at finalize: EFA GDA active; NVSHMEM device API over GDA on"
`);
    const env = { NVSHMEM_TESTS: path.join(tmp, 'nvshmem-tests'), DEVICE_API_PROGRAMS: 'shmem_put_atomic_ping_pong_latency', NVSHMEM_EFA_LAUNCH: `${process.execPath} ${path.join(ROOT, 'bin/nvshmem-efa.js')}` };
    const shared = checks(tmp, ['device_api'], env, 180_000);
    expect(shared.stdout, shared.out).toMatch(/^RESULT\tdevice_api\tfail\t0 runs: no program of DEVICE_API_PROGRAMS=shmem_put_atomic_ping_pong_latency ran: shmem_put_atomic_ping_pong_latency: not run on a shared GPU: /m);
    expect(existsSync(path.join(tmp, 'atomic.ran'))).toBe(false);
    const all = checks(tmp, ['device_api'], { ...env, DEVICE_API_PROGRAMS: 'device_api_order,shmem_put_atomic_ping_pong_latency' }, 180_000);
    expect(all.stdout, all.out).toMatch(/^RESULT\tdevice_api\tpass\t1 runs: shmem_put_atomic_ping_pong_latency: not run on a shared GPU: its 550 round trips per size, .* \(142 s on one H200\); .* \(DEVICE_API_SHARED_ALL=1 runs it\); device_api_order on: ok \d+s/m);
    expect(existsSync(path.join(tmp, 'atomic.ran'))).toBe(false);
    const forced = checks(tmp, ['device_api'], { ...env, DEVICE_API_SHARED_ALL: '1' }, 180_000);
    expect(forced.stdout, forced.out).toMatch(/^RESULT\tdevice_api\tpass\t1 runs: shmem_put_atomic_ping_pong_latency on: ok/m);
    const own = checks(tmp, ['device_api'], { ...env, PE_GPUS: '2' }, 180_000);
    expect(own.stdout, own.out).toMatch(/^RESULT\tdevice_api\tpass\t1 runs: shmem_put_atomic_ping_pong_latency on: ok/m);
  }, 600_000);

  // deepep_pattern stand-ins: the broken client is "caught" (a data error) only under the windows given in CAUGHT_AT.
  it('a negative control time-slicing hides is run again with windows a timeslice wide on a shared GPU; one still not caught fails', () => {
    const tmp = scratch();
    const dir = path.join(tmp, 'patterns');
    mkdirSync(dir);
    for (const p of ['deepep_pattern', 'deepep_pattern_no_quiet', 'deepep_pattern_other_rail'])
      standIn(path.join(dir, p), `
echo "$* bound=\${NVSHMEM_EFA_GDA_TIMEOUT_MS:-default}" > "${tmp}/args.$RANK"
echo "PE$RANK RESULT shim_build $([ ${p} = deepep_pattern ] && echo product || echo switched)"
if [ -n "$EFAEMU_PLACE_DEFER_US" ] && [ "$EFAEMU_PLACE_DEFER_US" = "\${CAUGHT_AT:-none}" ]; then echo "PE$RANK FAIL ll_pattern: 10 rounds x 4 experts x 64 tokens of 7168 B: every token byte there when its count signal arrived: 12 bytes wrong when the signal arrived, first in round 0 (expert 2, token 60); 10 rounds done; wait ran out in round -1"; exit 1; fi
# FAKE_OTHER: under the modes the run fails, but with no byte wrong (a peer gone, an error completion).
if [ -n "$EFAEMU_PLACE_DEFER_US" ] && [ -n "\${FAKE_OTHER:-}" ]; then echo "nvshmem-efa: EFA GDA quiet on PE $RANK (before signalling PE 1) failed: NIC: error completion (0xd)"; echo "PE$RANK FAIL ll_pattern: 10 rounds x 4 experts x 64 tokens of 7168 B: every token byte there when its count signal arrived: 0 bytes wrong when the signal arrived, first in round -1 (expert -1, token -1); 10 rounds done; wait ran out in round 3"; exit 2; fi
echo "PE$RANK ok ll_pattern: low-latency signals over GDA"
`);
    const env = { PATTERN_DIR: dir };
    const wide = checks(tmp, ['neg_no_quiet'], { ...env, CAUGHT_AT: '2000-20000' });
    expect(wide.stdout, wide.out).toMatch(/^RESULT\tneg_no_quiet\tpass\tcaught under modes place_order,defer \(EFAEMU_PLACE_ORDER=random:7:16 EFAEMU_PLACE_DEFER_US=2000-20000; rc 1\/1: .*\); not caught under EFAEMU_PLACE_ORDER=random:7:16 EFAEMU_PLACE_DEFER_US=20-400 on the shared GPU, so run again with the windows widened: caught; passes without/m);
    // Shared: 10 rounds (every placed write waits for timeslices) and GPU waits bounded at 60 s; one PE per GPU: the
    // program's own 200 rounds and the product's bound.
    expect(seen(tmp, 'args.1')).toMatch(/--wait-s 20 --rounds 10 ll bound=60000$/);
    // A broken client that fails under the modes without a byte wrong was not caught: that failure is not the race.
    const other = checks(tmp, ['neg_no_quiet'], { ...env, FAKE_OTHER: '1' });
    expect(other.stdout, other.out).toMatch(/^RESULT\tneg_no_quiet\tfail\tnot caught under modes place_order,defer .*not caught either: the modes prove nothing against this broken client \(it failed without a data error: nvshmem-efa: EFA GDA quiet on PE 0 .*error completion \(0xd\)/m);
    const never = checks(tmp, ['neg_no_quiet'], env);
    expect(never.stdout).toMatch(/^RESULT\tneg_no_quiet\tfail\tnot caught under modes place_order,defer .*so run again with the windows widened: not caught either: the modes prove nothing/m);
    // One PE per GPU: no second try (what 2x H200 showed stands).
    const two = checks(tmp, ['neg_no_quiet'], { ...env, PE_GPUS: '2', CAUGHT_AT: '2000-20000' });
    expect(two.stdout).toMatch(/^RESULT\tneg_no_quiet\tfail\tnot caught under modes place_order,defer \(EFAEMU_PLACE_ORDER=random:7:16 EFAEMU_PLACE_DEFER_US=20-400\): the modes/m);
    expect(seen(tmp, 'args.1')).toMatch(/--wait-s 20 ll bound=default$/);
    expect(existsSync(path.join(tmp, 'results', 'neg_no_quiet.wide.pe0.log'))).toBe(true);
  });

  // gda_pe_errors: PE 1 alone refuses GDA writes (RANK_ENV), PE 0 judges. The stand-in says what PE 0's kernel would
  // (FAKE_SHARED_ERRORS: the queue-wide errors of before ABI 8, PE 0's own wait failing with PE 1's error).
  it('gda_pe_errors: only PE 1 refuses GDA; PE 0\'s own traffic going on passes, its wait failing with PE 1\'s error fails', () => {
    const tmp = scratch();
    const pe = standIn(path.join(tmp, 'pe_test'), `
echo "refuse=\${EFAEMU_FAIL_AS_TARGET:-none} mode=\${@: -1}" > "${tmp}/pe.$RANK"
echo "PE$RANK RESULT init_status initialized"
[ "$RANK" = 1 ] && exit 0
if [ -n "\${FAKE_SHARED_ERRORS:-}" ]; then
  echo "PE0 RESULT pe_errors kernel no error; put to PE 1 0, wait for PE 1 13, put to PE 0 0, wait for PE 0 13, wait for PE 1 again 13"
  echo "PE0 ok pe_errors: PE 1 refusing, the wait for PE 1 reports its failed completion"
  echo "PE0 FAIL pe_errors: after PE 1's failure, a 65536 B put to PE 0 posts, its wait returns 0 and every byte landed: wait for PE 0 13"; exit 1
fi
echo "PE0 RESULT pe_errors kernel no error; put to PE 1 0, wait for PE 1 13, put to PE 0 0, wait for PE 0 0, wait for PE 1 again 13"
echo "PE0 ok pe_errors: PE 1 refusing, the wait for PE 1 reports its failed completion"
echo "PE0 ok pe_errors: after PE 1's failure, a 65536 B put to PE 0 posts, its wait returns 0 and every byte landed"
`);
    const ok = checks(tmp, ['gda_pe_errors'], { PE_TEST: pe });
    expect(ok.stdout, ok.out).toMatch(/^RESULT\tgda_pe_errors\tpass\tPE 1 refusing GDA \(EFAEMU_FAIL_AS_TARGET=gda, .*\): kernel no error; put to PE 1 0, wait for PE 1 13, put to PE 0 0, wait for PE 0 0/m);
    expect(seen(tmp, 'pe.0')).toBe('refuse=none mode=pe_errors');
    expect(seen(tmp, 'pe.1')).toBe('refuse=gda mode=pe_errors');
    const shared = checks(tmp, ['gda_pe_errors'], { PE_TEST: pe, FAKE_SHARED_ERRORS: '1' });
    expect(shared.stdout, shared.out).toMatch(/^RESULT\tgda_pe_errors\tfail\trc 1\/0; .*wait for PE 0 13.*\(an error of PE 1's must fail PE 1's wait alone\)/m);
  }, 180_000);

  // deepep_silent_bound's verdict with a stand-in for DeepEP's test: both ranks print the shim's trap message and fail;
  // PE 0 ends FAKE_PE0_EXIT_S after PE 1. A rank may take until the check's allowance (start-up + bound + 10 s), not the
  // harness's 15 s after its peer failed (1x H200: PE 0 was stopped in cudaDeviceSynchronize 15 s after PE 1 ended).
  it('deepep_silent_bound: a rank that ends by itself within the allowance passes however late after its peer; one that never ends fails', () => {
    const tmp = scratch();
    mkdirSync(path.join(tmp, 'deepep', 'tests'), { recursive: true });
    const py = standIn(path.join(tmp, 'python'), `
echo "nvshmem-efa: EFA GDA quiet of the signal's rail and peer on PE $RANK (before signalling PE $((1 - RANK))) failed: a wait passed NVSHMEM_EFA_GDA_TIMEOUT_MS"
[ "$RANK" = 0 ] && sleep "$FAKE_PE0_EXIT_S"
exit 1
`);
    const env = { PYTHON: py, DEEPEP_DIR: path.join(tmp, 'deepep'), DEEPEP_START_S: '10', GDA_TIMEOUT_MS: '1000' };
    const late = checks(tmp, ['deepep_silent_bound'], { ...env, FAKE_PE0_EXIT_S: '18' });
    expect(late.stdout, late.out).toMatch(/^RESULT\tdeepep_silent_bound\tpass\tboth PEs ended by themselves in \d+s \(start-up allowance 10s \+ bound 1000 ms; rc 1\/1\), each with the trap message/m);
    const hung = checks(tmp, ['deepep_silent_bound'], { ...env, FAKE_PE0_EXIT_S: '300' });
    expect(hung.stdout, hung.out).toMatch(/^RESULT\tdeepep_silent_bound\tfail\trc killed\(137\)\/1 in \d+s/m);
  }, 180_000);

  // A process the GPU driver holds survives SIGKILL. The stand-in for the driver: a `kill` (BASH_ENV, read by every
  // bash the harness starts) that does not deliver SIGKILL to the pid in FAKE_UNKILLABLE's file.
  it('a rank that outlives SIGKILL is named (pid, state) and left behind: the run and the checks after it go on', () => {
    const tmp = scratch();
    const pidFile = path.join(tmp, 'unkillable.pid');
    const bashEnv = path.join(tmp, 'bash-env');
    writeFileSync(bashEnv, `kill() { if [ "$1" = -KILL ] && [ -s "${pidFile}" ]; then local a k; k=$(cat "${pidFile}"); shift; for a in "$@"; do [ "$a" = "$k" ] || builtin kill -KILL "$a"; done; return 0; fi; builtin kill "$@"; }\n`);
    standIn(path.join(tmp, 'pe_test'), `
echo "PE$RANK RESULT init_status initialized"
if [ "$RANK" = 1 ] && [ ! -s "${pidFile}" ]; then echo $$ > "${pidFile}"; exec sleep 300; fi
echo "PE0 FAIL put: stand-in failure"; exit 1
`);
    const started = Date.now();
    const r = checks(tmp, ['nvshmem_perf', 'gda_kernel'], { PE_TEST: path.join(tmp, 'pe_test'), BASH_ENV: bashEnv, KILL_WAIT_S: '2' });
    const held = Number(readFileSync(pidFile, 'utf8'));
    try {
      expect(r.stdout, r.out).toMatch(/^RESULT\tnvshmem_perf\tfail\trc 1\/unkillable\(pid \d+ state S wchan \S+\) /m);
      expect(r.stdout).toMatch(/^STUCK\tPE 1 of nvshmem_perf: unkillable\(pid \d+ state S/m);
      expect(r.out).toMatch(/checks\.sh: PE 1 \(pid \d+, sleep 300\) outlived SIGKILL for 2 s, state S: the GPU driver holds it/);
      expect(r.stdout).toMatch(/^RESULT\tgda_kernel\t/m);  // the next check ran
      expect(Date.now() - started).toBeLessThan(100_000);
    } finally {
      process.kill(held, 'SIGKILL');
    }
  }, 180_000);
});
