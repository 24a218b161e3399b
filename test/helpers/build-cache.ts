import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * A build directory for native code the tests compile (efaemu's cmake build), kept between runs so that a rerun
 * rebuilds only what changed, and outside the checkout: a test writes nothing in the tree. One per checkout (a
 * cmake build dir belongs to one source dir: two worktrees must not share it). NVSHMEM_EFA_TEST_CACHE moves it.
 */
export function nativeBuildCache(name: string): string {
  const base = process.env.NVSHMEM_EFA_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'nvshmem-efa', 'test-builds');
  const checkout = createHash('sha256').update(ROOT).digest('hex').slice(0, 12);
  return path.join(base, `${path.basename(ROOT)}-${checkout}`, name);
}
