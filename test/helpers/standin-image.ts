import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IO_DEFS, LOCK, ROOT } from './cli.ts';
import { fakeGdrcopyTree } from './fake-gdrcopy.ts';
import { fakeToolchain } from './fake-toolchain.ts';
import { materialize } from './golden.ts';

/**
 * Stand-ins for building docker/Dockerfile with no registry and no network: a base image (Debian from
 * docker/standin/make-bases.sh, plus the fake toolchain where the CUDA devel image has its toolkit), and a
 * directory for each download stage, passed with --build-context. Written by the test, never the real sources.
 */
export const STANDIN = {
  debian: 'localhost/nvshmem-efa-standin/debian:bookworm',
  node: 'localhost/nvshmem-efa-standin/node:20',
};
export const CONTAINERS_CONF = path.join(ROOT, 'docker/standin/containers.conf');
/**
 * Where docker/standin/make-bases.sh keeps the stand-in base images: a podman store of their own (images/, run/)
 * and its downloads, outside the checkout and outside root's default store (NVSHMEM_EFA_STANDIN_CACHE moves it).
 */
export const STANDIN_CACHE = process.env.NVSHMEM_EFA_STANDIN_CACHE ?? path.join(os.homedir(), '.cache/nvshmem-efa/standin');

/**
 * The test's own podman storage, in a temporary directory (issue 39 item 9): what it builds, runs and mounts
 * never lands in root's default store (/var/lib/containers/storage), and is gone with the directory. The stand-in
 * bases are read from the cache store as an additional, read-only image store: nothing is copied. libpod's own
 * state (tmp_dir, its database, volumes) goes there too, through a containers.conf of its own.
 */
function makeStore(): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-podman-'));
  const storage = path.join(dir, 'storage.conf');
  writeFileSync(
    storage,
    ['[storage]', 'driver = "overlay"', `graphroot = "${dir}/root"`, `runroot = "${dir}/run"`, '[storage.options]', `additionalimagestores = ["${STANDIN_CACHE}/images"]`, ''].join('\n'),
  );
  const conf = path.join(dir, 'containers.conf');
  writeFileSync(conf, readFileSync(CONTAINERS_CONF, 'utf8').replace(/^\[engine\]$/m, `[engine]\ntmp_dir = "${dir}/tmp"\nvolume_path = "${dir}/volumes"`));
  return { dir, env: { CONTAINERS_CONF: conf, CONTAINERS_STORAGE_CONF: storage } };
}
let store: ReturnType<typeof makeStore> | undefined;
const theStore = () => (store ??= makeStore());
/** The temporary store's directory (removed by removeStore). */
export const storeDir = () => theStore().dir;
/** The environment every podman of the test runs with (the Slurm jobs' podman included). */
export const podmanEnv = (): NodeJS.ProcessEnv => ({ ...process.env, ...theStore().env });

export function podman(args: string[], o: { timeout?: number } = {}) {
  const r = spawnSync('podman', args, { env: podmanEnv(), encoding: 'utf8', timeout: o.timeout ?? 600_000, maxBuffer: 64 << 20 });
  return { code: r.status ?? (r.signal ? 128 : 1), out: r.stdout ?? '', err: r.stderr ?? '', all: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Removes the temporary store: its images and containers first (podman unmounts their layers), then the directory. */
export function removeStore(): string | undefined {
  if (!store) return undefined;
  podman(['rm', '-a', '-f']);
  podman(['rmi', '-a', '-f']);
  podman(['volume', 'prune', '-f']);
  try {
    rmSync(store.dir, { recursive: true, force: true });
    return undefined;
  } catch (e) {
    return `could not remove the test's podman store ${store.dir}: ${(e as Error).message}`;
  }
}

/** Why the image test cannot run here, or undefined. Asks the cache store itself: no temporary store is made for a skip. */
export function imageTestUnavailable(): string | undefined {
  if (spawnSync('sh', ['-c', 'command -v podman']).status !== 0) return 'no podman (apt-get install podman buildah runc, or run .ci/run)';
  if (process.getuid?.() !== 0) return 'not root: the image test uses rootful podman';
  const conf = path.join(STANDIN_CACHE, 'storage.conf');
  if (!existsSync(conf)) return `no stand-in base images in ${STANDIN_CACHE} (run docker/standin/make-bases.sh, as .ci/run does)`;
  for (const img of Object.values(STANDIN)) {
    const r = spawnSync('podman', ['image', 'exists', img], { env: { ...process.env, CONTAINERS_CONF, CONTAINERS_STORAGE_CONF: conf } });
    if (r.status !== 0) return `no ${img} in ${STANDIN_CACHE} (run docker/standin/make-bases.sh, as .ci/run does)`;
  }
  return undefined;
}

/** The version the stand-in EFA installer claims: what `doctor` and the report should show. */
export const STANDIN_INSTALLER_VERSION = '1.50.0-standin';

/**
 * An aws-efa-installer.tar.gz of our own: its efa_installer.sh records its arguments and installs a libfabric
 * 2.6.0 prefix (headers only, declaring the GDA ops) where the real one does, with the version record.
 */
function standinInstaller(dir: string): void {
  const stage = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-installer-'));
  const inst = path.join(stage, 'aws-efa-installer');
  mkdirSync(inst);
  writeFileSync(
    path.join(inst, 'efa_installer.sh'),
    `#!/bin/bash
# Stand-in for AWS's efa_installer.sh (test fixture).
set -e
mkdir -p /opt/amazon/efa/include/rdma /opt/amazon/efa/lib /opt/amazon/efa/bin
printf '%s\\n' "$*" > /opt/amazon/efa/standin-installer-args
cat > /opt/amazon/efa/include/rdma/fabric.h <<'H'
#define FI_MAJOR_VERSION 2
#define FI_MINOR_VERSION 6
#define FI_REVISION_VERSION 0
H
cat > /opt/amazon/efa/include/rdma/fi_ext_efa.h <<'H'
#define FI_EFA_GDA_OPS "efa gda ops"
H
printf '# EFA installer version: ${STANDIN_INSTALLER_VERSION}\\n# Packages installed:\\nlibfabric-aws-2.6.0 (stand-in)\\n' > /opt/amazon/efa_installed_packages
echo "stand-in EFA installer: done"
`,
    { mode: 0o755 },
  );
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('tar', ['-czf', path.join(dir, 'aws-efa-installer.tar.gz'), '-C', stage, 'aws-efa-installer']);
  if (r.status !== 0) throw new Error(`tar: ${r.stderr}`);
}

export interface StandinContexts {
  /** The base image tag built from the fake toolchain. */
  base: string;
  /** --build-context NAME=DIR for every download stage. */
  contexts: Record<string, string>;
  root: string;
}

/** Builds the stand-in base image and writes the download stages' stand-ins. */
export function prepareStandins(tag: string): StandinContexts {
  const root = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-standin-'));
  // Base: Debian + the fake toolchain at the CUDA image's places, the lock for our test efa_io_defs.h.
  const t = fakeToolchain();
  const b = path.join(root, 'base');
  mkdirSync(b);
  cpSync(t.cudaHome, path.join(b, 'cuda'), { recursive: true });
  cpSync(t.bin, path.join(b, 'bin'), { recursive: true });
  copyFileSync(path.join(t.root, 'probe.json'), path.join(b, 'probe.json'));
  copyFileSync(LOCK, path.join(b, 'efa-io-defs-lock.json'));
  writeFileSync(
    path.join(b, 'Containerfile'),
    [
      `FROM ${STANDIN.debian}`,
      'COPY cuda /usr/local/cuda',
      'COPY bin /opt/standin/bin',
      'COPY probe.json efa-io-defs-lock.json /opt/standin/',
      // The fakes write what they saw under FAKE_ROOT, as whichever user runs them.
      'RUN chmod 1777 /opt/standin',
      'ENV PATH=/opt/standin/bin:/usr/local/cuda/bin:$PATH FAKE_ROOT=/opt/standin FAKE_PIDS=/tmp PYTHON=/opt/standin/bin/python3 NVSHMEM_EFA_EFA_IO_DEFS_LOCK=/opt/standin/efa-io-defs-lock.json NO_COLOR=1',
      '',
    ].join('\n'),
  );
  const r = podman(['build', '--quiet', '--network', 'none', '-t', tag, b]);
  if (r.code !== 0) throw new Error(`stand-in base build failed:\n${r.all}`);

  const contexts: Record<string, string> = {};
  const ctx = (name: string) => (contexts[name] = path.join(root, name));
  standinInstaller(ctx('efa-installer'));
  fakeGdrcopyTree(ctx('gdrcopy-src'));
  contexts['nvshmem-src'] = materialize('v3.4-like');
  mkdirSync(ctx('efa-io-defs'));
  copyFileSync(IO_DEFS, path.join(contexts['efa-io-defs']!, 'efa_io_defs.h'));
  mkdirSync(ctx('deepep-src'));
  return { base: tag, contexts, root };
}

/** podman build arguments for docker/Dockerfile on the stand-ins, with no network. */
export function imageBuildArgs(s: StandinContexts, target: string, tag: string): string[] {
  const npmCache = path.join(os.homedir(), '.npm');
  return [
    'build',
    // Docker's image format keeps SHELL (bash -o pipefail); OCI's drops it.
    '--format', 'docker',
    '--network', 'none',
    '-f', path.join(ROOT, 'docker/Dockerfile'),
    '--target', target,
    '-t', tag,
    '--build-arg', `BASE_IMAGE=${s.base}`,
    '--build-arg', `NODE_IMAGE=${STANDIN.node}`,
    '--build-arg', `FETCH_IMAGE=${STANDIN.debian}`,
    // The stand-in base has what the stages need: no apt-get (no network).
    '--build-arg', 'APT_PACKAGES=',
    ...Object.entries(s.contexts).flatMap(([k, v]) => ['--build-context', `${k}=${v}`]),
    // npm ci in the tool stage from the cache `npm ci` filled on this host (--prefer-offline).
    '-v', `${npmCache}:/root/.npm`,
    ROOT,
  ];
}
