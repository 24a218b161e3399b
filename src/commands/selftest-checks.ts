/**
 * The table of selftest's checks, as data only: `--help` lists their ids, and the CLI builds its help without
 * loading selftest.ts and what it imports (issue 22: help in under 0.15 s). selftest.ts runs them.
 */

/** What a check needs from the host and the work dir. */
export type Need = 'unshare' | 'efaemu' | 'fabtests' | 'gpus' | 'nvshmem' | 'gda' | 'pe_test' | 'pattern' | 'deepep' | 'rails' | 'nvshmem_tests' | 'neg_build';

/**
 * How a check meets the efaemu modes: 'run' takes the modes of each --efaemu-modes run (one row per run);
 * 'run-unplaced' the same without the placement modes (place_order, defer, duplicate: a path that does not claim to
 * survive them, NVSHMEM's own proxy path with GDA off); any other string
 * names the modes the check sets itself (negative controls run with and without them, normal_mode always defers).
 */
export type CheckModes = 'run' | 'run-unplaced' | string | undefined;

/**
 * Every check, in the order checks.sh runs them, with what it needs from the host, how it meets the efaemu modes, and
 * for the checks that run PEs on GPUs how many PEs at most (2 unless said; selftest-placement.ts places them).
 */
export const SELFTEST_CHECKS: readonly { id: string; title: string; needs: readonly Need[]; modes?: CheckModes; pes?: number }[] = [
  { id: 'fi_info', title: 'fi_info -p efa lists efa-direct and efa', needs: ['unshare', 'efaemu'] },
  { id: 'fabtests', title: 'fabtests fi_rdm_pingpong, fi_rma_bw over efaemu', needs: ['unshare', 'efaemu', 'fabtests'] },
  { id: 'nvshmem_perf', title: 'NVSHMEM put bandwidth and atomic latency, 2 PEs, GDA off', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'pe_test'] },
  { id: 'gda_kernel', title: 'EFA GDA active on both PEs; put, put-imm + rx_poll, get, quiet, warp batch', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test'], modes: 'run' },
  { id: 'gda_rails', title: 'EFA GDA on 2 rails per PE (2 emulated NICs per GPU): the kernel test, traffic on both NICs', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test', 'rails'], modes: 'run' },
  { id: 'deepep_ll', title: 'DeepEP test_low_latency.py --disable-nvlink, GDA on, reordering', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], modes: 'run' },
  { id: 'deepep_ll_4pes', title: 'DeepEP test_low_latency.py --disable-nvlink on 4 PEs (every rank dispatches to 3 others), GDA on, reordering', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], modes: 'run', pes: 4 },
  { id: 'deepep_rails', title: 'DeepEP test_low_latency.py --disable-nvlink on 2 rails per PE (multi-rail build), traffic on both NICs', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep', 'rails'], modes: 'run' },
  { id: 'deepep_counters', title: 'DeepEP with GDA off: the RDM path carries the same payload bytes', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], modes: 'run-unplaced' },
  { id: 'deepep_shrink', title: 'DeepEP test_low_latency.py --shrink-test on 6 PEs: ranks 1, 3 and 5 fail, the others mask them; rank 1 also refuses every GDA write (efaemu as a dead peer) and the shim masks a failed peer (NVSHMEM_EFA_SHIM_PEER_ERRORS=mask) instead of trapping', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], pes: 6 },
  { id: 'deepep_pressure', title: 'DeepEP test_low_latency.py --pressure-test (bounded)', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], modes: 'run' },
  { id: 'll_pattern', title: "DeepEP's low-latency pattern through the shim (deepep_pattern ll): every token byte there when its count signal arrives", needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pattern'], modes: 'run' },
  { id: 'normal_mode', title: 'DeepEP normal mode across requesters (deepep_pattern normal): chunks over GDA, quiet, fence, tail added by the proxy; chunks there when the tail moves', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pattern'], modes: 'defer' },
  { id: 'neg_fail_injection', title: 'Negative control: injected NIC failures fail loudly, no hang', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test'] },
  { id: 'neg_wrong_provider', title: 'Negative control: a wrong FI_PROVIDER fails NVSHMEM init (diagnosed)', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'pe_test'] },
  { id: 'neg_no_quiet', title: 'Negative control: the shim without its quiet before a signal is caught under the modes, passes without', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pattern'], modes: 'place_order,defer vs none' },
  { id: 'neg_signal_other_rail', title: 'Negative control: a signal on another rail than its payload is caught under the modes (2 rails), passes without', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pattern', 'rails'], modes: 'defer vs none' },
  { id: 'neg_ignore_error', title: 'Negative control: a kernel that ignores a NIC error is caught under failure injection, passes without', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test'], modes: 'fail gda vs none' },
  { id: 'gda_pe_errors', title: 'A failure stays with its PE: PE 1 refuses GDA writes (efaemu as a dead peer), PE 0\'s wait for PE 1 reports it, its own put to itself posts, completes and lands', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test'], modes: 'EFAEMU_FAIL_AS_TARGET=gda on PE 1' },
  { id: 'silent_bound', title: 'SILENT_AFTER_ERROR plus an injected failure, GDA kernel test: every process ends within NVSHMEM_EFA_GDA_TIMEOUT_MS with the trap message', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'pe_test'], modes: 'silent + fail gda' },
  { id: 'deepep_silent_bound', title: "SILENT_AFTER_ERROR plus an injected failure, DeepEP: every process ends within the bound (NVSHMEM_EFA_GDA_TIMEOUT_MS, and NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS for DeepEP's receive waits) with a trap message", needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'deepep'], modes: 'silent + fail gda' },
  { id: 'device_api', title: "NVSHMEM's own perftests and examples, unmodified, through NVSHMEM's device API over GDA (a build with the device API hooks, the default): 2 PEs started by nvshmem-efa launch (PMI-1), the switch on and off, efaemu's counters per program; device_api_order also on 4 PEs (a put to a PE that is not a barrier neighbour, then the barrier, then the check) and, on a multi-rail build, on 2 NICs per PE (device_api_order+rails: the cross-warp fence tests and a proxy put, fence, GDA flag)", needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'nvshmem_tests'], modes: 'run', pes: 4 },
  { id: 'neg_device_api', title: 'Negative controls of the device API (device_api_order against device libraries with a fence that skips the GDA quiet, a signal that does not wait for its payload, a proxy atomic without the GDA flush, a quiet that flushes no PE (the barrier on 4 PEs with one writer); on a multi-rail build, with 2 NICs per PE, the rail of the calling warp (caught by xwarp_p) and a fence without the flush of the PEs the proxy wrote to (caught by proxy_fence_gda)): each caught under the modes, passes without', needs: ['unshare', 'efaemu', 'gpus', 'nvshmem', 'gda', 'nvshmem_tests', 'neg_build'], modes: 'place_order,defer vs none', pes: 4 },
];
