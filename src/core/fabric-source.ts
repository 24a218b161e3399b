import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { cp, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { boundedBody } from './bounded-body.ts';
import { httpGet } from './http-get.ts';
import { EnvironmentError, FilesystemError, VerificationError } from './errors.ts';
import { openLog, run } from './exec.ts';
import { refuseMountsInside } from './overlap.ts';
import { openFreshSync } from './fs-atomic.ts';
import { cloneRepo, readHeadCommit, resetCloneTo } from './git.ts';
import { archiveName, fabricEnvKey, GDRCOPY_SWITCH, isLocalOrigin, type FabricOrigin, type FabricPackage, type FabricPin } from './fabric-lock.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { makeDirs } from './make-dirs.ts';
import { walkTree } from './walk-tree.ts';
import { recordDownload } from './work-dir.ts';

/** A pinned source tree in the work dir, and how it was checked. */
export interface FabricSource {
  dir: string;
  kind: 'archive' | 'git';
  /** The archive URL or git repository it came from. */
  origin: string;
  /** "sha256 <hex>" of the archive, or "commit <hex>" of the clone. */
  verified: string;
}

export interface SourceIO {
  downloads: string;
  sources: string;
  offline: boolean;
  signal: AbortSignal;
  logPath: string;
  progress(s: string): void;
}

const envName = fabricEnvKey;

/** What to do when the pinned source cannot be had here: every way to provide it. */
export function howToProvide(pkg: FabricPackage, pin: FabricPin): string {
  const alt =
    pkg === 'libfabric'
      ? '; or pass --libfabric-home DIR to use a libfabric you have (GDA needs >= 2.3.0 on rdma-core >= 59)'
      : pkg === 'fabtests'
        ? '; or set NVSHMEM_EFA_FABTESTS=0 to build libfabric without its fabtests (selftest then skips them, saying why)'
        : pkg === 'gdrcopy'
          ? `; or pass --gdrcopy-home DIR (or GDRCOPY_HOME) to use a GDRCopy you have (include/gdrapi.h, lib/libgdrapi.so); or set ${GDRCOPY_SWITCH}=0 to build without GDRCopy (NVSHMEM's EFA provider then refuses to start)`
          : '';
  const git = pkg === 'fabtests' ? 'LIBFABRIC' : envName(pkg);
  return `download ${pin.archive.url} (sha256 ${pin.archive.sha256}) and pass NVSHMEM_EFA_${envName(pkg)}_URL=file:///path/to/${archiveName(pin)}, or set NVSHMEM_EFA_${git}_GIT to a git mirror of ${pin.repository} (tag ${pin.ref} must be commit ${pin.commit}), or run once with network access${alt}`;
}

/** The cached archive in <work-dir>/downloads, when it is there and is the pinned one. */
export async function cachedArchive(pin: FabricPin, downloads: string): Promise<string | undefined> {
  const file = path.join(downloads, archiveName(pin));
  if (!existsSync(file)) return undefined;
  // Only a regular file is hashed: a FIFO put there would block the read forever, a device never end it.
  if (!(await stat(file)).isFile()) return undefined;
  return (await sha256File(file)) === pin.archive.sha256 ? file : undefined;
}

/**
 * A local archive (a path or file:// URL, from NVSHMEM_EFA_<PKG>_URL or the lock) must be a regular file
 * before it is read: a FIFO would hang the run and /dev/zero would fill the downloads' disk.
 */
async function checkLocalArchive(pkg: FabricPackage, pin: FabricPin, url: string): Promise<void> {
  const file = url.startsWith('file://') ? fileURLToPath(url) : url;
  const variable = `NVSHMEM_EFA_${envName(pkg)}_URL`;
  const label = process.env[variable] === url ? `${variable}=${url}` : url;
  const st = await stat(file).catch(() => undefined);
  // A missing file is reported by the copy itself ("no such file"), with every way to provide it.
  if (st && !st.isFile()) {
    throw new FilesystemError(`${label} is not a regular file (${st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'a device or socket'}), so it cannot be ${pkg}'s release archive`, howToProvide(pkg, pin), file, st.isDirectory() ? 'EISDIR' : 'EINVAL');
  }
}

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** The pinned archives are a few MiB (libfabric's is the largest, 3 MiB); a stalled server is given a minute. */
const DOWNLOAD_BOUNDS = { maxBytes: 256 << 20, stallMs: 60_000 };

const MiB = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;

/** Copies or downloads `url` to `dest`, returning its sha256; a path or file:// URL is read locally. */
async function transfer(url: string, dest: string, signal: AbortSignal, progress: (s: string) => void): Promise<string> {
  const h = createHash('sha256');
  // downloads/ is shared with the user: a link at the partial name is replaced, never written through.
  const out = createWriteStream('', { fd: openFreshSync(dest) });
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
  });
  let bytes = 0;
  const take = (chunk: Uint8Array) => {
    h.update(chunk);
    bytes += chunk.length;
    progress(`${path.posix.basename(url)}: ${MiB(bytes)}`);
    return out.write(chunk) ? undefined : new Promise<void>((r) => out.once('drain', () => r()));
  };
  try {
    if (url.startsWith('/') || url.startsWith('file://')) {
      const file = url.startsWith('file://') ? fileURLToPath(url) : url;
      for await (const chunk of createReadStream(file)) {
        signal.throwIfAborted();
        await take(chunk as Buffer);
      }
    } else {
      const body = await httpGet(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(15 * 60_000)]) });
      for await (const chunk of boundedBody(body, DOWNLOAD_BOUNDS)) await take(chunk);
    }
  } finally {
    out.end();
  }
  await done;
  return h.digest('hex');
}

/**
 * The pinned archive, from the cache or fetched into it (through a temporary file: the cache only ever holds
 * an archive whose sha256 is the pin's). Another checksum is refused (exit 5) and nothing is kept.
 */
async function archive(pkg: FabricPackage, pin: FabricPin, url: string, io: SourceIO): Promise<string> {
  const cached = await cachedArchive(pin, io.downloads);
  if (cached) {
    io.progress(`${archiveName(pin)}: cached, sha256 verified`);
    return cached;
  }
  const what = `${pkg} ${pin.ref}`;
  if (io.offline && !isLocalOrigin({ kind: 'archive', url })) {
    throw new EnvironmentError(`--offline and ${what} is not in ${io.downloads} (${archiveName(pin)}, sha256 ${pin.archive.sha256})`, howToProvide(pkg, pin));
  }
  if (isLocalOrigin({ kind: 'archive', url })) await checkLocalArchive(pkg, pin, url);
  await makeDirs(io.downloads);
  const dest = path.join(io.downloads, archiveName(pin));
  const tmp = `${dest}.partial`;
  let got: string;
  try {
    got = await transfer(url, tmp, io.signal, io.progress);
  } catch (e) {
    await rm(tmp, { force: true });
    if (io.signal.aborted) throw io.signal.reason ?? e;
    const code = (e as NodeJS.ErrnoException).code;
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const why = code === 'ENOENT' ? 'no such file' : cause?.code ?? cause?.message ?? (e as Error).message;
    throw new EnvironmentError(`cannot get ${what} from ${url}: ${why}`, howToProvide(pkg, pin));
  }
  if (got !== pin.archive.sha256) {
    await rm(tmp, { force: true });
    throw new VerificationError(
      `${url} is not the pinned ${what} archive: sha256 ${got}, expected ${pin.archive.sha256} (${pin.checksumFrom})`,
      `use the release archive ${pin.archive.url}, or a byte-identical mirror of it`,
    );
  }
  await rename(tmp, dest);
  // Ours from now on (clean removes it), unlike an archive the user put there: recorded in the work-dir marker.
  recordDownload(dest);
  return dest;
}

/** Unpacks `file` and moves its single top-level folder (or the whole content) to `dest`. */
async function unpack(file: string, dest: string, io: SourceIO): Promise<void> {
  const tmp = `${dest}.partial`;
  await rm(tmp, { recursive: true, force: true });
  await makeDirs(tmp);
  const log = await openLog(io.logPath);
  try {
    io.progress(`unpacking ${path.basename(file)}`);
    await run('tar', ['-xf', file, '-C', tmp], { log, logPath: io.logPath, signal: io.signal, fix: `check that ${file} is a tar archive (gzip/bzip2/xz) and that tar, gzip and bzip2 are installed` });
  } finally {
    await log.end();
  }
  const entries = (await readdir(tmp, { withFileTypes: true })).filter((e) => e.name !== 'pax_global_header');
  const top = entries.length === 1 && entries[0]!.isDirectory() ? path.join(tmp, entries[0]!.name) : tmp;
  await rm(dest, { recursive: true, force: true });
  await rename(top, dest);
  await rm(tmp, { recursive: true, force: true });
}

/** A clone of the pinned tag whose HEAD is the pinned commit, reused when it already is. */
async function gitSource(pkg: FabricPackage, pin: FabricPin, url: string, dest: string, io: SourceIO): Promise<void> {
  if ((await readHeadCommit(dest)) === pin.commit) {
    io.progress(`cached clone at ${pin.commit.slice(0, 12)}`);
    await resetCloneTo(dest, pin.commit);
    return;
  }
  if (io.offline && !isLocalOrigin({ kind: 'git', url })) throw new EnvironmentError(`--offline and no verified clone of ${pkg} ${pin.ref} in ${dest}`, howToProvide(pkg, pin));
  const tmp = `${dest}.partial`;
  await cloneRepo(url, ['--depth', '1', '--branch', pin.ref, '--single-branch'], tmp, `${pkg} ${pin.ref}`, howToProvide(pkg, pin), io.signal, io.logPath, io.progress);
  const head = await readHeadCommit(tmp);
  if (head !== pin.commit) {
    await rm(tmp, { recursive: true, force: true });
    throw new VerificationError(`${url} ${pin.ref} resolved to ${head}, but the pin says ${pin.commit}`, `the tag moved or the mirror is not genuine; use a trusted mirror of ${pin.repository}`);
  }
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

/** The verified source tree of `pin` under <work-dir>/sources, from its archive or a git mirror. */
export async function obtainSource(pkg: FabricPackage, pin: FabricPin, origin: FabricOrigin, io: SourceIO): Promise<FabricSource> {
  const dest = path.join(io.sources, `${pkg}-${pin.ref}`);
  if (origin.kind === 'git') {
    await gitSource(pkg, pin, origin.url, dest, io);
    return { dir: dest, kind: 'git', origin: origin.url, verified: `commit ${pin.commit}` };
  }
  const file = await archive(pkg, pin, origin.url, io);
  await unpack(file, dest, io);
  return { dir: dest, kind: 'archive', origin: origin.url, verified: `sha256 ${pin.archive.sha256}` };
}

/** The files an install put into its stage outside the prefix (a folder on the way to the prefix is not one). */
async function filesOutside(stage: string, prefix: string): Promise<string[]> {
  const outside: string[] = [];
  await walkTree(
    stage,
    (e) => {
      if (e.type !== 'dir') outside.push('/' + e.rel);
    },
    { skip: [(e) => '/' + e.rel === prefix] },
  );
  return outside;
}

/**
 * The warned fix for what a staged install put outside its prefix (installed nowhere, see stagedInstall and
 * mergedInstall); none when it put nothing there.
 */
export function outsidePrefixFixes(pkg: string, prefix: string, outside: readonly string[]): FixRecord[] {
  if (!outside.length) return [];
  const more = outside.length > 8 ? ` and ${outside.length - 8} more` : '';
  return [{ id: `${pkg}-install-outside-prefix`, anchor: prefix, why: 'a work-dir build writes nothing outside the work dir', status: 'warned', detail: `${pkg}${pkg.endsWith('s') ? "'" : "'s"} install also wanted ${outside.slice(0, 8).join(', ')}${more}; not installed` }];
}

/** Runs `install` into a fresh staging DESTDIR; returns where it put `prefix` (an install that put nothing there fails). */
async function installIntoStage(prefix: string, stage: string, install: (destdir: string) => Promise<void>): Promise<string> {
  await rm(stage, { recursive: true, force: true });
  await makeDirs(stage);
  await install(stage);
  const staged = path.join(stage, prefix);
  if (!existsSync(staged)) throw new EnvironmentError(`the install put nothing under ${prefix}`, `read the install log; the build's prefix must be ${prefix}`);
  return staged;
}

/**
 * Runs an install into a staging DESTDIR and moves the prefix into place: a failed install leaves the old
 * prefix (or none), and anything the install put outside the prefix (a system directory) is not installed
 * anywhere; it is returned, to be reported.
 */
export async function stagedInstall(prefix: string, stage: string, install: (destdir: string) => Promise<void>): Promise<{ outside: string[] }> {
  // The prefix is replaced whole: never across a mount (someone's install bind-mounted in its place).
  refuseMountsInside([prefix, stage], 'the install replaces whole');
  const staged = await installIntoStage(prefix, stage, install);
  const outside = await filesOutside(stage, prefix);
  await rm(prefix, { recursive: true, force: true });
  await makeDirs(path.dirname(prefix));
  await rename(staged, prefix);
  await rm(stage, { recursive: true, force: true });
  return { outside };
}

/**
 * Runs an install into a staging DESTDIR and copies what it put under `prefix` into the existing prefix, file by
 * file, never over a file already there (those are returned as clashes and left as they were): for a package that
 * installs into another one's prefix (fabtests into libfabric's). A failed install changes nothing in the prefix;
 * what the install put outside the prefix is installed nowhere and returned, as stagedInstall does.
 */
export async function mergedInstall(prefix: string, stage: string, install: (destdir: string) => Promise<void>): Promise<{ clashes: string[]; outside: string[] }> {
  refuseMountsInside([stage], 'the install replaces whole');
  const staged = await installIntoStage(prefix, stage, install);
  const outside = await filesOutside(stage, prefix);
  const clashes: string[] = [];
  await walkTree(staged, async (e) => {
    const to = path.join(prefix, e.rel);
    if (e.type === 'dir') await makeDirs(to);
    else if (existsSync(to)) clashes.push(e.rel);
    else await cp(e.abs, to, { verbatimSymlinks: true, preserveTimestamps: true });
  });
  await rm(stage, { recursive: true, force: true });
  return { clashes, outside };
}
