import { existsSync } from 'node:fs';
import path from 'node:path';
import { formatBytes, mayAccess, mountPointOf, nearestExisting, spaceLeft, whoAmI } from './fs-facts.ts';

/**
 * Every failure the user can act on is one of these: a message saying what went wrong and a `fix` saying
 * what to try. The CLI maps `exitCode` straight to the process exit status.
 */
export class NvshmemEfaError extends Error {
  readonly exitCode: number = 1;
  constructor(
    message: string,
    readonly fix: string,
    readonly logPath?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The exit code of a dry run (`build --dry-run`, `patch --dry-run`, `patch --export --dry-run`) whose plan lists
 * blockers: the plan is whole, and the real run would stop on them (issue 39, item 5). One code whatever the
 * blockers are (each names the code the real run would end with), apart from the codes of a dry run that could
 * not plan at all (2, 3, 6, 7).
 */
export const DRY_RUN_WOULD_FAIL = 8;

/** Bad command line: exit 2, like most CLIs. */
export class UsageError extends NvshmemEfaError {
  override readonly exitCode = 2;
}

/** The tree does not look as a patcher expects; nothing was written. */
export class PatchRefusedError extends NvshmemEfaError {
  override readonly exitCode = 3;
  constructor(
    message: string,
    fix: string,
    readonly refusals: readonly string[],
  ) {
    super(message, fix);
  }
}

/** A required tool or library is missing or too old. */
export class EnvironmentError extends NvshmemEfaError {
  override readonly exitCode = 4;
}

/**
 * The work dir holds no build (or no report) that the command reads: report, env, selftest and bench say this
 * with one code, whether the directory is missing, empty, or holds only a patch, a run that built nothing, or an
 * install since deleted (issue 39, item 6: it was 1, 2 or 4 by command). Exit 4: what the command needs is missing,
 * and the fix is to build it. A build that ran and failed is exit 1 (a step failed), a run still going exit 7.
 */
export class NoBuildError extends EnvironmentError {}

/** A fetched source does not match its pin. */
export class VerificationError extends NvshmemEfaError {
  override readonly exitCode = 5;
}

/** An external command (cmake, ninja, git) failed; `logPath` holds its whole output. */
export class CommandFailedError extends NvshmemEfaError {
  constructor(
    message: string,
    fix: string,
    logPath: string | undefined,
    readonly tail: readonly string[],
  ) {
    super(message, fix, logPath);
  }
}

/**
 * The file system refused an operation (a file where a directory is expected, read-only or full disk, no
 * permission): the message names the path, the fix says what to change. Not a bug, so no stack trace.
 */
export class FilesystemError extends NvshmemEfaError {
  override readonly exitCode = 6;
  constructor(
    message: string,
    fix: string,
    readonly path: string,
    readonly code: string,
  ) {
    super(message, fix);
  }
}

/** Another run holds the work dir's lock; the message names its pid and command. */
export class WorkDirBusyError extends NvshmemEfaError {
  override readonly exitCode = 7;
}

/** Ctrl-C or SIGTERM: exit 130 as shells expect. */
export class InterruptedError extends NvshmemEfaError {
  override readonly exitCode = 130;
}

export function formatError(raw: unknown): string {
  const err = asTypedError(raw);
  if (err instanceof NvshmemEfaError) {
    const lines = [`error: ${err.message}`];
    if (err instanceof CommandFailedError && err.tail.length > 0) {
      lines.push('last lines of output:', ...err.tail.map((l) => `  ${l}`));
    }
    if (err instanceof PatchRefusedError) lines.push(...err.refusals.map((r) => `  - ${r}`));
    if (err.logPath) lines.push(`full log: ${err.logPath}`);
    lines.push(`fix: ${err.fix}`);
    return lines.join('\n');
  }
  const e = raw as Error;
  return `internal error: ${e?.stack ?? String(err)}\nfix: this is a bug in nvshmem-efa; rerun with --verbose and report it with the log and the output of 'nvshmem-efa --version' (the commit and the pins).`;
}

/**
 * What a run does with each directory it names, so that a file-system fault can say which disk is full,
 * whether a refused access was a read or a write, and which option to change. Without it (a fault outside
 * a run) the fix falls back to the work dir, where most writes go.
 */
export interface FaultContext {
  dirs: readonly FaultDir[];
}
export interface FaultDir {
  /** The option that named it, e.g. --nvshmem-src. */
  flag: string;
  dir: string;
  /** source: only read (copy mode); in-place: patched where it is; work-dir and export: written. */
  role: 'source' | 'in-place' | 'work-dir' | 'export';
}

/** The directories of a run's options, with what the run does in each. */
export function faultContextOf(o: { workDir: string; nvshmemSrc?: string; deepepSrc?: string; exportDir?: string; inPlace: boolean }): FaultContext {
  const tree = (flag: string, dir: string | undefined): FaultDir[] => (dir ? [{ flag, dir, role: o.inPlace ? 'in-place' : 'source' }] : []);
  return {
    dirs: [
      { flag: '--work-dir', dir: o.workDir, role: 'work-dir' },
      ...tree('--nvshmem-src', o.nvshmemSrc),
      ...tree('--deepep-src', o.deepepSrc),
      ...(o.exportDir ? [{ flag: '--export', dir: o.exportDir, role: 'export' as const }] : []),
    ],
  };
}

/** The error as the user should see it: a file-system fault from Node becomes a FilesystemError. */
export function asTypedError(err: unknown, context?: FaultContext): unknown {
  return err instanceof NvshmemEfaError ? err : (filesystemFault(err, context) ?? err);
}

export function exitCodeOf(err: unknown): number {
  const e = asTypedError(err);
  return e instanceof NvshmemEfaError ? e.exitCode : 1;
}

/** Adds to a typed error's message and fix (the run knows what the failing step could not: see run-pipeline). */
export function amendError<E extends NvshmemEfaError>(err: E, change: { message?: (m: string) => string; fix?: (f: string) => string }): E {
  if (change.message) err.message = change.message(err.message);
  if (change.fix) (err as { fix: string }).fix = change.fix(err.fix);
  return err;
}

type Access = 'read' | 'write';
interface Where {
  /** The path the fault is about (for a copy: the source when reading failed, the destination when writing did). */
  path: string;
  /** The run's directory holding it, when known. */
  owner?: FaultDir;
  access?: Access;
}

/** What each errno means for the user, and what to try. */
const FAULTS: Record<string, { what: string; fix: (p: string, w: Where) => string }> = {
  ENOENT: { what: 'does not exist', fix: (p) => `check the path (a parent directory of ${p} may be missing or was removed during the run)` },
  ENOTDIR: { what: 'has a file where a directory is expected', fix: (p) => `a component of ${p} is a regular file: move it away or choose another path` },
  EISDIR: { what: 'is a directory where a file is expected', fix: (p) => `move the directory ${p} away or choose another path` },
  EEXIST: { what: 'already exists (and is in the way)', fix: (p) => `move ${p} away (a file where a directory should be, or the reverse) and rerun` },
  EACCES: { what: 'permission denied', fix: (p, w) => permissionFix(p, w) },
  EPERM: {
    what: 'operation not permitted',
    fix: (p, w) =>
      w.owner?.role === 'in-place'
        ? inPlaceFix(w.owner, `${p} cannot be changed here (read-only or special file system)`)
        : `${p} cannot be changed here (read-only or special file system); choose another path, e.g. --work-dir under your home`,
  },
  EROFS: {
    what: 'is on a read-only file system',
    fix: (p, w) =>
      w.owner?.role === 'in-place'
        ? inPlaceFix(w.owner, `${w.owner.dir} is on a read-only file system`)
        : w.owner?.role === 'export'
          ? `choose a writable location for --export (${p} is read-only)`
          : `choose a writable location (${p} is read-only), e.g. --work-dir under /tmp or your home`,
  },
  ENOSPC: { what: 'no space left on device', fix: (p, w) => spaceFix(p, w, 'free space') },
  EDQUOT: { what: 'disk quota exceeded', fix: (p, w) => spaceFix(p, w, 'free space within your quota') },
  ENAMETOOLONG: { what: 'name too long', fix: () => 'use a shorter --work-dir path' },
  ELOOP: { what: 'has too many levels of symbolic links', fix: (p) => `fix the symbolic link loop at ${p}` },
  EMFILE: { what: 'too many open files', fix: () => 'raise the open-file limit (ulimit -n 65536) and rerun' },
  ENFILE: { what: 'too many open files in the system', fix: () => 'close other programs or raise fs.file-max, then rerun' },
  EBUSY: { what: 'is busy', fix: (p) => `something else holds ${p} (a mount point or an open file); choose another path` },
  EXDEV: { what: 'crosses file systems', fix: (p) => `keep ${p} and the work dir on one file system` },
  EIO: { what: 'input/output error', fix: (p) => `the disk holding ${p} reported an I/O error: check dmesg, then choose another --work-dir` },
};

/** Faults that need no path to be environment faults (a stream's write reports none). */
const PATHLESS = new Set(['ENOSPC', 'EDQUOT', 'EMFILE', 'ENFILE', 'EIO']);

// System calls that only read, and those that only write (Node's `syscall` names). open and copyfile do
// either and are told apart by what the path is and what this user may do with it.
const READS = new Set(['scandir', 'opendir', 'readdir', 'read', 'readlink', 'stat', 'lstat', 'fstat', 'access', 'realpath', 'watch']);
const WRITES = new Set(['mkdir', 'mkdtemp', 'rmdir', 'unlink', 'rename', 'write', 'symlink', 'link', 'chmod', 'fchmod', 'lchmod', 'chown', 'fchown', 'lchown', 'utime', 'futime', 'lutime', 'ftruncate', 'truncate', 'fsync', 'fdatasync', 'rm']);

/** The run's directory holding `p` (the deepest one: an export may sit beside a work dir, never inside it). */
function ownerOf(p: string, context?: FaultContext): FaultDir | undefined {
  const abs = path.resolve(p);
  return context?.dirs
    .filter((d) => abs === path.resolve(d.dir) || abs.startsWith(path.resolve(d.dir) + path.sep))
    .sort((a, b) => b.dir.length - a.dir.length)[0];
}

/** Which path a fault is about and whether it happened reading or writing. */
function locate(e: NodeJS.ErrnoException & { dest?: string }, context?: FaultContext): Where | undefined {
  const src = e.path;
  const dest = e.dest;
  const at = (p: string, access?: Access): Where => ({ path: p, owner: ownerOf(p, context), ...(access ? { access } : {}) });
  if (src && dest) {
    // copyfile, rename, link, symlink: no space and read-only are the destination's; a permission fault is
    // the source's when this user cannot read it.
    if (e.code === 'EACCES' || e.code === 'EPERM') return mayAccess(src, 'read') ? at(dest, 'write') : at(src, 'read');
    return at(dest, 'write');
  }
  const p = src ?? dest;
  if (!p) return undefined;
  const syscall = e.syscall ?? '';
  if (READS.has(syscall)) return at(p, 'read');
  if (WRITES.has(syscall) || e.code === 'ENOSPC' || e.code === 'EDQUOT' || e.code === 'EROFS') return at(p, 'write');
  const w = at(p);
  // A tree the run only reads (copy mode) is opened for reading; elsewhere an open that this user could not
  // have read is a read, and one of a file that is not there yet (being created) or not writable is a write.
  if (w.owner?.role === 'source') return { ...w, access: 'read' };
  if (existsSync(p) && !mayAccess(p, 'read')) return { ...w, access: 'read' };
  return { ...w, access: 'write' };
}

/**
 * For a fault that carries no path (a stream's write: ENOSPC): the run's directory whose file system has
 * the least space left, found with statfs, and what is left there.
 */
function fullestDir(context?: FaultContext): { dir: FaultDir; left: string } | undefined {
  const seen = new Map<string, { dir: FaultDir; bytes: number; inodes: number }>();
  for (const d of context?.dirs.filter((x) => x.role !== 'source') ?? []) {
    const space = spaceLeft(d.dir);
    if (!space) continue;
    const key = mountPointOf(d.dir) ?? d.dir;
    if (!seen.has(key)) seen.set(key, { dir: d, ...space });
  }
  const best = [...seen.values()].sort((a, b) => a.bytes - b.bytes || a.inodes - b.inodes)[0];
  return best && { dir: best.dir, left: best.inodes === 0 ? 'no inodes left' : `${formatBytes(best.bytes)} left` };
}

function roleText(d: FaultDir): string {
  return `${d.flag} ${d.dir}${d.role === 'in-place' ? ', patched in place' : ''}`;
}

function inPlaceFix(owner: FaultDir, why: string): string {
  return `${why}, and --in-place patches ${owner.flag} ${owner.dir} where it is: make it writable by this user (${whoAmI()}), or drop --in-place to patch a copy in the work dir instead`;
}

function permissionFix(p: string, w: Where): string {
  const target = nearestExisting(p);
  if (w.access === 'read') {
    return `make ${p} readable by this user (${whoAmI()}): files need r, directories r and x, and every directory above it x (ls -ld ${target})${w.owner?.role === 'source' ? `; nvshmem-efa only reads ${w.owner.flag}` : ''}`;
  }
  if (w.owner?.role === 'in-place') return inPlaceFix(w.owner, `this user cannot write ${target}`);
  if (w.owner?.role === 'export') return `make ${target} writable by this user (ls -ld ${target}), or choose another --export`;
  return `make ${target} writable by this user (ls -ld ${target}), or choose another --work-dir`;
}

function spaceFix(p: string, w: Where, what: string): string {
  const mount = mountPointOf(p);
  const where = `${what} on the file system holding ${p}${mount ? `, mounted at ${mount} (df -h ${mount})` : ` (df -h ${nearestExisting(p)})`}`;
  switch (w.owner?.role) {
    case 'in-place':
      return `${where}, or drop --in-place to patch a copy in a --work-dir on another disk, then rerun`;
    case 'export':
      return `${where}, or choose an --export dir on another disk, then rerun`;
    default:
      return `${where}, or choose a --work-dir on another disk, then rerun`;
  }
}

/** A Node file-system error (errno code and path) as a typed fault; undefined for anything else. */
export function filesystemFault(err: unknown, context?: FaultContext): FilesystemError | undefined {
  const e = err as NodeJS.ErrnoException & { dest?: string };
  if (!e || typeof e !== 'object' || typeof e.code !== 'string') return undefined;
  const f = FAULTS[e.code];
  if (!f) return undefined;
  const w = locate(e, context);
  if (!w) {
    // ENOSPC from a stream, for instance: no path attached; still an environment fault, not a bug.
    if (!PATHLESS.has(e.code)) return undefined;
    const full = e.code === 'ENOSPC' || e.code === 'EDQUOT' ? fullestDir(context) : undefined;
    if (!full) {
      const where = 'a file system this run writes to (the work dir, or a tree patched in place)';
      const fix = e.code === 'ENOSPC' || e.code === 'EDQUOT' ? 'free space on the disk of the work dir, or of the tree patched in place (df -h DIR shows which is full), then rerun' : f.fix('the work dir', { path: 'the work dir' });
      return new FilesystemError(`${where}: ${f.what} [${e.code}]${e.syscall ? ` (${e.syscall})` : ''}`, fix, 'the work dir', e.code);
    }
    const mount = mountPointOf(full.dir.dir);
    const found = `: of the file systems this run writes to, the one ${mount ? `mounted at ${mount}` : 'holding it'} (holding ${roleText(full.dir)}) has the least space (${full.left})`;
    const at: Where = { path: full.dir.dir, owner: full.dir, access: 'write' };
    return new FilesystemError(`${f.what} [${e.code}]${e.syscall ? ` (${e.syscall})` : ''}${found}`, f.fix(at.path, at), at.path, e.code);
  }
  const mount = e.code === 'ENOSPC' ? mountPointOf(w.path) : undefined;
  const detail = [
    e.syscall ? `${e.syscall}${e.dest && e.path ? ` ${e.path} -> ${e.dest}` : ''}` : '',
    e.code === 'EACCES' && w.access ? (w.access === 'read' ? 'reading' : 'writing') : '',
    w.owner && w.owner.role !== 'work-dir' ? roleText(w.owner) : '',
    mount ? `the file system mounted at ${mount} is full` : '',
  ].filter(Boolean);
  return new FilesystemError(`${w.path}: ${f.what} [${e.code}]${detail.length ? ` (${detail.join('; ')})` : ''}`, f.fix(w.path, w), w.path, e.code);
}
