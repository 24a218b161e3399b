import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { planPatches, type PatchPlan, type PatchSpec } from '../engine/plan.ts';
import { cmakeSpecs, SRC_CMAKE, staticLibInstallTail, staticLibSpecs } from './cmake.ts';
import { type LayoutId, type NvshmemLayout, treeLayout } from './layout.ts';
import { libfabricCppSpecs } from './libfabric-cpp.ts';
import { templateFileSpecs, vendoredFileSpec, type Template, type VendoredFile } from './template.ts';

/**
 * Everything the NVSHMEM patcher does for one layout, in the order the report lists it. `staticLibTail`: the
 * tree has NVSHMEM 3.4's combined static library, installed by a line ending in this text (see cmake.ts).
 */
export function nvshmemSpecs(t: Template, vendored: VendoredFile[] = [], layout: LayoutId = 'single-rail', staticLibTail?: string): PatchSpec[] {
  return [
    ...libfabricCppSpecs(t, layout),
    ...cmakeSpecs(t),
    ...(staticLibTail === undefined ? [] : staticLibSpecs(staticLibTail)),
    ...templateFileSpecs(t),
    ...vendored.map((v) => vendoredFileSpec(t, v)),
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
}

/** Looks for the transport elsewhere, so a refusal can say "found X instead" for older layouts. */
async function findElsewhere(root: string, base: string, depth = 0): Promise<string[]> {
  if (depth > 6) return [];
  let entries;
  try {
    entries = await readdir(path.join(root, base), { withFileTypes: true });
  } catch {
    return [];
  }
  const hits: string[] = [];
  for (const e of entries) {
    const rel = base ? `${base}/${e.name}` : e.name;
    if (e.isDirectory() && !e.name.startsWith('.') && e.name !== 'build' && e.name !== 'node_modules') {
      hits.push(...(await findElsewhere(root, rel, depth + 1)));
    } else if (e.isFile() && /^libfabric\.(cpp|cu|c)$/.test(e.name)) hits.push(rel);
  }
  return hits;
}

/** The tree's layout and the specs for it: what planNvshmem plans and nvshmemSpecDigest stamps. */
async function treeSpecs(root: string, t: Template, vendored: VendoredFile[]): Promise<{ layout?: NvshmemLayout; specs: PatchSpec[] }> {
  const found = await treeLayout(root);
  const layout = found && 'layout' in found ? found.layout : undefined;
  return { ...(layout ? { layout } : {}), specs: nvshmemSpecs(t, vendored, layout?.id, await readStaticLibTail(root)) };
}

/**
 * What the patcher would write into this tree, without locating it (ids, files and lines): part of the patch
 * step's stamp, so a tool whose specs changed re-patches a work dir it patched before.
 */
export async function nvshmemSpecDigest(root: string, t: Template, vendored: VendoredFile[] = []): Promise<unknown[]> {
  const { specs } = await treeSpecs(root, t, vendored);
  return specs.map((s) => ({ id: s.id, file: s.file, kind: s.kind, ...('lines' in s ? { lines: s.lines } : {}) }));
}

/**
 * Detects the layout from libfabric.h, then plans that layout's hook set. A tree of neither layout is planned
 * with the single-rail set, whose state check then refuses it, naming what it found.
 */
export async function planNvshmem(root: string, t: Template, vendored: VendoredFile[] = []): Promise<NvshmemPlan> {
  const { layout, specs } = await treeSpecs(root, t, vendored);
  const plan = await planPatches(root, specs, {
    async explainMissing(file) {
      if (!file.endsWith('libfabric.cpp') && !file.endsWith('libfabric.h')) return undefined;
      const hits = await findElsewhere(root, '');
      return hits.length
        ? `found ${hits.join(', ')} instead: an NVSHMEM layout other than 3.x, which nvshmem-efa does not patch`
        : 'no libfabric transport source anywhere in the tree: is this an NVSHMEM source tree?';
    },
  });
  return layout ? { ...plan, layout } : plan;
}
