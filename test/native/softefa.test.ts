import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NVCC = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));
const CUDA_INC = NVCC ? path.join(path.dirname(path.dirname(NVCC)), 'include') : '/usr/local/cuda/include';
const GDA = path.join(ROOT, 'templates/transport_efa_gda');
const HARNESS = path.join(ROOT, 'test/native/harness');
/** The GDA host code: every source the patch adds to NVSHMEM (one file per object), as the manifest lists them. */
const GDA_SOURCES = (JSON.parse(readFileSync(path.join(GDA, 'manifest.json'), 'utf8')).sources as string[]).map((s) => path.join(GDA, s));

function build(cuda: boolean, target?: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'softefa-'));
  const args = ['-S', path.join(ROOT, 'native/softefa'), '-B', dir, `-DSOFTEFA_CUDA=${cuda ? 'ON' : 'OFF'}`];
  if (cuda) args.push(`-DCMAKE_CUDA_COMPILER=${NVCC}`);
  execFileSync('cmake', args, { stdio: 'pipe' });
  execFileSync('cmake', ['--build', dir, '-j', '2', ...(target ? ['--target', target] : [])], { stdio: 'pipe' });
  return dir;
}

/** Runs a test program printing "ok <name>" / "FAIL <name>: why" and "<n> failed"; returns the ok names. */
function runChecks(exe: string): string[] {
  const r = spawnSync(exe, { encoding: 'utf8', timeout: 240_000 });
  const lines = r.stdout.trim().split('\n');
  expect(lines.filter((l) => l.startsWith('FAIL')), r.stderr).toEqual([]);
  expect(lines.at(-1)).toBe('0 failed');
  expect(r.status).toBe(0);
  return lines.filter((l) => l.startsWith('ok ')).map((l) => l.slice(3));
}

describe('software EFA (CPU)', () => {
  const dir = build(false);

  it('executes correct WQE streams, flags every protocol violation, completes out of order, reports NIC errors', () => {
    const ok = runChecks(path.join(dir, 'softefa_cpu_test'));
    // Every rule the issues name has its own case: the strictness rules of the first model...
    for (const rule of [
      'wrong phase is rejected',
      'a doorbell going backwards is a violation',
      'a doorbell covering more than max_batch new WQEs is a violation',
      'a doorbell covering an unwritten slot is a violation',
      'a slot overwritten before its completion is a violation',
      'more than max_batch WQEs staged past the doorbell is a violation',
      'a max_batch rule broken puts the QP in error: the first WQE fails QP_INTERNAL_ERROR, the rest FLUSHED, nothing moves',
      'NIC errors complete with the EFA status and move no data',
      'the encoder writes the fields at the upstream positions',
      // ...and what a real NIC does that the first model did not.
      'reorder specs parse, and malformed ones are refused',
      'large:B:N holds a large write until N later WQEs completed; its data is placed only with its completion',
      'a held WQE completes at drain() (the NIC completes eventually)',
      'reverse completes each poll\'s WQEs last first',
      'random:SEED:W is a seeded permutation, the same for the same seed',
      'a slot reused while its previous WQE is held is a violation (reordering on)',
      'doorbell: 16-bit producer counter wraps cleanly; a value above 16 bits is a violation',
      '128-byte WQEs: the same RDMA WQE with a zero tail executes; a non-zero tail is rejected',
      'RX CQ overrun: a receiver that does not drain is reported, one that drains is not',
      'UNKNOWN_PEER: RDMA to a target that has not inserted the initiator fails and moves nothing',
      'QP error: held and later WQEs complete FLUSHED and move nothing',
      'a malformed WQE puts the QP in error: the WQEs after it are flushed',
    ]) {
      expect(ok).toContain(rule);
    }
    expect(ok.length).toBeGreaterThanOrEqual(38);
  });

  it('runs the GDA device code on CPU threads exactly, with completions out of order', () => {
    const ok = runChecks(path.join(dir, 'gda_device_cpu_test'));
    for (const rule of [
      'puts, gets and puts with immediate across heap-region ends land every byte (random completion order, hot regions)',
      'puts, gets and puts with immediate across heap-region ends land every byte (random completion order, region table only)',
      'reserve refuses more WQEs than max_batch or the SQ holds, instead of spinning',
      // The count-based quiet of the previous release is caught; the retired-prefix quiet is not.
      'concurrent quiet: the count-based quiet returns before its own large put landed',
      'concurrent quiet: the retired-prefix quiet covers its own put (1 checker thread(s), 3 posters, large:64K:32)',
      'concurrent quiet: the retired-prefix quiet covers its own put (4 checker thread(s), 3 posters, large:64K:32)',
      'put with immediate split into pieces: the immediate arrives after all of its data',
      'credits: 4 x window immediates to a slowly draining receiver all arrive, no overrun, credits refreshed',
      'credits: a receiver that never drains makes the sender fail with NO_CREDITS, its CQ intact',
      'overrun on purpose (immediates past the window, credits skipped): reported by the NIC model and rx_poll',
      'a CQE of another QP makes quiet return BAD_CQE instead of hanging',
      // A post refused after its slot was reserved fills the slot: nothing waits on it, nothing moves.
      'refused posts (bad PE, unregistered, out-of-heap, unreachable) fill their reserved slots with WQEs that move nothing',
      "a refused post's slot is filled while other threads post through a small SQ: nothing waits on it forever",
      'hot regions: a filled slot is used; one not fully written, or retired, is skipped for the region table',
      'prepared handle: puts and gets within its regions land; other posts go the general way; a failed set-up reports',
      'NIC errors reach quiet: UNKNOWN_PEER, then FLUSHED after a QP error',
      'the doorbell register gets the 16-bit producer counter past 65536 WQEs; 128-byte WQE stride',
      // Signals (DeepEP's low-latency count and flag): written only after the payload completed. The early write
      // is caught (negative control); the protocol passes under both reorderings.
      'signal protocol, negative control: a count written right after its payload was posted (no completion wait) is seen before its payload (large:4096:16)',
      'signal protocol (dispatch-shaped: 3 token warps put, 2 signal warps write each expert\'s count after completion): every count seen finds its tokens in place (large:4096:16)',
      'signal protocol (dispatch-shaped: 3 token warps put, 2 signal warps write each expert\'s count after completion): every count seen finds its tokens in place (random:7:8)',
      'signal values come from their own SQ slot\'s scratch entry: 2000 writes through a 16-slot SQ land with their own values, while one shared source word mixes them up (negative control) (random:13:8)',
      'refused signals: a bad size, a misaligned target or no scratch refuse before reserving; a bad PE or a target outside the heap fill their slot; nothing moves',
      // Rails: two NICs per PE, each its own software EFA. Puts spread by the policy with per-rail counts; quiet and
      // signals wait on every rail (the first-rail quiet and the own-rail signal are caught); handles bind a rail.
      // Owned queues (ABI 6): a thread's own queue, its slots from a counter in registers; quiet covers them.
      'owned queues: 4 owners each put and get through their own queue (64 slots, 300 posts: the ring wraps), byte-exact, every slot retired exactly once; posts outside the handle go the shared queue (random:5:8)',
      'owned queues: a claim past the last free queue gets NO_OWNED_QUEUE; a freed queue goes to the next owner, who continues its counters; a failed set-up claims nothing; a rail without owned queues has none to give',
      'owned queues, negative control: a quiet of the shared queues alone returns before a put held on an owned queue landed; efa_gda_quiet waits for it (large:64K:32)',
      'owned queues: a transfer over the max RDMA size is split into pieces on the owned queue; one outside the handle\'s regions goes the shared queue, and the owner\'s quiet waits for it there too (large:64K:32, held until idle)',
      'owned queues under concurrency: 2 checkers each own a queue (large put, efa_gda_quiet_owned, look at the target) while 3 threads post through the shared queue; every check finds its put in place (large:64K:32)',
      '2 rails: a WQE on rail 1 carrying rail 0\'s key fails, its destination QP of rail 0 is unknown there (the rig\'s rails are separate NICs)',
      '2 rails: 4 warps\' puts (4 KiB, and 1 MiB across region ends and max-RDMA pieces), gets and puts with immediate spread over both rails by (PE + warp) % 2, land byte-exact; per-rail counts; every rail\'s slots retired exactly (random:21:8 on both)',
      '2 rails, negative control: a quiet that waits on the first rail only returns before puts on the other rail landed (large:64K:32)',
      '2 rails: quiet covers every rail: each checker\'s own put landed whichever rail it took (2 checkers, 3 posters, large:64K:32)',
      '2 rails: quiet covers every rail: each checker\'s own put landed whichever rail it took (4 checkers, 3 posters, large:64K:32)',
      '2 rails, signal protocol, negative control: a count that waits only for its own rail\'s completions (quiet of that rail, then the write) is seen before tokens that took the other rail (rail 0 inorder, rail 1 large:4096:16)',
      '2 rails, signal protocol (dispatch-shaped, token warps on both rails): efa_gda_signal waits for every rail, every count seen finds its tokens in place (rail 0 random:7:8, rail 1 random:7:8)',
      '2 rails, signal protocol (dispatch-shaped, token warps on both rails): efa_gda_signal waits for every rail, every count seen finds its tokens in place (rail 0 reverse, rail 1 reverse)',
      '2 rails, signal protocol (dispatch-shaped, token warps on both rails): efa_gda_signal waits for every rail, every count seen finds its tokens in place (rail 0 inorder, rail 1 large:4096:16)',
      '2 rails: a prepared handle binds its rail; a rail GDA does not run on is refused before anything is reserved',
      // A rail wait bounded to one peer (efa_gda_quiet_rail_pe): the slots addressed to that PE, by slot_pe. Another
      // PE's slot never holds it (the rail-wide wait is caught); a pending slot of the PE does, in any completion order
      // (a wait that skips every slot is caught); no slot_pe, or no PE noted, waits for everything.
      "peer wait: a slot addressed to another PE that never completes does not hold the wait for pe (returns 0 at once), nor do other PEs' slots across the 32-bit slot wrap",
      'peer wait: a slot addressed to pe that has not completed holds the wait: ERR_TIMEOUT within the bound, the queue marked with that slot and PE; the same slot completed from another thread releases it, not before',
      "peer wait: completions out of order: pe's later slots done, an earlier one not: the wait still holds",
      "peer wait: a queue without slot_pe, or a PE slot_pe cannot name, waits for every slot (the rail's retired prefix); a slot with no PE noted (0xffff) is waited for",
      "peer wait: a queue already unusable fails the wait for a pending slot of pe at once with its reason; with none of pe's slots pending the wait returns 0",
      "efa_gda_quiet_rail_pe: a rail GDA does not run on or a PE out of range is refused before waiting; a PE's failed completion is returned to its wait",
      // Review 3, finding 6: an error belongs to its PE (its negative control, every failure the queue's, below).
      "errors per PE: PE 1 refuses PE 0 (UNKNOWN_PEER); PE 1's rail wait fails, PE 0's returns 0 and a put to PE 0 after the failure lands; the quiet of everything reports PE 1's failure and the queue stays usable; a local failure (the QP's error state) then fails PE 0's wait too and makes the queue unusable",
      "peer wait through the NIC (large:64K:32): PE 0's own put held does not hold the rail wait for PE 1, whose puts completed; the wait for PE 0 returns only once it landed",
      "peer wait through the NIC (large:64K:32): PE 1's put held does not hold the rail wait for PE 0, whose puts completed; the wait for PE 1 returns only once it landed",
      // Review 3, finding 4: the bound is on no progress (its negative control, the elapsed-time bound, below).
      'a NIC that keeps completing, slowly (pace:20000, 24 WQEs through an 8-entry SQ): the posts and the quiet last about 5 x the 100 ms bound and pass; the bound counts time without progress',
    ]) {
      expect(ok).toContain(rule);
    }
  });

  it('negative control NVSHMEMX_EFA_GDA_TEST_ELAPSED_BOUND: the elapsed-time bound times out a quiet the NIC keeps completing', () => {
    const r = spawnSync(path.join(dir, 'gda_device_cpu_test_elapsed_bound'), { encoding: 'utf8', timeout: 120_000, env: { ...process.env, GDA_TEST_ONLY: 'keeps completing' } });
    expect(r.stdout.trim().split('\n')).toEqual([
      'ok negative control NVSHMEMX_EFA_GDA_TEST_ELAPSED_BOUND: a NIC that keeps completing, slowly: the quiet times out at the 100 ms bound', '0 failed']);
  });

  it('negative control NVSHMEMX_EFA_GDA_TEST_QUEUE_WIDE_ERRORS: with every failure the queue\'s, PE 1\'s failure fails PE 0\'s wait', () => {
    const r = spawnSync(path.join(dir, 'gda_device_cpu_test_queue_wide_errors'), { encoding: 'utf8', timeout: 120_000, env: { ...process.env, GDA_TEST_ONLY: 'errors per PE' } });
    expect(r.stdout).toMatch(/^FAIL errors per PE: .*: PE 0's wait returned 14: PE 1's failure stopped PE 0's traffic \[own == 0\]$/m);
    expect(r.stdout.trim().split('\n').at(-1)).toBe('1 failed');
  });

  it('runs the DeepEP shim as the patched low-latency kernels call it: which path each switch takes, counted NVSHMEM calls', () => {
    const ok = runChecks(path.join(dir, 'shim_cpu_test'));
    expect(ok).toEqual([
      // Rails: the tokens and the count of one (expert, rank) on one rail; the count waits for that rail only (a
      // stalled other NIC does not hold it), and never lands before its token (1 and 2 rails). The first three
      // failed on the shim before (tokens by warp + expert + slot, the count by warp, the count's quiet on every rail).
      '2 rails: the tokens and the count of one (expert, rank) go on one rail, (PE + expert) % rails, whichever warps and slots post them (random:11:8)',
      '4 rails: the tokens and the count of one (expert, rank) go on one rail, (PE + expert) % rails, whichever warps and slots post them (random:11:8)',
      "2 rails: a count waits only for its tokens' rail: with the other rail's NIC stalled, it is posted at once",
      '1 rail: a count is seen only after its token, which the NIC held (large:4096:16)',
      '2 rails: a count is seen only after its token, which the NIC held (large:4096:16)',
      // No NVSHMEM (CPU proxy) operation in the low-latency calls when signals go over GDA...
      'signals over GDA: the low-latency calls (get_p2p_ptr, put_nbi_warp, the patched count signal, quiet, rma_p) make no NVSHMEM call; every count finds its tokens in place (random:7:8)',
      // ...on two rails too: the experts take both, each count waits for its tokens' rail, with
      // NVSHMEM_EFA_SHIM_SIGNALS=proxy as well.
      "2 rails, signals over GDA: the experts spread over both rails, every count waits for its tokens' rail; no NVSHMEM call; every count finds its tokens in place (rail 0 random:7:8, rail 1 random:7:8)",
      "2 rails, signals over GDA: the experts spread over both rails, every count waits for its tokens' rail; no NVSHMEM call; every count finds its tokens in place (rail 0 inorder, rail 1 large:4096:16)",
      '2 rails, NVSHMEM_EFA_SHIM_SIGNALS=proxy: the counts go through NVSHMEM after the payload completed and was flushed on both rails (random:7:8)',
      // ...the run-time switch to the proxy baseline, GDA off, and normal mode's adds, which stay on NVSHMEM.
      "NVSHMEM_EFA_SHIM_SIGNALS=proxy: the same calls send each count and the barrier value through NVSHMEM after the GDA payload completed; quiet then adds NVSHMEM's quiet (random:7:8)",
      'GDA not active: every put, signal, quiet and rma_p goes through NVSHMEM',
      "normal mode's counter adds go through NVSHMEM even with GDA signals on, after the GDA payload; quiet then includes NVSHMEM's quiet; a local copy is a local atomic",
      // A peer's failure (issue 35 item 6): a trap by default; with NVSHMEM_EFA_SHIM_PEER_ERRORS=mask the rank is masked
      // and nothing more is sent to it (the mask test fails on a shim whose failures always trap).
      "NVSHMEM_EFA_SHIM_PEER_ERRORS=trap (the default): with PE 1 refusing, its count's wait traps, naming the quiet of the signal's rail and peer",
      "NVSHMEM_EFA_SHIM_PEER_ERRORS=mask: with PE 1 refusing, its count is not written and rank 1 is masked (once, said on stdout) instead of a trap; later tokens, counts and barrier writes to it post nothing; DeepEP's quiet does not trap",
      'NVSHMEM_EFA_SHIM_PEER_ERRORS: unset, empty and trap trap; mask masks; anything else is refused',
      // DeepEP's own receive waits end at NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS when it is set (a failed signal write is
      // seen by its sender only; the receiver would wait DeepEP's 100 s).
      "DeepEP's receive-wait bound (NUM_TIMEOUT_CYCLES in the kernels that include the shim) is DeepEP's own until NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS sets it; the value is validated",
    ]);
  });

  // The shim's negative controls, each built with one test switch: exactly the behaviour it breaks is broken (the
  // checks of the control's own behaviour carry its name), the other holds.
  it("negative control NO_QUIET_BEFORE_SIGNAL: a count is seen before its held token; its rail is still its tokens'", () => {
    const ctl = 'negative control NVSHMEM_EFA_SHIM_TEST_NO_QUIET_BEFORE_SIGNAL: ';
    expect(runChecks(path.join(dir, 'shim_cpu_test_no_quiet_before_signal'))).toEqual([
      '2 rails: the tokens and the count of one (expert, rank) go on one rail, (PE + expert) % rails, whichever warps and slots post them (random:11:8)',
      '4 rails: the tokens and the count of one (expert, rank) go on one rail, (PE + expert) % rails, whichever warps and slots post them (random:11:8)',
      "2 rails: a count waits only for its tokens' rail: with the other rail's NIC stalled, it is posted at once",
      `${ctl}1 rail: a count is seen before its token, which the NIC held (large:4096:16)`,
      `${ctl}2 rails: a count is seen before its token, which the NIC held (large:4096:16)`,
    ]);
  });

  it('negative control SIGNAL_OTHER_RAIL: the count goes on another rail than its tokens; softefa places bytes with the completion, so the count still follows its token here (efaemu EFAEMU_PLACE_DEFER_US catches it)', () => {
    const ctl = 'negative control NVSHMEM_EFA_SHIM_TEST_SIGNAL_OTHER_RAIL: ';
    expect(runChecks(path.join(dir, 'shim_cpu_test_signal_other_rail'))).toEqual([
      `${ctl}2 rails: the count goes on the rail after its tokens' rail (random:11:8)`,
      `${ctl}4 rails: the count goes on the rail after its tokens' rail (random:11:8)`,
      "2 rails: a count waits only for its tokens' rail: with the other rail's NIC stalled, it is posted at once",
      '1 rail: a count is seen only after its token, which the NIC held (large:4096:16)',
      '2 rails: a count is seen only after its token, which the NIC held (large:4096:16)',
    ]);
  });

  // NVSHMEM's device API over GDA (issue 23): what nvshmemi_transfer_* does once patched, with NVSHMEM's proxy a
  // counting stand-in that notes whether the GDA data ordered before each of its operations was in place.
  const signalRule = 'put with SET signal (writes delivered once): the signal is a GDA write, seen only after its payload, which the NIC held (large:4096:16); no proxy call';
  const addRule = 'put with SIGNAL_ADD: the payload over GDA, the add through the proxy only once the payload (held by the NIC) completed and was flushed; counted as an atomic';
  const fenceRule = 'fence: a GDA put after it is seen only after the GDA put before it, which the NIC held';
  const railRule = "two rails: put, p, put with SET signal, get and g to PE 1, from warps 0 to 3, all leave through PE 1's rail (1 mod 2), none through rail 0; the data lands";
  const quietRule = 'quiet flushes each PE sent a GDA write (put, p, SET signal) since its last flush, a read per rail, and no other: not after a get alone, nor twice; two rails';
  const proxyRule = (by: string, next: string) =>
    `proxy_fence_gda: two rails, the proxy on rail 0's NIC (multi-rail NVSHMEM), PE 1's GDA rail 1: a put from a buffer outside GDA's regions through the proxy, ${by}, then p of a flag over GDA: the put is in place before the flag (PE 1 flushed through every rail after the proxy's quiet); ${next}`;
  const proxyFenceRule = proxyRule('fence', 'the next fence posts nothing');
  const proxyQuietRule = proxyRule('quiet', "the next quiet flushes only the flag's PE");
  it("routes NVSHMEM's device API: RMA over GDA, what GDA cannot serve through the proxy by reason, quiet and fence over both paths, signals after their payload", () => {
    expect(runChecks(path.join(dir, 'device_api_cpu_test'))).toEqual([
      signalRule,
      addRule,
      fenceRule,
      railRule,
      quietRule,
      'a proxy operation to PE 1 takes its GDA mark with its flush: after a fetching atomic the quiet flushes nothing more; a non-fetching atomic marks PE 1 as written by the proxy, and the quiet after it flushes PE 1 once',
      proxyFenceRule,
      proxyQuietRule,
      'put_nbi and get_nbi of heap buffers (thread, warp and block scope) go over GDA: no proxy call; the data is in place after quiet, which makes no proxy quiet (random:7:8)',
      'blocking put and get: the data is in place when the call returns, without a quiet (large:4096:16 holds them)',
      'a GPU that does not order RDMA writes (no READS_OVER_GDA): get, nbi and blocking, goes through the proxy, counted as a read without write ordering; puts stay GDA writes',
      'a put from memory GDA did not register goes through the proxy, counted (no region); the next quiet makes one proxy quiet, the quiet after it none',
      'a fence after a proxy operation waits for the proxy (its quiet), so a GDA put after it cannot pass it',
      'p: 4 and 8 bytes are GDA writes when writes are delivered once; 1 and 2 bytes, and every size where a write may land twice, go through the proxy (counted as values); g without scratch goes through the proxy (counted)',
      'g with scratch: every size is a GDA read into a scratch slot, its value returned once the read completed, which the NIC held (large:4:16 holds every read); no proxy call; the slot is free again',
      'put with SET signal where writes may land twice: the payload over GDA, the SET through the proxy after it was in place',
      'an atomic after GDA puts runs through the proxy only once they are in place; a second atomic with no GDA write since needs no flush (fetching atomics too)',
    ]);
  });

  // Its negative controls, one test switch each: exactly the rule it breaks is broken. softefa places a write's
  // bytes with its completion, so NO_FLUSH_BEFORE_PROXY is caught here by the missing quiet; the flush alone
  // (placement after completion) needs efaemu's EFAEMU_PLACE_DEFER_US.
  // Each control names the rules it breaks and what its build calls each of them.
  const controls: [string, string, [string, string][]][] = [
    ['signal_no_wait', 'NVSHMEMX_EFA_GDA_API_TEST_SIGNAL_NO_WAIT', [[signalRule, 'a SET signal over GDA is seen before its held payload']]],
    ['no_flush_before_proxy', 'NVSHMEMX_EFA_GDA_API_TEST_NO_FLUSH_BEFORE_PROXY', [[addRule, "the proxy's SIGNAL_ADD runs before its held GDA payload is in place"]]],
    ['fence_no_gda_quiet', 'NVSHMEMX_EFA_GDA_API_TEST_FENCE_NO_GDA_QUIET', [[fenceRule, 'a put after a fence is seen before the held put before it']]],
    ['quiet_no_flush', 'NVSHMEMX_EFA_GDA_API_TEST_QUIET_NO_FLUSH', [[quietRule, 'quiet flushes no PE it wrote to']]],
    ['warp_rail', 'NVSHMEMX_EFA_GDA_API_TEST_WARP_RAIL', [[railRule, "warps 1 and 3 send PE 1's operations through rail 0"]]],
    [
      'no_proxy_flush',
      'NVSHMEMX_EFA_GDA_API_TEST_NO_PROXY_FLUSH',
      [
        [proxyFenceRule, "proxy_fence_gda: a GDA p after fence is seen before the proxy's put"],
        [proxyQuietRule, "proxy_fence_gda: a GDA p after quiet is seen before the proxy's put"],
      ],
    ],
  ];
  for (const [name, ctl, broken] of controls) {
    it(`device API negative control ${ctl}: ${broken.map(([, b]) => b).join('; ')}; the other rules hold`, () => {
      const expected = [signalRule, addRule, fenceRule, railRule, quietRule, proxyFenceRule, proxyQuietRule].map((r) => {
        const hit = broken.find(([rule]) => rule === r);
        return hit ? `negative control ${ctl}: ${hit[1]}` : r;
      });
      expect(runChecks(path.join(dir, `device_api_cpu_test_${name}`))).toEqual(expected);
    });
  }

  it("gives the same results with the post out of line, as normal mode's internode.cu includes the shim", () => {
    expect(runChecks(path.join(dir, 'shim_cpu_test_put_out_of_line'))).toEqual(runChecks(path.join(dir, 'shim_cpu_test')));
  });
});

describe.skipIf(!NVCC)(skipTitle('EFA GDA device code (nvcc, sm_90, our test header)', !NVCC && 'no nvcc in /usr/local/cuda/bin or /usr/local/bin'), () => {
  it('the GPU proof program with the device header compiles', () => {
    const dir = build(true, 'efa_gda_proof');
    expect(existsSync(path.join(dir, 'efa_gda_proof'))).toBe(true);
  }, 300_000); // one nvcc compile of the whole device header: about 60 s on 2 idle cores, past 120 s under load
});

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('EFA GDA host code against the installed libfabric (C++11, g++)'), () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gda-host-'));
  const harness = (name: string, extra: string[]) => {
    const exe = path.join(tmp, name);
    execFileSync('g++', ['-std=c++11', '-Wall', '-Wextra', '-Werror', ...extra, '-I', GDA, '-I', CUDA_INC,
      ...GDA_SOURCES, path.join(HARNESS, 'gda_host_harness.cpp'), '-lfabric', '-ldl', '-o', exe], { stdio: 'pipe' });
    return execFileSync(exe, { encoding: 'utf8', env: { ...process.env, NVSHMEM_EFA_GDA_ENABLE: '1' } });
  };

  it('with GDA ops (our fi_ext_efa.h): on a host without EFA, init joins the all-gather, fails with the reason, and leaves nothing', () => {
    const out = harness('with_gda', ['-I', path.join(ROOT, 'test/efa_abi/include')]);
    expect(out).toContain('init=-1 gathers=1 active=0 state=(nil)');
    expect(out).toMatch(/status: EFA GDA off: no efa-direct fabric for this NIC \(fi_getinfo: .*\): needs an EFA device and libfabric >= 2\.3\.0/);
    // The device API's slot with GDA off: zero, so NVSHMEM's device API stays on its proxy path.
    expect(out).toContain('api slot: rc=0 abi=0 on=0 state=(nil) shared=(nil) flags=0');
    expect(out).toContain('after fini: gathers=1 active=0');
  });

  it('against a libfabric without GDA ops (Debian 1.17): GDA is compiled out and says how to get it', () => {
    const out = harness('without_gda', []);
    expect(out).toContain('init=-1 gathers=0 active=0');
    expect(out).toContain('without FI_EFA_GDA_OPS (needs libfabric >= 2.3.0');
    expect(out).toContain('api slot: rc=0 abi=0 on=0 state=(nil) shared=(nil) flags=0');
  });
});

describe('EFA GDA host code end to end on 2 PEs (fake efa-direct provider and CUDA driver)', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gda-fake-'));
  execFileSync('g++', ['-std=c++11', '-shared', '-fPIC', '-Wall', '-Wextra', '-Werror', '-I', CUDA_INC,
    path.join(HARNESS, 'fake_libcuda.cpp'), '-o', path.join(tmp, 'libcuda.so.1')], { stdio: 'pipe' });
  execFileSync('g++', ['-std=c++11', '-Wall', '-Wextra', '-Werror', '-I', GDA, '-I', CUDA_INC, '-I', path.join(ROOT, 'test/efa_abi/include'),
    ...GDA_SOURCES, path.join(HARNESS, 'fake_fabric.cpp'), path.join(HARNESS, 'gda_host_fake_harness.cpp'),
    '-ldl', '-o', path.join(tmp, 'harness')], { stdio: 'pipe' });
  const run = (scenario: string) => {
    const r = spawnSync(path.join(tmp, 'harness'), [scenario], {
      encoding: 'utf8', timeout: 60_000, env: { ...process.env, LD_LIBRARY_PATH: tmp },
    });
    expect(r.stdout).not.toContain('HANG');
    expect(r.status).toBe(0);
    const pe = (n: number) => r.stdout.split('\n').filter((l) => l.startsWith(`pe${n}: `)).map((l) => l.slice(5)).join('\n');
    return { all: r.stdout, pe0: pe(0), pe1: pe(1) };
  };

  // Review 3, finding 10: a sender's immediate window must fit the receiver's RX CQ. PE 1's RX CQ holds 128 entries,
  // PE 0's 32: each may keep 32 / 2 = 16 immediates unconsumed at a PE (PE 1 took 64 before, overrunning PE 0).
  it('agrees the immediate window as the smallest RX CQ of any PE over the PEs, on every PE', () => {
    const r = run('rx-larger-pe1');
    for (const [me, out] of [[0, r.pe0], [1, r.pe1]] as const) {
      expect(out).toContain('init=0 active=1 gathers=3');
      expect(out).toContain(`state: abi=8 my_pe=${me} n_pes=2 n_rails=1 imm_window=16 `);
    }
    expect(r.pe1).toMatch(/ rx=128x32 /);
  });

  it('starts on every PE: own QP number in the state, per-slot marks, credits, 3 collectives (addresses, the AV barrier, the vote after the last step that can fail)', () => {
    const { all, pe0, pe1 } = run('active');
    for (const [me, out] of [[0, pe0], [1, pe1]] as const) {
      expect(out).toContain('init=0 active=1 gathers=3');
      expect(out).toContain(`state: abi=8 my_pe=${me} n_pes=2 n_rails=1 imm_window=16`);
      // The signal scratch (ABI 4, per rail in ABI 5): one zeroed word per SQ slot in GDA's registered block, read by lkey.
      expect(out).toContain('signal scratch: set=1 entries_zeroed=1 lkey_is_credits=1 after_credit_locks=1 aligned64=1');
      // qp_num filled from query_addr of our own address, for the TX and the RX CQ checks.
      expect(out).toContain(`qp: qp_num=${100 + me} own_peer_qpn=${100 + me} sq=256x64 max_batch=16 cq=256x32 rx=32x32 rx_qp_num=${100 + me}`);
      expect(out).toContain('slot_done: first=-256 last=-1');
      // Each slot's peer (ABI 7), for errors that name it: no PE yet, next to the slot marks.
      expect(out).toContain('slot_pe: set=1 all_unset=1 after_slot_done=1');
      // Each PE's first failed completion (ABI 8), zero, after the slot peers.
      expect(out).toContain('pe_error: zeroed=1');
      expect(out).toContain('tx cq zeroed=1');
      // NVSHMEM_EFA_GDA_TIMEOUT_MS unset: every GPU wait bounded at 5 s, named in the status line.
      expect(out).toMatch(/state: .* timeout_ns=5000000000\n/);
      expect(out).toContain('GPU waits bounded at 5000 ms (NVSHMEM_EFA_GDA_TIMEOUT_MS)');
      expect(out).toContain('signals_ordered=1 why: every PE\'s GPU orders GPUDirect RDMA writes (ordering 100, at least OWNER = 100)');
      // Peers at fixed offsets in the state (fast entries) match the peer table; past n_pes they are zero.
      expect(out).toContain('peer 1: ah=501 qpn=101 qkey=0x11110001 credits key=0x1000 valid=1 base_set=1 fast=1');
      expect(out).toContain('fast past n_pes zero=1');
      expect(out).toContain('fabric: av_inserts=2 enabled=1 cq_binds=2');
      // The GDA endpoint asks for 32 bytes of inline data: no wide WQEs for inline sends.
      expect(out).toContain('hints: fabric=efa-direct inject_size=32 context2=1 mr_local=1');
      // The RX CQ is sized for every PE's window even where the provider's default is smaller.
      expect(out).toContain('cq request: size=32 dmabuf_length=2097152 offset=0');
      // CQ dma-buf: 2 MiB aligned, whole pages, the PCIe mapping type.
      expect(out).toMatch(/dmabuf ptr_mod_2M=0 ptr_page_aligned=1 size=2097152 size_page_aligned=1 flags=1 device=1/);
      expect(out).toContain('cuMemHostRegister page_aligned=1 bytes=4096 iomemory=1 devicemap=1');
      expect(out).toContain('cuStreamCreate flags=1');
      expect(out).not.toContain('legacy default stream');
    }
    expect(all).toContain('all-gathers: 6'); // 3 at start, one per region registered (3)
  });

  it('regions: GPU memory as FI_HMEM_CUDA, host memory as FI_HMEM_SYSTEM, each publish a new table, the old one intact', () => {
    const { pe0 } = run('active');
    expect(pe0).toContain('mr ifaces: cuda cuda system'); // credit counters, GPU region, host region
    expect(pe0).toContain('table after the GPU region: count=1 n_pes=2');
    expect(pe0).toContain('table after the host region: count=2 n_pes=2');
    expect(pe0).toContain('first table unchanged after the second publish: count=1');
    expect(pe0).toContain('registration gathers=2');
    expect(pe0).toMatch(/table after releasing the GPU region: count=1 n_pes=2 n_rails=1 at=\S+\n {2}region 0: local valid=1 key=0x1002 len=1048576/);
    // Hot slots: filled once per region in registration order (ours last), retired on release, never refilled.
    expect(pe0).toMatch(/table after the GPU region: .*\n.*\n {2}hot 0: present=1 len=4194304 key=0x1001 base_is_row=1 \| pe0 present=1 key=0x1001 base_set=1 \| pe1 present=1 key=0x1001 base_set=1\n {2}hot 1: present=0 len=0 /);
    expect(pe0).toMatch(/table after the host region: (.*\n){3} {2}hot 0: present=1 (.*\n) {2}hot 1: present=1 len=1048576 key=0x1002 /);
    expect(pe0).toMatch(/table after releasing the GPU region: (.*\n){2} {2}hot 0: present=0 (.*\n) {2}hot 1: present=1 (.*\n) {2}hot 2: present=0 /);
    expect(pe0).toMatch(/table after a third region: (.*\n){3} {2}hot 0: present=0 (.*\n) {2}hot 1: present=1 (.*\n) {2}hot 2: present=1 len=1048576 key=0x1003 /);
    const tables = [...pe0.matchAll(/table [^:]+: count=\d+ n_pes=2 n_rails=1 at=(\S+)/g)].map((m) => m[1]);
    expect(new Set(tables).size).toBe(tables.length);
  });

  it('128-byte WQE devices: GDA starts with a 128-byte stride instead of switching itself off', () => {
    const { pe0, pe1 } = run('wide-wqe');
    for (const out of [pe0, pe1]) {
      expect(out).toContain('init=0 active=1');
      expect(out).toMatch(/qp: qp_num=\d+ own_peer_qpn=\d+ sq=256x128 /);
    }
  });

  it('NVSHMEM_EFA_GDA_ENABLE differing between PEs: off on every PE with the reason, no hang', () => {
    const { pe0, pe1, all } = run('mismatch');
    for (const out of [pe0, pe1]) {
      expect(out).toContain('enabled()=1');
      expect(out).toContain('init=-1 active=0 gathers=1');
      expect(out).toContain('status: EFA GDA off on every PE: NVSHMEM_EFA_GDA_ENABLE differs between PEs (on for PE 0, off for PE 1)');
    }
    expect(all).toContain('all-gathers: 1');
  });

  it('requested nowhere: off quietly (init returns 0), one collective', () => {
    const { pe0, pe1 } = run('none');
    for (const out of [pe0, pe1]) {
      expect(out).toContain('init=0 active=0 gathers=1');
      expect(out).toContain('status: EFA GDA off: not requested (set NVSHMEM_EFA_GDA_ENABLE=1 on every PE)');
    }
  });

  it('one PE without efa-direct: off everywhere, each PE says why', () => {
    const { pe0, pe1 } = run('no-efa-pe1');
    expect(pe0).toContain('status: EFA GDA off: PE 1 could not start GDA (its log says why)');
    expect(pe1).toMatch(/status: EFA GDA off: no efa-direct fabric for this NIC/);
  });

  // Review 3, finding 9: libfabric after 2.3.0 reports FI_EFA_WQ_CAPS_64_BIT_REQ_ID in the caps word it appended to
  // struct fi_efa_wq_attr; completions with 64-bit request ids would be misread by the device code (16-bit ones).
  it('a send queue with 64-bit request ids (FI_EFA_WQ_CAPS_64_BIT_REQ_ID) on one PE: off everywhere, that PE names the cap', () => {
    const { pe0, pe1 } = run('wq-caps-64-pe1');
    expect(pe0).toContain('init=-1 active=0 gathers=1');
    expect(pe0).toContain('status: EFA GDA off: PE 1 could not start GDA (its log says why)');
    expect(pe1).toContain('status: EFA GDA off: the send queue of the GDA endpoint reports FI_EFA_WQ_CAPS_64_BIT_REQ_ID (caps 0x1): its completions carry 64-bit request ids, which this GDA code does not read (it reads 16-bit ones)');
  });

  // Review 3, finding 9: EFA's first device (0xefa0) builds a CQ from sub-CQs polled in turn; the device code polls one
  // ring. The efa provider reports the PCI device id as the nic's device_id.
  it('a NIC that is EFA device 0xefa0 (CQs of sub-CQs) on one PE: off everywhere, that PE says why; 0xefa1 is taken', () => {
    const { pe0, pe1 } = run('sub-cq-pe1');
    expect(pe0).toContain('status: EFA GDA off: PE 1 could not start GDA (its log says why)');
    expect(pe1).toContain('status: EFA GDA off: rdmap0s0 is an EFA device 0xefa0, whose completion queues are made of sub-CQs polled in turn');
    expect(pe0).not.toContain('0xefa1');
  });

  // Review 3, finding 10: immediates only where every receiver takes them unsolicited. A provider with
  // FI_EFA_USE_UNSOLICITED_WRITE_RECV off needs a posted receive per write-with-immediate, and GDA posts none.
  it('a PE whose provider takes immediates only into posted receives: GDA stays on, no PE sends immediates, the status says whose', () => {
    const r = run('unsolicited-off-pe1');
    for (const [me, out] of [[0, r.pe0], [1, r.pe1]] as const) {
      expect(out).toContain('init=0 active=1 gathers=3');
      expect(out).toContain(`state: abi=8 my_pe=${me} n_pes=2 n_rails=1 imm_window=0 `);
      expect(out).toContain("(immediates off: PE 1's provider would take them only into posted receives (FI_EFA_USE_UNSOLICITED_WRITE_RECV off there))");
    }
  });

  it('an AV insert failing on one PE: the barrier after the inserts turns GDA off everywhere, no hang', () => {
    const { pe0, pe1, all } = run('av-fail-pe1');
    expect(pe0).toContain('init=-1 active=0 gathers=2');
    expect(pe0).toContain("status: EFA GDA off: PE 1 could not insert every PE's GDA address");
    expect(pe1).toContain("status: EFA GDA off: fi_av_insert of PE 0's GDA address failed");
    expect(all).toContain('all-gathers: 2');
  });

  it('a heap region one PE cannot register: loud on every PE, kept in the table as unreachable', () => {
    const { pe0, pe1 } = run('region-fail-pe1');
    for (const out of [pe0, pe1]) {
      expect(out).toMatch(/nvshmem-efa: EFA GDA active, but heap region 0x[0-9a-f]+ \(1048576 bytes\) is unreachable by GDA: .*; GDA operations on it fail with NVSHMEMX_EFA_GDA_ERR_REGION_UNREACHABLE/);
      expect(out).toMatch(/region 1: local valid=\d key=0x[0-9a-f]+ len=1048576 \| pe0 valid=1 key=0x1002 len=1048576 \| pe1 valid=0 /);
    }
    expect(pe1).toMatch(/region 1: local valid=0 /);
    // The unreachable region never becomes hot: posts to it go through the table, which reports it.
    for (const out of [pe0, pe1]) expect(out).toMatch(/table after the host region: (.*\n){3} {2}hot 0: present=1 (.*\n) {2}hot 1: present=0 len=0 /);
  });

  it('a CQ larger than its GPU buffer is refused, and the plain dma-buf mapping is used where PCIe mapping is refused', () => {
    expect(run('cq-oversize').pe0).toContain('status: EFA GDA off: the TX CQ needs 262144 x 32 bytes but its GPU buffer holds 2097152');
    const { pe0 } = run('no-pcie');
    expect(pe0).toContain('CQ dma-buf plain (no PCIe mapping type)');
    expect(pe0).toMatch(/flags=1 device=1\n.*flags=0 device=1/);
  });

  // Several NICs per PE (multi-rail NVSHMEM hands over one fi_info per NIC): one efa-direct endpoint per rail.
  it('two rails: an endpoint, queues, credits and scratch per NIC, every PE\'s address and every region\'s keys per rail, the state says 2 rails', () => {
    const { pe0, pe1, all } = run('rails2');
    for (const [me, out] of [[0, pe0], [1, pe1]] as const) {
      expect(out).toContain('init=0 active=1 gathers=3 rails=2');
      expect(out).toContain(`status: EFA GDA active on 2 rails (rdmap0s0-rdm, rdmap1s0-rdm): efa-direct, QPs ${100 + me}/${110 + me}, SQ 256 x 64 B`);
      expect(out).toContain(`state: abi=8 my_pe=${me} n_pes=2 n_rails=2`);
      // Each NIC opened as its own domain (the domain names NVSHMEM handed over), each rail with its own QP.
      expect(out).toContain('getinfo domains: rdmap0s0-rdm rdmap1s0-rdm');
      expect(out).toContain(`qp: qp_num=${100 + me} own_peer_qpn=${100 + me} sq=256x64 max_batch=16 cq=256x32 rx=32x32 rx_qp_num=${100 + me}`);
      expect(out).toContain(`rail 1 qp: qp_num=${110 + me} own_peer_qpn=${110 + me} sq=256x64 max_batch=16 cq=256x32 rx=32x32 rx_qp_num=${110 + me}`);
      expect(out).toContain('rail 1 peer 1: ah=501 qpn=111 qkey=0x11110001');
      expect(out).toContain('rail 1 signal scratch: set=1 entries_zeroed=1 lkey_is_credits=1 after_credit_locks=1 aligned64=1');
      expect(out).toContain('rail 1 slot_done: first=-256 last=-1');
      expect(out).toContain('rails apart: queues, doorbells, CQs, slot marks, credits, scratch distinct=1');
      expect(out).toContain('rails past n_rails zero=1');
      expect(out).toContain('fabric: av_inserts=4 enabled=1 cq_binds=4');
      // Every region on every rail, with that rail's keys, and hot on both rails.
      expect(out).toContain('mr ifaces: cuda cuda cuda cuda system system');
      expect(out).toMatch(/table after the GPU region: count=1 n_pes=2 n_rails=2 at=\S+\n {2}region 0: local valid=1 key=(0x[0-9a-f]+) .*\n {2}region 0 rail 1: local valid=1 key=(?!\1)0x[0-9a-f]+ /);
      expect(out).toMatch(/table after the GPU region: (.*\n){3} {2}hot 0: present=1 len=4194304 .*\n(.*\n){2} {2}hot 0 rail 1: present=1 len=4194304 /);
    }
    expect(all).toContain('all-gathers: 6'); // still one collective per registration, whatever the rails
  });

  it('a rail one PE cannot open: GDA runs on the rails every PE has, each PE says which rail was left out and why (status and stderr)', () => {
    const { pe0, pe1, all } = run('rail1-fails-pe1');
    for (const out of [pe0, pe1]) expect(out).toContain('init=0 active=1 gathers=3 rails=1');
    expect(pe0).toContain('status: EFA GDA active on 1 of 2 rails (rdmap0s0-rdm); rail 1 (rdmap1s0-rdm) left out: PE 1 has only 1 usable rail (its log says why), and every PE runs GDA on as many rails: efa-direct, QP 100,');
    expect(pe1).toMatch(/status: EFA GDA active on 1 of 2 rails \(rdmap0s0-rdm\); rail 1 \(rdmap1s0-rdm\) left out: no efa-direct fabric for rdmap1s0-rdm \(fi_getinfo: .*\): needs an EFA device and libfabric >= 2\.3\.0: efa-direct, QP 101,/);
    expect(pe0).toContain('nvshmem-efa: EFA GDA on PE 0: rail 1 (rdmap1s0-rdm) left out: PE 1 has only 1 usable rail');
    expect(pe1).toContain('nvshmem-efa: EFA GDA on PE 1: rail 1 (rdmap1s0-rdm) left out: no efa-direct fabric for rdmap1s0-rdm');
    // The rail left out is closed: one rail's AV inserts, one rail in the table.
    expect(pe0).toContain('fabric: av_inserts=2 ');
    expect(pe0).toContain('state: abi=8 my_pe=0 n_pes=2 n_rails=1');
    expect(pe0).toContain('table after the GPU region: count=1 n_pes=2 n_rails=1');
    expect(all).toContain('all-gathers: 6');
  });

  // Owned queues (NVSHMEM_EFA_GDA_OWNED_QUEUES): extra endpoints per rail, one per queue a device thread may own.
  it('owned queues: an endpoint, GPU TX CQ, SQ mapping and slot marks each, their addresses inserted on every PE, in the state; none by default', () => {
    const { pe0, pe1 } = run('owned3');
    for (const [me, out] of [[0, pe0], [1, pe1]] as const) {
      expect(out).toContain('init=0 active=1 gathers=3 rails=1');
      expect(out).toMatch(/status: EFA GDA active on 1 rail .*, 2 PEs, 3 owned queues per rail\n/);
      // Their own QP numbers (from query_addr of their inserted addresses), queues apart from the rail's and each other's.
      const q = (n: number) => `qp_num=${n * 1000 + 100 + me} sq=256x64 cq=256x32 slot_done=-256..-1 counters=0/0/0 cq_zeroed=1 owner=0 apart=1`;
      expect(out).toContain(`owned: n=3 | ${q(1)} | ${q(2)} | ${q(3)}\n`);
      // 2 PEs x (the rail's QP + 3 owned) inserted; each endpoint binds a TX and an RX CQ.
      expect(out).toContain('fabric: av_inserts=8 enabled=1 cq_binds=8');
      expect(out).toContain('endpoints: opened=4 closed=0');
      expect(out).toContain('endpoints after fini: opened=4 closed=4');
    }
    const plain = run('active').pe0;
    expect(plain).toContain('owned: n=0\n');
    expect(plain).not.toContain('owned queue');
    expect(plain).toContain('endpoints: opened=1 closed=0');
  });

  it('owned queues on two rails: each rail its own, with that rail\'s QP numbers', () => {
    const { pe0 } = run('owned-rails2');
    expect(pe0).toContain('init=0 active=1 gathers=3 rails=2');
    expect(pe0).toMatch(/\nowned: n=2 \| qp_num=1100 .* \| qp_num=2100 /);
    expect(pe0).toMatch(/\nrail 1 owned: n=2 \| qp_num=1110 .* \| qp_num=2110 /);
    expect(pe0).toContain('fabric: av_inserts=12 ');
  });

  it('owned queues one PE could not open all of: every PE runs as many as the fewest, says so, and closes the rest', () => {
    const { pe0, pe1 } = run('owned-limit-pe1');
    for (const out of [pe0, pe1]) {
      expect(out).toContain('init=0 active=1');
      expect(out).toContain('2 owned queues per rail; 3 owned queues per rail asked for, 2 on every PE: PE 1 opened 2 (its log says why)');
      expect(out).toMatch(/\nowned: n=2 \| /);
    }
    expect(pe1).toContain("nvshmem-efa: EFA GDA on PE 1: fewer owned queues than NVSHMEM_EFA_GDA_OWNED_QUEUES=3 asked for: owned queue 2 of rdmap0s0-rdm: creating an owned queue's endpoint failed");
    // PE 0 opened 3 and closes the one past the common count at once.
    expect(pe0).toContain('endpoints: opened=4 closed=1');
    expect(pe0).toContain('endpoints after fini: opened=4 closed=4');
    const bad = run('owned-bad');
    for (const out of [bad.pe0, bad.pe1]) {
      expect(out).toContain('init=-1 active=0 gathers=1');
      expect(out).toContain('status: EFA GDA off: NVSHMEM_EFA_GDA_OWNED_QUEUES=99 is not a number of owned queues in [0, 32]');
    }
  });

  it('rails left out by rule: the same NIC twice, NVSHMEM_EFA_GDA_RAILS on one PE (the others follow it), a malformed NVSHMEM_EFA_GDA_RAILS turns GDA off', () => {
    for (const out of Object.values(run('rails-dup')).slice(1))
      expect(out).toContain('status: EFA GDA active on 1 of 2 rails (rdmap0s0-rdm); rail 1 (rdmap0s0-rdm) left out: the same NIC as rail 0:');
    const env = run('rails-env-pe0');
    expect(env.pe0).toContain('status: EFA GDA active on 1 of 2 rails (rdmap0s0-rdm); rail 1 (rdmap1s0-rdm) left out: NVSHMEM_EFA_GDA_RAILS=1 allows 1 rail:');
    expect(env.pe1).toContain('status: EFA GDA active on 1 of 2 rails (rdmap0s0-rdm); rail 1 (rdmap1s0-rdm) left out: PE 0 has only 1 usable rail');
    const bad = run('rails-env-bad');
    expect(bad.pe0).toContain('init=-1 active=0 gathers=1');
    expect(bad.pe0).toContain('status: EFA GDA off: NVSHMEM_EFA_GDA_RAILS=two is not a number of rails in [1, 4]');
    expect(bad.pe1).toContain('status: EFA GDA off: PE 0 could not start GDA on any of its 2 rails (its log says why)');
  });

  it('no rail opens on one PE: off on every PE, no hang, the PE itself lists every rail with its reason', () => {
    const { pe0, pe1, all } = run('rails-none-pe1');
    for (const out of [pe0, pe1]) expect(out).toContain('init=-1 active=0 gathers=1 rails=0');
    expect(pe0).toContain('status: EFA GDA off: PE 1 could not start GDA on any of its 2 rails (its log says why)');
    expect(pe1).toMatch(/status: EFA GDA off: no rail could start: rail 0 \(rdmap0s0-rdm\) left out: no efa-direct fabric .*; rail 1 \(rdmap1s0-rdm\) left out: no efa-direct fabric /);
    expect(all).toContain('all-gathers: 1');
  });

  it('a region one PE cannot register on one rail: unreachable on that rail only, loud, never hot', () => {
    const { pe0, pe1 } = run('rails-region-fail-pe1');
    for (const out of [pe0, pe1]) {
      expect(out).toMatch(/nvshmem-efa: EFA GDA active, but heap region 0x[0-9a-f]+ \(4194304 bytes\) is unreachable by GDA on rail 1 \(rdmap1s0-rdm\): /);
      expect(out).toMatch(/table after the GPU region: count=1 n_pes=2 n_rails=2 at=\S+\n {2}region 0: local valid=1 .* \| pe0 valid=1 .* \| pe1 valid=1 .*\n {2}region 0 rail 1: local valid=\d .* \| pe1 valid=0 /);
      expect(out).toMatch(/table after the GPU region: (.*\n){3} {2}hot 0: present=0 /);
    }
    expect(pe1).toMatch(/region 0 rail 1: local valid=0 /);
  });

  // Start-up agrees after its last step that can fail: nothing a PE does after the vote can fail.
  it('start-up failing on one PE after the last address exchange (finish_start): off on every PE with the same reason, no hang', () => {
    const { pe0, pe1, all } = run('finish-fail-pe1');
    const status = 'status: EFA GDA off on every PE: PE 1 could not finish start-up: allocating the device state failed (CUDA_ERROR_2)\n';
    for (const out of [pe0, pe1]) {
      expect(out).toContain('init=-1 active=0 gathers=3 rails=0');
      expect(out).toContain(status);
      expect(out).toContain('after fini: active=0 state=(nil)');
    }
    // PE 0 finished its part and closed it again.
    expect(pe0).toContain('endpoints after fini: opened=1 closed=1');
    expect(all).toContain('all-gathers: 3');
  });

  it('GPUDirect RDMA write ordering: GDA signals only where every PE\'s GPU orders RDMA writes (>= OWNER), the same answer and reason on every PE', () => {
    const below = run('gdr-unordered-pe1');
    const why = 'PE 1\'s GPU reports CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 0, below OWNER = 100, so it may see a signal before the payload an earlier RDMA write placed: send signals through NVSHMEM';
    for (const out of [below.pe0, below.pe1]) {
      expect(out).toContain('init=0 active=1'); // puts still run over GDA
      expect(out).toContain(`signals_ordered=0 why: ${why}\n`);
      expect(out).toContain(`GDA signals off: ${why}, 2 PEs\n`);
    }
    const unknown = run('gdr-unknown-pe0');
    for (const out of [unknown.pe0, unknown.pe1])
      expect(out).toContain('signals_ordered=0 why: PE 0 could not read its GPU\'s GPUDirect RDMA write ordering (its log says why)');
    expect(unknown.pe0).toContain('nvshmem-efa: EFA GDA on PE 0: cuDeviceGetAttribute(GPU_DIRECT_RDMA_WRITES_ORDERING) failed (CUDA_ERROR_801); GDA signals are off');
    const all = run('gdr-all-devices');
    for (const out of [all.pe0, all.pe1]) expect(out).toContain('signals_ordered=1 ');
    // NVSHMEM's device API (issue 35, review 3 finding 3): values (p, SET) and reads (g, get) over GDA only where every
    // PE's GPU orders GPUDirect RDMA writes; below OWNER on one PE, puts stay GDA writes and the rest goes through the
    // proxy on every PE, and the status line says why.
    for (const out of [below.pe0, below.pe1]) {
      expect(out).toContain('api slot: rc=0 abi=5 on=1 flags=0 g_slots=0\n');
      expect(out).toContain(`NVSHMEM device API over GDA on (puts as GDA writes; p, SET signals, g and get through NVSHMEM's proxy: ${why})`);
    }
    for (const out of [all.pe0, all.pe1]) {
      expect(out).toMatch(/api slot: rc=0 abi=5 on=1 flags=3 g_slots=[1-9]\d*\n/);
      // quiet's flush marks (review 3, finding 2): a word of bits after flushed_at, cleared; the proxy's (finding 7)
      // after them.
      expect(out).toContain('api shared: unflushed=after flushed_at proxy_unflushed=after unflushed words=1 set=0\n');
      expect(out).toContain('NVSHMEM device API over GDA on (p and SET signals as GDA writes: every NIC delivers a write once; g as GDA reads, get too)');
    }
  });

  it('writes delivered once: GDA signals only where every PE\'s every rail was granted FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES, the same answer and reason on every PE', () => {
    const refused = run('once-refused-pe1');
    const why = 'PE 1\'s NIC does not promise to deliver an RDMA write once (FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES refused';
    for (const out of [refused.pe0, refused.pe1]) {
      expect(out).toContain('init=0 active=1'); // puts still run over GDA
      expect(out).toMatch(/delivered_once=0 asked=1 why: /);
      expect(out).toContain(why);
      expect(out).toMatch(/GDA signals off: PE 1's NIC does not promise to deliver an RDMA write once .*: send signals through NVSHMEM; puts stay on GDA: a late copy of one may land again in a reused buffer, as NVSHMEM's own RDMA writes through that NIC may, 2 PEs\n/);
    }
    expect(refused.pe1).toMatch(/EFA GDA on PE 1, rail 0 \(.*\): FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES refused/);
    const granted = run('gdr-all-devices');
    for (const out of [granted.pe0, granted.pe1]) {
      expect(out).toMatch(/delivered_once=1 asked=1 why: every PE's NICs deliver an RDMA write once/);
      expect(out).toContain('GDA signals on (every PE\'s GPU orders GPUDirect RDMA writes and every NIC delivers a write once)');
    }
  });

  it('NVSHMEM_EFA_GDA_TIMEOUT_MS: the bound in nanoseconds in the state and in the status line; malformed or 0 keeps GDA off with the variable named', () => {
    for (const out of Object.values(run('timeout-250')).slice(1)) {
      expect(out).toMatch(/state: .* timeout_ns=250000000\n/);
      expect(out).toContain('GPU waits bounded at 250 ms (NVSHMEM_EFA_GDA_TIMEOUT_MS)');
    }
    const bad = run('timeout-bad');
    expect(bad.pe0).toContain('init=-1 active=0 gathers=1');
    expect(bad.pe0).toContain('status: EFA GDA off: NVSHMEM_EFA_GDA_TIMEOUT_MS=5s is not a whole number of milliseconds in [1, 3600000] (the bound on every GPU wait; unset: 5000)');
    expect(bad.pe1).toContain('status: EFA GDA off: PE 0 could not start GDA (its log says why)');
    for (const out of Object.values(run('timeout-zero')).slice(1))
      expect(out).toContain('status: EFA GDA off: NVSHMEM_EFA_GDA_TIMEOUT_MS=0 is not a whole number of milliseconds in [1, 3600000]');
  });
});
