import path from 'node:path';
import { packageRoot } from '../../core/paths.ts';
import { readPackageFile } from '../../core/small-file.ts';
import type { OwnedFileSpec } from '../engine/plan.ts';

/** Every file of templates/deepep_efa carries this; it is how a rerun recognises its own copy. */
export const DEEPEP_OWNER_MARK = 'nvshmem-efa template deepep_efa';
export const SHIM_FILE = 'nvshmem_efa_shim.cuh';

export async function loadShim(dir = path.join(packageRoot(), 'templates', 'deepep_efa')): Promise<string> {
  const content = await readPackageFile(path.join(dir, SHIM_FILE));
  if (!content.includes(DEEPEP_OWNER_MARK)) throw new Error(`${SHIM_FILE} lacks "${DEEPEP_OWNER_MARK}"`);
  return content;
}

export function shimFileSpec(destDir: string, content: string): OwnedFileSpec {
  return {
    kind: 'owned-file',
    id: 'deepep-shim-file',
    file: `${destDir}/${SHIM_FILE}`,
    anchor: `templates/deepep_efa/${SHIM_FILE}`,
    why: "DeepEP's IBGDA device layer rebuilt on NVSHMEM's public API (and the EFA GDA path when active)",
    content,
    ownerMark: DEEPEP_OWNER_MARK,
  };
}
