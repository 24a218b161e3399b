import { detectGdrdrv, surveyEnvironment, versionAtLeast, type GdrdrvFacts, type Survey } from '../core/environment.ts';
import { GDRCOPY_SWITCH } from '../core/fabric-lock.ts';
import { queryTool } from '../core/exec.ts';
import { findPipNvshmem, pipNvshmemFix } from '../core/pip-nvshmem.ts';
import { hostVerdict, renderChecks, type HostCheck, type HostVerdict } from '../core/host-check.ts';
import { notNvshmemReason, nvshmemVersion, versionWarning } from '../core/nvshmem-tree.ts';
import { describeJournal, journalState, JOURNAL, readJournal, STAGED } from '../patchers/engine/journal.ts';
import { planNvshmem } from '../patchers/nvshmem/index.ts';
import { layoutLine } from '../patchers/nvshmem/layout.ts';
import { loadTemplate } from '../patchers/nvshmem/template.ts';
import { refusalError } from '../steps/patch-nvshmem.ts';

/** Build-time CMake options: set in a job's environment they do nothing, and usually mean a mixed-up recipe. */
const BUILD_TIME_NAMES = [
  'NVSHMEM_LIBFABRIC_SUPPORT', 'NVSHMEM_IBGDA_SUPPORT', 'NVSHMEM_IBRC_SUPPORT', 'NVSHMEM_USE_GDRCOPY', 'NVSHMEM_MPI_SUPPORT',
  'NVSHMEM_PMIX_SUPPORT', 'NVSHMEM_SHMEM_SUPPORT', 'NVSHMEM_UCX_SUPPORT', 'NVSHMEM_USE_NCCL', 'NVSHMEM_BUILD_TESTS',
];

export interface DoctorInput {
  env: NodeJS.ProcessEnv;
  /** The build's environment survey: what was found and every blocker the build would stop on. */
  survey: Pick<Survey, 'parts' | 'blockers'>;
  /** Where a pip nvidia-nvshmem package lives, if the Python that would run DeepEP has one. */
  pipNvshmem?: string;
  /** torch's requirement on the pip package (its metadata), when it has one: then uninstalling it breaks torch. */
  torchRequiresNvshmem?: string;
  nodeVersion: string;
  torch?: string;
  /** The --nvshmem-src tree's check (nvshmemTreeCheck), when one was given. */
  nvshmemTree?: HostCheck;
  /** EFA devices and GDRCopy's kernel module as the host shows them (detectGdrdrv); absent: not looked at. */
  gdrdrv?: GdrdrvFacts;
}

const BLOCKER_TITLES: Record<string, string> = {
  cuda: 'CUDA toolkit the build would use',
  cmake: 'cmake',
  compiler: 'Host C/C++ compilers',
  libfabric: 'libfabric the build would use',
  gdrcopy: 'GDRCopy the build would use',
  'gdrcopy-tools': 'Tools to build GDRCopy (libgdrapi)',
  nvml: 'NVML header (nvml.h, included by NVSHMEM)',
};

const check = (id: string, title: string, status: HostCheck['status'], evidence: string, fix = ''): HostCheck => ({ id, title, status, evidence, fix });

/** Fast host checks that build nothing: tools, the paths the build would use, the run-time environment. */
export function doctorChecks(d: DoctorInput): HostCheck[] {
  const out: HostCheck[] = [];
  const [maj, min] = d.nodeVersion.replace(/^v/, '').split('.').map(Number);
  out.push(maj! > 20 || (maj === 20 && min! >= 19)
    ? check('node', 'Node.js', 'pass', d.nodeVersion)
    : check('node', 'Node.js', 'fail', `${d.nodeVersion} (needs >= 20.19)`, 'install Node.js 20.19 or newer'));
  // Every blocker the build would stop on is a failed check of its own (not only the first one).
  for (const b of d.survey.blockers) out.push(check(b.id, BLOCKER_TITLES[b.id] ?? b.id, 'fail', b.message, b.fix));
  const e = d.survey.parts;
  const failed = (id: string) => d.survey.blockers.some((b) => b.id === id);
  if (e.cuda && !failed('cuda')) out.push(check('cuda', BLOCKER_TITLES.cuda!, 'pass', `CUDA ${e.cuda.version} at ${e.cuda.home}; arch ${e.cudaArch ?? '?'}`));
  if (e.cmake && !failed('cmake')) out.push(check('cmake', BLOCKER_TITLES.cmake!, 'pass', `cmake ${e.cmake.version}${e.ninja ? '; ninja' : '; no ninja (make is slower)'}`));
  if (e.nvml && !failed('nvml')) out.push(check('nvml', BLOCKER_TITLES.nvml!, 'pass', e.nvml));
  const plan = e.fabric;
  if (plan?.libfabric.action === 'build') {
    const rdma = plan.rdmaCore?.action === 'build' ? ` and rdma-core ${plan.rdmaCore.ref} (${plan.rdmaCore.why})` : '';
    out.push(check('libfabric', BLOCKER_TITLES.libfabric!, 'pass', `build will build libfabric ${plan.libfabric.ref} with EFA GDA from pinned sources${rdma}: ${plan.libfabric.why}`));
  } else if (e.libfabric) {
    out.push(e.libfabric.gda.available
      ? check('libfabric', BLOCKER_TITLES.libfabric!, 'pass', `${e.libfabric.version} at ${e.libfabric.home}; ${e.libfabric.gda.reason}`)
      : check('libfabric', BLOCKER_TITLES.libfabric!, 'warn', `${e.libfabric.version} at ${e.libfabric.home}; ${e.libfabric.gda.reason}`, 'leave --libfabric-home / LIBFABRIC_HOME unset (build then builds a pinned libfabric with GDA), or point it at libfabric >= 2.3.0'));
  }
  if (!failed('gdrcopy')) {
    out.push(e.gdrcopy?.build
      ? check('gdrcopy', BLOCKER_TITLES.gdrcopy!, 'pass', `not found on this host: build will build its library (libgdrapi) from pinned sources (third_party/gdrcopy/lock.json) into ${e.gdrcopy.home}`)
      : e.gdrcopy
        ? check('gdrcopy', BLOCKER_TITLES.gdrcopy!, 'pass', e.gdrcopy.home)
        : check('gdrcopy', BLOCKER_TITLES.gdrcopy!, 'warn', `not found, and ${GDRCOPY_SWITCH}=0: NVSHMEM would be built without it and refuse the EFA provider`, `unset ${GDRCOPY_SWITCH} (build then builds libgdrapi from pinned sources), or install GDRCopy and pass --gdrcopy-home`));
  }
  // Only where EFA devices are: NVSHMEM's EFA provider runs there, and GDRCopy there needs its kernel module.
  if (d.gdrdrv?.efaDevices.length) out.push(gdrdrvCheck(d.gdrdrv));
  const env = d.env;
  const transport = env.NVSHMEM_REMOTE_TRANSPORT;
  out.push(transport === 'libfabric'
    ? check('env-transport', 'NVSHMEM_REMOTE_TRANSPORT', 'pass', 'libfabric')
    : check('env-transport', 'NVSHMEM_REMOTE_TRANSPORT', 'warn', transport ? `${transport}: not the libfabric transport` : 'unset: NVSHMEM uses IB RC, not libfabric/EFA', 'export NVSHMEM_REMOTE_TRANSPORT=libfabric'));
  const provider = env.NVSHMEM_LIBFABRIC_PROVIDER;
  out.push(provider === 'efa'
    ? check('env-provider', 'NVSHMEM_LIBFABRIC_PROVIDER', 'pass', 'efa')
    : check('env-provider', 'NVSHMEM_LIBFABRIC_PROVIDER', 'warn', provider ? `${provider}: not EFA` : 'unset: NVSHMEM picks cxi (HPE Slingshot), not EFA', 'export NVSHMEM_LIBFABRIC_PROVIDER=efa'));
  const shm = env.FI_EFA_ENABLE_SHM_TRANSFER;
  out.push(shm === '0'
    ? check('env-shm', 'FI_EFA_ENABLE_SHM_TRANSFER', 'pass', '0')
    : check('env-shm', 'FI_EFA_ENABLE_SHM_TRANSFER', 'warn', shm === undefined ? 'unset (libfabric then routes intra-node traffic through its shm provider)' : shm, 'export FI_EFA_ENABLE_SHM_TRANSFER=0'));
  const misplaced = BUILD_TIME_NAMES.filter((n) => env[n] !== undefined);
  out.push(misplaced.length
    ? check('env-build-time', 'Build-time names in the environment', 'warn', `${misplaced.join(', ')} set: these are CMake options of the NVSHMEM build and do nothing at run time`, 'pass them to the build (nvshmem-efa sets them) and unset them in jobs')
    : check('env-build-time', 'Build-time names in the environment', 'pass', 'none set'));
  if (env.NVSHMEM_IB_ENABLE_IBGDA === '1') out.push(check('env-ibgda', 'NVSHMEM_IB_ENABLE_IBGDA', 'warn', '1: asks for IBGDA, which an EFA build of NVSHMEM does not have', 'unset NVSHMEM_IB_ENABLE_IBGDA (the EFA GDA switch is NVSHMEM_EFA_GDA_ENABLE)'));
  const gda = env.NVSHMEM_EFA_GDA_ENABLE;
  if (gda !== undefined && !/^(0|1|y|yes|on|true|n|no|off|false)$/i.test(gda)) out.push(check('env-gda', 'NVSHMEM_EFA_GDA_ENABLE', 'warn', `'${gda}' is neither on (1/y/yes/on/true) nor off`, 'export NVSHMEM_EFA_GDA_ENABLE=1 (or 0)'));
  // The GDA transport reads these at start-up and turns GDA off on every PE for a value it cannot parse.
  for (const [id, name, lo, hi, what] of GDA_COUNTS) {
    const v = env[name];
    if (v !== undefined && v !== '' && !countIn(v, lo, hi))
      out.push(check(id, name, 'warn', `'${v}' is not a number of ${what} in [${lo}, ${hi}]: the GDA transport turns GDA off on every PE for it`, `export ${name}=N with N in ${lo}..${hi} (or unset it)`));
  }
  const ldPip = (env.LD_LIBRARY_PATH ?? '').split(':').filter((p) => /nvidia\/nvshmem/.test(p));
  if (d.pipNvshmem || ldPip.length) {
    out.push(check('pip-nvshmem', 'pip NVSHMEM shadowing', 'warn', [d.pipNvshmem && `pip package at ${d.pipNvshmem}`, ldPip.length && `LD_LIBRARY_PATH has ${ldPip.join(', ')}`].filter(Boolean).join('; ') + ': its libnvshmem can load instead of the one nvshmem-efa builds', pipNvshmemFix({ torchRequires: d.torchRequiresNvshmem }, '<work dir>/install/nvshmem/lib')));
  } else {
    out.push(check('pip-nvshmem', 'pip NVSHMEM shadowing', 'pass', 'no pip nvidia-nvshmem package, nothing in LD_LIBRARY_PATH'));
  }
  if (d.nvshmemTree) out.push(d.nvshmemTree);
  out.push(d.torch ? check('torch', 'PyTorch (for DeepEP)', 'pass', d.torch) : check('torch', 'PyTorch (for DeepEP)', 'skip', 'python3 cannot import torch: only needed with --deepep-*'));
  return out;
}

/**
 * The oldest gdrdrv accepted (issue 22): before 2.4 the module has no GET_INFO_V2 ioctl (gdrdrv.h,
 * GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2), and a libgdrapi 2.5 such as the one the build builds gets less from it.
 */
export const MIN_GDRDRV = [2, 4] as const;
const GDRDRV_FIX = `install and load GDRCopy's kernel module, gdrdrv >= ${MIN_GDRDRV.join('.')}: from the EFA installer or AMI that provides it, or the gdrdrv-dkms package (gdrcopy-kmod on RPM systems) of GDRCopy's packages, or from a GDRCopy checkout: make driver, then sudo ./insmod.sh (loads gdrdrv.ko and creates /dev/gdrdrv); in a container, pass /dev/gdrdrv through`;

/** GDRCopy's kernel module on a host with EFA devices: missing or too old is a failure (the EFA provider needs it). */
export function gdrdrvCheck(g: GdrdrvFacts): HostCheck {
  const title = "GDRCopy's kernel module (gdrdrv)";
  const devices = `${g.efaDevices.length} EFA device(s) (${g.efaDevices.join(', ')})`;
  if (!g.dev) return check('gdrdrv', title, 'fail', `${devices} and no /dev/gdrdrv${g.version ? ` (gdrdrv ${g.version} is loaded, but its device node is missing)` : ': gdrdrv is not loaded'}; NVSHMEM's EFA provider needs GDRCopy`, GDRDRV_FIX);
  const numeric = g.version && /^\d+(\.\d+)*/.exec(g.version)?.[0];
  if (!numeric) return check('gdrdrv', title, 'warn', `/dev/gdrdrv present, but ${g.version ? `its version '${g.version}' (/sys/module/gdrdrv/version) is not one to compare` : 'no /sys/module/gdrdrv/version'}: cannot tell that it is >= ${MIN_GDRDRV.join('.')}`, `check the loaded module's version (modinfo gdrdrv); if it is older, ${GDRDRV_FIX}`);
  if (!versionAtLeast(numeric, MIN_GDRDRV)) return check('gdrdrv', title, 'fail', `gdrdrv ${g.version} is loaded: older than ${MIN_GDRDRV.join('.')}; ${devices}`, GDRDRV_FIX);
  return check('gdrdrv', title, 'pass', `gdrdrv ${g.version}, /dev/gdrdrv; ${devices}`);
}

/** The transport's optional counts (transport_efa_gda.h): id, variable, range, what it counts. */
const GDA_COUNTS: [string, string, number, number, string][] = [
  ['env-gda-rails', 'NVSHMEM_EFA_GDA_RAILS', 1, 4, 'rails'],
  ['env-gda-owned', 'NVSHMEM_EFA_GDA_OWNED_QUEUES', 0, 32, 'owned queues per rail'],
];
/** Whether v parses as strtol(v, &end, 10) does with *end == 0, within [lo, hi]. */
function countIn(v: string, lo: number, hi: number): boolean {
  if (!/^\s*[+-]?\d+$/.test(v)) return false;
  const n = Number(v.trim());
  return n >= lo && n <= hi;
}

const TREE_TITLE = 'NVSHMEM source tree (--nvshmem-src)';

/** What the tree is: its version and libfabric layout, and whether `patch` would apply (planned, nothing written). */
export interface NvshmemTreeFacts {
  version?: string;
  layout?: { id: string; summary: string };
}

/**
 * A journal at the tree's root: a patch was interrupted mid-commit (the tree may be half patched). Doctor only
 * looks; the next `patch` or `build` on the tree finishes or undoes it.
 */
async function journalCheck(dir: string): Promise<HostCheck | undefined> {
  let state;
  try {
    const j = await readJournal(dir);
    if (!j) return undefined;
    state = await journalState(dir, j);
  } catch (e) {
    return check('nvshmem-tree', TREE_TITLE, 'fail', (e as Error).message, (e as { fix?: string }).fix ?? '');
  }
  const next =
    state.action === 'complete' ? 'every file is replaced or staged whole, so the next run completes it'
    : state.action === 'roll back' ? 'some staged files are missing, so the next run rolls it back (restores the replaced files) and patches again'
    : `${state.conflicts.join(', ')} changed since, so the next run refuses it`;
  const fix = state.action === 'conflict'
    ? `restore ${state.conflicts.join(' ')} (git checkout -- ${state.conflicts.join(' ')}), remove ${JOURNAL} and the ${STAGED} files, then rerun nvshmem-efa patch`
    : `rerun nvshmem-efa patch (or build) --in-place --nvshmem-src ${dir}: it ${state.action === 'complete' ? 'completes it' : 'rolls it back and patches again'}`;
  return check('nvshmem-tree', TREE_TITLE, 'fail', `${describeJournal(dir, state)} (${JOURNAL}, ${STAGED} files beside them): ${next}`, fix);
}

export async function nvshmemTreeCheck(dir: string): Promise<{ check: HostCheck; facts: NvshmemTreeFacts }> {
  const notTree = await notNvshmemReason(dir).catch((e: Error) => e.message);
  if (notTree) return { check: check('nvshmem-tree', TREE_TITLE, 'fail', `${dir} is not an NVSHMEM source tree (${notTree})`, 'pass the root of an NVSHMEM 3.x source tree (the folder holding CMakeLists.txt and src/)'), facts: {} };
  const version = await nvshmemVersion(dir);
  const journal = await journalCheck(dir);
  if (journal) return { check: journal, facts: version ? { version } : {} };
  const plan = await planNvshmem(dir, await loadTemplate());
  const layout = plan.layout ? { id: plan.layout.id, summary: plan.layout.summary } : undefined;
  const facts: NvshmemTreeFacts = { ...(version ? { version } : {}), ...(layout ? { layout } : {}) };
  const what = `NVSHMEM ${version ?? '(no version in CMakeLists.txt)'} at ${dir}`;
  if (plan.refusals.length) {
    const err = refusalError(plan, dir);
    return { check: check('nvshmem-tree', TREE_TITLE, 'fail', `${what}: patch would refuse it: ${plan.refusals.map((r) => `${r.id}: ${r.detail}`).join('; ')}`, err.fix), facts };
  }
  const toApply = plan.fixes.filter((f) => f.status === 'applied').length;
  // The device API hooks are patches of their own in other files, on by default: a build would refuse the tree where
  // they do not apply, and --no-device-api is the way to build it anyway.
  const withApi = await planNvshmem(dir, await loadTemplate(), [], { nvshmemDeviceApi: true });
  const refused = withApi.refusals;
  const counts = `${toApply} patch(es) to apply, ${plan.fixes.length - toApply} already present`;
  if (refused.length) {
    const detail = `${what}; ${layoutLine(layout!)}; ${counts}; but the device API hooks, on by default, would be refused (${refused.length} of their patches): ${refused.slice(0, 2).map((r) => `${r.id}: ${r.detail}`).join('; ')}${refused.length > 2 ? '; ...' : ''}`;
    return { check: check('nvshmem-tree', TREE_TITLE, 'fail', detail, "build with --no-device-api (NVSHMEM's device API then stays on its CPU proxy), or use an NVSHMEM release from NVIDIA (3.0.6 to 3.5.x have the shape the hooks need)"), facts };
  }
  const evidence = `${what}; ${layoutLine(layout!)}; ${counts}; the device API hooks apply too (${withApi.fixes.length - plan.fixes.length} more patches; --no-device-api leaves them out)`;
  const warn = versionWarning(version);
  return { check: warn ? check('nvshmem-tree', TREE_TITLE, 'warn', `${evidence}; ${warn.detail}`, 'build it with care, or use --nvshmem-ref v3.4.5-0') : check('nvshmem-tree', TREE_TITLE, 'pass', evidence), facts };
}

/** The schema of `doctor --json`; 2: `verdict` is a value (it was the prose now in `summary`; issue 39, item 6). */
export const DOCTOR_JSON = 'nvshmem-efa-doctor/2';

/** The words for each verdict (hostVerdict: the rule doctor and probe share). */
const VERDICT_SUMMARY: Record<HostVerdict, string> = {
  fail: 'not ready: fix the failed checks, then run nvshmem-efa build',
  warn: 'the build can run; fix the warnings before running jobs on EFA',
  ok: 'ready',
};

/** The verdict as the text output says it (the JSON's `summary`). */
export function doctorVerdict(checks: readonly HostCheck[]): string {
  return VERDICT_SUMMARY[hostVerdict(checks)];
}

export async function doctorCommand(opts: { cudaHome?: string; libfabricHome?: string; gdrcopyHome?: string; nvshmemSrc?: string; json: boolean }, out: (s: string) => void): Promise<number> {
  // NVIDIA NVSHMEM 3.x includes nvml.h, so a build stops without it: a blocker here too.
  const survey = await surveyEnvironment({ ...opts, env: process.env, requireNvml: true });
  const py = process.env.PYTHON ?? 'python3';
  const pip = await findPipNvshmem(py);
  const torch = (await queryTool(py, ['-c', 'import torch; print(torch.__version__)']))?.trim() || undefined;
  const tree = opts.nvshmemSrc ? await nvshmemTreeCheck(opts.nvshmemSrc) : undefined;
  // NVSHMEM_EFA_SYSROOT: where /sys and /dev are read (tests), as for the host's rdma-core.
  const gdrdrv = detectGdrdrv(process.env.NVSHMEM_EFA_SYSROOT ?? '/');
  const checks = doctorChecks({ env: process.env, survey, pipNvshmem: pip.dir, torchRequiresNvshmem: pip.torchRequires, nodeVersion: process.version, torch, gdrdrv, ...(tree ? { nvshmemTree: tree.check } : {}) });
  const verdict = hostVerdict(checks);
  const summary = VERDICT_SUMMARY[verdict];
  out(opts.json ? JSON.stringify({ schema: DOCTOR_JSON, verdict, summary, checks, ...(tree ? { nvshmem: { dir: opts.nvshmemSrc, ...tree.facts } } : {}) }, null, 2) : renderChecks(checks, summary));
  return verdict === 'fail' ? 1 : 0;
}
