import { existsSync, statSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { scanCMake } from '../patchers/engine/cmake-scan.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import { walkTree } from './walk-tree.ts';

/**
 * Files NVSHMEM's own build writes into its source tree (v3.4.5's src/CMakeLists.txt and src/device/CMakeLists.txt,
 * lines cited below). They are outputs: left out of the tree hash so a build does not invalidate itself, and
 * each is written from an input that is hashed, so an edit that reaches the build still shows.
 */
export const NVSHMEM_BUILD_OUTPUTS = [
  // Target git_commit (src/CMakeLists.txt:800-808), run by every build with the tree root as working directory.
  'git_commit.txt',
  'version.txt',
  // configure_file() outputs (src/CMakeLists.txt:600, 625, 626). Nearly every translation unit includes them: a
  // copy of the tree without them (a fresh copy after a template change) regenerates them with a new time stamp
  // and recompiles all of NVSHMEM, where keeping them (CMake leaves an unchanged output alone) recompiles only
  // what changed.
  'src/include/non_abi/nvshmem_version.h',
  'src/include/non_abi/nvshmem_build_options.h',
  'src/device/comm/transfer_device.cu',
  // Shipped in the release, identical to its .in, and overwritten by every configure with transfer_device.cuh.in
  // (src/CMakeLists.txt:587, src/device/CMakeLists.txt:155), which the device API patch changes: hashed, the
  // patched tree changed under its own stamp at the first configure, and the first rerun after a cold build
  // patched and built NVSHMEM again (issue 38). An edit to it never reaches the build; one to the .in does.
  'src/include/non_abi/device/pt-to-pt/transfer_device.cuh',
] as const;

/** NVIDIA NVSHMEM releases whose trees the patcher is tested on (they patch and compile). */
export const TESTED_VERSIONS = { from: [3, 2, 5], below: [3, 6], text: '3.2.5 to 3.5.x' } as const;

/** The project version from the top-level `project(... VERSION x.y.z.w)`, if the tree has one. */
export async function nvshmemVersion(dir: string): Promise<string | undefined> {
  try {
    const cmds = scanCMake(await readFile(path.join(dir, 'CMakeLists.txt'), 'utf8'));
    const project = cmds.find((c) => c.name === 'project');
    const i = project?.args.findIndex((a) => a.text === 'VERSION') ?? -1;
    return i >= 0 ? project!.args[i + 1]?.text : undefined;
  } catch {
    return undefined;
  }
}

const cmp = (a: readonly number[], b: readonly number[]) => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d) return d;
  }
  return 0;
};

/** A warning for a version outside what is tested (the patch may still apply: the anchors decide). */
export function versionWarning(version: string | undefined): FixRecord | undefined {
  const base = { id: 'nvshmem-version', anchor: 'project(NVSHMEM VERSION ...)', why: `nvshmem-efa is tested on NVIDIA NVSHMEM ${TESTED_VERSIONS.text}` };
  if (!version) {
    return { ...base, status: 'warned', detail: 'the tree names no NVSHMEM version: the patches applied where their anchors were found, but this tree is not one nvshmem-efa is tested on' };
  }
  const v = version.split('.').map(Number);
  if (v.some(Number.isNaN) || cmp(v, TESTED_VERSIONS.from) < 0 || cmp(v, TESTED_VERSIONS.below) >= 0) {
    return { ...base, status: 'warned', detail: `NVSHMEM ${version} is outside the tested ${TESTED_VERSIONS.text}: the anchors were found, but build and run it with care (pass --nvshmem-ref v3.4.5-0 for the pinned release)` };
  }
  return undefined;
}

/**
 * A cheap look before copying a whole directory: an NVSHMEM source tree has src/ and NVSHMEM's version
 * script or a CMakeLists.txt naming the NVSHMEM project. Returns what is missing, or undefined.
 */
export async function notNvshmemReason(dir: string): Promise<string | undefined> {
  // A tree this user cannot read is a permission fault (said as such, exit 6), not "not an NVSHMEM tree".
  await readdir(dir);
  const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();
  if (!isDir(path.join(dir, 'src'))) return 'it has no src/ directory';
  if (existsSync(path.join(dir, 'nvshmem_transport.sym')) || existsSync(path.join(dir, 'nvshmem_host.sym'))) return undefined;
  const cm = await readFile(path.join(dir, 'CMakeLists.txt'), 'utf8').catch(() => undefined);
  if (cm === undefined) return 'it has neither CMakeLists.txt nor nvshmem_transport.sym';
  if (!/project\s*\(\s*NVSHMEM\b/i.test(cm)) return 'its CMakeLists.txt does not declare project(NVSHMEM ...)';
  return undefined;
}

/** Source files under `dir/src` that `#include <header>` (first few only): tells which headers the build needs. */
export async function filesIncluding(dir: string, header: string, max = 3): Promise<string[]> {
  const re = new RegExp(`^\\s*#\\s*include\\s*[<"]${header.replace('.', '\\.')}[>"]`, 'm');
  const hits: string[] = [];
  await walkTree(
    dir,
    async (e) => {
      if (hits.length >= max) return 'stop';
      if (e.type !== 'dir' && /\.(c|cc|cpp|cu|h|hpp|cuh)$/.test(e.name) && re.test(await readFile(e.abs, 'utf8'))) hits.push(e.rel);
    },
    // Everything under src/ is looked at; what cannot be read is passed over (this only tells which headers are needed).
    { start: 'src', onUnreadable: () => {} },
  );
  return hits;
}
