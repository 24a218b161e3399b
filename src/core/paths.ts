import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EnvironmentError, FilesystemError, UsageError } from './errors.ts';

/** The package's name in its package.json: how a directory is recognised as the package root. */
function isPackageRoot(dir: string): boolean {
  try {
    return JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).name === 'nvshmem-efa';
  } catch {
    return false;
  }
}

/** NVSHMEM_EFA_HOME values already checked (the root is asked for many times per run). */
const checkedHomes = new Set<string>();

/**
 * NVSHMEM_EFA_HOME, checked before anything is read from it: pointing nowhere (2), at a file (6) or at a
 * directory that is not the package (2) is one line naming the variable, not a stack trace from the first
 * file read under it.
 */
function checkedHome(home: string): string {
  if (checkedHomes.has(home)) return home;
  const fix = `unset NVSHMEM_EFA_HOME, or set it to the directory holding nvshmem-efa's package.json, templates/ and third_party/`;
  let st;
  try {
    st = statSync(home);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new UsageError(`NVSHMEM_EFA_HOME=${home} does not exist`, fix);
    throw new FilesystemError(`NVSHMEM_EFA_HOME=${home} cannot be read (${code})`, fix, home, code ?? 'EIO');
  }
  if (!st.isDirectory()) throw new FilesystemError(`NVSHMEM_EFA_HOME=${home} is not a directory`, fix, home, 'ENOTDIR');
  if (!isPackageRoot(home) || !existsSync(path.join(home, 'templates'))) {
    throw new UsageError(`NVSHMEM_EFA_HOME=${home} is not an nvshmem-efa package (no package.json named nvshmem-efa and templates/ there)`, fix);
  }
  checkedHomes.add(home);
  return home;
}

/**
 * The installed package's root (holding templates/ and third_party/). Found by walking up from this module,
 * so it works from src/ under tsx and from a bundled dist/ file alike; NVSHMEM_EFA_HOME overrides it.
 */
export function packageRoot(): string {
  if (process.env.NVSHMEM_EFA_HOME) return checkedHome(process.env.NVSHMEM_EFA_HOME);
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && isPackageRoot(dir)) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new EnvironmentError('cannot find the nvshmem-efa package root (no package.json named nvshmem-efa above this module)', 'set NVSHMEM_EFA_HOME to the directory holding its package.json, templates/ and third_party/');
    dir = up;
  }
}

export function toolVersion(): string {
  return JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')).version as string;
}
