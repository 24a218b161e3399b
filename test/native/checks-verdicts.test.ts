// The verdicts of native/efaemu/gpu/checks.sh on the CPU (issue 37, item 2): every check's pass, fail and skip, and
// each negative control's "caught / not caught", judged by the real checks.sh over what stand-in programs print. The
// lines are the real programs' (pe_test.cu, deepep_pattern.cu, device_api_order.cu through pe_common.cuh's "PE<r> ok
// / FAIL / RESULT", the transport's and the shim's stderr lines, DeepEP's test, fi_info, fabtests), as in the logs
// quoted in bench/results/ (one-gpu-selftest.md, efaemu-gpu-h200x2/, quickstart-gpu/). A negative control whose
// broken client was not caught must be a FAIL: the last test shows a checks.sh with each such judgement weakened
// turning those FAILs into PASSes, which the "not caught" test rejects.
import { afterAll, describe, expect, it } from 'vitest';
import { checksWorld, dropWorld, mutant, runChecks, type Scenario, type Verdict } from '../helpers/checks-sh.ts';

const st = (o: object) => `stats '${JSON.stringify(o)}'`;
const gdaStatus = 'EFA GDA active on 1 rail (efaemu0): efa-direct, QP 3, SQ 1024 x 64 B (max_batch 64), TX CQ 1024 x 32 B, RX CQ 1024 x 32 B';
const shimLine = 'nvshmem-efa shim: EFA GDA active on 1 rail; payload over GDA; low-latency signals over GDA';
const finalize = 'nvshmem-efa: PE $RANK at finalize: EFA GDA active on 1 rail (efaemu0); NVSHMEM device API over GDA on';
const proxyLine = 'nvshmem-efa: PE $RANK: NVSHMEM device API proxy operations 0 (outside GDA regions 0, p or value writes 0, g 0, atomics and signal adds 0, reads without GPU write ordering 0); proxy quiets covered 0';
const trap = 'nvshmem-efa: EFA GDA quiet on PE $RANK (before signalling PE $((1 - RANK))) failed: a wait passed NVSHMEM_EFA_GDA_TIMEOUT_MS (1000 ms)';
const llOk = 'ok ll_pattern: 200 rounds x 4 experts x 64 tokens of 7168 B: every token byte there when its count signal arrived';
const llCaught = 'FAIL ll_pattern: 200 rounds x 4 experts x 64 tokens of 7168 B: every token byte there when its count signal arrived: 1791328 bytes wrong when the signal arrived, first in round 0 (expert 2, token 60); 200 rounds done; wait ran out in round -1';

const fiInfo = (fabrics: string[]) => `printf '${fabrics.map((f) => `provider: efa\\n    fabric: ${f}\\n    domain: efaemu0-rdm\\n    version: 2.3\\n    type: FI_EP_RDM\\n    protocol: FI_PROTO_EFA\\n`).join('')}'`;
// A fabtests pair: server and client are one stand-in; the client (its last argument the server's address) reports.
const fabtest = (clientRc = 0) => `[ "\${@: -1}" = 127.0.0.1 ] || exit 0
echo '1m      200     200m        0.76s    275.37    3807.93       0.00'
exit ${clientRc}`;
const fabtests = (bad?: string): Scenario => Object.fromEntries(['fi_rdm_pingpong_p_efa_v', 'fi_rma_bw_p_efa_v_o_write', 'fi_rma_bw_p_efa_v_o_read', 'fi_rma_bw_p_efa_v_o_writedata']
  .map((t) => [`fabtests.${t}`, fabtest(t === bad ? 1 : 0)]));

const gdaKernel = (ooo: number) => `echo "PE$RANK ok this PE sees exactly one GPU (CUDA_VISIBLE_DEVICES), so NVLink cannot carry its traffic"
echo "PE$RANK RESULT init_status initialized"
echo "PE$RANK RESULT gda_status ${gdaStatus}"
echo "PE$RANK ok nvshmemx_efa_gda_status() says active"
echo "PE$RANK RESULT kernel_start_unix $(date +%s).000"
echo "PE$RANK ok the 3 MiB put landed byte-exact"
echo "PE$RANK ok the warp batch landed byte-exact"
echo "PE$RANK RESULT gda_owned_wqes 128,128,128,128,128,128,128,128"
echo "PE$RANK RESULT failures 0"
${st({ paths: { gda: { write: { bytes: 8661772 } } }, faults: { gda_cqe_out_of_order: ooo } })}`;
const gdaRails = (nic1: number) => `echo "PE$RANK RESULT gda_status EFA GDA active on 2 rails (efaemu0, efaemu1): efa-direct, QPs 3 3"
echo "PE$RANK ok GDA runs on 2 rails (nvshmemx_efa_gda_rails)"
echo "PE$RANK RESULT gda_rails 2"
echo "PE$RANK RESULT gda_rail_wqes 612/598"
${st({ per_nic: { efaemu0: { gda: { write: { bytes: 4096 } } }, efaemu1: { gda: { write: { bytes: nic1 } } } }, faults: { gda_cqe_out_of_order: 3 } })}`;
const nvshmemPerf = (landed: boolean) => `echo "PE$RANK RESULT init_status initialized"
echo "PE$RANK RESULT put_bw bytes=4194304 iters=20 GB/s=2.803 us_per_put=1496.3"
echo "PE$RANK RESULT atomic_latency op=fetch_add iters=100 us=238.49"
${st({ paths: { rdm: { write: { gpu_bytes: 26345472 } } } })}
[ "$RANK" = 1 ] || exit 0
${landed ? 'echo "PE1 ok put of 4194304 bytes from PE 0 landed byte-exact"' : 'echo "PE1 FAIL put of 4194304 bytes from PE 0 landed byte-exact: 4096 bytes differ"; exit 1'}`;

// DeepEP's low-latency test (test_low_latency.py under the stand-in interpreter).
const deepep = (o: { gda?: number; rdmGpu?: number; fail?: string; rails2?: boolean; nic1?: number; shim?: string } = {}) => `
[ "$RANK" = 0 ] && echo "${o.shim ?? (o.rails2 ? 'nvshmem-efa shim: EFA GDA active on 2 rails; payload over GDA, one rail per (expert, rank); low-latency signals over GDA' : shimLine)}"
[ "$RANK" = 0 ] && echo "[rank 0] Dispatch + combine bandwidth: 0.03 GB/s, avg_t=690999.67 us, min_t=678612.98 us, max_t=706197.39 us"
${st({ paths: { gda: { write: { bytes: o.gda ?? 4096, small_bytes: 64, small_ops: 8 } }, rdm: { write: { gpu_bytes: o.rdmGpu ?? 0 } } },
  per_nic: { efaemu0: { gda: { write: { bytes: 2048 } } }, efaemu1: { gda: { write: { bytes: o.nic1 ?? 2048 } } } } })}
${o.fail ? `[ "$RANK" = 1 ] && { printf 'Traceback (most recent call last):\\n  File "tests/test_low_latency.py", line 180, in test_main\\n${o.fail}\\n'; exit 1; }` : ''}
exit 0`;
// deepep_counters: GDA off, the RDM path's GPU-sourced payload (all but the signal-sized bytes) per rank.
const counters = (payload: number) => `${st({ paths: { rdm: { write: { gpu_bytes: payload + 32, small_gpu_bytes: 32 } }, gda: { write: { ops: 0 } } } })}`;
// deepep_shrink: rank 1 refuses GDA (EFAEMU_FAIL_AS_TARGET=gda, its environment alone) and every rank's shim masks a
// failed peer (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask); REFUSED: the refusals efaemu counted on rank 1.
const shrink = (ok: boolean, refused = 3) => `[ "\${NVSHMEM_EFA_SHIM_PEER_ERRORS:-}" = mask ] || { echo "RuntimeError: the shim traps on a peer's failure"; exit 1; }
if [ "$RANK" = 1 ]; then [ "\${EFAEMU_FAIL_AS_TARGET:-}" = gda ] || { echo "RuntimeError: rank 1 is not refusing"; exit 1; }
elif [ -n "\${EFAEMU_FAIL_AS_TARGET:-}" ]; then echo "RuntimeError: rank $RANK refuses too"; exit 1; fi
[ "$RANK" = 0 ] && echo "nvshmem-efa shim: rank 1 masked after its GDA failure (status 13): nothing more is sent to it (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask)"
case $RANK in 1) echo "Rank 1 failed when first calling dispatch communication API, exit..." ;; 3) echo "Rank 3 failed when first calling combine communication API, exit..." ;; 5) echo "Rank 5 failed when first calling clean communication API, exit..." ;; esac
[ "$RANK" = 1 ] && ${st({ paths: { gda: { write: { bytes: 4096 } }, rdm: { write: { gpu_bytes: 0 } } }, faults: { refused } })}
[ "$RANK" = 1 ] || ${st({ paths: { gda: { write: { bytes: 4096 } }, rdm: { write: { gpu_bytes: 0 } } } })}
${ok ? '' : '[ "$RANK" = 2 ] && { echo "RuntimeError: DeepEP error: timeout (dispatch CPU)"; exit 1; }'}
exit 0`;
const pressure = (ok: boolean) => `[ "$RANK" = 0 ] && for s in 0 1; do echo "Testing with seed $s ..."; echo "[rank 0] Dispatch + combine bandwidth: 0.03 GB/s"; done
[ "$RANK" = 0 ] && echo "[rank 0] Dispatch + combine bandwidth: 0.03 GB/s"
${ok ? '' : '[ "$RANK" = 1 ] && echo "AssertionError: hash mismatch for seed 1"'}
exit 0`;

// deepep_pattern (ll_pattern, normal_mode, the neg_control runs): BUILD is what its shim_build line says.
const pattern = (build: string, o: { caught?: boolean; otherFail?: boolean } = {}) => `
echo "PE$RANK RESULT shim_build ${build}"
echo "PE$RANK RESULT shim_gda active rails 1 signals_over_gda 1"
echo "${shimLine}"
${o.caught ? `echo "PE$RANK ${llCaught}"; exit 1` : ''}
${o.otherFail ? `echo "${trap}"; echo "PE$RANK FAIL ll kernel finished (no trap): unspecified launch failure"; exit 2` : ''}
echo "PE$RANK ${llOk}"`;
const normal = (ok: boolean) => `echo "PE$RANK RESULT shim_build product"
echo "PE$RANK ok normal_mode: sent 64 chunks of 65536 B, tail by proxy atomics"
${ok ? `echo "PE$RANK ok normal_mode: every chunk there when the tail (NVSHMEM's proxy atomic, another requester than the NIC) covered it"`
    : `echo "PE$RANK FAIL normal_mode: every chunk there when the tail (NVSHMEM's proxy atomic, another requester than the NIC) covered it: 65536 bytes wrong when the tail covered them, first at chunk 12; 64 chunks consumed; the tail stopped at -1"; exit 1`}`;

const failInjection = (loud: boolean) => loud
  ? `[ "$RANK" = 1 ] && exec sleep 30
echo "nvshmem-efa: EFA GDA put_nbi on PE 0 failed: NIC: error completion (0xd); remote address 0x7f432a000000 on PE 1, local address 0x7f4332009a00, 65536 bytes"
echo "PE0 FAIL the 3 MiB put landed byte-exact: 65536 bytes differ"; exit 1`
  : `echo "PE$RANK ok the 3 MiB put landed byte-exact"; echo "PE$RANK RESULT failures 0"`;
const wrongProvider = (refused: boolean) => refused
  ? `echo "/work/build/nv/sources/nvshmem/src/modules/transport/libfabric/libfabric.cpp:1587: non-zero status: -61 No providers matched fi_getinfo query: -61: No data available"; exit 1`
  : `echo "PE$RANK RESULT gda_status EFA GDA off: not requested (set NVSHMEM_EFA_GDA_ENABLE=1 on every PE)"; echo "PE$RANK RESULT failures 0"`;
const ignoreModes = (caught: boolean) => `echo "PE$RANK RESULT kernel_start_unix $(date +%s).000"
[ "$RANK" = 0 ] && { echo "PE0 ok ignore_error: the kernel put 1024 x 4 KiB, ignored every return value and reported success"; exit 0; }
${caught ? `echo "PE1 FAIL ignore_error: every byte PE 0's kernel said it sent landed: 1204224 of 4194304 bytes missing: the kernel reported success over a NIC error"; exit 1`
    : `echo "PE1 ok ignore_error: every byte PE 0's kernel said it sent landed"`}`;
const ignorePlain = (ok: boolean) => ok
  ? `[ "$RANK" = 0 ] && echo "PE0 ok ignore_error: the kernel put 1024 x 4 KiB, ignored every return value and reported success"; [ "$RANK" = 1 ] && echo "PE1 ok ignore_error: every byte PE 0's kernel said it sent landed"; exit 0`
  : `[ "$RANK" = 1 ] && { echo "PE1 FAIL ignore_error: the wait for PE 0's announcement ended: unspecified launch failure"; exit 1; }; exit 0`;
const peErrors = (reported: boolean) => `echo "PE$RANK RESULT init_status initialized"
[ "$RANK" = 1 ] && exit 0
echo "PE0 RESULT pe_errors kernel no error; put to PE 1 0, wait for PE 1 ${reported ? 13 : 0}, put to PE 0 0, wait for PE 0 0, wait for PE 1 again ${reported ? 13 : 0}"
${reported ? 'echo "PE0 ok pe_errors: PE 1 refusing, the wait for PE 1 reports its failed completion"'
    : `echo "PE0 FAIL pe_errors: PE 1 refusing, the wait for PE 1 reports its failed completion: kernel no error; put to PE 1 0, wait for PE 1 0"`}
echo "PE0 ok pe_errors: after PE 1's failure, a 65536 B put to PE 0 posts, its wait returns 0 and every byte landed"
${reported ? '' : 'exit 1'}`;
// silent_bound: PE 0's kernels start, then (after LATE seconds) the bounded wait gives up with the trap message.
// LATE: PE 0 ends by itself that late, its peer waiting for it until the harness stops it.
const silent = (late: number) => `echo "PE$RANK RESULT kernel_start_unix $(date +%s).000"
${late ? `[ "$RANK" = 1 ] && exec sleep 60; sleep ${late}` : ''}
echo "${trap}"
echo "PE$RANK FAIL the 3 MiB put landed byte-exact: a GDA call returned error 0x10b"; exit 1`;
const deepepSilent = (o: { trap: boolean; rc: number }) => `${o.trap ? `echo "${trap}"` : 'echo "RuntimeError: CUDA error: unspecified launch failure"'}
exit ${o.rc}`;

// device_api: NVSHMEM's perftests and examples through nvshmem-efa launch; STATE on or off.
const devApi = (state: 'on' | 'off', o: { rdmGpu?: number; line?: string } = {}) => `
${st(state === 'on' ? { paths: { gda: { write: { bytes: 65536 }, read: { bytes: 0 } }, rdm: { write: { bytes: o.rdmGpu ?? 0, gpu_bytes: o.rdmGpu ?? 0 }, read: { bytes: 0 } } } }
    : { paths: { gda: { write: { bytes: 0 }, read: { bytes: 0 } }, rdm: { write: { bytes: 65536, gpu_bytes: 65536 }, read: { bytes: 0 } } } })}
${o.line ? `echo "${o.line}"` : ''}
echo "${state === 'on' ? finalize : 'nvshmem-efa: PE $RANK at finalize: EFA GDA active on 1 rail (efaemu0); NVSHMEM device API over GDA off'}"
echo "${proxyLine}"`;
// device_api_order (neg_device_api): its last argument is the test; CAUGHT: PE 0 reports data errors there.
const order = (caught: boolean) => `t=\${@: -1}
if ${caught ? 'true' : 'false'} && [ "$RANK" = 0 ]; then echo "PE0 FAIL $t: 180224 data errors in 100 rounds of 32768 B; first at round 3 word 17: got 0x0000000000000000 want 0x0000000300000011"; exit 1; fi
echo "PE$RANK ok $t: 100 rounds of 32768 B checked, 0.41 s"`;
// warp_rail and no_proxy_flush run on 2 NICs per PE (PE_RAILS=2), after the unbroken program there.
const CONTROLS = ['fence_no_gda_quiet', 'signal_no_wait', 'no_flush_before_proxy', 'quiet_no_flush', 'warp_rail', 'no_proxy_flush'];
const negDeviceApi = (notCaught?: string, alsoPlain?: string): Scenario => ({
  'neg_device_api.unbroken': order(false),
  'neg_device_api.unbroken.rails': `[ "$PE_RAILS" = 2 ] && [ "$EFAEMU_NICS" = 2 ] || { echo "PE$RANK FAIL setup: not on 2 NICs"; exit 2; }\n${order(false)}`,
  ...Object.fromEntries(CONTROLS.flatMap((c) => [[`neg_device_api.${c}.modes`, order(c !== notCaught)], [`neg_device_api.${c}.plain`, order(c === alsoPlain)]])),
});

const GOOD: Scenario = {
  fi_info: fiInfo(['efa-direct', 'efa']),
  ...fabtests(),
  nvshmem_perf: nvshmemPerf(true),
  gda_kernel: gdaKernel(949),
  gda_rails: gdaRails(4096),
  deepep_ll: deepep(),
  deepep_ll_4pes: deepep(),
  deepep_rails: deepep({ rails2: true }),
  deepep_counters: counters(4032),
  deepep_shrink: shrink(true),
  deepep_pressure: pressure(true),
  ll_pattern: pattern('product'),
  normal_mode: normal(true),
  neg_fail_injection: failInjection(true),
  neg_wrong_provider: wrongProvider(true),
  'neg_no_quiet.modes': pattern('no_quiet', { caught: true }),
  'neg_no_quiet.plain': pattern('no_quiet'),
  'neg_signal_other_rail.modes': pattern('other_rail', { caught: true }),
  'neg_signal_other_rail.plain': pattern('other_rail'),
  'neg_ignore_error.modes': ignoreModes(true),
  'neg_ignore_error.plain': ignorePlain(true),
  gda_pe_errors: peErrors(true),
  silent_bound: silent(0),
  deepep_silent_bound: deepepSilent({ trap: true, rc: 1 }),
  'device_api.shmem_put_bw.on': devApi('on'),
  'device_api.shmem_put_bw.off': devApi('off'),
  'device_api.put-block.on': devApi('on', { line: '[1]: error: data[0] = 0 expected 2' }),
  'device_api.ring-bcast.on': devApi('on'),
  ...negDeviceApi(),
};

// Each check's broken run; for a negative control, its broken client NOT caught.
const BAD: Scenario = {
  fi_info: fiInfo(['efa', 'efa-direct']),
  ...fabtests('fi_rma_bw_p_efa_v_o_read'),
  nvshmem_perf: nvshmemPerf(false),
  gda_kernel: gdaKernel(0),
  gda_rails: gdaRails(0),
  deepep_ll: deepep({ rdmGpu: 4096, shim: 'nvshmem-efa shim: EFA GDA not in use (EFA GDA off: not requested (set NVSHMEM_EFA_GDA_ENABLE=1 on every PE)); every remote operation goes through NVSHMEM' }),
  deepep_ll_4pes: deepep({ fail: 'AssertionError: recv_x_amin == expected' }),
  deepep_rails: deepep({ rails2: true, nic1: 0 }),
  deepep_counters: counters(4000),
  deepep_shrink: shrink(false),
  deepep_pressure: pressure(false),
  ll_pattern: pattern('product', { caught: true }),
  normal_mode: normal(false),
  neg_fail_injection: failInjection(false),
  neg_wrong_provider: wrongProvider(false),
  'neg_no_quiet.modes': pattern('no_quiet'),
  'neg_no_quiet.plain': pattern('no_quiet'),
  'neg_signal_other_rail.modes': pattern('other_rail'),
  'neg_signal_other_rail.plain': pattern('other_rail'),
  'neg_ignore_error.modes': ignoreModes(false),
  'neg_ignore_error.plain': ignorePlain(true),
  gda_pe_errors: peErrors(false),
  silent_bound: silent(7),
  deepep_silent_bound: deepepSilent({ trap: false, rc: 1 }),
  'device_api.shmem_put_bw.on': devApi('on', { rdmGpu: 4096 }),
  'device_api.shmem_put_bw.off': devApi('off'),
  'device_api.put-block.on': devApi('on', { line: '[1]: error: data[0] = 0 expected 2' }),
  'device_api.ring-bcast.on': devApi('on', { line: 'ring-bcast: data mismatch at element 3' }),
  ...negDeviceApi('signal_no_wait'),
};

const ALL = ['fi_info', 'fabtests', 'nvshmem_perf', 'gda_kernel', 'gda_rails', 'deepep_ll', 'deepep_ll_4pes', 'deepep_rails', 'deepep_counters',
  'deepep_shrink', 'deepep_pressure', 'll_pattern', 'normal_mode', 'neg_fail_injection', 'neg_wrong_provider', 'neg_no_quiet',
  'neg_signal_other_rail', 'neg_ignore_error', 'gda_pe_errors', 'silent_bound', 'deepep_silent_bound', 'device_api', 'neg_device_api'];
// The bounds short enough for a CPU run: silent_bound's 1 s wait + 3 s slack, deepep_silent_bound's 1 s start-up.
// SHRINK_REFUSE=1: deepep_shrink with rank 1 refusing GDA (off by default: checks.sh says why).
const ENV = { SHRINK_REFUSE: '1', GDA_TIMEOUT_MS: '1000', SLACK_S: '3', DEEPEP_START_S: '1', PRESSURE_SECONDS: '5', DEVICE_API_PROGRAMS: 'shmem_put_bw,put-block,ring-bcast' };

// Every check in one run: about 250 s of stand-ins beside the other tests on a loaded 2-core host, over the helper's
// default 280 s once neg_device_api gained its 2-NIC runs (issue 35).
const ALL_MS = 540_000;

function verdicts(results: Map<string, Verdict>, want: Record<string, [string, RegExp]>, out: string) {
  for (const [check, [verdict, evidence]] of Object.entries(want)) {
    const got = results.get(check);
    expect(got, `${check}: no RESULT line\n${out}`).toBeDefined();
    expect(`${check} ${got!.verdict}`, out).toBe(`${check} ${verdict}`);
    expect(got!.evidence, `${check}\n${out}`).toMatch(evidence);
  }
}

// What the "not caught" runs must say: FAIL, and why. The mutation test below reuses it.
const NOT_CAUGHT: Record<string, [string, RegExp]> = {
  neg_fail_injection: ['fail', /rc 0\/0 after \d+s, injected 0; failure lines: none/],
  neg_wrong_provider: ['fail', /FI_PROVIDER=efa_wrong: rc 0\/0 after \d+s/],
  neg_no_quiet: ['fail', /not caught under modes place_order,defer \(EFAEMU_PLACE_ORDER=random:7:16 EFAEMU_PLACE_DEFER_US=20-400\): the modes prove nothing against this broken client; without them it passes/],
  neg_signal_other_rail: ['fail', /not caught under modes defer \(EFAEMU_PLACE_DEFER_US=20-400\): the modes prove nothing/],
  neg_ignore_error: ['fail', /under EFAEMU_FAIL_EVERY=97 EFAEMU_FAIL_PATH=gda: rc 0\/0, PE 1 found nothing wrong; without: rc 0\/0/],
  gda_pe_errors: ['fail', /rc 1\/0; kernel no error; put to PE 1 0, wait for PE 1 0, .*PE0 FAIL pe_errors: PE 1 refusing/],
  silent_bound: ['fail', /rc 1\/killed\(137\), \d+s after the kernels started \(bound 1000 ms \+ 3s\); PE 0 trap: nvshmem-efa: EFA GDA quiet on PE 0/],
  deepep_silent_bound: ['fail', /rc 1\/1 in \d+s \(allowance 1s \+ 1000 ms\); trap message on PE 0: none; PE 1: none; /],
  neg_device_api: ['fail', /unbroken: passes under the modes; fence_no_gda_quiet: caught by fence \(rc 1: PE0 FAIL fence: 180224 data errors.*\), passes without the modes; signal_no_wait: NOT caught under the modes \(rc 0, no data error in signal\)/],
};

// Side by side: each test runs checks.sh in a world of its own, and most of their time is waiting for stand-ins.
describe.concurrent('gpu/checks.sh verdicts on the CPU (stand-in programs printing the real lines)', () => {
  const worlds: ReturnType<typeof checksWorld>[] = [];
  const newWorld = () => { const w = checksWorld(); worlds.push(w); return w; };
  afterAll(() => { for (const w of worlds) dropWorld(w); });

  it('every check passes when its programs print what a passing run prints', async () => {
    const r = await runChecks(newWorld(), ALL, GOOD, ENV, undefined, ALL_MS);
    verdicts(r.results, {
      fi_info: ['pass', /fi_info -p efa: efa-direct efaemu0-rdm,efa efaemu0-rdm \(efa-direct first\)/],
      fabtests: ['pass', /fi_rdm_pingpong: 1m 275.37 MB\/s 3807.93 us; fi_rma_bw write: .*fi_rma_bw writedata: 1m 275.37 MB\/s/],
      nvshmem_perf: ['pass', /GDA off; put bandwidth 4194304 B: 2.803 GB\/s,4194304 B: 2.803 GB\/s; atomic latency fetch_add 238.49 us.*byte-exact at the target; RDM GPU write bytes 52690944/],
      gda_kernel: ['pass', /status active on both PEs .*17323544 GDA bytes written; 1898 CQEs out of order/],
      gda_rails: ['pass', /GDA active on 2 rails on both PEs .*WQEs per rail on PE 0 612\/598; GDA bytes written per NIC: efaemu0 8192, efaemu1 8192/],
      deepep_ll: ['pass', /test_low_latency.py --disable-nvlink, 2 x 1 GPU \(2 PEs, 1 per GPU\): passed over the shim's own GDA path \(PE 0: EFA GDA active on 1 rail\); GDA carried 8192 bytes \(16 signal-sized writes among them\), GPU-sourced RDM write bytes 0/],
      deepep_ll_4pes: ['pass', /4 x 1 GPU \(4 PEs, 1 per GPU\): passed .*GDA carried 16384 bytes/],
      deepep_rails: ['pass', /on 2 rails per PE: passed over the shim's own GDA path \(PE 0: EFA GDA active on 2 rails\), GDA active on 2 rails; both PEs wrote over both NICs/],
      deepep_counters: ['pass', /GDA off: passed; the RDM path carried 8064 GPU-sourced payload bytes = the 8064 the GDA path carried/],
      deepep_shrink: ['pass', /--shrink-test passed on 6 PEs, 1 per GPU: failed Rank 1 at dispatch,Rank 3 at combine,Rank 5 at clean, masked by the others; rank 1 refusing GDA \(EFAEMU_FAIL_AS_TARGET=gda, 3 refused\), the shim's peer errors mask \(1 masks said\)/],
      deepep_pressure: ['pass', /--pressure-test bounded to 5s: 3 test_main runs, 0 repeats matched .*2 seed\(s\) started, no error/],
      ll_pattern: ['pass', /ll_pattern: 200 rounds x 4 experts x 64 tokens of 7168 B: every token byte there when its count signal arrived; /],
      normal_mode: ['pass', /normal_mode: every chunk there when the tail .*efaemu modes defer: +EFAEMU_PLACE_DEFER_US=20-400/],
      neg_fail_injection: ['pass', /EFAEMU_FAIL_EVERY=97 on the GDA path: the test failed loudly in \d+s \(rc 1\/killed\(137\), the waiting peer stopped by the harness\): PE0 FAIL the 3 MiB put/],
      neg_wrong_provider: ['pass', /FI_PROVIDER=efa_wrong: NVSHMEM init failed on both PEs in \d+s \(rc 1\/1\); NVSHMEM said: .*No providers matched fi_getinfo/],
      neg_no_quiet: ['pass', /caught under modes place_order,defer \(EFAEMU_PLACE_ORDER=random:7:16 EFAEMU_PLACE_DEFER_US=20-400; rc 1\/1: PE0 FAIL ll_pattern: .*1791328 bytes wrong.*\); passes without \(low-latency signals over GDA\); build: no_quiet; 2 PEs, 1 per GPU$/],
      neg_signal_other_rail: ['pass', /caught under modes defer \(EFAEMU_PLACE_DEFER_US=20-400; rc 1\/1: .*\); passes without .*; build: other_rail/],
      neg_ignore_error: ['pass', /caught under EFAEMU_FAIL_EVERY=97 EFAEMU_FAIL_PATH=gda \(rc 0\/1; PE 0's kernel reported success, PE 1: PE1 FAIL ignore_error: every byte .*\); passes without$/],
      gda_pe_errors: ['pass', /PE 1 refusing GDA \(EFAEMU_FAIL_AS_TARGET=gda, 0 refused\): kernel no error; put to PE 1 0, wait for PE 1 13, put to PE 0 0, wait for PE 0 0/],
      silent_bound: ['pass', /both PEs ended by themselves -?[0-4]s after the kernels started \(bound 1000 ms \+ 3s; rc 1\/1\); PE 0: nvshmem-efa: EFA GDA quiet on PE 0/],
      deepep_silent_bound: ['pass', /both PEs ended by themselves in \d+s \(start-up allowance 1s \+ bound 1000 ms; rc 1\/1\), each with the trap message/],
      device_api: ['pass', /4 runs: shmem_put_bw on: ok \d+s, GDA w\/r 131072\/0 B, RDM w\+r 0 B.*; shmem_put_bw off: ok .*; put-block on \(data not judged: it reads its peer's put with no synchronization; \[1\]: error: data\[0\] = 0 expected 2;\[1\]: error: data\[0\] = 0 expected 2\): ok .*; ring-bcast on: ok/],
      neg_device_api: ['pass', /unbroken: passes under the modes; fence_no_gda_quiet: caught by fence .*; signal_no_wait: caught by signal .*; no_flush_before_proxy: caught by atomic .*; quiet_no_flush: caught by barrier_lone on 4 PEs \(rc 1: PE0 FAIL barrier_lone: 180224 data errors.*; unbroken on 2 NICs per PE: passes under the modes; warp_rail: caught by xwarp_p with 2 NICs per PE \(rc 1: PE0 FAIL xwarp_p: 180224 data errors.*\), passes without the modes; no_proxy_flush: caught by proxy_fence_gda with 2 NICs per PE \(rc 1: PE0 FAIL proxy_fence_gda: 180224 data errors.*\), passes without the modes \(device_api_order/],
    }, r.out);
  }, ALL_MS + 20_000);

  it('every check fails on a broken run; a negative control whose broken client was not caught is a FAIL, never a PASS', async () => {
    const r = await runChecks(newWorld(), ALL, BAD, ENV, undefined, ALL_MS);
    verdicts(r.results, {
      fi_info: ['fail', /fi_info -p efa printed: efa efaemu0-rdm,efa-direct efaemu0-rdm/],
      fabtests: ['fail', /fi_rma_bw -p efa -v -o read FAILED \(rc client=1 server=0\)/],
      nvshmem_perf: ['fail', /rc 0\/1 PE1 FAIL put of 4194304 bytes from PE 0 landed byte-exact: 4096 bytes differ/],
      gda_kernel: ['fail', /rc 0\/0, active on 2 PE\(s\), out-of-order CQEs 0;/],
      gda_rails: ['fail', /rc 0\/0, rails 2\/2, 2 rails on 2 PE\(s\), GDA bytes per NIC efaemu0 8192 efaemu1 0 \(both must carry traffic\)/],
      deepep_ll: ['fail', /rc 0\/0; path: no GDA path: nvshmem-efa shim: EFA GDA not in use .*; GDA bytes 8192, GPU-sourced RDM write bytes 8192/],
      deepep_ll_4pes: ['fail', /rc 0\/1\/0\/0; path: the shim's own GDA path .*AssertionError: recv_x_amin == expected/],
      deepep_rails: ['fail', /PEs that wrote over both NICs: 0 of 2; GDA bytes 8192 \(efaemu0 4096, efaemu1 0\)/],
      deepep_counters: ['fail', /GDA-on GDA payload bytes 8064 \(\+128 small\) vs GDA-off RDM GPU payload bytes 8000 \(\+64 small\)/],
      deepep_shrink: ['fail', /rc 0\/0\/1\/0\/0\/0 on 6 PEs, 1 per GPU .*RuntimeError: DeepEP error: timeout \(dispatch CPU\)/],
      deepep_pressure: ['fail', /3 test_main runs, 2 seeds in 5s; rc 0\/0; AssertionError: hash mismatch for seed 1/],
      ll_pattern: ['fail', /rc 1\/1; PE0 FAIL ll_pattern: .*1791328 bytes wrong/],
      normal_mode: ['fail', /rc 1\/1; PE0 FAIL normal_mode: .*65536 bytes wrong when the tail covered them/],
      device_api: ['fail', /shmem_put_bw on: FAIL rc 0 8192 GPU-sourced RDM write bytes; .*put-block on \(data not judged.*\): ok .*ring-bcast on: FAIL rc 0 output: ring-bcast: data mismatch at element 3/],
      ...NOT_CAUGHT,
    }, r.out);
  }, ALL_MS + 20_000);

  it('the other verdicts: skips that say why, a control that is not the broken build or fails without the modes too, a run that never failed', async () => {
    const world = newWorld();
    const r = await runChecks(world, ['gda_rails', 'deepep_counters', 'deepep_ll', 'neg_no_quiet', 'neg_signal_other_rail', 'neg_ignore_error',
      'deepep_silent_bound', 'neg_device_api', 'no_such_check'], {
      gda_rails: `echo "PE$RANK RESULT gda_status ${gdaStatus}"; echo "PE$RANK RESULT gda_rails 1"; echo "PE$RANK FAIL GDA runs on 2 rails (nvshmemx_efa_gda_rails): 1 rails"; exit 1`,
      // DEEPEP_GDA_PATH=shim (the build's --deepep-gda): a DeepEP whose operations went through NVSHMEM's device API instead.
      deepep_ll: `[ "$RANK" = 0 ] && echo "nvshmem-efa shim: built without the shim's EFA GDA path (NVSHMEM_EFA_SHIM_GDA undefined); every remote operation goes through NVSHMEM's device API"
echo "${finalize}"; ${st({ paths: { gda: { write: { bytes: 4096 } }, rdm: { write: { gpu_bytes: 0 } } } })}`,
      'neg_no_quiet.modes': pattern('product', { caught: true }),
      'neg_no_quiet.plain': pattern('product'),
      'neg_signal_other_rail.modes': pattern('other_rail', { caught: true }),
      'neg_signal_other_rail.plain': pattern('other_rail', { otherFail: true }),
      'neg_ignore_error.modes': ignoreModes(true),
      'neg_ignore_error.plain': ignorePlain(false),
      // The injected failures never surfaced: both ranks ended well.
      deepep_silent_bound: deepepSilent({ trap: false, rc: 0 }),
      ...negDeviceApi(undefined, 'no_flush_before_proxy'),
    }, { ...ENV, DEEPEP_GDA_PATH: 'shim' });
    verdicts(r.results, {
      gda_rails: ['skip', /NVSHMEM handed GDA one NIC per PE \(rails 1\/1\): a single-rail libfabric transport/],
      deepep_counters: ['skip', /needs deepep_ll first/],
      deepep_ll: ['fail', /rc 0\/0; path: NVSHMEM's device API \(DeepEP built without the shim's GDA path; .*\); GDA bytes 8192/],
      neg_no_quiet: ['fail', /deepep_pattern_no_quiet is not the negative-control build \(shim_build: product\); rebuild it with its switch/],
      neg_signal_other_rail: ['fail', /caught under modes defer, but fails without them too \(rc 2\/2: nvshmem-efa: EFA GDA quiet on PE 0 .*\): the failure is not the modes' doing/],
      neg_ignore_error: ['fail', /under EFAEMU_FAIL_EVERY=97 EFAEMU_FAIL_PATH=gda: rc 0\/1, PE 1 PE1 FAIL ignore_error: every byte .*; without: rc 0\/1 \(caught needs/],
      deepep_silent_bound: ['fail', /rc 0\/0 in \d+s .*trap message on PE 0: none; PE 1: none/],
      neg_device_api: ['fail', /no_flush_before_proxy: caught, but fails without the modes too \(rc 1\): not the modes' doing/],
      no_such_check: ['fail', /no such check \(checks.sh --list\)/],
    }, r.out);
    // The checks that run nothing: without their inputs every check is a skip naming the missing one.
    const bare = await runChecks(world, ['all'], {}, { PE_TEST: '', PATTERN_DIR: '', DEEPEP_DIR: '', NVSHMEM_TESTS: '', LIBFABRIC_HOME: '/nonexistent' });
    expect([...bare.results.keys()]).toEqual(ALL);
    for (const [check, v] of bare.results)
      expect(`${check} ${v.verdict}: ${v.evidence}`).toMatch(new RegExp(`^${check} skip: (LIBFABRIC_HOME is not set or missing \\(/nonexistent\\)|(PE_TEST|PATTERN_DIR|DEEPEP_DIR|NVSHMEM_TESTS) is not set or missing \\(unset\\))$`));
    const noLaunch = await runChecks(world, ['device_api', 'neg_device_api'], {}, { NVSHMEM_EFA_LAUNCH: '' });
    for (const c of ['device_api', 'neg_device_api']) expect(noLaunch.results.get(c)).toEqual({ verdict: 'skip', evidence: 'NVSHMEM_EFA_LAUNCH is not set (nvshmem-efa selftest sets it)' });
  }, 300_000);

  // Issue 35: the rows and controls that need 2 NICs per PE (PE_RAILS=2: the cross-warp fence of review 3's finding 1
  // and the proxy put, fence, GDA flag of finding 7), and deepep_shrink with rank 1 refusing and the shim masking.
  const orderRails = (rails: number) => `[ "$PE_RAILS" = 2 ] && [ "$EFAEMU_NICS" = 2 ] && [ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ] || { echo "PE$RANK FAIL setup: not on 2 NICs"; exit 2; }
${st({ paths: { gda: { write: { bytes: 65536 }, read: { bytes: 0 } }, rdm: { write: { bytes: 0, gpu_bytes: 0 }, read: { bytes: 0 } } } })}
for t in fence signal xwarp_p xwarp_signal proxy_fence_gda; do echo "PE$RANK ok $t: 100 rounds of 32768 B checked, 0.41 s"; done
echo "nvshmem-efa: PE $RANK at finalize: EFA GDA active on ${rails === 2 ? '2 rails (efaemu0, efaemu1)' : '1 rail (efaemu0)'}; NVSHMEM device API over GDA on"
echo "${proxyLine}"`;
  it('issue 35: a 2-NIC control not caught is a FAIL; DEVICE_API_RAILS=0 leaves the 2-NIC runs out, saying so; device_api_order+rails needs GDA on 2 rails on every PE; deepep_shrink needs rank 1 refused', async () => {
    const world = newWorld();
    for (const [ctl, test] of [['no_proxy_flush', 'proxy_fence_gda'], ['warp_rail', 'xwarp_p']]) {
      const r = await runChecks(world, ['neg_device_api'], negDeviceApi(ctl), ENV);
      verdicts(r.results, { neg_device_api: ['fail', new RegExp(`${ctl}: NOT caught under the modes \\(rc 0, no data error in ${test}\\)`)] }, r.out);
    }
    const single = await runChecks(world, ['neg_device_api', 'device_api'], { ...negDeviceApi(), 'device_api.shmem_put_bw.on': devApi('on'), 'device_api.shmem_put_bw.off': devApi('off') },
      { ...ENV, DEVICE_API_RAILS: '0', DEVICE_API_PROGRAMS: 'shmem_put_bw,device_api_order+rails' });
    verdicts(single.results, {
      neg_device_api: ['pass', /quiet_no_flush: caught by barrier_lone on 4 PEs .*; warp_rail: not run: DEVICE_API_RAILS=0 \(it needs 2 NICs per PE and a multi-rail NVSHMEM\); no_proxy_flush: not run: DEVICE_API_RAILS=0/],
      device_api: ['pass', /2 runs: shmem_put_bw on: ok .*; device_api_order\+rails: not run: DEVICE_API_RAILS=0 \(a single-rail NVSHMEM gives GDA one NIC per PE/],
    }, single.out);
    const two = await runChecks(world, ['device_api'], { 'device_api.device_api_order+rails.on': orderRails(2) }, { ...ENV, DEVICE_API_PROGRAMS: 'device_api_order+rails' });
    verdicts(two.results, { device_api: ['pass', /1 runs: device_api_order\+rails on: ok \d+s, GDA w\/r 131072\/0 B/] }, two.out);
    const one = await runChecks(world, ['device_api'], { 'device_api.device_api_order+rails.on': orderRails(1) }, { ...ENV, DEVICE_API_PROGRAMS: 'device_api_order+rails' });
    verdicts(one.results, { device_api: ['fail', /device_api_order\+rails on: FAIL rc 0 GDA on 2 rails at finalize on 0 of 2 PEs \(2 NICs per PE, PE_RAILS=2\)/] }, one.out);
    const unrefused = await runChecks(world, ['deepep_shrink'], { deepep_shrink: shrink(true, 0) }, ENV);
    verdicts(unrefused.results, { deepep_shrink: ['fail', /rc 0\/0\/0\/0\/0\/0 on 6 PEs, 1 per GPU .*rank 1 refusing GDA \(EFAEMU_FAIL_AS_TARGET=gda, 0 refused\)/] }, unrefused.out);
  }, 300_000);

  // The test above can fail: each judgement of "caught" weakened the way a plausible bug would, the not-caught runs
  // become PASSes, which NOT_CAUGHT rejects.
  it('a checks.sh whose negative controls pass when not caught is told apart: each weakened judgement turns its FAIL into a PASS', async () => {
    const world = newWorld();
    const script = mutant(world, [
      ['elif [ "$caught" = 1 ] && [ "$plain" = 1 ]; then', 'elif [ "$plain" = 1 ]; then'],
      ['if [ "$RC0" != 0 ] && [ -n "$loud" ] && [ "$ELAPSED" -lt 110 ]; then', 'if [ "$ELAPSED" -lt 110 ]; then'],
      ['if [ "$RC0" != 0 ] && [ "$RC1" != 0 ] && [ "$ELAPSED" -lt 85 ]; then', 'if [ "$ELAPSED" -lt 85 ]; then'],
      ['[ "$RC1" != 0 ] && [ -n "$why" ] && caught=1', 'caught=1'],
      ['elif [ "$caught" = 0 ]; then ok=0; ev+="$ctl: NOT caught', 'elif [ "$caught" = 0 ]; then ev+="$ctl: NOT caught'],
      ['[ "$took" -le $(( ms / 1000 + slack )) ] && [ -n "$trap0" ]; then', '[ -n "$trap0" ]; then'],
      ['[ "$ELAPSED" -le $((start_s + ms / 1000 + 10)) ] && [ -n "$t0" ] && [ -n "$t1" ]; then', '[ "$ELAPSED" -le $((start_s + ms / 1000 + 10)) ]; then'],
      [`if [ "$RC0" = 0 ] && [ "$RC1" = 0 ] && [ "$(grep -c 'ok pe_errors' "$RESULTS/gda_pe_errors.pe0.log")" = 2 ]; then`,
        `if [ "$RC1" = 0 ] && grep -q 'ok pe_errors' "$RESULTS/gda_pe_errors.pe0.log"; then`],
    ]);
    const r = await runChecks(world, Object.keys(NOT_CAUGHT), BAD, ENV, script);
    for (const check of Object.keys(NOT_CAUGHT)) expect(r.results.get(check)?.verdict, `${check}\n${r.out}`).toBe('pass');
    expect(() => verdicts(r.results, NOT_CAUGHT, r.out)).toThrow();
  }, 300_000);
});
