import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The installed package's root (holding templates/ and third_party/). Found by walking up from this module,
 * so it works from src/ under tsx and from a bundled dist/ file alike; NVSHMEM_EFA_HOME overrides it.
 */
export function packageRoot(): string {
  if (process.env.NVSHMEM_EFA_HOME) return process.env.NVSHMEM_EFA_HOME;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).name === 'nvshmem-efa') return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the nvshmem-efa package root; set NVSHMEM_EFA_HOME');
    dir = up;
  }
}

export function toolVersion(): string {
  return JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')).version as string;
}
