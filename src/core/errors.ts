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
  return `internal error: ${e?.stack ?? String(err)}\nfix: this is a bug in nvshmem-efa; rerun with --verbose and report it with the log.`;
}

/** The error as the user should see it: a file-system fault from Node becomes a FilesystemError. */
export function asTypedError(err: unknown): unknown {
  return err instanceof NvshmemEfaError ? err : (filesystemFault(err) ?? err);
}

export function exitCodeOf(err: unknown): number {
  const e = asTypedError(err);
  return e instanceof NvshmemEfaError ? e.exitCode : 1;
}

/** What each errno means for the user, and what to try. */
const FAULTS: Record<string, { what: string; fix: (p: string) => string }> = {
  ENOENT: { what: 'does not exist', fix: (p) => `check the path (a parent directory of ${p} may be missing or was removed during the run)` },
  ENOTDIR: { what: 'has a file where a directory is expected', fix: (p) => `a component of ${p} is a regular file: move it away or choose another path` },
  EISDIR: { what: 'is a directory where a file is expected', fix: (p) => `move the directory ${p} away or choose another path` },
  EEXIST: { what: 'already exists (and is in the way)', fix: (p) => `move ${p} away (a file where a directory should be, or the reverse) and rerun` },
  EACCES: { what: 'permission denied', fix: (p) => `make ${p} writable by this user (ls -ld ${p}), or choose another --work-dir` },
  EPERM: { what: 'operation not permitted', fix: (p) => `${p} cannot be changed here (read-only or special file system); choose another path, e.g. --work-dir under your home` },
  EROFS: { what: 'is on a read-only file system', fix: (p) => `choose a writable location (${p} is read-only), e.g. --work-dir under /tmp or your home` },
  ENOSPC: { what: 'no space left on device', fix: (p) => `free space on the file system holding ${p} (df -h ${p}) or choose a --work-dir on another disk, then rerun` },
  EDQUOT: { what: 'disk quota exceeded', fix: (p) => `free space within your quota on the file system holding ${p}, or choose another --work-dir` },
  ENAMETOOLONG: { what: 'name too long', fix: () => 'use a shorter --work-dir path' },
  ELOOP: { what: 'has too many levels of symbolic links', fix: (p) => `fix the symbolic link loop at ${p}` },
  EMFILE: { what: 'too many open files', fix: () => 'raise the open-file limit (ulimit -n 65536) and rerun' },
  ENFILE: { what: 'too many open files in the system', fix: () => 'close other programs or raise fs.file-max, then rerun' },
  EBUSY: { what: 'is busy', fix: (p) => `something else holds ${p} (a mount point or an open file); choose another path` },
  EXDEV: { what: 'crosses file systems', fix: (p) => `keep ${p} and the work dir on one file system` },
  EIO: { what: 'input/output error', fix: (p) => `the disk holding ${p} reported an I/O error: check dmesg, then choose another --work-dir` },
};

/** A Node file-system error (errno code and path) as a typed fault; undefined for anything else. */
export function filesystemFault(err: unknown): FilesystemError | undefined {
  const e = err as NodeJS.ErrnoException & { dest?: string };
  if (!e || typeof e !== 'object' || typeof e.code !== 'string') return undefined;
  const f = FAULTS[e.code];
  if (!f) return undefined;
  const p = e.path ?? e.dest;
  if (!p) {
    // ENOSPC from a stream, for instance: no path attached; still an environment fault, not a bug.
    if (e.code !== 'ENOSPC' && e.code !== 'EDQUOT' && e.code !== 'EMFILE' && e.code !== 'ENFILE' && e.code !== 'EIO') return undefined;
  }
  const where = p ?? 'the work dir';
  const op = e.syscall ? ` (${e.syscall}${e.dest && e.path ? ` ${e.path} -> ${e.dest}` : ''})` : '';
  return new FilesystemError(`${where}: ${f.what} [${e.code}]${op}`, f.fix(where), where, e.code);
}
