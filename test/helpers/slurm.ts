import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { tmp, waitFor } from './cli.ts';

/**
 * A real single-host Slurm for the batch scripts' tests: Debian's munged, slurmctld and slurmd started on
 * localhost with a configuration written here, stopped by pid. .ci/run installs the packages; without them, or
 * without root (munged and slurmd run as root here), `slurmUnavailable` says why.
 */
const which = (c: string) => spawnSync('sh', ['-c', `command -v ${c}`]).status === 0;

export function slurmUnavailable(): string | undefined {
  const missing = ['slurmctld', 'slurmd', 'munged', 'sbatch', 'srun', 'scontrol'].filter((c) => !which(c));
  if (missing.length) return `no ${missing.join(', ')} (apt-get install slurm-wlm munge, or run .ci/run, which installs them)`;
  if (process.getuid?.() !== 0) return 'not root: this test starts munged and slurmd itself';
  return undefined;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

export interface Job {
  id: string;
  state: string;
  exit: string;
  output: string;
}

export interface Slurm {
  /** Where its state, logs and job outputs live. */
  dir: string;
  host: string;
  /** The environment with SLURM_CONF for sbatch/srun/scontrol. */
  env: NodeJS.ProcessEnv;
  /** sbatch a script and wait for the job to end. */
  submit(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<Job>;
  stop(): Promise<void>;
}

export async function startSlurm(baseEnv: NodeJS.ProcessEnv): Promise<Slurm> {
  const dir = tmp('nvshmem-efa-slurm-');
  const host = os.hostname();
  const daemons: ChildProcess[] = [];
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
  const env: NodeJS.ProcessEnv = { ...baseEnv, SLURM_CONF: conf };
  const daemon = (cmd: string, args: string[], log: string) => {
    const fd = openSync(path.join(dir, log), 'a');
    daemons.push(spawn(cmd, args, { env, stdio: ['ignore', fd, fd], detached: true }));
  };
  daemon('munged', ['--force', '-F', `--key-file=${key}`, `--socket=${sock}`, `--pid-file=${dir}/munge/munged.pid`, `--log-file=${dir}/log/munged.log`, `--seed-file=${dir}/munge/seed`], 'munged.out');
  await waitFor('munged', () => existsSync(sock), 20_000);
  daemon('slurmctld', ['-D', '-f', conf], 'slurmctld.out');
  daemon('slurmd', ['-D', '-f', conf, '-N', host], 'slurmd.out');
  const idle = () => spawnSync('sinfo', ['-h', '-o', '%t'], { env, encoding: 'utf8' }).stdout.trim();
  await waitFor(`the node to be idle (sinfo says '${idle()}'; logs in ${dir}/log)`, () => idle() === 'idle', 60_000);

  return {
    dir,
    host,
    env,
    async submit(script, args, jobEnv) {
      const out = path.join(dir, 'jobs', `job-${Date.now()}.out`);
      const s = execFileSync('sbatch', ['--parsable', '--output', out, '--chdir', dir, ...args, script], { env: { ...env, ...jobEnv, SLURM_CONF: conf }, encoding: 'utf8' }).trim();
      const id = s.split(';')[0]!;
      let info = '';
      await waitFor(`job ${id} to end`, () => {
        info = spawnSync('scontrol', ['show', 'job', '-o', id], { env, encoding: 'utf8' }).stdout;
        return /JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)/.test(info);
      }, 180_000);
      return { id, state: /JobState=(\S+)/.exec(info)![1]!, exit: /ExitCode=(\S+)/.exec(info)![1]!, output: existsSync(out) ? readFileSync(out, 'utf8') : '' };
    },
    async stop() {
      // Only the daemons started here, by their pids; munged last (slurmd needs it to shut down).
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
    },
  };
}
