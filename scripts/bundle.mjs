// Bundles src/ for fast start-up: an entry, cli.mjs, and chunk-*.mjs beside it (esbuild's code splitting), so that
// each command's `await import()` in src/cli.ts stays lazy and --help loads none of zod, execa, listr2
// or tree-sitter (test/unit/cli-light.test.ts checks the entry's static imports in the metafile).
//   node scripts/bundle.mjs                    dist/cli.mjs, dependencies stay in node_modules (`npm run build`;
//                                              `npm pack` runs it too: prepack; the tests when dist/ is stale:
//                                              test/global-setup.ts). In a clone bin/nvshmem-efa.js runs it only
//                                              while dist/source-hash.txt matches src/ (source-stat.txt: the same,
//                                              told by stat alone, its fast path); an installed package has no src/.
//   node scripts/bundle.mjs --standalone DIR   one self-contained directory (every dependency bundled,
//                                              web-tree-sitter's wasm, package.json, templates/, third_party/, the C++
//                                              grammar inflated (tree-sitter-cpp.wasm),
//                                              native/probe, bench/gda-signals, and for selftest native/efaemu,
//                                              native/softefa and the test GDA headers test/efa_abi)
//                                              for a machine without node_modules: run DIR/nvshmem-efa.mjs.
//   --metafile FILE (with either)              also write esbuild's metafile there (the test reads it).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceHash } from '../bin/source-hash.js';
import { sourceStat } from '../bin/source-stat.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const valueOf = (flag) => (args.includes(flag) && !args[args.indexOf(flag) + 1]?.startsWith('--') ? args[args.indexOf(flag) + 1] : undefined);
const standalone = args.includes('--standalone') ? path.resolve(valueOf('--standalone') ?? 'standalone') : null;
const metafile = valueOf('--metafile');
// One flat directory: modules find files beside themselves (web-tree-sitter.wasm, the package root above them,
// code-identity's hash of every .mjs there).
const outdir = standalone ?? path.join(root, 'dist');
// Taken before bundling: a source edited meanwhile then leaves the stamps stale rather than vouching for it.
const stamp = standalone ? null : sourceHash(root);
const statStamp = standalone ? null : sourceStat(root);
// The commit the bundle is built from, for --version where no clone is at hand (src/core/version-info.ts): null
// when this tree is no clone (an npm tarball) or git is missing.
const builtFrom = (() => {
  if (!existsSync(path.join(root, '.git'))) return null;
  const git = (a) => execFileSync('git', ['-C', root, ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return { id: git(['rev-parse', 'HEAD']), modified: git(['status', '--porcelain', '--untracked-files=no']) !== '' };
  } catch {
    return null;
  }
})();
const result = await build({
  define: { __NVSHMEM_EFA_BUILT_FROM__: JSON.stringify(builtFrom) },
  entryPoints: { cli: path.join(root, 'src/cli.ts') },
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outdir,
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunk-[hash]',
  metafile: true,
  logLevel: 'warning',
  ...(standalone
    ? {
        // Bundled CommonJS dependencies call require(); give every ESM chunk one.
        banner: { js: "import { createRequire as __nvshmemEfaRequire } from 'node:module'; const require = __nvshmemEfaRequire(import.meta.url);" },
      }
    : { packages: 'external' }),
});
// Chunks of an earlier bundle go, once this one is written (their names are content hashes: a CLI that started
// on the old entry meanwhile still finds its chunks).
const written = new Set(Object.keys(result.metafile.outputs).map((f) => path.basename(f)));
for (const f of readdirSync(outdir)) if (/^chunk-\w+\.mjs$/.test(f) && !written.has(f)) rmSync(path.join(outdir, f));
if (standalone) {
  const req = createRequire(path.join(root, 'package.json'));
  cpSync(req.resolve('web-tree-sitter/web-tree-sitter.wasm'), path.join(standalone, 'web-tree-sitter.wasm'));
  // Python's byte-code caches (warmup/ is run by the tests here) are this host's, not the package's.
  for (const d of ['templates', 'third_party', 'native/probe', 'native/efaemu', 'native/softefa', 'test/efa_abi', 'bench/gda-signals']) cpSync(path.join(root, d), path.join(standalone, d), { recursive: true, filter: (f) => path.basename(f) !== '__pycache__' });
  // The C++ grammar inflated, at the top beside web-tree-sitter.wasm (src/patchers/engine/cpp.ts reads it first): a
  // standalone directory is not a download, so its 3 MB cost nothing, and every parse-using command then skips
  // about 20 ms of inflating. Not into third_party/: a copied symlink there (the tests' package copies) would take
  // the write into the clone.
  writeFileSync(path.join(standalone, 'tree-sitter-cpp.wasm'), gunzipSync(readFileSync(path.join(root, 'third_party/tree-sitter-cpp/tree-sitter-cpp.wasm.gz'))));
  cpSync(path.join(root, 'package.json'), path.join(standalone, 'package.json'));
  writeFileSync(path.join(standalone, 'nvshmem-efa.mjs'), "#!/usr/bin/env node\nconst { main } = await import('./cli.mjs');\nprocess.exitCode = await main(process.argv);\n");
} else {
  mkdirSync(path.join(root, 'dist'), { recursive: true });
  writeFileSync(path.join(root, 'dist/source-hash.txt'), stamp);
  writeFileSync(path.join(root, 'dist/source-stat.txt'), statStamp);
}
if (metafile) writeFileSync(path.resolve(metafile), JSON.stringify(result.metafile));
