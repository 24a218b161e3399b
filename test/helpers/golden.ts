import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const GOLDEN_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'golden');
export const GOLDEN = path.join(GOLDEN_ROOT, 'nvshmem');
export const GOLDEN_DEEPEP = path.join(GOLDEN_ROOT, 'deepep');

export interface GoldenCase {
  name: string;
  dir: string;
  base?: string;
  expect: 'patch' | 'refuse';
  note: string;
}

export function goldenCases(root = GOLDEN): GoldenCase[] {
  return readdirSync(root)
    .filter((n) => existsSync(path.join(root, n, 'case.json')))
    .sort()
    .map((name) => ({ name, dir: path.join(root, name), ...JSON.parse(readFileSync(path.join(root, name, 'case.json'), 'utf8')) }));
}

/** A fresh temporary copy of the case's tree: its base case's tree, then its own files over it. */
export function materialize(c: GoldenCase | string, root = GOLDEN): string {
  const gc = typeof c === 'string' ? goldenCases(root).find((x) => x.name === c)! : c;
  const dst = mkdtempSync(path.join(os.tmpdir(), `nvshmem-efa-${gc.name}-`));
  if (gc.base) cpSync(path.join(path.dirname(gc.dir), gc.base, 'tree'), dst, { recursive: true });
  cpSync(path.join(gc.dir, 'tree'), dst, { recursive: true });
  return dst;
}
