// native/efaemu/gpu/checks.sh run on the CPU with every program it starts replaced by one stand-in: a bash script
// that finds which run it is from where its stdout goes (checks.sh sends each rank to RESULTS/<run>.pe<R>.log, each
// `nvshmem-efa launch` rank to RESULTS/<run>/rank<R>.log, fi_info and fabtests to RESULTS/<run>.log) and runs the
// scenario's body for that run: the lines the real program would print, its efaemu statistics, its exit status. So
// checks.sh's own verdict code judges what a scenario says the programs did. No namespace is needed: EFAEMU_SYSFS_NS
// is set (the checks do not re-exec into sysfs-ns.sh) and the 2-rail wrapper is a stand-in that runs its command.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const CHECKS_SH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native/efaemu/gpu/checks.sh');

/** What a scenario says each run printed: run name (e.g. `neg_no_quiet.modes`, `device_api.shmem_put_bw.on`) -> a bash
 * body run with RANK set; `stats JSON` writes the rank's efaemu statistics. */
export type Scenario = Record<string, string>;

const DISPATCH = `
out=$(readlink "/proc/$$/fd/1")
case $out in
  */rank[0-9]*.log) key=$(basename "$(dirname "$out")"); RANK=$PMI_RANK ;;
  *.pe[0-9]*.log) key=$(basename "$out"); key=\${key%.pe*.log} ;;
  *) key=$(basename "$out" .log) ;;
esac
stats() { printf '%s' "$1" > "$EFAEMU_STATS/efaemu-$$.json"; }
[ -f "$SCEN/$key" ] || { echo "stand-in $0: no scenario for run $key"; exit 99; }
. "$SCEN/$key"
`;

function script(file: string, body: string) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `#!/bin/bash\n${body}`, { mode: 0o755 });
  return file;
}

export interface ChecksWorld { dir: string; script: string; env: Record<string, string> }

/** A scratch world: every input checks.sh names, each program a stand-in, 8 "GPUs" (one PE per GPU up to 8 PEs). */
export function checksWorld(): ChecksWorld {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'checks-verdicts-'));
  const p = (...s: string[]) => path.join(dir, ...s);
  const standIn = (file: string) => script(file, DISPATCH);
  for (const t of ['fi_info', 'fi_rdm_pingpong', 'fi_rma_bw']) standIn(p('lf/bin', t));
  mkdirSync(p('lf/include/rdma'), { recursive: true });
  mkdirSync(p('efaemu'));
  mkdirSync(p('nvshmem/lib'), { recursive: true });
  standIn(p('pe_test'));
  for (const t of ['deepep_pattern', 'deepep_pattern_no_quiet', 'deepep_pattern_other_rail']) standIn(p('patterns', t));
  mkdirSync(p('deepep/tests'), { recursive: true });
  // DeepEP's test is run by $PYTHON; checks.sh also runs $PYTHON for its statistics sums.
  script(p('python'), `[[ "$*" == *test_low_latency.py* ]] || exec python3 "$@"\n${DISPATCH}`);
  // device_api and neg_device_api find their programs by name under NVSHMEM_TESTS.
  for (const t of ['device_api_order', 'device_api_order_fence_no_gda_quiet', 'device_api_order_signal_no_wait',
    'device_api_order_no_flush_before_proxy', 'device_api_order_quiet_no_flush', 'device_api_order_warp_rail', 'device_api_order_no_proxy_flush'])
    standIn(p('tests/ours', t));
  for (const t of ['shmem_put_bw', 'shmem_p_latency']) standIn(p('tests/perftest', t));
  for (const t of ['put-block', 'ring-bcast']) standIn(p('tests/examples', t));
  // nvshmem-efa launch: N ranks with PMI_RANK, each into DIR/rank<R>.log; exit status that of the first rank that failed.
  script(p('launch'), `shift
while [ "$1" != -- ]; do case $1 in -n) n=$2; shift 2 ;; --output-dir) d=$2; shift 2 ;; *) shift ;; esac; done; shift
mkdir -p "$d"; pids=()
for ((r = 0; r < n; r++)); do PMI_RANK=$r PMI_SIZE=$n "$@" >"$d/rank$r.log" 2>&1 & pids+=($!); done
rc=0; for q in "\${pids[@]}"; do wait "$q"; s=$?; [ "$rc" = 0 ] && rc=$s; done; exit $rc
`);
  // sysfs-ns.sh (the 2-rail checks nest it per PE): its arguments dropped, the command run.
  script(p('sysfs-ns'), 'while [ "$1" != -- ]; do shift; done; shift; exec "$@"\n');
  // A PE that is a host of its own (own_host_argv: unshare --uts sh -c 'set the host name' pe-host NAME CMD...): CMD
  // alone, so no test needs the privilege and none can rename this host.
  script(p('bin/unshare'), '[ "$1" = --uts ] && [ "$2" = sh ] || exit 97; shift 6; exec "$@"\n');
  const env: Record<string, string> = {
    PATH: `${p('bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: process.env.HOME ?? dir, TMPDIR: os.tmpdir(),
    RESULTS: p('results'), SCEN: p('scen'), NVSHMEM_HOME: p('nvshmem'), EFAEMU_BUILD: p('efaemu'), LIBFABRIC_HOME: p('lf'),
    PE_TEST: p('pe_test'), PATTERN_DIR: p('patterns'), DEEPEP_DIR: p('deepep'), PYTHON: p('python'),
    NVSHMEM_TESTS: p('tests'), NVSHMEM_EFA_LAUNCH: `bash ${p('launch')}`,
    EFAEMU_SYSFS_NS: '1', EFAEMU_SYSFS_NS_SCRIPT: p('sysfs-ns'), PRELOAD_UNDER_TEST: '', NO_MPS_DIR: p('no-mps'),
    NS_DEVICES: Array.from({ length: 8 }, (_, i) => `/fake/gpu${i}`).join(' '),
    // A failed rank's peers are stopped 2 s after it, not 15: every failure scenario would wait that long.
    CHECK_TIMEOUT: '60', PEER_FAIL_GRACE_S: '2', PEER_EXIT_GRACE_S: '5', KILL_WAIT_S: '2',
  };
  return { dir, script: CHECKS_SH, env };
}

/** A copy of checks.sh with each [from, to] replaced; each `from` must occur exactly once (a mutation that no longer
 * applies fails the test rather than testing the unchanged script). */
export function mutant(world: ChecksWorld, edits: [string, string][]): string {
  let text = readFileSync(CHECKS_SH, 'utf8');
  for (const [from, to] of edits) {
    const n = text.split(from).length - 1;
    if (n !== 1) throw new Error(`mutation target found ${n} times in checks.sh: ${from}`);
    text = text.replace(from, () => to);
  }
  const file = path.join(world.dir, 'mutant', 'checks.sh');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text, { mode: 0o755 });
  return file;
}

export interface Verdict { verdict: string; evidence: string }

/** Runs checks.sh (or SCRIPT) on NAMES under SCENARIO in a fresh RESULTS; resolves to each check's RESULT line. Not
 * spawnSync: the tests of a file run their invocations side by side (each in a world of its own). */
export async function runChecks(world: ChecksWorld, names: string[], scenario: Scenario, extra: Record<string, string> = {},
  scriptPath = world.script, killAfterMs = 280_000) {
  const scen = world.env.SCEN!;
  rmSync(scen, { recursive: true, force: true });
  rmSync(world.env.RESULTS!, { recursive: true, force: true });
  mkdirSync(scen, { recursive: true });
  for (const [run, body] of Object.entries(scenario)) writeFileSync(path.join(scen, run), `${body}\n`);
  const child = spawn('bash', [scriptPath, ...names], { env: { ...world.env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  const results = new Map<string, Verdict>();
  for (const m of stdout.matchAll(/^RESULT\t([^\t]+)\t([^\t]+)\t(.*)$/gm)) results.set(m[1]!, { verdict: m[2]!, evidence: m[3]! });
  return { results, out: `${stdout}${stderr}`, status };
}

/** Removes the world's files. */
export function dropWorld(world: ChecksWorld) { rmSync(world.dir, { recursive: true, force: true }); }
