// Hash of every file under src/: identifies the sources a bundle in dist/ was built from.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export function sourceHash(root) {
  const h = createHash('sha256');
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) h.update(path.relative(root, p)).update('\0').update(readFileSync(p)).update('\0');
    }
  };
  walk(path.join(root, 'src'));
  return h.digest('hex');
}
