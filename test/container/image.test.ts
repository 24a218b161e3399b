import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, tmp, waitFor } from '../helpers/cli.ts';
import { slurmUnavailable, startSlurm } from '../helpers/slurm.ts';
import { imageBuildArgs, imageTestUnavailable, podman, podmanEnv, prepareStandins, removeStore, STANDIN_CACHE, STANDIN_INSTALLER_VERSION, storeDir, type StandinContexts } from '../helpers/standin-image.ts';

/**
 * docker/Dockerfile, built by rootful podman from stand-ins (docker/standin/make-bases.sh's Debian and Node
 * images, the fake toolchain where the CUDA image has its toolkit, our own EFA installer, GDRCopy and NVSHMEM
 * miniatures as --build-context directories) with --network none, then run with --network none: doctor,
 * patch, the entrypoint's build into a cache volume, its exit code and signals, and the baked image a launcher
 * without ENTRYPOINT (Pyxis/enroot) runs. Everything lives in a podman store of the test's own in a temporary
 * directory (never root's default store), which reads the stand-in bases from make-bases.sh's cache store. .ci/run makes the base images and sets NVSHMEM_EFA_IMAGE_TEST=1,
 * under which a host that cannot run this fails it; elsewhere it is skipped and says why.
 */
const REQUIRED = process.env.NVSHMEM_EFA_IMAGE_TEST === '1';
const UNAVAILABLE = imageTestUnavailable();
if (UNAVAILABLE && !REQUIRED) console.warn(`skipping the image test: ${UNAVAILABLE}`);

const id = `${process.pid}-${Date.now().toString(36)}`;
const IMG = `localhost/nvshmem-efa-test:${id}`;
const BAKED = `localhost/nvshmem-efa-test:${id}-baked`;
const BASE = `localhost/nvshmem-efa-standin/base:${id}`;
const volumes: string[] = [];
const containers: string[] = [];
const logs = tmp('nvshmem-efa-image-logs-');

/** podman run with no network; `entry` replaces the ENTRYPOINT (as a launcher that ignores it does). */
function run(image: string, cmd: string[], o: { entry?: string; volume?: string; env?: Record<string, string>; user?: string; extra?: string[] } = {}) {
  const args = ['run', '--rm', '--network', 'none'];
  if (o.entry) args.push('--entrypoint', o.entry);
  if (o.volume) args.push('-v', `${o.volume}:/cache`);
  if (o.user) args.push('--user', o.user);
  for (const [k, v] of Object.entries(o.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push(...(o.extra ?? []), image, ...cmd);
  return podman(args, { timeout: 300_000 });
}

function volume(): string {
  const v = `nvshmem-efa-test-${id}-${volumes.length}`;
  expect(podman(['volume', 'create', v]).code).toBe(0);
  volumes.push(v);
  return v;
}

describe.skipIf(!!UNAVAILABLE && !REQUIRED)(`docker/Dockerfile on stand-ins, --network none${UNAVAILABLE ? ` [skipped: ${UNAVAILABLE}]` : ''}`, () => {
  let standins: StandinContexts;

  beforeAll(() => {
    if (UNAVAILABLE) throw new Error(`NVSHMEM_EFA_IMAGE_TEST=1 but the image test cannot run here: ${UNAVAILABLE}`);
    standins = prepareStandins(BASE);
    for (const [target, tag] of [['start', IMG], ['baked', BAKED]] as const) {
      const r = podman(imageBuildArgs(standins, target, tag), { timeout: 1_200_000 });
      writeFileSync(path.join(logs, `build-${target}.log`), r.all);
      if (r.code !== 0) throw new Error(`podman build --target ${target} failed (exit ${r.code}); log ${logs}/build-${target}.log:\n${r.all.slice(-4000)}`);
    }
  }, 1_500_000);

  afterAll(() => {
    for (const c of containers) podman(['rm', '-f', c]);
    for (const v of volumes) podman(['volume', 'rm', '-f', v]);
    for (const t of [IMG, BAKED, BASE]) podman(['rmi', '-f', t]);
    const left = removeStore();
    if (left) throw new Error(left);
  }, 120_000);

  it("builds in a podman store of its own in a temporary directory, not in root's default store", () => {
    const info = podman(['info', '--format', '{{.Store.GraphRoot}} {{.Store.RunRoot}}']);
    expect(info.out.trim()).toBe(`${storeDir()}/root ${storeDir()}/run`);
    expect(podman(['image', 'exists', IMG]).code).toBe(0);
    // The default store (no CONTAINERS_STORAGE_CONF) has none of the test's images.
    const env = { ...process.env };
    delete env.CONTAINERS_STORAGE_CONF;
    for (const t of [IMG, BAKED, BASE]) expect(spawnSync('podman', ['image', 'exists', t], { env }).status, t).toBe(1);
    expect(STANDIN_CACHE.startsWith(ROOT + path.sep)).toBe(false);
  });

  it('`IMAGE --help`, `IMAGE doctor` and `IMAGE env` answer at once, without the build (issue 39 item 8)', () => {
    const v = volume();
    const help = run(IMG, ['--help'], { volume: v });
    expect(help.code, help.all).toBe(0);
    expect(help.out).toContain('Usage: nvshmem-efa');
    expect(help.all).not.toMatch(/Configure, build and install NVSHMEM|nvshmem-efa entrypoint:/);
    const doctor = run(IMG, ['doctor', '--json'], { volume: v });
    expect(doctor.all).not.toMatch(/Configure, build and install NVSHMEM/);
    expect(JSON.parse(doctor.out).schema).toMatch(/doctor/);
    // No build in the volume yet: env says so about the entrypoint's work dir, which the CLI read from NVSHMEM_EFA_WORK_DIR.
    const env = run(IMG, ['env'], { volume: v });
    expect(env.code).toBe(4); // no build in the work dir: exit 4, as every command says it (docs/cli.md)
    expect(env.err).toContain('no report in /cache/nvshmem-efa');
  });

  it('installs the EFA installer (container flags) and GDRCopy user library, and runs as uid 1000', () => {
    const r = run(IMG, ['-c', 'cat /opt/amazon/efa/standin-installer-args; ls /opt/gdrcopy/lib /opt/gdrcopy/include; id -u; ls /opt/nvshmem-efa-src'], { entry: '/bin/bash' });
    expect(r.code, r.all).toBe(0);
    expect(r.out).toContain('-y --skip-kmod --skip-limit-conf --no-verify');
    expect(r.out).toMatch(/libgdrapi\.so\.2\b/);
    expect(r.out).toContain('gdrapi.h');
    expect(r.out).toMatch(/^1000$/m);
    // No DeepEP without WITH_DEEPEP=1: the entrypoint builds it only when its tree is there.
    expect(r.out).toContain('efa_io_defs.h');
    expect(r.out).not.toContain('DeepEP');
  });

  it('doctor runs offline and sees the CUDA toolkit, the installer libfabric and GDRCopy', () => {
    // The host's CUDA toolkit over the stand-in's, as a read-only volume, when this host has one.
    const cuda = existsSync('/usr/local/cuda/bin/nvcc') ? ['-v', '/usr/local/cuda:/usr/local/cuda:ro'] : [];
    const r = run(IMG, ['doctor'], { entry: '/usr/local/bin/nvshmem-efa', extra: cuda });
    expect(r.all).not.toMatch(/ENOENT|Cannot find module|at .*\.mjs:\d+/);
    expect(r.all).toMatch(/nvcc|CUDA/);
    expect(r.all).toContain('/opt/amazon/efa');
    expect(r.all).toContain('/opt/gdrcopy');
    expect([0, 1]).toContain(r.code);
  });

  it('patch works on the image sources with no network', () => {
    const r = run(IMG, ['patch', '--nvshmem-src', '/opt/nvshmem-efa-src/nvshmem', '--work-dir', '/tmp/w', '--efa-io-defs', '/opt/nvshmem-efa-src/efa_io_defs.h'], { entry: '/usr/local/bin/nvshmem-efa' });
    expect(r.code, r.all).toBe(0);
    expect(r.all).toMatch(/patch/i);
  });

  it('the entrypoint builds into the cache volume, exports the environment, passes the exit code; a rerun builds nothing', () => {
    const v = volume();
    const cmd = ['bash', '-c', 'echo "T=$NVSHMEM_REMOTE_TRANSPORT"; echo "L=$LD_LIBRARY_PATH"; exit 7'];
    const first = run(IMG, cmd, { volume: v });
    writeFileSync(path.join(logs, 'entrypoint-first.log'), first.all);
    expect(first.code, first.all).toBe(7);
    expect(first.out).toContain('T=libfabric');
    expect(first.out).toMatch(/L=\/cache\/nvshmem-efa\/install\/nvshmem\/lib:/);
    expect(first.out).toContain('/opt/gdrcopy/lib');
    // The build's summary goes to stderr; stdout is the command's alone.
    expect(first.out).not.toMatch(/Configure, build and install NVSHMEM|run-time environment/);
    expect(first.err).toMatch(/✔ Configure, build and install NVSHMEM/);
    const again = run(IMG, cmd, { volume: v });
    writeFileSync(path.join(logs, 'entrypoint-again.log'), again.all);
    expect(again.code, again.all).toBe(7);
    expect(again.err).toContain('Configure, build and install NVSHMEM [SKIPPED: up to date]');
    expect(again.err).not.toMatch(/✔ Configure, build and install NVSHMEM/);
  });

  it('a TERM to the container reaches the command (exec), and one during the build stops it with 130', async () => {
    const v = volume();
    expect(run(IMG, ['true'], { volume: v }).code).toBe(0);
    // After a build: the command is PID 1's exec, so `podman stop` ends it at once with TERM's status.
    const c1 = `nvshmem-efa-test-${id}-sleep`;
    containers.push(c1);
    expect(podman(['run', '-d', '--name', c1, '--network', 'none', '-v', `${v}:/cache`, '-e', 'NVSHMEM_EFA_SKIP_BUILD=1', IMG, 'sleep', '300']).code).toBe(0);
    await waitFor('the sleep to start', () => podman(['exec', c1, 'pgrep', '-x', 'sleep']).code === 0);
    const t0 = Date.now();
    podman(['stop', '-t', '30', c1]);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(podman(['inspect', '-f', '{{.State.ExitCode}}', c1]).out.trim()).toBe('143');
    // During a build (the fake compiler hangs): the entrypoint passes TERM on; the build stops its tools, exits 130.
    const v2 = volume();
    const c2 = `nvshmem-efa-test-${id}-hang`;
    containers.push(c2);
    expect(podman(['run', '-d', '--name', c2, '--network', 'none', '-v', `${v2}:/cache`, '-e', 'FAKE_HANG=build', IMG, 'true']).code).toBe(0);
    await waitFor('the fake build to hang', () => podman(['exec', c2, 'test', '-s', '/tmp/grandchild']).code === 0, 120_000);
    podman(['kill', '-s', 'TERM', c2]);
    const w = podman(['wait', c2], { timeout: 60_000 });
    expect(w.out.trim()).toBe('130');
    expect(podman(['logs', c2]).all).toMatch(/interrupted|130/);
  });

  it('the baked image: the build is in the image, its environment reaches bash without the ENTRYPOINT (as under Pyxis, as root)', () => {
    const noEntry = run(BAKED, ['-c', 'echo "T=$NVSHMEM_REMOTE_TRANSPORT"; echo "L=$LD_LIBRARY_PATH"; test -f /opt/nvshmem-efa-build/install/nvshmem/lib/libnvshmem_host.so && echo built'], { entry: '/bin/bash', user: '0' });
    expect(noEntry.code, noEntry.all).toBe(0);
    expect(noEntry.out).toContain('T=libfabric');
    expect(noEntry.out).toMatch(/L=\/opt\/nvshmem-efa-build\/install\/nvshmem\/lib:/);
    expect(noEntry.out).toContain('built');
    // BASH_ENV is read by every non-interactive bash, nested ones too: the library path is prepended once, not once per level.
    const nested = run(BAKED, ['-c', 'echo "$LD_LIBRARY_PATH"; bash -c \'bash -c "echo \\$LD_LIBRARY_PATH"\''], { entry: '/bin/bash', user: '0' });
    const [outer, inner] = nested.out.trim().split('\n');
    expect(nested.code, nested.all).toBe(0);
    expect(inner).toBe(outer);
    // docker run: the entrypoint finds the build done and does not build (no network, no cache volume needed).
    const withEntry = run(BAKED, ['bash', '-c', 'echo "T=$NVSHMEM_REMOTE_TRANSPORT"']);
    expect(withEntry.code, withEntry.all).toBe(0);
    expect(withEntry.out).toContain('T=libfabric');
    expect(withEntry.err).not.toMatch(/Configure, build and install NVSHMEM/);
  });

  const SLURM_SKIP = slurmUnavailable();
  it.skipIf(!!SLURM_SKIP)(`examples/slurm/deepep-pyxis.sbatch under a real Slurm, with a stand-in for Pyxis (podman, no ENTRYPOINT, as root)${SLURM_SKIP ? ` [skipped: ${SLURM_SKIP}]` : ''}`, async () => {
    // Pyxis itself is not here (a SPANK plugin for enroot): an `srun` in front of Slurm's takes the
    // --container-* options off and runs the task's command in the image with podman, as enroot would.
    const realSrun = spawnSync('sh', ['-c', 'command -v srun'], { encoding: 'utf8' }).stdout.trim();
    const bin = tmp('nvshmem-efa-pyxis-');
    mkdirSync(bin, { recursive: true });
    const penv = podmanEnv();
    writeFileSync(path.join(bin, 'srun'), `#!/bin/bash
# Stand-in for Pyxis (test fixture): --container-image and --container-mounts run the command in that image.
# The test's own podman store and settings, whatever environment Slurm gives the job.
export CONTAINERS_CONF='${penv.CONTAINERS_CONF}' CONTAINERS_STORAGE_CONF='${penv.CONTAINERS_STORAGE_CONF}'
args=(); cmd=(); image=; mounts=
for a in "$@"; do
  if [ \${#cmd[@]} -gt 0 ]; then cmd+=("$a"); continue; fi
  case "$a" in
    --container-image=*) image=\${a#*=} ;;
    --container-mounts=*) mounts=\${a#*=} ;;
    --container-*|--no-container-*) echo "pyxis stand-in: $a is not handled here" >&2; exit 2 ;;
    -*) args+=("$a") ;;
    *) cmd+=("$a") ;;
  esac
done
[ -n "$image" ] || exec ${realSrun} "$@"
vols=(); IFS=, read -r -a ms <<< "$mounts"; for m in "\${ms[@]}"; do vols+=(-v "$m"); done
# In the task: podman's containers get the task's own limits (more is refused), nproc at most conmon's 32768.
exec ${realSrun} "\${args[@]}" bash -c 'cap() { [ "$1" = unlimited ] || [ "$1" -gt 32768 ] && echo 32768 || echo "$1"; }; exec podman run --rm --network none --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$(cap "$(ulimit -Su)"):$(cap "$(ulimit -Hu)")" --user 0 --entrypoint /usr/bin/env --env "SLURM_*" --env PAYLOAD --env PAYLOAD_ARGS --env MASTER_ADDR --env MASTER_PORT "$@"' _ "\${vols[@]}" "$image" "\${cmd[@]}"
`, { mode: 0o755 });
    // The jobs' podman uses the same containers.conf (runc, limits) as the rest of this test.
    const slurm = await startSlurm({ ...podmanEnv(), PATH: `${bin}:${process.env.PATH}` });
    try {
      const script = path.join(ROOT, 'examples/slurm/deepep-pyxis.sbatch');
      const ok = await slurm.submit(script, ['-N', '1', '--ntasks-per-node', '2'], { CONTAINER_IMAGE: BAKED, PAYLOAD: 'doctor', CONTAINER_MOUNTS: `${logs}:/results` });
      writeFileSync(path.join(logs, 'pyxis-doctor.log'), ok.output);
      expect(ok.state, ok.output).toBe('COMPLETED');
      expect(ok.output).toContain(`job ${ok.id}: 1 node(s), 2 task(s), payload doctor, image ${BAKED}`);
      for (const task of [0, 1]) expect(ok.output).toMatch(new RegExp(`task ${task}/2 on \\S+ in the image: node 0 of 1, 0 GPUs, build /opt/nvshmem-efa-build, transport libfabric, GDA 1`));
      expect(ok.output.match(/^pass\s+NVSHMEM_REMOTE_TRANSPORT\s+libfabric$/gm)).toHaveLength(2);
      // The image that builds at start has no baked environment: refused, saying which target to build.
      const bad = await slurm.submit(script, ['-N', '1', '--ntasks-per-node', '1'], { CONTAINER_IMAGE: IMG, PAYLOAD: 'doctor' });
      expect(bad.state, bad.output).toBe('FAILED');
      expect(bad.output).toContain('no baked build environment');
    } finally {
      await slurm.stop();
    }
  }, 600_000);

  it('reports the stand-in installer version it found', () => {
    const r = run(BAKED, ['report', '--work-dir', '/opt/nvshmem-efa-build'], { entry: '/usr/local/bin/nvshmem-efa' });
    expect(r.code, r.all).toBe(0);
    expect(r.all).toContain(STANDIN_INSTALLER_VERSION);
  });
});
