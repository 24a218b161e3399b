import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const GOLDEN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'golden', 'nvshmem');

export interface GoldenCase {
  name: string;
  dir: string;
  base?: string;
  expect: 'patch' | 'refuse';
  note: string;
}

export function goldenCases(): GoldenCase[] {
  return readdirSync(GOLDEN)
    .filter((n) => existsSync(path.join(GOLDEN, n, 'case.json')))
    .sort()
    .map((name) => ({ name, dir: path.join(GOLDEN, name), ...JSON.parse(readFileSync(path.join(GOLDEN, name, 'case.json'), 'utf8')) }));
}

/** A fresh temporary copy of the case's tree: its base case's tree, then its own files over it. */
export function materialize(c: GoldenCase | string): string {
  const gc = typeof c === 'string' ? goldenCases().find((x) => x.name === c)! : c;
  const dst = mkdtempSync(path.join(os.tmpdir(), `nvshmem-efa-${gc.name}-`));
  if (gc.base) cpSync(path.join(GOLDEN, gc.base, 'tree'), dst, { recursive: true });
  cpSync(path.join(gc.dir, 'tree'), dst, { recursive: true });
  return dst;
}
