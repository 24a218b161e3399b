import { statSync } from 'node:fs';
import type * as z from 'zod';
import path from 'node:path';
import { EnvironmentError, FilesystemError, NvshmemEfaError, UsageError } from './errors.ts';
import { packageRoot } from './paths.ts';
import { readSmallFile } from './untrusted.ts';

/**
 * Files and directories named by the user (an option or a variable) are untrusted input: a FIFO would block
 * a read forever, /dev/zero would fill memory, a directory or a missing path would end in a stack trace. These
 * helpers check what the path is before reading it and turn every way it can be wrong into a one-line error
 * that names the option or variable (`label`, e.g. "--efa-io-defs /x" or "NVSHMEM_EFA_FABRIC_LOCK=/x").
 *
 * Exit codes follow the README's table: a path that names nothing (or an empty one) is a command-line mistake
 * (2); a path that names the wrong kind of thing (a file where a directory is expected, a directory, FIFO or
 * device where a regular file is expected) is the file system's answer (6).
 */

function openFault(label: string, file: string, fix: string, e: NodeJS.ErrnoException): Error {
  if (e.code === 'ENOENT') return new UsageError(`${label} does not exist`, fix);
  if (e.code === 'ENOTDIR') return new FilesystemError(`${label}: a component of the path is a file, not a directory`, fix, file, 'ENOTDIR');
  if (e.code === 'EACCES' || e.code === 'EPERM') return new FilesystemError(`${label} cannot be read (permission denied)`, `make it readable by this user (ls -l ${file}), or ${fix}`, file, e.code);
  if (e.code === 'ELOOP') return new FilesystemError(`${label} is a symbolic link loop`, fix, file, 'ELOOP');
  return new FilesystemError(`${label} cannot be opened (${e.code ?? e.message})`, fix, file, e.code ?? 'EIO');
}

/**
 * The bytes of a small regular file the user names (an option or a variable; links followed, as the user's
 * own), at most `maxBytes`: anything else is a one-line error naming `label`.
 */
export async function readUserFile(file: string, label: string, fix: string, maxBytes = 1 << 20): Promise<Buffer> {
  let got;
  try {
    got = readSmallFile(file, maxBytes, { follow: true });
  } catch (e) {
    throw openFault(label, file, fix, e as NodeJS.ErrnoException);
  }
  if (got.kind === 'missing') throw new UsageError(`${label} does not exist`, fix);
  if (got.kind === 'bad') {
    if (got.what === 'too-large') throw new UsageError(`${label} is ${got.why}`, fix);
    throw new FilesystemError(got.what === 'dir' ? `${label} is a directory, not a file` : `${label} is ${got.why}`, fix, file, got.what === 'dir' ? 'EISDIR' : 'EINVAL');
  }
  return got.bytes;
}

/**
 * A directory named by an option or variable: nothing (2), or a file where the directory is expected (6).
 * `mustExist: false` accepts a path that is not there yet (a work dir to create).
 */
export function checkDirectory(dir: string, label: string, fix: string, mustExist = true): void {
  let st;
  try {
    st = statSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      if (!mustExist) return;
      throw new UsageError(`${label} does not exist`, fix);
    }
    throw openFault(label, dir, fix, e as NodeJS.ErrnoException);
  }
  if (!st.isDirectory()) throw new FilesystemError(`${label} is not a directory (it is ${st.isFile() ? 'a file' : 'a special file'})`, fix, dir, 'ENOTDIR');
}

/** The first zod issue as "path: message" (one line; the count of the others), not zod's JSON dump. */
export function firstIssue(error: z.ZodError): string {
  const [i, ...rest] = error.issues;
  if (!i) return 'invalid';
  return `${i.path.join('.') || '(top level)'}: ${i.message}${rest.length ? ` (and ${rest.length} more)` : ''}`;
}

/**
 * A small JSON file named by an option or variable, validated by `schema`: not JSON, or not `what`, is exit 2
 * with one line naming `label` and the first problem.
 */
export async function readJsonFile<T>(file: string, label: string, fix: string, schema: z.ZodType<T>, what: string): Promise<T> {
  const text = (await readUserFile(file, label, fix)).toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    // JSON.parse quotes the text it stopped at, newlines included: one line, and short.
    throw new UsageError(`${label} is not JSON (${(e as Error).message.replace(/\s+/g, ' ').slice(0, 120)})`, fix);
  }
  const r = schema.safeParse(json);
  if (!r.success) throw new UsageError(`${label} is not ${what}: ${firstIssue(r.error)}`, fix);
  return r.data;
}

/**
 * One of the package's lock files (`rel` under the package root), or the file the variable `envVar` names
 * instead. A bad file named by the variable is the user's to fix (exit 2, naming the variable); a bad file of
 * the package itself means a damaged install (exit 4).
 */
export async function readLockFile<T>(envVar: string, rel: readonly string[], schema: z.ZodType<T>, what: string, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const named = env[envVar];
  if (named) {
    return readJsonFile(named, `${envVar}=${named}`, `unset ${envVar} (the package's ${rel.join('/')} is then used), or point it at ${what} of the same form`, schema, what);
  }
  const file = path.join(packageRoot(), ...rel);
  try {
    return await readJsonFile(file, file, 'reinstall nvshmem-efa', schema, what);
  } catch (e) {
    if (e instanceof NvshmemEfaError) throw new EnvironmentError(e.message, 'this copy of nvshmem-efa is damaged: reinstall it (npm ci), or set NVSHMEM_EFA_HOME to an intact copy');
    throw e;
  }
}

/**
 * A file of the package itself (a template, a manifest): read as untrusted like any other, and when it cannot be, the
 * error names what to fix. Under NVSHMEM_EFA_HOME the variable is named (exit 2: it points at a copy that lacks the
 * file; it exited 6 naming only the path, issue 36 class 9); otherwise the install is damaged (exit 4).
 */
export async function readPackageFile(file: string): Promise<string> {
  const home = process.env.NVSHMEM_EFA_HOME;
  const underHome = home !== undefined && home !== '' && !path.relative(path.resolve(home), file).startsWith('..');
  try {
    return (await readUserFile(file, file, 'reinstall nvshmem-efa', 16 << 20)).toString('utf8');
  } catch (e) {
    if (!(e instanceof NvshmemEfaError)) throw e;
    const why = e.message.startsWith(file) ? e.message.slice(file.length).trim() : e.message;
    if (underHome) {
      throw new UsageError(
        `NVSHMEM_EFA_HOME=${home}: ${path.relative(home, file)} ${why}`,
        `unset NVSHMEM_EFA_HOME, or point it at an intact nvshmem-efa package (every file of templates/ and third_party/)`,
      );
    }
    throw new EnvironmentError(`${file} ${why}`, 'this copy of nvshmem-efa is damaged: reinstall it (npm ci), or set NVSHMEM_EFA_HOME to an intact copy');
  }
}

