import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, IO_DEFS, LOCK, ROOT, stepStatus, tmp, waitFor } from '../helpers/cli.ts';
import { fakeToolchain, hungPids } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * docker/entrypoint.sh with a stand-in build: the real CLI driving the fake toolchain (cmake and python
 * scripts that build nothing, or hang) on the miniature NVSHMEM tree. What is checked is the entrypoint's
 * contract: exec, signals, exit codes, environment, and the cache.
 */
const ENTRYPOINT = path.join(ROOT, 'docker/entrypoint.sh');

interface Started {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number>;
}
const running: Started[] = [];
afterEach(() => {
  for (const r of running.splice(0)) {
    try {
      process.kill(-r.child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
});

function setup(o: { slowBuild?: boolean; failBuild?: boolean } = {}) {
  const t = fakeToolchain();
  const src = materialize('v3.4-like');
  const work = path.join(tmp('nvshmem-efa-cache-'), 'nvshmem-efa');
  // Wrappers in front of the fake cmake: a build step that takes a while, or fails.
  const bin = tmp('nvshmem-efa-wrap-');
  if (o.slowBuild || o.failBuild) {
    const act = o.failBuild ? 'echo "error: the compiler failed"; exit 1' : 'sleep 3';
    writeFileSync(path.join(bin, 'cmake'), `#!/bin/sh\ncase "$1" in --build) ${act} ;; esac\nexec ${t.bin}/cmake "$@"\n`, { mode: 0o755 });
  }
  const env: NodeJS.ProcessEnv = {
    ...t.env,
    PATH: `${bin}:${t.bin}:${path.dirname(process.execPath)}:${process.env.PATH}`,
    NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK,
    NVSHMEM_EFA_BIN: BIN,
    NVSHMEM_EFA_WORK_DIR: work,
    NVSHMEM_EFA_BUILD_ARGS: `--nvshmem-src ${src} --cuda-home ${t.cudaHome} --libfabric-home ${t.libfabricHome} --efa-io-defs ${IO_DEFS}`,
  };
  delete env.LIBFABRIC_HOME;
  return { t, src, work, env };
}

function start(cmd: string[], env: NodeJS.ProcessEnv): Started {
  const child = spawn('bash', [ENTRYPOINT, ...cmd], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number>((resolve) => child.on('close', (code, sig) => resolve(code ?? 128 + (sig ? os.constants.signals[sig] : 0))));
  const r = { child, out: () => out, err: () => err, exited };
  running.push(r);
  return r;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('docker/entrypoint.sh', () => {
  it('builds into the cache, exports the build\'s environment (the container\'s own values win), execs the command and exits with its status', async () => {
    const { work, env } = setup();
    const r = start(['sh', '-c', 'echo "pid=$$"; echo "transport=$NVSHMEM_REMOTE_TRANSPORT gda=$NVSHMEM_EFA_GDA_ENABLE user=$USER_SETTING"; echo "ld=$LD_LIBRARY_PATH"; exit 42'], { ...env, USER_SETTING: 'kept', NVSHMEM_EFA_GDA_ENABLE: '1', LD_LIBRARY_PATH: '/user/lib' });
    expect(await r.exited, r.err()).toBe(42);
    // exec: the command is the entrypoint's process itself, not a child of it.
    expect(r.out()).toContain(`pid=${r.child.pid}`);
    expect(r.out()).toContain('transport=libfabric gda=1 user=kept');
    expect(r.out()).toMatch(new RegExp(`^ld=${work}/install/nvshmem/lib:.*:/user/lib$`, 'm'));
    // The build's own output went to stderr; stdout is the command's.
    expect(r.out()).not.toMatch(/Detect build environment|report:/);
    expect(r.err()).toMatch(/Configure, build and install NVSHMEM/);
    expect(stepStatus(work)['build-nvshmem']).toBe('done');
  });

  it('a fresh cache is a no-op build; a changed source tree (a stale cache) is rebuilt', async () => {
    const { src, work, env } = setup();
    expect(await start(['true'], env).exited).toBe(0);
    const again = start(['true'], env);
    expect(await again.exited, again.err()).toBe(0);
    const s = stepStatus(work);
    expect(Object.entries(s).filter(([id, st]) => id !== 'detect' && st === 'done')).toEqual([]);
    expect(s['build-nvshmem']).toBe('skipped');
    const f = path.join(src, 'src/modules/transport/libfabric/libfabric.cpp');
    writeFileSync(f, readFileSync(f, 'utf8') + '\n// changed\n');
    expect(await start(['true'], env).exited).toBe(0);
    expect(stepStatus(work)).toMatchObject({ 'get-nvshmem': 'done', 'patch-nvshmem': 'done', 'build-nvshmem': 'done' });
  });

  it('a failed build: exit with the build\'s status, the report path on stderr, the command never runs', async () => {
    const { work, env } = setup({ failBuild: true });
    const r = start(['sh', '-c', 'echo RAN'], env);
    expect(await r.exited).toBe(1);
    expect(r.out()).not.toContain('RAN');
    expect(r.err()).toContain(`nvshmem-efa entrypoint: build failed (exit 1); report: ${work}/report.md`);
  });

  it('NVSHMEM_EFA_SKIP_BUILD=1 without a build: exit 1 naming the report, the command never runs', async () => {
    const { work, env } = setup();
    const r = start(['sh', '-c', 'echo RAN'], { ...env, NVSHMEM_EFA_SKIP_BUILD: '1' });
    expect(await r.exited).toBe(1);
    expect(r.out()).not.toContain('RAN');
    expect(r.err()).toContain(`no usable build in ${work}`);
  });

  it('SIGTERM to the exec\'d command: it gets the signal and its exit status is the container\'s', async () => {
    const { env } = setup();
    const r = start(['sh', '-c', 'trap "echo got-TERM; exit 77" TERM; echo ready; while :; do sleep 0.1; done'], env);
    await waitFor('the command to start', () => r.out().includes('ready'));
    process.kill(r.child.pid!, 'SIGTERM');
    expect(await r.exited).toBe(77);
    expect(r.out()).toContain('got-TERM');
  });

  it('SIGTERM during the build: passed on, the build stops its commands and the entrypoint exits 130 without running the command', async () => {
    const { t, env } = setup();
    const r = start(['sh', '-c', 'echo RAN'], { ...env, FAKE_HANG: 'build' });
    await waitFor('the build to hang', () => hungPids(t).length === 3, 60_000);
    const pids = hungPids(t);
    process.kill(r.child.pid!, 'SIGTERM');
    expect(await r.exited).toBe(130);
    expect(r.out()).not.toContain('RAN');
    expect(r.err()).toContain('build failed (exit 130)');
    await waitFor('the hung build to be stopped', () => pids.every((p) => !alive(p)), 10_000);
  });

  it('two containers on one cache volume: the second waits for the first one\'s build, then both run', async () => {
    const { work, env } = setup({ slowBuild: true });
    const a = start(['sh', '-c', 'echo A-ran'], env);
    await waitFor('the first build to take the lock', () => /Configure, build and install NVSHMEM/.test(a.err()), 60_000);
    const b = start(['sh', '-c', 'echo B-ran'], env);
    const [ca, cb] = await Promise.all([a.exited, b.exited]);
    expect([ca, cb], a.err() + b.err()).toEqual([0, 0]);
    expect(a.out()).toContain('A-ran');
    expect(b.out()).toContain('B-ran');
    expect(b.err()).toContain(`another run is building in ${work}; waiting for it`);
  });
});
