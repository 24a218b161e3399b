import path from 'node:path';
import * as z from 'zod';
import { packageRoot } from '../../core/paths.ts';
import { readPackageFile } from '../../core/small-file.ts';
import type { OwnedFileSpec } from '../engine/plan.ts';

const Manifest = z.object({
  name: z.string(),
  stage: z.enum(['not-implemented', 'implemented']),
  stageNote: z.string(),
  destination: z.string(),
  sources: z.array(z.string()).min(1),
  headers: z.array(z.string()),
  /** Headers installed for applications: the public API, the device API and the vendored efa_io_defs.h. */
  installHeaders: z.array(z.string()).min(1),
  installDir: z.string(),
  exportPattern: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/),
  enableEnv: z.string().regex(/^NVSHMEM_[A-Z0-9_]+$/),
});
export type TemplateManifest = z.infer<typeof Manifest>;

export interface Template {
  dir: string;
  manifest: TemplateManifest;
  files: { name: string; content: string }[];
}

/** Every template file carries this line; it is how the patcher recognises its own copies. */
export const OWNER_MARK = 'nvshmem-efa template';

export async function loadTemplate(dir = path.join(packageRoot(), 'templates', 'transport_efa_gda')): Promise<Template> {
  const manifest = Manifest.parse(JSON.parse(await readPackageFile(path.join(dir, 'manifest.json'))));
  const names = [...manifest.headers, ...manifest.sources];
  const files = await Promise.all(
    names.map(async (name) => ({ name, content: await readPackageFile(path.join(dir, name)) })),
  );
  for (const f of files) {
    if (!f.content.includes(OWNER_MARK)) throw new Error(`template file ${f.name} lacks "${OWNER_MARK}"`);
  }
  return { dir, manifest, files };
}

export function templateFileSpecs(t: Template): OwnedFileSpec[] {
  return t.files.map((f) => ({
    kind: 'owned-file',
    id: `efa-gda-template:${f.name}`,
    file: `${t.manifest.destination}/${f.name}`,
    anchor: `templates/${t.manifest.name}/${f.name}`,
    why: 'the EFA GDA transport sources compiled into nvshmem_transport_libfabric',
    content: f.content,
    ownerMark: OWNER_MARK,
  }));
}

/** A verified third-party file the template needs next to its own (efa_io_defs.h). */
export interface VendoredFile {
  name: string;
  content: string;
  origin: string;
}

/** A vendored file as the tree gets it: a first line naming its origin (how a rerun recognises the copy as ours), then the verified file, unchanged. */
export function vendoredContent(t: Template, v: VendoredFile): string {
  return `/* ${OWNER_MARK} ${t.manifest.name}: vendored by nvshmem-efa from ${v.origin}. */\n${v.content}`;
}

export function vendoredFileSpec(t: Template, v: VendoredFile): OwnedFileSpec {
  return {
    kind: 'owned-file',
    id: `efa-gda-vendored:${v.name}`,
    file: `${t.manifest.destination}/${v.name}`,
    anchor: v.origin,
    why: 'the upstream EFA I/O definitions the GDA device header includes (pinned, sha256-verified)',
    content: vendoredContent(t, v),
    ownerMark: OWNER_MARK,
  };
}
