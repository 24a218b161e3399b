import { existsSync } from 'node:fs';
import path from 'node:path';
import { DRY_RUN_WOULD_FAIL, EnvironmentError } from '../core/errors.ts';
import { readHeadCommit } from '../core/git.ts';
import type { Options } from '../options.ts';
import { renderDiff, seriesNames } from '../patchers/engine/apply.ts';
import { display } from '../patchers/engine/bytes.ts';
import { prepareParser } from '../patchers/engine/cpp.ts';
import type { FileChange } from '../patchers/engine/plan.ts';
import { planDeepEp } from '../patchers/deepep/index.ts';
import { planNvshmem } from '../patchers/nvshmem/index.ts';
import { layoutLine } from '../patchers/nvshmem/layout.ts';
import { loadTemplate, type VendoredFile } from '../patchers/nvshmem/template.ts';
import { nvshmemVersion } from '../core/nvshmem-tree.ts';
import { deepEpCloneDir, deepEpPinFor } from '../steps/get-deepep.ts';
import { nvshmemCloneDir, pinFor } from '../steps/get-nvshmem.ts';
import { workPaths } from '../steps/work-paths.ts';
import { deepEpRefusalError } from '../steps/patch-deepep.ts';
import { refusalError } from '../steps/patch-nvshmem.ts';
import type { Ctx, PatchResult, WorkPaths } from '../steps/types.ts';
import { efaIoDefsOrigin, loadLock, readEfaIoDefs } from '../steps/vendor-efa-io-defs.ts';
import { EXPORT_MARKER, exportPatches, type ExportPart } from './export-patches.ts';
import { preflight, type Found, type PlanBlocker } from './preflight.ts';
import type { DetectedEnv } from '../core/environment.ts';
import { shellQuote } from '../core/shell-quote.ts';

/**
 * The tree a read-only plan looks at: the user's own tree (a copy would be identical), or the verified
 * cached clone of a pinned ref. Nothing is copied, fetched or written. A pinned ref not fetched yet is
 * `missing`: the error a plan that needs the tree (an export) stops on, with the way to get it.
 */
async function pristineTree(opts: Options): Promise<{ dir: string; note?: string; missing?: EnvironmentError }> {
  if (opts.nvshmemSrc) return { dir: opts.nvshmemSrc };
  const pin = pinFor(opts.nvshmemRef);
  const dir = nvshmemCloneDir(workPaths(opts.workDir), pin);
  if (existsSync(dir) && (await readHeadCommit(dir)) === pin.commit) return { dir, note: `or any checkout of NVSHMEM ${pin.ref}` };
  return { dir, missing: new EnvironmentError(`no verified clone of NVSHMEM ${pin.ref} in ${dir} to plan against`, `run 'nvshmem-efa build' once to fetch it, or pass --nvshmem-src DIR`) };
}

/** DeepEP as the run would patch it: --deepep-src, or the verified cached clone of --deepep-ref (none yet: said so). */
async function deepEpTree(opts: Options, paths: WorkPaths): Promise<{ dir?: string; missing?: string }> {
  if (opts.deepepSrc) return { dir: opts.deepepSrc };
  if (!opts.deepepRef) return {};
  const pin = deepEpPinFor(opts.deepepRef);
  const dir = deepEpCloneDir(paths, pin);
  if ((await readHeadCommit(dir)) === pin.commit) return { dir };
  return { missing: `DeepEP ${pin.ref} is not fetched yet (the build fetches it into ${dir}); its patches are not in this plan` };
}

/** A file the plan leaves out, and why (the output says so instead of leaving it out silently). */
interface Omitted {
  file: string;
  why: string;
}

/**
 * efa_io_defs.h is in the plan when its verified bytes are at hand (--efa-io-defs, checked by preflight), so
 * the diff and the export are exactly what the patch step writes. Without it the plan does not download it: a
 * dry run or an export must not need the network, nor differ with whether a download happened to work. It
 * is then named as left out, with where the build gets it, instead of being silently absent.
 */
async function vendoredPlan(opts: Options, destination: string, refused: PlanBlocker | undefined): Promise<{ vendored: VendoredFile[]; omitted: Omitted[] }> {
  const lock = await loadLock();
  // A --efa-io-defs the run would refuse is a blocker of the plan; the plan goes on without its bytes.
  if (refused) return { vendored: [], omitted: [{ file: `${destination}/${lock.file}`, why: `the --efa-io-defs given is refused (blocker: ${refused.message})` }] };
  if (opts.efaIoDefs) {
    return { vendored: [{ name: lock.file, content: (await readEfaIoDefs(opts.efaIoDefs, lock)).toString('utf8'), origin: efaIoDefsOrigin(lock) }], omitted: [] };
  }
  const file = `${destination}/${lock.file}`;
  const why = `which the build vendors from the pinned source (${efaIoDefsOrigin(lock)}, sha256 ${lock.sha256}, ${lock.url}); pass --efa-io-defs FILE to include it`;
  return { vendored: [], omitted: [{ file, why }] };
}

/** One part of an export as `--json` gives it: the files written (or to be written) and the command that applies them. */
function exportedPart(dir: string, part: ExportPart): { name: string; tree: string; files: string[]; apply: string | null; note?: string } {
  const sub = path.join(dir, part.name);
  const files = part.changes.length ? [...seriesNames(part.changes), 'series'].map((n) => path.join(sub, n)) : [];
  const apply = part.changes.length ? `git -C ${shellQuote(part.tree)} apply ${shellQuote(sub)}/*.patch` : null;
  return { name: part.name, tree: part.tree, files, apply, ...(part.note ? { note: part.note } : {}) };
}

/** `patch --export DIR --dry-run`: every file the export would write, and nothing written. */
function exportListing(dir: string, parts: readonly ExportPart[]): string[] {
  const lines: string[] = [];
  if (existsSync(path.join(dir, EXPORT_MARKER))) lines.push(`would replace the earlier export in ${dir} (the files its ${EXPORT_MARKER} lists)`);
  for (const part of parts) {
    if (part.changes.length === 0) {
      lines.push(`${part.name}: every patch already present in ${part.tree}; nothing to export`);
      continue;
    }
    const sub = path.join(dir, part.name);
    for (const n of [...seriesNames(part.changes), 'series']) lines.push(`would write ${path.join(sub, n)}`);
    lines.push(`${part.name}: would be applied with:`, `  git -C ${shellQuote(part.tree)} apply ${shellQuote(sub)}/*.patch${part.note ? `   # ${part.note}` : ''}`);
  }
  lines.push(`would write ${path.join(dir, EXPORT_MARKER)}`);
  return lines;
}

/** A command of the build plan: what runs, where, with which variables on top of the environment. */
interface PlannedCommand {
  argv: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** When it runs, if not simply in order. */
  note?: string;
}

const commandLine = (c: PlannedCommand) =>
  `${c.cwd ? `cd ${shellQuote(c.cwd)} && ` : ''}${Object.entries(c.env ?? {}).map(([k, v]) => `${k}=${shellQuote(v)} `).join('')}${c.argv.map(shellQuote).join(' ')}`;

/**
 * The commands `build` would run for NVSHMEM (and DeepEP), from the same functions the steps call: the
 * configure line is cmakeArgs() with the tree the build configures (the work dir's patched copy, the tree
 * itself with --in-place, or the verified clone of a pinned ref) and the patch plan's fixes (which decide the
 * static-library switch).
 */
async function buildPlan(opts: Options, found: Found & { env: DetectedEnv }, tree: string, fixes: PatchResult['fixes'], deepep: string | undefined): Promise<{ commands: PlannedCommand[]; notes: string[] }> {
  // Only `build --dry-run` plans the build: `patch --dry-run` loads none of the build steps' code.
  const [{ cmakeArgs, linkStubPath }, { deepEpEnv, deepEpGdaPathFix, python, SETUP_ARGS }] = await Promise.all([import('../steps/build-nvshmem.ts'), import('../steps/deepep-setup.ts')]);
  const paths = workPaths(opts.workDir);
  const env = found.env;
  const built = opts.inPlace || !opts.nvshmemSrc ? tree : path.join(paths.sources, 'nvshmem');
  const ctx: Ctx = {
    opts,
    paths,
    // cmakeArgs and deepEpEnv read no state; a dry run opens none (it must not depend on, or touch, the work dir's).
    state: undefined as never,
    signal: new AbortController().signal,
    envFixes: found.envFixes,
    env,
    source: { kind: 'local', dir: built, origin: tree },
    patch: { fixes, changedFiles: [], templateStage: '', templateNote: '', gdaEnv: '' },
  };
  const notes: string[] = [];
  if (env.libcuda.kind === 'none') notes.push(`before the configure: a libcuda.so link stub is generated at ${linkStubPath(ctx)}`);
  const commands: PlannedCommand[] = [
    { argv: [env.cmake.path, ...cmakeArgs(ctx, env)] },
    { argv: [env.cmake.path, '--build', paths.build, '--parallel', String(opts.jobs)] },
    { argv: [env.cmake.path, '--install', paths.build] },
  ];
  if (opts.deepepSrc || opts.deepepRef) {
    const dir = opts.deepepSrc ? (opts.inPlace ? opts.deepepSrc : path.join(paths.sources, 'deepep')) : deepepCloneFor(opts, paths);
    // As nvshmemHasGda() will find it after the install: a libfabric with GDA (a pinned one built here has it)
    // and efa_io_defs.h installed (given, or downloaded: a download that fails stops the build, issue 39).
    const lfGda = env.fabric?.libfabric.action === 'build' || env.libfabric.gda.available;
    const nvshmemGda = lfGda && (!!opts.efaIoDefs || !opts.offline);
    const shimGda = opts.deepepGda === 'shim' && nvshmemGda;
    if (lfGda && !opts.efaIoDefs && !opts.offline) {
      notes.push(shimGda
        ? "DeepEP's GDA path (NVCC_APPEND_FLAGS=-DNVSHMEM_EFA_SHIM_GDA) assumes the download of efa_io_defs.h works; if it fails the build stops there (exit 4)"
        : "DeepEP's GDA path (NVSHMEM's device API, whose GDA headers include efa_io_defs.h) assumes the download of efa_io_defs.h works; if it fails the build stops there (exit 4)");
    }
    // Which path DeepEP's remote operations take, said as the report will say it.
    const gdaPath = deepEpGdaPathFix({ deepepGda: opts.deepepGda, nvshmemGda, deviceApiHooks: opts.nvshmemDeviceApi });
    notes.push(`${gdaPath.status}: ${gdaPath.id}: ${gdaPath.detail}`);
    commands.push({
      cwd: dir,
      env: deepEpEnv(ctx, paths.install, shimGda),
      argv: [python(), ...SETUP_ARGS],
      note: opts.overlap ? "on a cold build (no earlier install) it starts right after NVSHMEM's configure, beside its build, and runs again after the install to link" : undefined,
    });
    if (deepep === undefined) notes.push('DeepEP is fetched before it is patched and built');
  }
  return { commands, notes };
}

const deepepCloneFor = (opts: Options, paths: WorkPaths) => deepEpCloneDir(paths, deepEpPinFor(opts.deepepRef!));

/** A plan with blockers exits with this (docs/cli.md's exit-code table; the plan's `exitCode`). */
export const WOULD_FAIL = DRY_RUN_WOULD_FAIL;

/** The schema of the plan `build --dry-run --json` and `patch --dry-run --json` print. */
export const PLAN_JSON = 'nvshmem-efa-plan/1';
/** The schema of what `patch --export DIR --json` prints (with or without --dry-run). */
export const EXPORT_JSON = 'nvshmem-efa-export/1';

/**
 * The environment a dry run plans with when blockers kept the survey from completing it: what was found, and a
 * placeholder `<…>` for each part that was not (the blockers say what to install). A plan with placeholders is
 * still the whole plan: every command, with the holes named.
 */
function planningEnv(found: Found): { env: DetectedEnv; placeholders: string[] } | undefined {
  if (found.env) return { env: found.env, placeholders: [] };
  const parts = found.parts;
  if (!parts) return undefined;
  const placeholders: string[] = [];
  const take = <T>(v: T | undefined, name: string, stand: T): T => {
    if (v !== undefined) return v;
    placeholders.push(name);
    return stand;
  };
  const cuda = take(parts.cuda, '<cuda-home>', { home: '<cuda-home>', nvcc: '<cuda-home>/bin/nvcc', version: 'unknown' });
  const cmake = take(parts.cmake, '<cmake>', { path: '<cmake>', version: 'unknown' });
  const libfabric = take(parts.libfabric, '<libfabric-home>', { home: '<libfabric-home>', version: 'unknown', gda: { available: false, reason: 'no libfabric found (a blocker)' } });
  return { env: { ...parts, cuda, cmake, libfabric, gpus: parts.gpus ?? [], cudaArch: parts.cudaArch ?? '90', libcuda: parts.libcuda ?? { kind: 'none' } }, placeholders };
}

/** The blockers as the text plan ends: each with its fix and the code the real run would exit with. */
function blockerLines(blockers: readonly PlanBlocker[], command: string): string[] {
  if (!blockers.length) return [];
  return [
    `# blockers: the real ${command} would stop on ${blockers.length === 1 ? 'this' : `these ${blockers.length}`} (dry run exit ${WOULD_FAIL})`,
    ...blockers.flatMap((b) => [`#   blocker: ${b.id}: ${b.message} (exit ${b.exitCode})`, `#     fix: ${b.fix}`]),
  ];
}

/**
 * On stderr too, as every failure is said (an error: line, a fix: line): a reader of stdout that stops at the
 * diff still learns why the exit code is not 0. The first blocker's; the plan lists them all.
 */
function wouldFailLine(blockers: readonly PlanBlocker[], command: string): void {
  const [first] = blockers;
  if (!first) return;
  const n = blockers.length;
  process.stderr.write(`error: dry run: the real ${command} would stop on ${n} blocker${n > 1 ? 's' : ''} (listed at the end of the plan; exit ${WOULD_FAIL}): ${first.message}\nfix: ${first.fix}${n > 1 ? ' (the plan lists the fix of each)' : ''}\n`);
}

/**
 * `patch --dry-run` / `patch --export DIR [--dry-run]` / `build --dry-run`: plan against the trees, write nothing
 * to them. A dry run needs none of the build's prerequisites: what the real run would stop on is listed in the
 * plan as a blocker with its fix, and the exit code is WOULD_FAIL (issue 39, item 5).
 */
export async function planOnly(opts: Options, out: (s: string) => void): Promise<number> {
  // A tree given is parsed below: the C++ grammar compiles meanwhile, beside the preflight (issue 38 item 3).
  if (opts.nvshmemSrc) prepareParser();
  // The checks the real run makes before its first step, all of them; a dry run collects their blockers.
  const found = await preflight(opts);
  const blockers = found.blockers;
  const paths = workPaths(opts.workDir);
  const tree = await pristineTree(opts);
  const notes: string[] = [];
  if (tree.missing) {
    // An export writes the patches of that tree: it (and its dry run) stops there. A build or patch fetches the
    // tree first; with --offline the offline-cache blocker already says what is missing.
    if (opts.exportDir) {
      if (!opts.dryRun) throw tree.missing;
      if (!blockers.some((b) => b.id === 'offline-cache')) blockers.push({ id: 'nvshmem-tree', message: tree.missing.message, fix: tree.missing.fix, exitCode: tree.missing.exitCode });
    }
    notes.push(`NVSHMEM ${opts.nvshmemRef} is not fetched yet (the ${opts.command} fetches it into ${tree.dir}); its patches are not in this plan`);
  }
  const template = await loadTemplate();
  const { vendored, omitted } = await vendoredPlan(opts, template.manifest.destination, blockers.find((b) => b.id === 'efa-io-defs'));
  const plan = tree.missing ? undefined : await planNvshmem(tree.dir, template, vendored, { nvshmemDeviceApi: opts.nvshmemDeviceApi });
  if (plan?.refusals.length) throw refusalError(plan, tree.dir);
  const fixes = plan ? plan.fixes : [];
  const parts: ExportPart[] = plan ? [{ name: 'nvshmem', tree: tree.dir, changes: plan.changes, ...(tree.note ? { note: tree.note } : {}) }] : [];
  let deepepChanges: FileChange[] = [];
  const dp = await deepEpTree(opts, paths);
  if (dp.dir) {
    const dplan = dp.dir === opts.deepepSrc && found.deepepPlan ? found.deepepPlan : await planDeepEp(dp.dir);
    if (dplan.refusals.length) throw deepEpRefusalError(dplan, dp.dir);
    fixes.push(...dplan.fixes);
    deepepChanges = dplan.changes;
    parts.push({ name: 'deepep', tree: dp.dir, changes: dplan.changes });
  }
  notes.unshift(...omitted.map((o) => `not in this ${opts.exportDir ? 'export' : 'diff'}: ${o.file}, ${o.why}`));
  if (dp.missing) notes.push(dp.missing);
  const exitCode = blockers.length ? WOULD_FAIL : 0;
  const verdict = { wouldFail: blockers.length > 0, exitCode, blockers };
  if (opts.exportDir) {
    // --dry-run changes nothing, the export included: it lists what the export would write. A real export has
    // no blockers (each stopped it above).
    const lines = opts.dryRun ? exportListing(opts.exportDir, parts) : await exportPatches(opts.exportDir, parts);
    if (opts.json) {
      // --json is one document here too (it printed the lines above as plain text: issue 36, class 9).
      out(JSON.stringify({ schema: EXPORT_JSON, export: opts.exportDir, dryRun: Boolean(opts.dryRun), ...verdict, parts: parts.map((p) => exportedPart(opts.exportDir!, p)), ...(plan?.layout ? { layout: { id: plan.layout.id, summary: plan.layout.summary } } : {}), ...(notes.length ? { notes } : {}) }, null, 2));
      return exitCode;
    }
    for (const line of lines) out(line);
    if (plan?.layout) out(`nvshmem: planned for the ${layoutLine(plan.layout)}`);
    for (const n of notes) out(`note: ${n}`);
    for (const line of blockerLines(blockers, 'export')) out(line);
    wouldFailLine(blockers, 'export');
    return exitCode;
  }
  // In the one diff shown, DeepEP's files go under deepep/ so the two trees cannot be confused.
  const changes = [...(plan?.changes ?? []), ...deepepChanges.map((c) => ({ ...c, file: `deepep/${c.file}` }))];
  const version = tree.missing ? undefined : await nvshmemVersion(tree.dir);
  const layout = plan?.layout ? { id: plan.layout.id, summary: plan.layout.summary } : undefined;
  const planning = opts.command === 'build' ? planningEnv(found) : undefined;
  const build = planning ? await buildPlan(opts, { ...found, env: planning.env }, tree.dir, fixes, dp.dir) : undefined;
  if (build && planning?.placeholders.length) build.notes.push(`${planning.placeholders.join(', ')}: not found on this host (see the blockers); the build uses what their fixes provide`);
  if (opts.json) {
    out(JSON.stringify({ schema: PLAN_JSON, command: opts.command, dryRun: true, ...verdict, tree: tree.dir, ...(version ? { version } : {}), ...(layout ? { layout } : {}), fixes, diff: display(renderDiff(changes)), notInDiff: omitted, ...(build ? { build } : {}), ...(notes.length ? { notes } : {}) }, null, 2));
    return exitCode;
  }
  out(display(renderDiff(changes)).trimEnd() || (plan ? `# ${tree.dir}: every patch already present; nothing to change` : `# ${tree.dir}: not fetched yet; no diff`));
  // After the diff (stdout stays a patch from its first line): what is not in it, then what it was planned for
  // (the last line of `patch --dry-run`).
  for (const n of notes) out(`# ${n}`);
  if (layout) out(`# NVSHMEM ${version ?? '(version not named in CMakeLists.txt)'}; ${layoutLine(layout)}`);
  if (build && planning) {
    const env = planning.env;
    const fab = env.fabric;
    const fabric = fab
      ? [
          ...(fab.rdmaCore ? [`# rdma-core: ${fab.rdmaCore.action === 'build' ? `build ${fab.rdmaCore.ref} from pinned sources` : 'the host\'s'} (${fab.rdmaCore.why})`] : []),
          `# libfabric: ${fab.libfabric.action === 'build' ? `build ${fab.libfabric.ref} from pinned sources` : `use ${fab.libfabric.home}`} (${fab.libfabric.why})`,
        ]
      : [];
    // GDRCopy: the step that builds it is not in the build plan below, so say here which one the build uses.
    const gdr = env.gdrcopy;
    fabric.push(gdr
      ? gdr.build ? `# gdrcopy: build libgdrapi from pinned sources (third_party/gdrcopy/lock.json) into ${gdr.home}` : `# gdrcopy: use ${gdr.home}`
      : "# gdrcopy: none: NVSHMEM is built without GDRCopy, and its EFA provider will refuse to start (the warning below says why)");
    out(
      [
        '',
        ...fabric,
        '# build plan (dry run): the commands the build runs, in order',
        ...build.commands.flatMap((c) => [`#   ${commandLine(c)}`, ...(c.note ? [`#     (${c.note})`] : [])]),
        ...build.notes.map((n) => `# ${n}`),
        ...found.envFixes.map((f) => `# ${f.status}: ${f.id}: ${f.detail ?? f.why}`),
      ].join('\n'),
    );
  }
  for (const line of blockerLines(blockers, opts.command)) out(line);
  wouldFailLine(blockers, opts.command);
  return exitCode;
}
