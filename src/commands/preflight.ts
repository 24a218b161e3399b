import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { blockersError, surveyEnvironment, type DetectedEnv } from '../core/environment.ts';
import { EnvironmentError, PatchRefusedError, UsageError, VerificationError } from '../core/errors.ts';
import { probe } from '../core/exec.ts';
import { filesIncluding, notNvshmemReason } from '../core/nvshmem-tree.ts';
import { checkDisjoint, type NamedDir } from '../core/overlap.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import type { Options } from '../options.ts';
import { python } from '../steps/deepep-setup.ts';
import { deepEpPinFor, deepEpCloneDir } from '../steps/get-deepep.ts';
import { headCommit, nvshmemCloneDir, pinFor } from '../steps/get-nvshmem.ts';
import { workPaths } from '../steps/index.ts';
import { deepEpRefusalError } from '../steps/patch-deepep.ts';
import { loadLock } from '../steps/vendor-efa-io-defs.ts';
import { fabricOrigin, fabricPin, isLocalOrigin, loadFabricLock } from '../core/fabric-lock.ts';
import { cachedArchive, howToProvide } from '../core/fabric-source.ts';
import path from 'node:path';
import { checkExportDir } from './export-patches.ts';

/**
 * Everything that can be checked before the long steps, checked before anything is written: a typo in a
 * DeepEP path must not surface after a 19-minute NVSHMEM build, and a refusal must leave nothing behind.
 * Checks are data, run in order; each throws the typed error the user would otherwise meet later.
 */
export interface Found {
  /** The build environment (build only), handed to the detect step. */
  env?: DetectedEnv;
  envFixes: FixRecord[];
}

interface Check {
  id: string;
  applies(o: Options): boolean;
  run(o: Options, found: Found): Promise<void>;
}

const isBuild = (o: Options) => o.command === 'build';
const planOnly = (o: Options) => o.dryRun || !!o.exportDir;

async function mustBeDir(flag: string, dir: string, fix: string): Promise<void> {
  let st;
  try {
    st = await stat(dir);
  } catch {
    throw new UsageError(`${flag} ${dir} does not exist`, fix);
  }
  if (!st.isDirectory()) throw new UsageError(`${flag} ${dir} is not a directory`, fix);
}

/** The NVSHMEM tree the run will read before patching: the user's, or the cached clone of a pinned ref. */
function knownNvshmemTree(o: Options): string | undefined {
  if (o.nvshmemSrc) return o.nvshmemSrc;
  const dir = nvshmemCloneDir(workPaths(o.workDir), pinFor(o.nvshmemRef));
  return existsSync(dir) ? dir : undefined;
}

export const PREFLIGHT: readonly Check[] = [
  {
    id: 'source-dirs',
    applies: () => true,
    async run(o) {
      if (o.nvshmemSrc) await mustBeDir('--nvshmem-src', o.nvshmemSrc, 'pass the root of an NVSHMEM source tree');
      if (o.deepepSrc) await mustBeDir('--deepep-src', o.deepepSrc, 'pass the root of a DeepEP checkout');
    },
  },
  {
    id: 'homes',
    applies: isBuild,
    async run(o) {
      if (o.cudaHome) await mustBeDir('--cuda-home', o.cudaHome, 'pass the CUDA toolkit directory (holding bin/nvcc)');
      if (o.libfabricHome) await mustBeDir('--libfabric-home', o.libfabricHome, 'pass the libfabric install prefix (holding include/rdma/fabric.h)');
      if (o.gdrcopyHome) await mustBeDir('--gdrcopy-home', o.gdrcopyHome, 'pass the GDRCopy install prefix (holding include/gdrapi.h)');
    },
  },
  {
    id: 'refs',
    applies: () => true,
    async run(o) {
      if (!o.nvshmemSrc) pinFor(o.nvshmemRef);
      if (o.deepepRef) deepEpPinFor(o.deepepRef);
      if (o.libfabricRef) fabricPin(await loadFabricLock(), 'libfabric', o.libfabricRef);
    },
  },
  {
    id: 'offline-cache',
    applies: (o) => o.offline && !planOnly(o),
    async run(o) {
      const paths = workPaths(o.workDir);
      if (!o.nvshmemSrc) {
        const pin = pinFor(o.nvshmemRef);
        const dir = nvshmemCloneDir(paths, pin);
        if ((await headCommit(dir)) !== pin.commit) throw new EnvironmentError(`--offline and no verified clone of NVSHMEM ${pin.ref} in ${dir}`, 'run once with network access to fill the cache, or pass --nvshmem-src DIR');
      }
      if (o.deepepRef) {
        const pin = deepEpPinFor(o.deepepRef);
        const dir = deepEpCloneDir(paths, pin);
        if ((await headCommit(dir)) !== pin.commit) throw new EnvironmentError(`--offline and no verified clone of DeepEP ${pin.ref} in ${dir}`, 'run once with network access, or pass --deepep-src DIR');
      }
    },
  },
  {
    id: 'no-overlap',
    applies: () => true,
    async run(o) {
      const dirs: NamedDir[] = [{ flag: '--work-dir', dir: o.workDir }];
      if (o.nvshmemSrc) dirs.push({ flag: '--nvshmem-src', dir: o.nvshmemSrc });
      if (o.deepepSrc) dirs.push({ flag: '--deepep-src', dir: o.deepepSrc });
      if (o.exportDir) dirs.push({ flag: '--export', dir: o.exportDir });
      checkDisjoint(dirs);
    },
  },
  {
    id: 'export-dir',
    applies: (o) => !!o.exportDir,
    run: (o) => checkExportDir(o.exportDir!),
  },
  {
    id: 'efa-io-defs',
    applies: (o) => !!o.efaIoDefs && !planOnly(o),
    async run(o) {
      const lock = await loadLock();
      let bytes: Buffer;
      try {
        bytes = await readFile(o.efaIoDefs!);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        throw new UsageError(`--efa-io-defs ${o.efaIoDefs}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (e as Error).message}`, `pass the path of ${lock.file} (${lock.repository} ${lock.revision} ${lock.path})`);
      }
      const got = createHash('sha256').update(bytes).digest('hex');
      if (got !== lock.sha256) {
        throw new VerificationError(`${o.efaIoDefs} is not the pinned ${lock.file}: sha256 ${got}, expected ${lock.sha256} (${lock.repository} ${lock.revision})`, `use exactly ${lock.path} of ${lock.repository} at ${lock.revision}: ${lock.url}`);
      }
    },
  },
  {
    id: 'nvshmem-tree',
    applies: (o) => !!o.nvshmemSrc,
    async run(o) {
      const why = await notNvshmemReason(o.nvshmemSrc!);
      if (why) {
        throw new PatchRefusedError(`--nvshmem-src ${o.nvshmemSrc} is not an NVSHMEM source tree (${why}); nothing was copied or changed`, 'pass the root of an NVSHMEM 3.x source tree (the folder holding CMakeLists.txt and src/), or use --nvshmem-ref v3.4.5-0', []);
      }
    },
  },
  {
    // DeepEP is planned (read only) before NVSHMEM is touched: its refusal must not follow an in-place patch.
    id: 'deepep-plan',
    applies: (o) => !!o.deepepSrc && !planOnly(o),
    async run(o) {
      const plan = await planDeepEp(o.deepepSrc!);
      if (plan.refusals.length) throw deepEpRefusalError(plan, o.deepepSrc!, 'nothing was changed (checked before NVSHMEM was patched)');
    },
  },
  {
    id: 'build-environment',
    applies: isBuild,
    async run(o, found) {
      const tree = knownNvshmemTree(o);
      // An NVSHMEM not fetched yet is a pinned NVIDIA release, and every 3.x includes nvml.h.
      const requireNvml = tree ? (await filesIncluding(tree, 'nvml.h', 1)).length > 0 : true;
      const s = await surveyEnvironment({ cudaHome: o.cudaHome, libfabricHome: o.libfabricHome, libfabricRef: o.libfabricRef, workDir: o.workDir, gdrcopyHome: o.gdrcopyHome, cudaArch: o.cudaArch, env: process.env, requireNvml });
      if (!s.env) throw blockersError(s.blockers);
      found.env = s.env;
      found.envFixes = s.fixes;
    },
  },
  {
    // --offline with libfabric / rdma-core to build: their pinned sources must already be here.
    id: 'fabric-offline',
    applies: (o) => isBuild(o) && o.offline && !planOnly(o),
    async run(o, found) {
      const plan = found.env?.fabric;
      if (!plan || plan.libfabric.action !== 'build') return;
      const lock = await loadFabricLock();
      const paths = workPaths(o.workDir);
      const wanted = [{ pkg: 'libfabric' as const, ref: plan.libfabric.ref }, ...(plan.rdmaCore?.action === 'build' ? [{ pkg: 'rdma-core' as const, ref: plan.rdmaCore.ref }] : [])];
      const missing: string[] = [];
      let fix = '';
      for (const w of wanted) {
        const pin = fabricPin(lock, w.pkg, w.ref);
        const origin = fabricOrigin(w.pkg, pin);
        if (isLocalOrigin(origin)) continue;
        if (origin.kind === 'git' ? (await headCommit(path.join(paths.sources, `${w.pkg}-${pin.ref}`))) === pin.commit : await cachedArchive(pin, paths.downloads)) continue;
        missing.push(`${w.pkg} ${pin.ref} (${pin.archive.url}, sha256 ${pin.archive.sha256})`);
        fix ||= howToProvide(w.pkg, pin);
      }
      if (missing.length) {
        throw new EnvironmentError(`--offline, and the pinned sources to build are not cached in ${paths.downloads}: ${missing.join('; ')} (${plan.libfabric.why})`, `${fix}${missing.length > 1 ? ' (likewise for each one named)' : ''}`);
      }
    },
  },
  {
    id: 'python-torch',
    applies: (o) => isBuild(o) && !o.dryRun && !!(o.deepepSrc || o.deepepRef),
    async run() {
      const torch = await probe(python(), ['-c', 'import torch; print(torch.__version__)']);
      if (!torch) {
        throw new EnvironmentError(`${python()} cannot import torch, which DeepEP's setup.py builds with`, 'install PyTorch for your CUDA (pip install torch) or set PYTHON to an interpreter that has it; or drop --deepep-src/--deepep-ref');
      }
    },
  },
];

/** Runs every applicable check in order; the first failure is thrown, nothing having been written. */
export async function preflight(o: Options): Promise<Found> {
  const found: Found = { envFixes: [] };
  for (const c of PREFLIGHT) if (c.applies(o)) await c.run(o, found);
  return found;
}

