import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/** The vendored C++ grammar is the file its README names, byte for byte (the README's table holds the checksum). */
describe('third_party/tree-sitter-cpp', () => {
  it('tree-sitter-cpp.wasm.gz inflates to the sha256 its README records', () => {
    const dir = path.join(ROOT, 'third_party/tree-sitter-cpp');
    const recorded = /^\| sha256 of the `\.wasm` \(inflated\) \| `([0-9a-f]{64})` \|$/m.exec(readFileSync(path.join(dir, 'README.md'), 'utf8'))?.[1];
    expect(recorded).toBeDefined();
    expect(createHash('sha256').update(gunzipSync(readFileSync(path.join(dir, 'tree-sitter-cpp.wasm.gz')))).digest('hex')).toBe(recorded);
  });
});
