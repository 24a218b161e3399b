import { existsSync, statSync } from 'node:fs';
import { readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError } from '../core/errors.ts';
import { openLog, queryTool, run } from '../core/exec.ts';
import { hashJson } from '../core/hash.ts';
import { findPipNvshmem, pipNvshmemFix, requireTorch } from '../core/pip-nvshmem.ts';
import { pythonIdentity } from '../core/python-identity.ts';
import { StateStore } from '../core/state.ts';
import { skipDirsAt, walkTree } from '../core/walk-tree.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { requireDeepEp, wantsDeepEp } from './get-deepep.ts';
import { settleDeepEpBeside } from './deepep-beside.ts';
import { deepEpEnv, deepEpGdaPathFix, hashDeepEpSources, NINJA_STEP, nvshmemHasGda, python, SETUP_ARGS, shimGdaCompiledIn } from './deepep-setup.ts';
import type { Ctx, DeepEpBuildResult, Step } from './types.ts';

/** What DeepEP's setup.py reads from NVSHMEM_DIR; a missing piece fails the link long after the compile. */
async function validateNvshmemDir(prefix: string): Promise<string[]> {
  const lib = path.join(prefix, 'lib');
  const libs = existsSync(lib) ? await readdir(lib) : [];
  const missing: string[] = [];
  if (!existsSync(path.join(prefix, 'include', 'nvshmem.h'))) missing.push('include/nvshmem.h');
  if (!libs.some((f) => f.startsWith('libnvshmem_host.so'))) missing.push('lib/libnvshmem_host.so*');
  if (!libs.includes('libnvshmem_device.a')) missing.push('lib/libnvshmem_device.a');
  if (!libs.some((f) => f.startsWith('nvshmem_transport_libfabric.so'))) missing.push('lib/nvshmem_transport_libfabric.so*');
  return missing;
}

/**
 * What DeepEP's setup.py does not read of the install: lib/cmake, NVSHMEM's CMake package files. NVSHMEM's
 * install rewrites its exported targets files at every `cmake --install` (install(CODE ... file(WRITE ...)),
 * v3.4.5 src/CMakeLists.txt:823-849) and install(EXPORT) copies them with their new time, so any rerun of
 * build-nvshmem, even one that installed nothing new, changed them (issue 38). setup.py takes include/ and the
 * libraries in lib/ by name (-I, -L, -l).
 */
const NOT_READ_BY_DEEPEP = ['lib/cmake'];

/**
 * The NVSHMEM install DeepEP compiles and links against (NVSHMEM_DIR), by each header's and library's path,
 * size and time, not content (libnvshmem_device.a alone is tens of MB). Sound because cmake --install
 * rewrites only a file that differs ("Up-to-date" otherwise) and a rewritten one has a new time: a rebuilt
 * NVSHMEM that installed anything new reruns build-deepep, one that installed nothing new does not.
 */
async function installIdentity(prefix: string): Promise<string> {
  const files: string[] = [];
  for (const start of ['include', 'lib']) {
    await walkTree(
      prefix,
      async (e) => {
        if (e.type === 'symlink') files.push(`${e.rel} -> ${await readlink(e.abs)}`);
        else if (e.type === 'file') files.push(`${e.rel} ${fileIdentity(e.abs)}`);
      },
      // A folder that is not there (or cannot be read) is part of the identity, as "missing".
      { start, sorted: true, skip: [skipDirsAt(NOT_READ_BY_DEEPEP.map((d) => path.join(prefix, d)))], onUnreadable: (rel) => files.push(`${rel}: missing`) },
    );
  }
  return hashJson(files);
}

/** Size and modification time: what tells a file rewritten since (a module relinked, a library reinstalled). */
function fileIdentity(file: string): string {
  const st = statSync(file, { bigint: true });
  return `${st.size} ${st.mtimeNs}`;
}

/** With a GPU, the built module must import; without, it must link this NVSHMEM (and no IBGDA symbol). */
const checkKind = (ctx: Ctx): DeepEpBuildResult['check'] => (ctx.env?.gpus.length ? 'import' : 'link');

/**
 * What build-deepep keeps in the state: its result, and the module as it was when checked. The import check
 * costs an import of torch (seconds); a skipped step keeps its verdict, which holds while the module is the
 * file that passed it (and the stamp, which has everything the module is built from, is unchanged).
 */
interface KeptBuild extends DeepEpBuildResult {
  checked: string;
  /** hashJson(pythonIdentity) of the interpreter this build imported torch with (absent in states written before). */
  torchImported?: string;
}

/**
 * Whether the last build-deepep of this work dir imported torch with the interpreter `py` is now (same file, same
 * sys.version and prefix, the same torch/version.py): then the preflight need not import torch again. A state
 * that cannot be read, or names another interpreter, says no.
 */
export async function torchImportedBefore(workDir: string, py: string): Promise<boolean> {
  const state = await StateStore.open(workDir, () => {});
  const kept = state.get('build-deepep')?.result as KeptBuild | undefined;
  if (!kept?.torchImported) return false;
  return kept.torchImported === hashJson(await pythonIdentity(py));
}

export const buildDeepEpStep: Step = {
  id: 'build-deepep',
  title: 'Build DeepEP against this NVSHMEM',
  enabled: (ctx) => (ctx.opts.command !== 'build' ? 'patch only' : wantsDeepEp(ctx)),
  // Inputs only, each cheap to read (an unchanged rerun must be a no-op in well under 2 s): the patched
  // sources without what the build writes into them, the NVSHMEM install by its files' metadata, the
  // compile's environment, the Python and its torch without importing it, and which check the module gets.
  // The GDA path is there by name: where NVSHMEM has no GDA both choices compile alike (no shim flag), but the
  // report's deepep-gda-path record, kept with the result, says which was asked for.
  async stamp(ctx) {
    const prefix = ctx.build!.prefix;
    const { MAX_JOBS: _jobs, ...compile } = deepEpEnv(ctx, prefix, shimGdaCompiledIn(ctx, prefix));
    return {
      sources: await hashDeepEpSources(requireDeepEp(ctx).dir),
      nvshmem: await installIdentity(prefix),
      libs: ctx.build!.libraries,
      env: compile,
      deepepGda: ctx.opts.deepepGda,
      cuda: ctx.env!.cuda.version,
      check: checkKind(ctx),
      python: await pythonIdentity(python()),
    };
  },
  async run(ctx, io) {
    const dir = requireDeepEp(ctx).dir;
    const prefix = ctx.build!.prefix;
    const fixes: FixRecord[] = [];
    const missing = await validateNvshmemDir(prefix);
    if (missing.length) {
      throw new EnvironmentError(`NVSHMEM install ${prefix} lacks ${missing.join(', ')}, which DeepEP's setup.py links against`, 'rerun the NVSHMEM build with --force');
    }
    fixes.push({ id: 'deepep-nvshmem-dir', anchor: `NVSHMEM_DIR=${prefix}`, status: 'applied', why: "DeepEP's setup.py takes NVSHMEM from NVSHMEM_DIR, else from a pip nvidia-nvshmem package (which has IBGDA, not this transport)", detail: 'include/nvshmem.h, libnvshmem_host.so, libnvshmem_device.a and the libfabric transport are present' });
    const torch = await requireTorch(python(), '', 'torch.__version__, torch.version.cuda');
    const pip = await findPipNvshmem(python());
    if (pip.dir) {
      fixes.push({ id: 'deepep-pip-nvshmem', anchor: pip.dir, status: 'warned', why: 'a pip nvidia-nvshmem package can be loaded instead of this NVSHMEM at run time (torch or another extension pulls it in first)', detail: `found ${pip.dir}; DeepEP is linked with an rpath to ${prefix}/lib, but the library loaded first (one soname) serves both. Fix: ${pipNvshmemFix(pip, path.join(prefix, 'lib'))}` });
    }
    fixes.push(deepEpGdaPathFix({ deepepGda: ctx.opts.deepepGda, nvshmemGda: nvshmemHasGda(ctx, prefix), deviceApiHooks: ctx.patch?.nvshmemDeviceApi === true }));

    const env = deepEpEnv(ctx, prefix, shimGdaCompiledIn(ctx, prefix));
    const beside = await settleDeepEpBeside(ctx, prefix, env, io);
    let steps = 0;
    const log = await openLog(io.logPath);
    try {
      io.progress(`python setup.py build_ext --inplace (torch ${torch.trim()})`);
      await run(python(), [...SETUP_ARGS], {
        cwd: dir,
        env: { ...process.env, ...env },
        log,
        logPath: io.logPath,
        signal: ctx.signal,
        fix: 'read the compiler error above; the patched sources are in ' + dir,
        onLine(line) {
          const m = NINJA_STEP.exec(line);
          if (!m) return;
          steps += 1;
          io.progress(`[${m[1]}/${m[2]}] ${line.replace(/^\[\d+\/\d+\]\s*/, '').slice(0, 90)}`);
        },
      });
    } finally {
      await log.end();
    }
    if (beside) fixes.push({ ...beside, detail: `${beside.detail}; after NVSHMEM's install, ninja ran ${steps} step${steps === 1 ? '' : 's'}` });
    const module = (await readdir(dir)).find((f) => /^deep_ep_cpp.*\.so$/.test(f));
    if (!module) throw new EnvironmentError(`setup.py finished but no deep_ep_cpp*.so in ${dir}`, `read ${io.logPath}`);
    const modulePath = path.join(dir, module);
    const check = checkKind(ctx);
    if (check === 'import') {
      const ok = await queryTool(python(), ['-c', 'import deep_ep, sys; print(deep_ep.__file__)'], { ...process.env, PYTHONPATH: dir });
      if (!ok) throw new EnvironmentError(`import deep_ep fails with the built ${module}`, `run: PYTHONPATH=${dir} ${python()} -c "import deep_ep" to see why`);
    } else {
      const dyn = (await queryTool('readelf', ['-d', modulePath])) ?? '';
      const undef = (await queryTool('nm', ['-D', '--undefined-only', modulePath])) ?? '';
      if (!/libnvshmem_host\.so/.test(dyn) || !dyn.includes(path.join(prefix, 'lib'))) {
        throw new EnvironmentError(`${module} does not link libnvshmem_host from ${prefix}/lib`, `read ${io.logPath}`);
      }
      if (/nvshmemi_ibgda_device_state_d/.test(undef)) throw new EnvironmentError(`${module} still references IBGDA device state`, 'the IBGDA layer was not replaced; rerun with --force');
    }
    fixes.push({ id: 'deepep-check', anchor: modulePath, status: 'applied', why: check === 'import' ? 'a GPU is present: import deep_ep must succeed' : 'no GPU: the module must link libnvshmem_host from this prefix and no IBGDA symbol', detail: `${check} check passed` });
    const result: DeepEpBuildResult = { module: modulePath, check, fixes };
    ctx.deepepBuild = result;
    // The interpreter that imported torch for this build: the preflight's torch check trusts it next time
    // (importing torch costs seconds at every container start).
    const kept: KeptBuild = { ...result, checked: fileIdentity(modulePath), torchImported: hashJson(await pythonIdentity(python())) };
    return kept;
  },
  restore(ctx, saved) {
    const { checked, ...result } = saved as KeptBuild;
    // Another module than the one checked (deleted, rebuilt by hand): its check is not this one's.
    if (!checked || !existsSync(result.module) || fileIdentity(result.module) !== checked) return false;
    ctx.deepepBuild = result;
    return true;
  },
};
