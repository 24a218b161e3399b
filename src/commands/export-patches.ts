import { existsSync } from 'node:fs';
import { readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { UsageError } from '../core/errors.ts';
import { writeFileAtomic } from '../core/fs-atomic.ts';
import { exportPatches as writeSeries } from '../patchers/engine/apply.ts';
import type { FileChange } from '../patchers/engine/plan.ts';

/**
 * `patch --export DIR` layout: one folder per tree, because NVSHMEM's and DeepEP's patches apply to
 * different checkouts (DIR/nvshmem/, DIR/deepep/), each with numbered .patch files and a `series`. A marker
 * lists every file written, so the next export into DIR removes exactly those (no stale patch survives) and
 * a directory that is not an export is never written into.
 */
export const EXPORT_MARKER = '.nvshmem-efa-export.json';
const Marker = z.object({ schema: z.literal('nvshmem-efa-export/1'), files: z.array(z.string()) });

export interface ExportPart {
  /** Folder name under DIR: nvshmem or deepep. */
  name: string;
  /** The tree the patches were planned against (shown in the apply command). */
  tree: string;
  changes: readonly FileChange[];
  /** Where else the patches apply, for the message (e.g. "or any checkout of v3.4.5-0"). */
  note?: string;
}

const sh = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

async function readMarker(dir: string): Promise<z.infer<typeof Marker> | undefined> {
  try {
    return Marker.parse(JSON.parse(await readFile(path.join(dir, EXPORT_MARKER), 'utf8')));
  } catch {
    return undefined;
  }
}

/** Refuses an --export DIR that is a file, or a non-empty directory no export of ours wrote (exit 2). */
export async function checkExportDir(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  if (!(await stat(dir)).isDirectory()) throw new UsageError(`--export ${dir} exists and is not a directory`, 'pass a new or empty directory for the patches');
  const entries = await readdir(dir);
  if (entries.length && !(await readMarker(dir))) {
    throw new UsageError(
      `--export ${dir} is not empty and holds no earlier nvshmem-efa export (it holds ${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ', …' : ''})`,
      `pass a new or empty directory, e.g. --export ${path.join(dir, 'nvshmem-efa-patches')}`,
    );
  }
}

/** Writes the export; returns the lines to print: what was written and the command that applies each part. */
export async function exportPatches(dir: string, parts: readonly ExportPart[]): Promise<string[]> {
  await checkExportDir(dir);
  const old = await readMarker(dir);
  for (const f of old?.files ?? []) await rm(path.join(dir, f), { force: true });
  for (const sub of new Set((old?.files ?? []).map((f) => f.split('/')[0]!))) {
    await rmdir(path.join(dir, sub)).catch(() => undefined);
  }
  const written: string[] = [];
  const lines: string[] = [];
  for (const part of parts) {
    if (part.changes.length === 0) {
      lines.push(`${part.name}: every patch already present in ${part.tree}; nothing to export`);
      continue;
    }
    const names = await writeSeries(path.join(dir, part.name), part.changes);
    written.push(...names.map((n) => `${part.name}/${n}`), `${part.name}/series`);
    lines.push(
      `${part.name}: ${names.length} patch file(s) in ${path.join(dir, part.name)}; apply with:`,
      `  git -C ${sh(part.tree)} apply ${sh(path.join(dir, part.name))}/*.patch${part.note ? `   # ${part.note}` : ''}`,
    );
  }
  await writeFileAtomic(path.join(dir, EXPORT_MARKER), JSON.stringify({ schema: 'nvshmem-efa-export/1', files: written }, null, 2) + '\n');
  return lines;
}
