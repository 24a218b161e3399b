import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { blockersError, checkCudaArchOption, surveyEnvironment, type DetectedEnv } from '../core/environment.ts';
import { EnvironmentError, NvshmemEfaError, PatchRefusedError, UsageError, VerificationError } from '../core/errors.ts';
import { readHeadCommit } from '../core/git.ts';
import { checkDirectory } from '../core/small-file.ts';
import { STATE_FILE } from '../core/state.ts';
import { MARKER_FILE } from '../core/work-dir.ts';
import { queryTool } from '../core/exec.ts';
import { filesIncluding, notNvshmemReason } from '../core/nvshmem-tree.ts';
import { checkDisjoint, type NamedDir } from '../core/overlap.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import type { Options } from '../options.ts';
import { python } from '../steps/deepep-setup.ts';
import { deepEpPinFor, deepEpCloneDir } from '../steps/get-deepep.ts';
import { nvshmemCloneDir, pinFor } from '../steps/get-nvshmem.ts';
import { workPaths } from '../steps/work-paths.ts';
import { deepEpRefusalError } from '../steps/patch-deepep.ts';
import { loadLock, readEfaIoDefs } from '../steps/vendor-efa-io-defs.ts';
import { fabricOrigin, fabricPin, fabtestsPin, gdrcopyPin, isLocalOrigin, loadFabricLock, loadGdrcopyLock, type FabricPackage, type FabricPin } from '../core/fabric-lock.ts';
import { cachedArchive, howToProvide } from '../core/fabric-source.ts';
import path from 'node:path';
import { checkExportDir } from './export-patches.ts';
import { torchImportedBefore } from '../steps/build-deepep.ts';
import { checkInPlaceWritable } from '../core/writable.ts';
import { requireTorch } from '../core/pip-nvshmem.ts';

/**
 * Everything that can be checked before the long steps, checked before anything is written: a typo in a
 * DeepEP path must not surface after a 19-minute NVSHMEM build, and a refusal must leave nothing behind.
 * Checks are data, run in order; each throws the typed error the user would otherwise meet later.
 */
export interface Found {
  /** The build environment (build only), handed to the detect step. */
  env?: DetectedEnv;
  envFixes: FixRecord[];
  /** The plan of --deepep-src made by the check (a dry run shows it instead of planning it again). */
  deepepPlan?: Awaited<ReturnType<typeof planDeepEp>>;
  /** What the environment survey found, blockers or not (a dry run plans with it when `env` is missing). */
  parts?: Partial<DetectedEnv>;
  /** A dry run's: what the real run would stop on, each with the typed error's message and fix (in order). */
  blockers: PlanBlocker[];
}

/** Something the real run would stop on, found by a dry run, which lists it in the plan instead of stopping. */
export interface PlanBlocker {
  /** The preflight check (or environment part: cuda, cmake, nvml, …) that found it. */
  id: string;
  message: string;
  fix: string;
  /** The exit code the real run would end with. */
  exitCode: number;
}

/**
 * What a dry run lists as a blocker instead of stopping: a missing prerequisite of the build (a tool, a
 * library, a header, a cache, a Python with torch: exit 4) or a given source that does not match its pin
 * (exit 5). A command-line mistake, a source tree that is not what it should be, a file-system refusal or a
 * busy work dir still stop a dry run: they are about what to plan, not what the host lacks (issue 39, item 5).
 */
export const isBlocker = (e: unknown): e is NvshmemEfaError => e instanceof EnvironmentError || e instanceof VerificationError;

interface Check {
  id: string;
  applies(o: Options): boolean;
  run(o: Options, found: Found): Promise<void>;
}

const isBuild = (o: Options) => o.command === 'build';

/** A directory the run reads: nothing there is exit 2, a file there exit 6 (the README's table). */
async function mustBeDir(flag: string, dir: string, fix: string): Promise<void> {
  checkDirectory(dir, `${flag} ${dir}`, fix);
}

/** A home named by a variable instead of its option: refused like the option, naming the variable. */
function envHome(name: string, fix: string): void {
  const dir = process.env[name];
  if (dir) checkDirectory(dir, `${name}=${dir}`, `${fix}, or unset ${name}`);
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
      const cuda = 'pass the CUDA toolkit directory (holding bin/nvcc)';
      const libfabric = 'pass the libfabric install prefix (holding include/rdma/fabric.h)';
      const gdrcopy = 'pass the GDRCopy install prefix (holding include/gdrapi.h)';
      if (o.cudaHome) await mustBeDir('--cuda-home', o.cudaHome, cuda);
      // The variables are used when the option is not given (as environment.ts does): a typo in one must not
      // silently select another toolkit or library, and the error names the variable.
      else if (process.env.CUDA_HOME) envHome('CUDA_HOME', 'set it to the CUDA toolkit directory (holding bin/nvcc)');
      else envHome('CUDA_PATH', 'set it to the CUDA toolkit directory (holding bin/nvcc)');
      if (o.libfabricHome) await mustBeDir('--libfabric-home', o.libfabricHome, libfabric);
      else if (!o.libfabricRef) envHome('LIBFABRIC_HOME', 'set it to the libfabric install prefix (holding include/rdma/fabric.h)');
      if (o.gdrcopyHome) await mustBeDir('--gdrcopy-home', o.gdrcopyHome, gdrcopy);
      else envHome('GDRCOPY_HOME', 'set it to the GDRCopy install prefix (holding include/gdrapi.h)');
    },
  },
  {
    // The pins every run reads (a variable may name other lock files): checked before anything is written.
    id: 'locks',
    applies: () => true,
    async run(o) {
      await loadLock();
      if (isBuild(o)) {
        await loadFabricLock();
        await loadGdrcopyLock();
      }
    },
  },
  {
    // What claiming the work dir would refuse, refused here too: a dry run must not succeed where the run
    // would stop at once. Only a dry run needs the foreign-directory check (the run claims the dir itself).
    id: 'work-dir',
    applies: (o) => !o.exportDir,
    async run(o) {
      checkDirectory(o.workDir, `--work-dir ${o.workDir}`, `pass a directory path (a new one is created), or move ${o.workDir} away`, false);
      if (o.dryRun && existsSync(o.workDir) && !existsSync(path.join(o.workDir, MARKER_FILE)) && !existsSync(path.join(o.workDir, STATE_FILE))) {
        const entries = await readdir(o.workDir);
        if (entries.length) {
          throw new UsageError(
            `--work-dir ${o.workDir} is not empty and is not an nvshmem-efa work dir (it holds ${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ', …' : ''}); the build would refuse to write into it`,
            `pass a new or empty directory, e.g. --work-dir ${path.join(o.workDir, 'nvshmem-efa-work')}`,
          );
        }
      }
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
    applies: (o) => o.offline,
    async run(o) {
      const paths = workPaths(o.workDir);
      if (!o.nvshmemSrc) {
        const pin = pinFor(o.nvshmemRef);
        const dir = nvshmemCloneDir(paths, pin);
        if ((await readHeadCommit(dir)) !== pin.commit) throw new EnvironmentError(`--offline and no verified clone of NVSHMEM ${pin.ref} in ${dir}`, 'run once with network access to fill the cache, or pass --nvshmem-src DIR');
      }
      if (o.deepepRef) {
        const pin = deepEpPinFor(o.deepepRef);
        const dir = deepEpCloneDir(paths, pin);
        if ((await readHeadCommit(dir)) !== pin.commit) throw new EnvironmentError(`--offline and no verified clone of DeepEP ${pin.ref} in ${dir}`, 'run once with network access, or pass --deepep-src DIR');
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
    async run(o) {
      checkDirectory(o.exportDir!, `--export ${o.exportDir}`, 'pass a new or empty directory for the patches', false);
      await checkExportDir(o.exportDir!);
    },
  },
  {
    id: 'efa-io-defs',
    // A dry run and an export check it too: the run would refuse it before its first step.
    applies: (o) => !!o.efaIoDefs,
    async run(o) {
      await readEfaIoDefs(o.efaIoDefs!, await loadLock());
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
    applies: (o) => !!o.deepepSrc,
    async run(o, found) {
      const plan = await planDeepEp(o.deepepSrc!);
      if (plan.refusals.length) throw deepEpRefusalError(plan, o.deepepSrc!, 'nothing was changed (checked before NVSHMEM was patched)');
      found.deepepPlan = plan;
      // --in-place writes NVSHMEM's tree first and DeepEP's after: a DeepEP this user cannot write is refused
      // before NVSHMEM is touched, not after (the patch of NVSHMEM would stay).
      if (o.inPlace) checkInPlaceWritable('--deepep-src', o.deepepSrc!, plan.changes.map((c) => path.dirname(path.join(o.deepepSrc!, c.file))), 'nothing was changed (checked before NVSHMEM was patched)');
    },
  },
  {
    id: 'in-place-writable',
    applies: (o) => o.inPlace && !!o.nvshmemSrc,
    async run(o) {
      checkInPlaceWritable('--nvshmem-src', o.nvshmemSrc!, [], 'nothing was changed');
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
      // A --cuda-arch the toolkit cannot target is a command-line mistake (exit 2), said before what is missing.
      if (o.cudaArch && s.parts.cuda) await checkCudaArchOption(o.cudaArch, s.parts.cuda);
      found.parts = s.parts;
      found.envFixes = s.fixes;
      if (!s.env) {
        // A dry run lists each one (as doctor does); the run stops at the first, naming the others.
        const exitCode = blockersError(s.blockers).exitCode;
        if (o.dryRun) found.blockers.push(...s.blockers.map((b) => ({ ...b, exitCode })));
        else throw blockersError(s.blockers);
        return;
      }
      found.env = s.env;
    },
  },
  {
    // --offline with libfabric / rdma-core / GDRCopy to build: their pinned sources must already be here.
    id: 'fabric-offline',
    applies: (o) => isBuild(o) && o.offline,
    async run(o, found) {
      // A dry run with environment blockers goes on with what the survey found.
      const plan = found.env?.fabric ?? found.parts?.fabric;
      const gdrcopy = found.env?.gdrcopy ?? found.parts?.gdrcopy;
      const paths = workPaths(o.workDir);
      // Each with why it is built, said once per reason.
      const wanted: { pkg: FabricPackage; pin: FabricPin; why: string }[] = [];
      if (plan?.libfabric.action === 'build') {
        const lock = await loadFabricLock();
        const lfPin = fabricPin(lock, 'libfabric', plan.libfabric.ref);
        wanted.push({ pkg: 'libfabric', pin: lfPin, why: plan.libfabric.why });
        if (plan.rdmaCore?.action === 'build') wanted.push({ pkg: 'rdma-core', pin: fabricPin(lock, 'rdma-core', plan.rdmaCore.ref), why: plan.libfabric.why });
        // fabtests come with the libfabric build unless turned off (from the same clone when libfabric comes from git).
        const ft = process.env.NVSHMEM_EFA_FABTESTS !== '0' ? fabtestsPin(lfPin) : undefined;
        if (ft && fabricOrigin('fabtests', ft).kind !== 'git') wanted.push({ pkg: 'fabtests', pin: ft, why: plan.libfabric.why });
      }
      // Detection planned the gdrcopy step: no GDRCopy found or named, and not turned off.
      if (gdrcopy?.build) {
        wanted.push({ pkg: 'gdrcopy', pin: gdrcopyPin(await loadGdrcopyLock()), why: 'no GDRCopy on this host, and NVSHMEM\'s EFA provider needs it' });
      }
      const missing: typeof wanted = [];
      for (const w of wanted) {
        const origin = fabricOrigin(w.pkg, w.pin);
        if (isLocalOrigin(origin)) continue;
        if (origin.kind === 'git' ? (await readHeadCommit(path.join(paths.sources, `${w.pkg}-${w.pin.ref}`))) === w.pin.commit : await cachedArchive(w.pin, paths.downloads)) continue;
        missing.push(w);
      }
      if (missing.length) {
        const why = [...new Set(missing.map((m) => m.why))].join('; ');
        const names = missing.map((m) => `${m.pkg} ${m.pin.ref} (${m.pin.archive.url}, sha256 ${m.pin.archive.sha256})`);
        throw new EnvironmentError(`--offline, and the pinned sources to build are not cached in ${paths.downloads}: ${names.join('; ')} (${why})`, `${howToProvide(missing[0]!.pkg, missing[0]!.pin)}${missing.length > 1 ? ' (likewise for each one named)' : ''}`);
      }
    },
  },
  {
    id: 'python-torch',
    // A dry run too: the build would stop here before its first step.
    applies: (o) => isBuild(o) && !!(o.deepepSrc || o.deepepRef),
    async run(o) {
      const py = python();
      const found = py.includes('/') ? existsSync(py) : (process.env.PATH ?? '').split(':').some((d) => d && existsSync(path.join(d, py)));
      if (!found) {
        const named = process.env.PYTHON ? `PYTHON=${py}` : py;
        throw new EnvironmentError(`${named}: no such Python interpreter${py.includes('/') ? '' : ' on PATH'}, and DeepEP's setup.py needs one with torch`, 'set PYTHON to a Python that has PyTorch (e.g. PYTHON=$(which python3)), or drop --deepep-src/--deepep-ref');
      }
      // A rerun whose last DeepEP build imported torch with this very interpreter skips the import (seconds).
      if (existsSync(o.workDir) && (await torchImportedBefore(o.workDir, py))) return;
      await requireTorch(py, '; or drop --deepep-src/--deepep-ref');
    },
  },
];

/**
 * Runs every applicable check in order; the first failure is thrown, nothing having been written. A dry run
 * (`--dry-run`) lists each blocker (isBlocker) in `found.blockers` and goes on, so that its plan is whole.
 */
export async function preflight(o: Options): Promise<Found> {
  const found: Found = { envFixes: [], blockers: [] };
  for (const c of PREFLIGHT) {
    if (!c.applies(o)) continue;
    try {
      await c.run(o, found);
    } catch (e) {
      if (!(o.dryRun && isBlocker(e))) throw e;
      found.blockers.push({ id: c.id, message: e.message, fix: e.fix, exitCode: e.exitCode });
    }
  }
  return found;
}

