import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { skipDirsNamed, skipHiddenDirs, walkTree } from '../../core/walk-tree.ts';
import type { FixRecord } from '../engine/fix.ts';
import { planPatches, type PatchPlan, type PatchSpec } from '../engine/plan.ts';
import { lineOf } from '../engine/text.ts';
import { cmakeSpecs, SRC_CMAKE, staticLibInstallTail, staticLibSpecs } from './cmake.ts';
import { deviceApiSpecs, TRANSFER_DEVICE, DEVICE_API_SLOT } from './device-api.ts';
import { type LayoutId, type NvshmemLayout, treeLayout } from './layout.ts';
import { libfabricCppSpecs } from './libfabric-cpp.ts';
import { templateFileSpecs, vendoredFileSpec, type Template, type VendoredFile } from './template.ts';

/** What the user chose about the patch: `nvshmemDeviceApi` also routes NVSHMEM's own device API over GDA (the tool's default; off with --no-device-api). */
export interface NvshmemPatchChoice {
  nvshmemDeviceApi?: boolean;
}

/**
 * Everything the NVSHMEM patcher does for one layout, in the order the report lists it. `staticLibTail`: the
 * tree has NVSHMEM 3.4's combined static library, installed by a line ending in this text (see cmake.ts).
 */
export function nvshmemSpecs(t: Template, vendored: VendoredFile[] = [], layout: LayoutId = 'single-rail', staticLibTail?: string, choice: NvshmemPatchChoice = {}): PatchSpec[] {
  return [
    ...libfabricCppSpecs(t, layout),
    ...cmakeSpecs(t),
    ...(staticLibTail === undefined ? [] : staticLibSpecs(staticLibTail)),
    ...templateFileSpecs(t),
    ...vendored.map((v) => vendoredFileSpec(t, v)),
    ...(choice.nvshmemDeviceApi ? deviceApiSpecs(t, vendored) : []),
  ];
}

async function readStaticLibTail(root: string): Promise<string | undefined> {
  try {
    return staticLibInstallTail(await readFile(path.join(root, SRC_CMAKE), 'utf8'));
  } catch {
    return undefined; // no src/CMakeLists.txt: the CMake specs refuse it with their own message
  }
}

/** The plan, and the libfabric layout it was made for (absent when the tree has none nvshmem-efa knows). */
export interface NvshmemPlan extends PatchPlan {
  layout?: NvshmemLayout;
  /** Where the tree shows AWS's own GDA transport (then also a refusal). */
  awsGda?: { file: string; line: number };
}

/** The refusal of a tree that has device API hooks from an earlier run, in a run with --no-device-api. */
export const DEVICE_API_LEFTOVER_ID = 'device-api-left-over';
export const DEVICE_API_LEFTOVER_FIX = 'leave out --no-device-api to build with the device API hooks the tree has, or restore the tree (git checkout -- .) and rerun';

/**
 * AWS's efa-gda NVSHMEM prototype branch carries a GDA transport of its own, switched by the CMake option
 * NVSHMEM_EFAGDA_SUPPORT. Such a tree is refused, not patched: both transports would start a GDA path in the
 * same libfabric transport (two efa-direct endpoint sets, two registrations of the symmetric heap, hooks in the
 * same functions), nothing says they coexist and no one has run them together; the tree already has what
 * nvshmem-efa adds.
 */
const AWS_GDA_OPTION = 'NVSHMEM_EFAGDA_SUPPORT';
export const AWS_GDA_FIX =
  `this tree is AWS's efa-gda NVSHMEM, with its own EFA GDA transport: build it as it is (cmake -D${AWS_GDA_OPTION}=ON), ` +
  "or give nvshmem-efa an NVSHMEM release from NVIDIA or AWS's devel-aws-2025-11-25 branch";

const CMAKE_FILE = /^(CMakeLists\.txt(\.in)?|.*\.cmake(\.in)?)$/;
const SOURCE_FILE = /\.(h|hpp|c|cc|cpp|cu|cuh|in)$/;
/** Where the option can be: every CMake file (its definition), and the sources of the transports and headers. */
const SOURCE_DIRS = ['src/modules/transport/', 'src/include/'];

/** What the two searches below leave out: hidden folders (.git), and folders named build or node_modules at any depth. */
const NOT_SEARCHED = [skipHiddenDirs, skipDirsNamed('build', 'node_modules')];

async function findAwsGda(root: string): Promise<{ file: string; line: number; text: string } | undefined> {
  let hit: { file: string; line: number; text: string } | undefined;
  await walkTree(
    root,
    async (e) => {
      if (e.type !== 'file' || !(CMAKE_FILE.test(e.name) || (SOURCE_FILE.test(e.name) && SOURCE_DIRS.some((d) => e.rel.startsWith(d))))) return;
      // Read synchronously: a few hundred small files, each an open, stat, read and close that would otherwise wait
      // in turn for libuv's thread pool (long waits on a loaded machine), for no concurrency (the walk is in order).
      // The bytes are searched, and only a file that has the option is decoded: decoding every file cost more
      // than reading it (issue 38 item 3). The option's name is ASCII, so its bytes are found where its text is.
      let bytes: Buffer;
      try {
        bytes = readFileSync(e.abs);
      } catch {
        return; // unreadable: not searched
      }
      if (bytes.indexOf(AWS_GDA_OPTION) === -1) return;
      const src = bytes.toString('utf8');
      const at = src.indexOf(AWS_GDA_OPTION);
      const start = src.lastIndexOf('\n', at) + 1;
      const nl = src.indexOf('\n', at);
      hit = { file: e.rel, line: lineOf(src, at), text: src.slice(start, nl === -1 ? src.length : nl).trim().slice(0, 100) };
      return 'stop';
    },
    // The first hit in name order; folders that cannot be read are passed over.
    { skip: NOT_SEARCHED, sorted: true, maxDepth: 8, onUnreadable: () => {} },
  );
  return hit;
}

/** Looks for the transport elsewhere, so a refusal can say "found X instead" for older layouts. */
async function findElsewhere(root: string): Promise<string[]> {
  const hits: string[] = [];
  await walkTree(
    root,
    (e) => {
      if (e.type === 'file' && /^libfabric\.(cpp|cu|c)$/.test(e.name)) hits.push(e.rel);
    },
    { skip: NOT_SEARCHED, maxDepth: 6, onUnreadable: () => {} },
  );
  return hits;
}

/** The tree's layout and the specs for it: what planNvshmem plans and nvshmemSpecDigest stamps. */
async function treeSpecs(root: string, t: Template, vendored: VendoredFile[], choice: NvshmemPatchChoice): Promise<{ layout?: NvshmemLayout; specs: PatchSpec[] }> {
  const found = await treeLayout(root);
  const layout = found && 'layout' in found ? found.layout : undefined;
  return { ...(layout ? { layout } : {}), specs: nvshmemSpecs(t, vendored, layout?.id, await readStaticLibTail(root), choice) };
}

/**
 * A tree that already has the device API hooks (an earlier run patched it in place) while this run (--no-device-api)
 * leaves the device API off: its hooks would still be built, so the build would not be what the option says.
 * Refused, with the two ways out.
 */
async function leftoverDeviceApi(root: string): Promise<FixRecord | undefined> {
  const src = await readFile(path.join(root, TRANSFER_DEVICE), 'utf8').catch(() => '');
  const at = src.indexOf(DEVICE_API_SLOT);
  if (at === -1) return undefined;
  return {
    id: DEVICE_API_LEFTOVER_ID,
    file: TRANSFER_DEVICE,
    anchor: `${DEVICE_API_SLOT} in ${TRANSFER_DEVICE}`,
    why: 'with --no-device-api the build must not route the device API over GDA; hooks left from an earlier run would',
    status: 'refused',
    detail: `${TRANSFER_DEVICE}:${lineOf(src, at)}: the NVSHMEM device API hooks of an earlier run are in this tree, and this run leaves the device API off (--no-device-api)`,
  };
}

/**
 * What the patcher would write into this tree, without locating it (ids, files and lines): part of the patch
 * step's stamp, so a tool whose specs changed re-patches a work dir it patched before.
 */
export async function nvshmemSpecDigest(root: string, t: Template, vendored: VendoredFile[] = [], choice: NvshmemPatchChoice = {}): Promise<unknown[]> {
  const { specs } = await treeSpecs(root, t, vendored, choice);
  return specs.map((s) => ({ id: s.id, file: s.file, kind: s.kind, ...('lines' in s ? { lines: s.lines } : {}) }));
}

/**
 * Detects the layout from libfabric.h, then plans that layout's hook set. A tree of neither layout is planned
 * with the single-rail set, whose state check then refuses it, naming what it found.
 */
export async function planNvshmem(root: string, t: Template, vendored: VendoredFile[] = [], choice: NvshmemPatchChoice = {}): Promise<NvshmemPlan> {
  // The search for AWS's transport reads a few hundred files one by one: it waits on the disk while the plan
  // parses, instead of before it. Its result is the same; it is awaited below (a plan that fails first leaves it).
  const awsSearch = findAwsGda(root);
  awsSearch.catch(() => {});
  const { layout, specs } = await treeSpecs(root, t, vendored, choice);
  const plan: NvshmemPlan = await planPatches(root, specs, {
    async explainMissing(file) {
      if (!file.endsWith('libfabric.cpp') && !file.endsWith('libfabric.h')) return undefined;
      const hits = await findElsewhere(root);
      return hits.length
        ? `found ${hits.join(', ')} instead: an NVSHMEM layout other than 3.x, which nvshmem-efa does not patch`
        : 'no libfabric transport source anywhere in the tree: is this an NVSHMEM source tree?';
    },
  });
  const aws = await awsSearch;
  if (aws) {
    plan.awsGda = { file: aws.file, line: aws.line };
    plan.refusals.unshift({
      id: 'aws-efa-gda-transport',
      file: aws.file,
      anchor: `${AWS_GDA_OPTION} in the CMake files and transport sources`,
      why: "AWS's efa-gda NVSHMEM has a GDA transport of its own; a second one in the same libfabric transport is untested",
      status: 'refused',
      detail: `${aws.file}:${aws.line}: \`${aws.text}\`: this tree carries AWS's own EFA GDA transport (the ${AWS_GDA_OPTION} option of its efa-gda branch), which nvshmem-efa's transport is not known to coexist with`,
    });
  }
  const leftover = choice.nvshmemDeviceApi ? undefined : await leftoverDeviceApi(root);
  if (leftover) plan.refusals.push(leftover);
  return layout ? { ...plan, layout } : plan;
}
