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

/** Ctrl-C or SIGTERM: exit 130 as shells expect. */
export class InterruptedError extends NvshmemEfaError {
  override readonly exitCode = 130;
}

export function formatError(err: unknown): string {
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
  const e = err as Error;
  return `internal error: ${e?.stack ?? String(err)}\nfix: this is a bug in nvshmem-efa; rerun with --verbose and report it with the log.`;
}
