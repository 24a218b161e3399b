import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cli, IO_DEFS, LOCK, ROOT, tmp } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';
import { slurmUnavailable, startSlurm, type Slurm } from '../helpers/slurm.ts';

/**
 * examples/slurm/deepep-tests.sbatch under a real Slurm (test/helpers/slurm.ts: Debian's slurmctld and slurmd,
 * and munged, started here on localhost), the script submitted with sbatch, its 2-task path run on the CPU
 * with `nvshmem-efa doctor` as the payload (and a payload of our own). Everything checked is printed by the
 * tasks Slurm started, so the test fails if Slurm did not run them. Without the packages or root, the tests are
 * skipped and say why.
 */
const SCRIPT = path.join(ROOT, 'examples/slurm/deepep-tests.sbatch');
const SKIP = slurmUnavailable();
if (SKIP) console.warn(`skipping the Slurm test: ${SKIP}`);

describe.skipIf(!!SKIP)(`examples/slurm/deepep-tests.sbatch on a single-host Slurm${SKIP ? ` [skipped: ${SKIP}]` : ''}`, () => {
  let slurm: Slurm;
  let dir: string;
  let host: string;
  let env: NodeJS.ProcessEnv;
  const t = fakeToolchain();
  const work = path.join(tmp(), 'work');

  beforeAll(async () => {
    env = { ...t.env, PATH: `${t.bin}:${path.dirname(process.execPath)}:${process.env.PATH}` };
    delete env.LIBFABRIC_HOME;
    slurm = await startSlurm(env);
    ({ dir, host, env } = slurm);

    // A build to launch on: the stand-in (fake toolchain) build of the miniature NVSHMEM tree.
    const b = cli(['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS], { ...env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK });
    expect(b.code, b.stderr).toBe(0);
  }, 120_000);

  afterAll(() => slurm?.stop());

  /** sbatch the script and wait for the job to end; its state, exit code and output. */
  function submit(extraEnv: NodeJS.ProcessEnv, args: string[]) {
    const nvefa = path.join(dir, 'nvshmem-efa');
    writeFileSync(nvefa, `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
    return slurm.submit(SCRIPT, args, { NVSHMEM_EFA: nvefa, NVSHMEM_EFA_WORK_DIR: work, ...extraEnv });
  }

  it('the 2-task path: Slurm runs nvshmem-efa doctor in both tasks with the build\'s run-time environment', async () => {
    const job = await submit({ PAYLOAD: 'doctor', PAYLOAD_ARGS: `--cuda-home ${t.cudaHome} --libfabric-home ${t.libfabricHome}` }, ['-N', '1', '--ntasks-per-node', '2']);
    expect(job.state, job.output).toBe('COMPLETED');
    expect(job.exit).toBe('0:0');
    expect(job.output).toContain(`job ${job.id}: 1 node(s), 2 task(s), payload doctor, build ${work}`);
    for (const task of [0, 1]) expect(job.output).toContain(`task ${task}/2 on ${host}: node 0 of 1, 0 GPUs, transport libfabric, GDA 0`);
    // doctor, in each task, sees what `nvshmem-efa env` exported there.
    expect(job.output.match(/^pass\s+NVSHMEM_REMOTE_TRANSPORT\s+libfabric$/gm)).toHaveLength(2);
    expect(job.output.match(/^pass\s+FI_EFA_ENABLE_SHM_TRANSFER\s+0$/gm)).toHaveLength(2);
    expect(job.output.match(/^verdict: /gm)).toHaveLength(2);
  });

  it('a payload of one\'s own runs in every task with the same environment (EFA settings, the build\'s library path)', async () => {
    const payload = path.join(dir, 'payload.sh');
    writeFileSync(payload, '#!/bin/sh\necho "payload rank=$SLURM_PROCID args=$* provider=$FI_PROVIDER order=$CUDA_DEVICE_ORDER ld=$LD_LIBRARY_PATH"\n', { mode: 0o755 });
    const job = await submit({ PAYLOAD: payload, PAYLOAD_ARGS: 'wire-test --quick' }, ['-N', '1', '--ntasks-per-node', '2']);
    expect(job.state, job.output).toBe('COMPLETED');
    for (const rank of [0, 1]) expect(job.output).toContain(`payload rank=${rank} args=wire-test --quick provider=efa order=PCI_BUS_ID ld=${work}/install/nvshmem/lib:`);
  });

  it('a job on a build that is not there fails before any task starts, naming the report', async () => {
    const job = await submit({ PAYLOAD: 'doctor', NVSHMEM_EFA_WORK_DIR: path.join(dir, 'no-build') }, ['-N', '1', '--ntasks-per-node', '2']);
    expect(job.state).toBe('FAILED');
    expect(job.output).toMatch(/error: no report in .*no-build/);
    expect(job.output).not.toMatch(/^task \d/m);
  });
});
