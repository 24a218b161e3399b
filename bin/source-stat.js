// The name, size and modification time of every file under src/: a fingerprint read with stat alone (no file is
// read, nothing hashed), so that bin/nvshmem-efa.js can tell in a few milliseconds that dist/ was bundled from
// the sources as they are. An edit changes a file's mtime; when the fingerprint differs, the bin falls back to
// the content hash (source-hash.js), so a touched but unchanged file still runs the bundle.
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

export function sourceStat(root) {
  const lines = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        const st = statSync(p, { bigint: true });
        lines.push(`${path.relative(root, p)}\t${st.size}\t${st.mtimeNs}`);
      }
    }
  };
  walk(path.join(root, 'src'));
  return lines.join('\n') + '\n';
}
