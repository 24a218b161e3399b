// Hash of every file under src/: identifies the sources a bundle in dist/ was built from.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sourceFiles } from './source-stat.js';

export function sourceHash(root) {
  const h = createHash('sha256');
  for (const p of sourceFiles(root)) h.update(path.relative(root, p)).update('\0').update(readFileSync(p)).update('\0');
  return h.digest('hex');
}
