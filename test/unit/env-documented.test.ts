import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/**
 * Every NVSHMEM_EFA_* environment variable the tool or its injected code reads is documented in the README or a
 * docs/ page (the CLI reference holds the tables): a variable a user cannot find is a switch nobody can use.
 * Read by the CLI: `env.NAME` / `env['NAME']`, or a `const ..._SWITCH = 'NAME'` read as env[...], in src/; by the templates: a "NVSHMEM_EFA_..." string literal (a
 * getenv argument or the *_ENV constant one is read through). C macros (NVSHMEM_EFA_SHIM_* defines) are not
 * environment and are not string literals.
 */
const files = (dir: string, ext: RegExp): string[] =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && ext.test(e.name))
    .map((e) => path.join(e.parentPath, e.name));

function readVariables(): Map<string, string> {
  const found = new Map<string, string>();
  for (const f of files(path.join(ROOT, 'src'), /\.ts$/)) {
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/\benv(?:\.|\[['"])(NVSHMEM_EFA_[A-Z0-9_]+)/g)) found.set(m[1]!, path.relative(ROOT, f));
    // A name kept in a constant (const GDRCOPY_SWITCH = 'NVSHMEM_EFA_GDRCOPY') and read as env[GDRCOPY_SWITCH].
    for (const m of text.matchAll(/const \w*(?:SWITCH|ENV|VARIABLE) = '(NVSHMEM_EFA_[A-Z0-9_]+)'/g)) found.set(m[1]!, path.relative(ROOT, f));
  }
  for (const f of files(path.join(ROOT, 'templates'), /\.(cpp|h|cuh)$/)) {
    for (const m of readFileSync(f, 'utf8').matchAll(/"(NVSHMEM_EFA_[A-Z0-9_]+)"/g)) found.set(m[1]!, path.relative(ROOT, f));
  }
  return found;
}

describe('environment variables', () => {
  it('every NVSHMEM_EFA_* variable read by src/ or templates/ is documented in README.md or docs/', () => {
    const docs = [path.join(ROOT, 'README.md'), ...files(path.join(ROOT, 'docs'), /\.md$/)].map((f) => readFileSync(f, 'utf8')).join('\n');
    const vars = readVariables();
    // The scan itself works: these are read today (a regex that matched nothing would pass vacuously).
    for (const known of ['NVSHMEM_EFA_GDA_TIMEOUT_MS', 'NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS', 'NVSHMEM_EFA_FABTESTS', 'NVSHMEM_EFA_GDRCOPY']) expect([...vars.keys()]).toContain(known);
    const missing = [...vars].filter(([name]) => !docs.includes(name)).map(([name, where]) => `${name} (read in ${where})`);
    expect(missing).toEqual([]);
  });
});
