import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { planPatches, type PatchPlan, type PatchSpec } from '../engine/plan.ts';
import { cmakeSpecs } from './cmake.ts';
import { libfabricCppSpecs } from './libfabric-cpp.ts';
import { templateFileSpecs, vendoredFileSpec, type Template, type VendoredFile } from './template.ts';

/** Everything the NVSHMEM patcher does, in the order the report lists it. */
export function nvshmemSpecs(t: Template, vendored: VendoredFile[] = []): PatchSpec[] {
  return [...libfabricCppSpecs(t), ...cmakeSpecs(t), ...templateFileSpecs(t), ...vendored.map((v) => vendoredFileSpec(t, v))];
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

export async function planNvshmem(root: string, t: Template, vendored: VendoredFile[] = []): Promise<PatchPlan> {
  return planPatches(root, nvshmemSpecs(t, vendored), {
    async explainMissing(file) {
      if (!file.endsWith('libfabric.cpp') && !file.endsWith('libfabric.h')) return undefined;
      const hits = await findElsewhere(root, '');
      return hits.length
        ? `found ${hits.join(', ')} instead: an NVSHMEM layout other than 3.x, which nvshmem-efa does not patch`
        : 'no libfabric transport source anywhere in the tree: is this an NVSHMEM source tree?';
    },
  });
}
