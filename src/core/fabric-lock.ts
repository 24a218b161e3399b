import path from 'node:path';
import * as z from 'zod';
import { UsageError } from './errors.ts';
import { readLockFile } from './small-file.ts';

/**
 * Pins of the libfabric and rdma-core releases nvshmem-efa builds when the host's cannot do EFA GDA
 * (third_party/libfabric/lock.json), and of GDRCopy when the host has none (third_party/gdrcopy/lock.json): a
 * release archive checked by sha256, or the git commit its tag must resolve to when the source comes from a git
 * mirror.
 */
const FabricPin = z.object({
  ref: z.string(),
  version: z.string().regex(/^\d+\.\d+(\.\d+)?$/),
  repository: z.string(),
  commit: z.string().regex(/^[0-9a-f]{40}$/),
  archive: z.object({
    url: z.string().url(),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    /** The name it is cached under in <work-dir>/downloads when the URL's own names no package (GitHub's v2.5.1.tar.gz). */
    file: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/).optional(),
  }),
  /** libfabric only: the release's fabtests tarball (fabtests are not in the libfabric tarball, only in git). */
  fabtests: z.object({ url: z.string().url(), sha256: z.string().regex(/^[0-9a-f]{64}$/), checksumFrom: z.string() }).optional(),
  checksumFrom: z.string(),
  note: z.string(),
});
export type FabricPin = z.infer<typeof FabricPin>;

const names = (want: string) => (p: { ref: string; version: string }) => p.ref === want || `v${p.version}` === want || p.version === want;

type Section = { default: string; pins: FabricPin[] };

/** A default that names no pin would surface later as an error that cannot say which lock is wrong. */
function defaultsArePinned<K extends string>(keys: readonly K[]) {
  return (l: Record<K, Section>, ctx: z.RefinementCtx) => {
    for (const key of keys) {
      if (!l[key].pins.some(names(l[key].default))) ctx.addIssue({ code: 'custom', path: [key, 'default'], message: `'${l[key].default}' is not one of its pins (${l[key].pins.map((p) => p.ref).join(', ')})` });
    }
  };
}

const Lock = z
  .object({
    schema: z.literal('nvshmem-efa-fabric-lock/1'),
    libfabric: z.object({ default: z.string(), pins: z.array(FabricPin).min(1) }),
    rdmaCore: z.object({ default: z.string(), minimum: z.string(), pins: z.array(FabricPin).min(1) }),
  })
  .superRefine(defaultsArePinned(['libfabric', 'rdmaCore']));
export type FabricLock = z.infer<typeof Lock>;

/** GDRCopy has a lock of its own: it is built whatever libfabric is used, and by a lock a site may replace alone. */
const GdrcopyLockSchema = z
  .object({
    schema: z.literal('nvshmem-efa-gdrcopy-lock/1'),
    gdrcopy: z.object({ default: z.string(), pins: z.array(FabricPin).min(1) }),
  })
  .superRefine(defaultsArePinned(['gdrcopy']));
export type GdrcopyLock = z.infer<typeof GdrcopyLockSchema>;

export type FabricPackage = 'libfabric' | 'rdma-core' | 'fabtests' | 'gdrcopy';

/**
 * The fabtests of a libfabric pin as a pin of their own (the same tag and commit, the fabtests tarball as its
 * archive), or undefined when the lock names no fabtests archive for it.
 */
export function fabtestsPin(libfabric: FabricPin): FabricPin | undefined {
  const f = libfabric.fabtests;
  if (!f) return undefined;
  return { ...libfabric, fabtests: undefined, archive: { url: f.url, sha256: f.sha256 }, checksumFrom: f.checksumFrom, note: `the fabtests of libfabric ${libfabric.ref}` };
}

/** The lock; NVSHMEM_EFA_FABRIC_LOCK points at another one (tests, sites that mirror other archives). */
export async function loadFabricLock(env: NodeJS.ProcessEnv = process.env): Promise<FabricLock> {
  // Checked as untrusted input: garbage, a schema mismatch or a FIFO is one line naming the variable.
  return readLockFile('NVSHMEM_EFA_FABRIC_LOCK', ['third_party', 'libfabric', 'lock.json'], Lock, 'a fabric lock', env);
}

/** The GDRCopy lock; NVSHMEM_EFA_GDRCOPY_LOCK points at another one (tests, sites that mirror other archives). */
export async function loadGdrcopyLock(env: NodeJS.ProcessEnv = process.env): Promise<GdrcopyLock> {
  return readLockFile('NVSHMEM_EFA_GDRCOPY_LOCK', ['third_party', 'gdrcopy', 'lock.json'], GdrcopyLockSchema, 'a GDRCopy lock', env);
}

/**
 * NVSHMEM_EFA_GDRCOPY=0: no GDRCopy is built when the host has none. NVSHMEM is then built without it and its EFA
 * provider refuses to start, which the report says (never a quiet fallback).
 */
export const GDRCOPY_SWITCH = 'NVSHMEM_EFA_GDRCOPY';
export const gdrcopyTurnedOff = (env: NodeJS.ProcessEnv = process.env) => env[GDRCOPY_SWITCH] === '0';

/** The GDRCopy pin the build uses: the lock's default (checked by the schema to be one of its pins). */
export function gdrcopyPin(lock: GdrcopyLock): FabricPin {
  return lock.gdrcopy.pins.find(names(lock.gdrcopy.default))!;
}

const section = (lock: FabricLock, pkg: Exclude<FabricPackage, 'gdrcopy'>) => (pkg === 'rdma-core' ? lock.rdmaCore : lock.libfabric);

export function fabricPin(lock: FabricLock, pkg: Exclude<FabricPackage, 'gdrcopy'>, ref?: string): FabricPin {
  const s = section(lock, pkg);
  const want = ref ?? s.default;
  const pin = s.pins.find(names(want));
  if (!pin) {
    const flag = pkg === 'libfabric' ? '--libfabric-ref' : 'the rdma-core pin';
    throw new UsageError(
      `${pkg} ref '${want}' is not pinned (pinned: ${s.pins.map((p) => p.ref).join(', ')})`,
      pkg === 'libfabric' ? `pass one of them as ${flag}, or build libfabric yourself and pass --libfabric-home DIR` : 'fix third_party/libfabric/lock.json (or NVSHMEM_EFA_FABRIC_LOCK)',
    );
  }
  return pin;
}

/** The file name a pinned archive is cached under in <work-dir>/downloads (the lock's, else the official URL's). */
export const archiveName = (pin: FabricPin) => pin.archive.file ?? path.posix.basename(new URL(pin.archive.url).pathname);

/**
 * Where the source comes from: the pinned release archive (or a mirror of it named by
 * NVSHMEM_EFA_<PKG>_URL: an https URL, file:// URL or path; the sha256 is still enforced), or a git
 * repository named by NVSHMEM_EFA_<PKG>_GIT, whose tag must resolve to the pinned commit.
 */
export type FabricOrigin = { kind: 'archive'; url: string } | { kind: 'git'; url: string };

const ENV_KEYS: Record<FabricPackage, string> = { libfabric: 'LIBFABRIC', fabtests: 'FABTESTS', 'rdma-core': 'RDMA_CORE', gdrcopy: 'GDRCOPY' };
export const fabricEnvKey = (pkg: FabricPackage) => ENV_KEYS[pkg];

export function fabricOrigin(pkg: FabricPackage, pin: FabricPin, env: NodeJS.ProcessEnv = process.env): FabricOrigin {
  const key = fabricEnvKey(pkg);
  // fabtests live in libfabric's git repository: a libfabric git mirror serves both (its fabtests/ folder).
  const git = env[`NVSHMEM_EFA_${pkg === 'fabtests' ? 'LIBFABRIC' : key}_GIT`];
  if (git) return { kind: 'git', url: git };
  return { kind: 'archive', url: env[`NVSHMEM_EFA_${key}_URL`] ?? pin.archive.url };
}

/** True when the origin is on this machine (a path or a file:// URL), so --offline may use it. */
export function isLocalOrigin(o: FabricOrigin): boolean {
  return o.url.startsWith('/') || o.url.startsWith('file://');
}

/** `60.1` >= `59.0`, compared numerically part by part. */
export function versionAtLeastStr(v: string, min: string): boolean {
  const a = v.split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}
