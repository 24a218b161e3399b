// The files under src/ (one walk, sorted by name, for both fingerprints of the sources a dist/ bundle was built
// from), and the cheap fingerprint: the name, size and modification time of each, read with stat alone (no file is
// read, nothing hashed), so that bin/nvshmem-efa.js can tell in a few milliseconds that dist/ was bundled from the
// sources as they are. An edit changes a file's mtime; when the fingerprint differs, the bin falls back to the
// content hash (source-hash.js), so a touched but unchanged file still runs the bundle.
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** Every regular file under <root>/src, depth first, each directory's entries by name. */
export function sourceFiles(root) {
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) files.push(p);
    }
  };
  walk(path.join(root, 'src'));
  return files;
}

export function sourceStat(root) {
  return sourceFiles(root)
    .map((p) => {
      const st = statSync(p, { bigint: true });
      return `${path.relative(root, p)}\t${st.size}\t${st.mtimeNs}\n`;
    })
    .join('');
}
