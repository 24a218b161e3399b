/**
 * The first rerun of `build` with DeepEP after a cold build, against that build, on the fake toolchain
 * (test/helpers): the ratio rerun / first build, median of RUNS pairs, each pair in a fresh work dir, both halves
 * in this process's one run (the machine's drift hits both). The fake builds write into the sources as the real
 * ones do (NVSHMEM's configure_file() outputs, transfer_device.cuh among them, git_commit.txt; its install's CMake
 * package files; DeepEP's build/ and the import check's byte code: issue 38), so the rerun is the first one after
 * such writes. Also where the rerun's time goes (each step's time from the report, the CLI's start-up) and that
 * the rerun was a no-op (every step the first build ran "up to date", no cmake and no setup.py run).
 * The CLI runs as the container runs it: the standalone bundle (scripts/bundle.mjs --standalone), built first
 * from this tree into a temporary directory (not timed).
 *   npx tsx bench/noop-rerun/run.ts [RUNS] [--out FILE]
 * Writes bench/results/noop-rerun.md (or FILE) with the command and the machine.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { IO_DEFS, LOCK } from '../../test/helpers/cli.ts';
import { fakeToolchain } from '../../test/helpers/fake-toolchain.ts';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const argv = process.argv.slice(2);
const outAt = argv.indexOf('--out');
const out = outAt >= 0 ? argv[outAt + 1]! : path.join(root, 'bench', 'results', 'noop-rerun.md');
const runs = Number(argv.find((a, i) => /^\d+$/.test(a) && argv[i - 1] !== '--out') ?? 5);

const t = fakeToolchain();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'noop-rerun-'));
const nvshmem = path.join(scratch, 'nvshmem');
const deepep = path.join(scratch, 'deepep');
cpSync(path.join(root, 'test/golden/nvshmem/v3.4-like/tree'), nvshmem, { recursive: true });
cpSync(path.join(root, 'test/golden/deepep/v1/tree'), deepep, { recursive: true });
// The release ships transfer_device.cuh, identical to its .in; NVSHMEM's configure overwrites it with the patched .in.
const transferDevice = path.join(nvshmem, 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh');
copyFileSync(`${transferDevice}.in`, transferDevice);
// One GPU shown: build-deepep checks the module by importing it (as on a GPU host), which writes byte code into DeepEP's tree.
const gpuBin = path.join(scratch, 'gpu-bin');
mkdirSync(gpuBin);
writeFileSync(path.join(gpuBin, 'nvidia-smi'), '#!/bin/sh\necho 9.0\n');
chmodSync(path.join(gpuBin, 'nvidia-smi'), 0o755);
// A GDRCopy named by --gdrcopy-home: nothing of GDRCopy is fetched or built in either half.
const gdrcopy = path.join(scratch, 'gdrcopy');
mkdirSync(path.join(gdrcopy, 'include'), { recursive: true });
mkdirSync(path.join(gdrcopy, 'lib'));
writeFileSync(path.join(gdrcopy, 'include/gdrapi.h'), '/* fake */\n');
writeFileSync(path.join(gdrcopy, 'lib/libgdrapi.so'), '');
const env = { ...t.env, PATH: `${gpuBin}:${t.env.PATH}`, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK };
const standalone = path.join(scratch, 'standalone');
execFileSync(process.execPath, [path.join(root, 'scripts', 'bundle.mjs'), '--standalone', standalone], { stdio: 'inherit' });
const BIN = path.join(standalone, 'nvshmem-efa.mjs');

const seconds = (args: string[]): number => {
  const t0 = performance.now();
  execFileSync(process.execPath, [BIN, ...args], { env, stdio: 'ignore' });
  return (performance.now() - t0) / 1000;
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** How many lines the fake toolchain has logged so far: setup.log (a setup.py run each), cmake.log (a cmake run each). */
const logged = (log: string) => (existsSync(path.join(t.root, log)) ? readFileSync(path.join(t.root, log), 'utf8').trim().split('\n').filter(Boolean).length : 0);

type StepRow = { id: string; status: string; reason?: string; ms: number };
interface Pair { first: number; rerun: number; firstSteps: StepRow[]; steps: StepRow[]; setupInRerun: number; cmakeInRerun: number }
const pairs: Pair[] = [];
const startup: number[] = [];
for (let i = 0; i < runs; i++) {
  const work = path.join(scratch, `work-${i}`);
  const args = ['build', '--nvshmem-src', nvshmem, '--deepep-src', deepep, '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome,
    '--gdrcopy-home', gdrcopy, '--efa-io-defs', IO_DEFS, '--jobs', '2'];
  const first = seconds(args);
  const steps = () => (JSON.parse(readFileSync(path.join(work, 'report.json'), 'utf8')) as { steps: StepRow[] }).steps;
  const firstSteps = steps();
  const before = { setup: logged('setup.log'), cmake: logged('cmake.log') };
  const rerun = seconds(args);
  pairs.push({ first, rerun, firstSteps, steps: steps(), setupInRerun: logged('setup.log') - before.setup, cmakeInRerun: logged('cmake.log') - before.cmake });
  startup.push(seconds(['--version']));
  rmSync(work, { recursive: true, force: true });
  process.stderr.write(`pair ${i + 1}/${runs}: first ${first.toFixed(2)} s, rerun ${rerun.toFixed(2)} s\n`);
}

// Every step the first build ran (detect has no stamp: it always runs) must be up to date, and nothing built.
const ran = (p: Pair) => p.firstSteps.filter((s) => s.status === 'done' && s.id !== 'detect').map((s) => s.id);
const noop = pairs.every((p) => p.setupInRerun === 0 && p.cmakeInRerun === 0 && ran(p).length > 0 && ran(p).every((id) => p.steps.find((s) => s.id === id)?.reason === 'up to date'));
const stepIds = pairs[0]!.steps.map((s) => s.id);
const stepMs = (id: string) => median(pairs.map((p) => p.steps.find((s) => s.id === id)?.ms ?? 0));
const lastStatus = (id: string) => {
  const s = pairs.at(-1)!.steps.find((x) => x.id === id)!;
  return s.status === 'skipped' ? `skipped (${s.reason})` : s.status;
};
const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
let commit = 'unknown';
try {
  commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const f = (s: number) => s.toFixed(2);
const md = `# First rerun of \`build\` with DeepEP after a cold build (fake toolchain)

What it measures: a first \`build --deepep-src\` of the miniature NVSHMEM and DeepEP trees (test/golden) on the fake
toolchain (test/helpers/fake-toolchain.ts: cmake and python scripts that compile nothing, so the figures are the
tool's own work: start-up, checks, hashing, stamps), then the same command again with nothing changed, in the same
work dir: the first rerun after the cold build. The fake builds write into the sources as NVSHMEM 3.4.5's and
DeepEP's do (issue 38): NVSHMEM's configure overwrites transfer_device.cuh with the patched transfer_device.cuh.in
and writes its other configure_file() outputs, its build writes git_commit.txt and version.txt, its install
rewrites lib/cmake/nvshmem; DeepEP's setup.py writes build/ and the module, and the import check (a GPU is shown)
writes deep_ep/__pycache__. Each pair runs in a fresh work dir; the ratio is taken pair by pair, and the median of
${runs} pairs is quoted. The rerun must be a no-op: every step the first build ran "up to date", no cmake and no
setup.py run (checked: **${noop ? 'yes' : 'NO'}**; cmake runs in the reruns: ${pairs.map((p) => p.cmakeInRerun).join(', ')};
setup.py runs: ${pairs.map((p) => p.setupInRerun).join(', ')}).

Command: \`npx tsx bench/noop-rerun/run.ts ${runs}\`

Machine: ${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, Node ${process.version};
tree at ${commit} (with the uncommitted changes of the moment); ${new Date().toISOString().slice(0, 10)}. The CLI ran as the
standalone bundle (\`node scripts/bundle.mjs --standalone DIR\`, as docker/Dockerfile builds it), not through tsx.

| measurement | median s | min s | max s |
|---|---|---|---|
| first build | ${f(median(pairs.map((p) => p.first)))} | ${f(Math.min(...pairs.map((p) => p.first)))} | ${f(Math.max(...pairs.map((p) => p.first)))} |
| no-op rerun | ${f(median(pairs.map((p) => p.rerun)))} | ${f(Math.min(...pairs.map((p) => p.rerun)))} | ${f(Math.max(...pairs.map((p) => p.rerun)))} |
| CLI start-up alone (\`--version\`) | ${f(median(startup))} | ${f(Math.min(...startup))} | ${f(Math.max(...startup))} |

**Ratio rerun / first build: ${(median(pairs.map((p) => p.rerun / p.first))).toFixed(3)}** (median of the ${runs} pairs' ratios).

Where the rerun's time goes, each step's time as its report says (a skipped step's time is its stamp):

| step | rerun status | median ms |
|---|---|---|
${stepIds.map((id) => `| ${id} | ${lastStatus(id)} | ${stepMs(id)} |`).join('\n')}

The rest of the rerun is the CLI's start-up (above), the preflight (its \`import torch\` is skipped when the last
DeepEP build imported torch with the same interpreter) and writing the report. On a GPU host, where the builds are
the real ones, this is measured separately.
`;
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, md);
process.stdout.write(md);
rmSync(scratch, { recursive: true, force: true });
