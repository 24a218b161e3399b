/**
 * What `--version` says (issue 39, item 4): a bug report needs the tool's commit and the pins it builds, not just
 * 0.1.0. Each pin is read from where the build reads it (src/pins.ts, the locks, and the variables that replace
 * them), so the answer is what a build run here would use.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fabricPin, gdrcopyPin, loadFabricLock, loadGdrcopyLock } from './fabric-lock.ts';
import { packageRoot, toolVersion } from './paths.ts';
import { loadLock as loadEfaIoDefsLock } from '../steps/vendor-efa-io-defs.ts';
import { DEEPEP_PINS, DEFAULT_NVSHMEM_REF, NVSHMEM_PINS } from '../pins.ts';

export const VERSION_JSON = 'nvshmem-efa-version/1';

/** Set by scripts/bundle.mjs (esbuild's define) to the commit dist/ or a standalone bundle was built from. */
declare const __NVSHMEM_EFA_BUILT_FROM__: { id: string; modified: boolean } | null | undefined;

export interface Commit {
  id: string;
  /** The tree differed from the commit (tracked files changed). */
  modified: boolean;
  /** git: asked of the clone this runs from; bundle: recorded when dist/ or the standalone bundle was built. */
  from: 'git' | 'bundle';
}

export interface Pinned {
  ref: string;
  commit: string;
  /** The other refs of the same package that may be asked for (--libfabric-ref, --nvshmem-ref, --deepep-ref). */
  alsoPinned?: string[];
}

export interface VersionInfo {
  schema: typeof VERSION_JSON;
  name: 'nvshmem-efa';
  version: string;
  /** null: neither a clone nor a bundle that recorded one (a copy of src/ without .git). */
  commit: Commit | null;
  pins: { nvshmem: Pinned; deepep: Pinned; libfabric: Pinned; rdmaCore: Pinned; gdrcopy: Pinned; efaIoDefs: Pinned };
}

/** HEAD of the clone the package runs from; undefined when the package root is no clone (an npm install, a bundle). */
export function gitCommit(root: string): Omit<Commit, 'from'> | undefined {
  // Only the package's own .git: an npm install inside the user's repository must not report the user's commit.
  if (!existsSync(path.join(root, '.git'))) return undefined;
  const git = (args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  try {
    const id = git(['rev-parse', 'HEAD']);
    if (!/^[0-9a-f]{40}$/.test(id)) return undefined;
    return { id, modified: git(['status', '--porcelain', '--untracked-files=no']) !== '' };
  } catch {
    return undefined; // no git on PATH, or not a repository after all: the bundle's record, if any
  }
}

function commitOf(root: string): Commit | null {
  const fromGit = gitCommit(root);
  if (fromGit) return { ...fromGit, from: 'git' };
  const baked = typeof __NVSHMEM_EFA_BUILT_FROM__ === 'undefined' ? null : __NVSHMEM_EFA_BUILT_FROM__;
  return baked ? { ...baked, from: 'bundle' } : null;
}

const others = (refs: string[], chosen: string) => {
  const rest = refs.filter((r) => r !== chosen);
  return rest.length ? { alsoPinned: rest } : {};
};

export async function versionInfo(): Promise<VersionInfo> {
  const version = toolVersion();
  const [fabric, gdr, efa] = await Promise.all([loadFabricLock(), loadGdrcopyLock(), loadEfaIoDefsLock()]);
  const nv = NVSHMEM_PINS.find((p) => p.ref === DEFAULT_NVSHMEM_REF)!;
  // DeepEP has no default (it is built only when asked for): the first pin, the one the docs name.
  const dp = DEEPEP_PINS[0]!;
  const lf = fabricPin(fabric, 'libfabric');
  const rc = fabricPin(fabric, 'rdma-core');
  const gd = gdrcopyPin(gdr);
  return {
    schema: VERSION_JSON,
    name: 'nvshmem-efa',
    version,
    commit: commitOf(packageRoot()),
    pins: {
      nvshmem: { ref: nv.ref, commit: nv.commit, ...others(NVSHMEM_PINS.map((p) => p.ref), nv.ref) },
      deepep: { ref: dp.ref, commit: dp.commit, ...others(DEEPEP_PINS.map((p) => p.ref), dp.ref) },
      libfabric: { ref: lf.ref, commit: lf.commit, ...others(fabric.libfabric.pins.map((p) => p.ref), lf.ref) },
      rdmaCore: { ref: rc.ref, commit: rc.commit, ...others(fabric.rdmaCore.pins.map((p) => p.ref), rc.ref) },
      gdrcopy: { ref: gd.ref, commit: gd.commit, ...others(gdr.gdrcopy.pins.map((p) => p.ref), gd.ref) },
      efaIoDefs: { ref: efa.revision, commit: efa.commit },
    },
  };
}

const LABELS: Record<keyof VersionInfo['pins'], string> = { nvshmem: 'NVSHMEM', deepep: 'DeepEP', libfabric: 'libfabric', rdmaCore: 'rdma-core', gdrcopy: 'GDRCopy', efaIoDefs: 'efa_io_defs.h' };

export function renderVersion(v: VersionInfo): string {
  const c = v.commit;
  const commit = c ? `${c.id}${c.modified ? ' (modified)' : ''}, from ${c.from === 'git' ? 'the clone' : 'the bundle'}` : 'unknown (neither a git clone nor a bundle that recorded it)';
  const rows = (Object.keys(LABELS) as (keyof VersionInfo['pins'])[]).map((k) => {
    const p = v.pins[k];
    return `  ${LABELS[k].padEnd(14)} ${p.ref.padEnd(10)} ${p.commit}${p.alsoPinned ? ` (also pinned: ${p.alsoPinned.join(', ')})` : ''}`;
  });
  return [`nvshmem-efa ${v.version}`, `commit: ${commit}`, 'pins (default ref, commit):', ...rows].join('\n');
}
