// Bundles src/ for fast start-up.
//   node scripts/bundle.mjs                    dist/cli.mjs, dependencies stay in node_modules (runs on
//                                              `npm install`/`npm ci`: prepare). bin/nvshmem-efa.js uses it
//                                              only while dist/source-hash.txt matches src/.
//   node scripts/bundle.mjs --standalone DIR   one self-contained directory (every dependency bundled, the
//                                              tree-sitter wasm files, package.json, templates/, third_party/,
//                                              native/probe, bench/gda-signals, and for selftest native/efaemu,
//                                              native/softefa and the test GDA headers test/efa_abi)
//                                              for a machine without node_modules: run DIR/nvshmem-efa.mjs.
import { build } from 'esbuild';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceHash } from '../bin/source-hash.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const standalone = process.argv[2] === '--standalone' ? path.resolve(process.argv[3] ?? 'standalone') : null;
const outfile = standalone ? path.join(standalone, 'cli.mjs') : path.join(root, 'dist/cli.mjs');
await build({
  entryPoints: [path.join(root, 'src/cli.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outfile,
  logLevel: 'warning',
  ...(standalone
    ? {
        // Bundled CommonJS dependencies call require(); give the ESM bundle one.
        banner: { js: "import { createRequire as __nvshmemEfaRequire } from 'node:module'; const require = __nvshmemEfaRequire(import.meta.url);" },
      }
    : { packages: 'external' }),
});
if (standalone) {
  const req = createRequire(path.join(root, 'package.json'));
  cpSync(req.resolve('web-tree-sitter/web-tree-sitter.wasm'), path.join(standalone, 'web-tree-sitter.wasm'));
  cpSync(req.resolve('tree-sitter-cpp/tree-sitter-cpp.wasm'), path.join(standalone, 'tree-sitter-cpp.wasm'));
  for (const d of ['templates', 'third_party', 'native/probe', 'native/efaemu', 'native/softefa', 'test/efa_abi', 'bench/gda-signals']) cpSync(path.join(root, d), path.join(standalone, d), { recursive: true });
  cpSync(path.join(root, 'package.json'), path.join(standalone, 'package.json'));
  writeFileSync(path.join(standalone, 'nvshmem-efa.mjs'), "#!/usr/bin/env node\nconst { main } = await import('./cli.mjs');\nprocess.exitCode = await main(process.argv);\n");
} else {
  mkdirSync(path.join(root, 'dist'), { recursive: true });
  writeFileSync(path.join(root, 'dist/source-hash.txt'), sourceHash(root));
}
