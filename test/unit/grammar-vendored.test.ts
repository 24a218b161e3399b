import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/** The vendored C++ grammar is the file its README names, byte for byte (the README's table holds the checksum). */
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const dir = path.join(ROOT, 'third_party/tree-sitter-cpp');
const recorded = /^\| sha256 of the `\.wasm` \(inflated\) \| `([0-9a-f]{64})` \|$/m.exec(readFileSync(path.join(dir, 'README.md'), 'utf8'))?.[1];

describe('third_party/tree-sitter-cpp', () => {
  it('tree-sitter-cpp.wasm.gz inflates to the sha256 its README records', () => {
    expect(recorded).toBeDefined();
    expect(sha256(gunzipSync(readFileSync(path.join(dir, 'tree-sitter-cpp.wasm.gz'))))).toBe(recorded);
  });
  // cpp.ts reads an inflated copy first where there is one (issue 38 item 3): the standalone bundle's must be
  // the same grammar, or its parses (and so its patches) would differ from a clone's.
  it('a standalone bundle carries it inflated too, with that sha256', () => {
    const sa = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-grammar-standalone-'));
    try {
      const b = spawnSync(process.execPath, [path.join(ROOT, 'scripts/bundle.mjs'), '--standalone', sa], { cwd: ROOT, encoding: 'utf8' });
      expect(b.status, b.stderr).toBe(0);
      expect(sha256(readFileSync(path.join(sa, 'tree-sitter-cpp.wasm')))).toBe(recorded);
    } finally {
      rmSync(sa, { recursive: true, force: true });
    }
  }, 120_000);
});
