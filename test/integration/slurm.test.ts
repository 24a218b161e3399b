import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cli, IO_DEFS, LOCK, ROOT, tmp, waitFor } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * examples/slurm/deepep-tests.sbatch under a real Slurm: Debian's slurmctld and slurmd (and munged) started
 * here on localhost with a configuration this test writes, the script submitted with sbatch, its 2-task path
 * run on the CPU with `nvshmem-efa doctor` as the payload (and a payload of our own). Everything checked is
 * printed by the tasks Slurm started, so the test fails if Slurm did not run them. .ci/run installs the
 * packages; without them, or without root (munged and slurmd run as root here), the tests are skipped and say why.
 */
const SCRIPT = path.join(ROOT, 'examples/slurm/deepep-tests.sbatch');
const which = (c: string) => spawnSync('sh', ['-c', `command -v ${c}`]).status === 0;
const missing = ['slurmctld', 'slurmd', 'munged', 'sbatch', 'srun', 'scontrol'].filter((c) => !which(c));
const SKIP = missing.length
  ? `no ${missing.join(', ')} (apt-get install slurm-wlm munge, or run .ci/run, which installs them)`
  : process.getuid?.() !== 0
    ? 'not root: this test starts munged and slurmd itself'
    : undefined;
if (SKIP) console.warn(`skipping the Slurm test: ${SKIP}`);

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

describe.skipIf(!!SKIP)(`examples/slurm/deepep-tests.sbatch on a single-host Slurm${SKIP ? ` [skipped: ${SKIP}]` : ''}`, () => {
  const dir = tmp('nvshmem-efa-slurm-');
  const daemons: ChildProcess[] = [];
  let env: NodeJS.ProcessEnv;
  const host = os.hostname();
  const t = fakeToolchain();
  const work = path.join(tmp(), 'work');

  const daemon = (cmd: string, args: string[], log: string) => {
    const fd = openSync(path.join(dir, log), 'a');
    const p = spawn(cmd, args, { env, stdio: ['ignore', fd, fd], detached: true });
    daemons.push(p);
    return p;
  };

  beforeAll(async () => {
    for (const d of ['munge', 'state', 'spool', 'log', 'jobs']) mkdirSync(path.join(dir, d), { recursive: true });
    // munged wants its key private and the socket's folder reachable.
    mkdirSync(path.join(dir, 'munge-key'), { mode: 0o700 });
    chmodSync(path.join(dir, 'munge'), 0o755);
    const key = path.join(dir, 'munge-key/munge.key');
    writeFileSync(key, Buffer.from(Array.from({ length: 1024 }, () => Math.floor(Math.random() * 256))), { mode: 0o400 });
    const sock = path.join(dir, 'munge/munge.sock');
    const [ctldPort, slurmdPort] = [await freePort(), await freePort()];
    const conf = path.join(dir, 'slurm.conf');
    writeFileSync(conf, [
      'ClusterName=nvefatest',
      `SlurmctldHost=${host}(127.0.0.1)`,
      'SlurmUser=root',
      'SlurmdUser=root',
      `SlurmctldPort=${ctldPort}`,
      `SlurmdPort=${slurmdPort}`,
      'AuthType=auth/munge',
      'CredType=cred/munge',
      `AuthInfo=socket=${sock}`,
      `StateSaveLocation=${dir}/state`,
      `SlurmdSpoolDir=${dir}/spool`,
      `SlurmctldPidFile=${dir}/slurmctld.pid`,
      `SlurmdPidFile=${dir}/slurmd.pid`,
      `SlurmctldLogFile=${dir}/log/slurmctld.log`,
      `SlurmdLogFile=${dir}/log/slurmd.log`,
      // No cgroups in a container: process groups track the tasks.
      'ProctrackType=proctrack/pgid',
      'TaskPlugin=task/none',
      'JobAcctGatherType=jobacct_gather/none',
      'AccountingStorageType=accounting_storage/none',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_CPU',
      'MpiDefault=none',
      'ReturnToService=2',
      'KillWait=5',
      `NodeName=${host} NodeAddr=127.0.0.1 CPUs=${Math.max(2, os.availableParallelism())} State=UNKNOWN`,
      `PartitionName=ci Nodes=${host} Default=YES MaxTime=10 State=UP`,
      '',
    ].join('\n'));
    env = { ...t.env, SLURM_CONF: conf, PATH: `${t.bin}:${path.dirname(process.execPath)}:${process.env.PATH}` };
    delete env.LIBFABRIC_HOME;
    daemon('munged', ['--force', '-F', `--key-file=${key}`, `--socket=${sock}`, `--pid-file=${dir}/munge/munged.pid`, `--log-file=${dir}/log/munged.log`, `--seed-file=${dir}/munge/seed`], 'munged.out');
    await waitFor('munged', () => existsSync(sock), 20_000);
    daemon('slurmctld', ['-D', '-f', conf], 'slurmctld.out');
    daemon('slurmd', ['-D', '-f', conf, '-N', host], 'slurmd.out');
    const idle = () => spawnSync('sinfo', ['-h', '-o', '%t'], { env, encoding: 'utf8' }).stdout.trim();
    await waitFor(`the node to be idle (sinfo says '${idle()}'; logs in ${dir}/log)`, () => idle() === 'idle', 60_000);

    // A build to launch on: the stand-in (fake toolchain) build of the miniature NVSHMEM tree.
    const b = cli(['build', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, '--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS], { ...env, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK });
    expect(b.code, b.stderr).toBe(0);
  }, 120_000);

  afterAll(async () => {
    // Only the daemons this test started, by their pids; munged last (slurmd needs it to shut down).
    for (const d of [...daemons].reverse()) {
      try {
        process.kill(d.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      await new Promise((r) => setTimeout(r, 300));
      try {
        process.kill(-d.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });

  /** sbatch the script and wait for the job to end; its state, exit code and output. */
  async function submit(extraEnv: NodeJS.ProcessEnv, args: string[]) {
    const out = path.join(dir, 'jobs', `job-${Date.now()}.out`);
    const nvefa = path.join(dir, 'nvshmem-efa');
    writeFileSync(nvefa, `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
    const s = execFileSync('sbatch', ['--parsable', '--output', out, '--chdir', dir, ...args, SCRIPT], {
      env: { ...env, NVSHMEM_EFA: nvefa, NVSHMEM_EFA_WORK_DIR: work, ...extraEnv },
      encoding: 'utf8',
    }).trim();
    const id = s.split(';')[0]!;
    let info = '';
    await waitFor(`job ${id} to end`, () => {
      info = spawnSync('scontrol', ['show', 'job', '-o', id], { env, encoding: 'utf8' }).stdout;
      return /JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)/.test(info);
    }, 120_000);
    return { id, state: /JobState=(\S+)/.exec(info)![1], exit: /ExitCode=(\S+)/.exec(info)![1], output: existsSync(out) ? readFileSync(out, 'utf8') : '' };
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
