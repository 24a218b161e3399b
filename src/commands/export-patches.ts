import { existsSync } from 'node:fs';
import { readdir, readlink, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import { UsageError } from '../core/errors.ts';
import { writeFileAtomic } from '../core/fs-atomic.ts';
import { entryKind, isConfinedPath, readSmallFile } from '../core/untrusted.ts';
import { seriesNames, exportPatches as writeSeries } from '../patchers/engine/apply.ts';
import type { FileChange } from '../patchers/engine/plan.ts';
import { shellQuote } from '../core/shell-quote.ts';

/**
 * `patch --export DIR` layout: one folder per tree, because NVSHMEM's and DeepEP's patches apply to
 * different checkouts (DIR/nvshmem/, DIR/deepep/), each with numbered .patch files and a `series`. A marker
 * lists every file written, so the next export into DIR removes exactly those (no stale patch survives) and
 * a directory that is not an export is never written into. The marker is read back as untrusted input: each
 * entry must be `<part>/<file>` inside DIR, and only regular files are removed (a link or a directory listed
 * there is left alone with a note), so an edited marker cannot make an export delete anything else.
 */
export const EXPORT_MARKER = '.nvshmem-efa-export.json';
const Marker = z.object({ schema: z.literal('nvshmem-efa-export/1'), files: z.array(z.string().refine((f) => isConfinedPath(f, 2) && f.includes('/'), { message: 'not a <part>/<file> path inside the export dir' })) });
/** The part folders an export writes (ExportPart.name). */
const PARTS = ['nvshmem', 'deepep'];

export interface ExportPart {
  /** Folder name under DIR: nvshmem or deepep. */
  name: string;
  /** The tree the patches were planned against (shown in the apply command). */
  tree: string;
  changes: readonly FileChange[];
  /** Where else the patches apply, for the message (e.g. "or any checkout of v3.4.5-0"). */
  note?: string;
}


/** The marker of an earlier export; a marker that is there but not one we wrote is refused (exit 2). */
function readMarker(dir: string): z.infer<typeof Marker> | undefined {
  const file = path.join(dir, EXPORT_MARKER);
  const got = readSmallFile(file);
  if (got.kind === 'missing') return undefined;
  let why: string;
  if (got.kind === 'bad') why = got.why;
  else {
    try {
      const parsed = Marker.safeParse(JSON.parse(got.text));
      if (parsed.success) return parsed.data;
      const issue = parsed.error.issues[0]!;
      const at = issue.path.length === 2 && issue.path[0] === 'files' ? `: ${JSON.stringify((JSON.parse(got.text) as { files: unknown[] }).files[issue.path[1] as number])} is ${issue.message}` : `: ${issue.path.join('.') || 'schema'}: ${issue.message}`;
      why = `it does not match its schema${at}`;
    } catch {
      why = 'it is not JSON';
    }
  }
  throw new UsageError(
    `${file} is not an export marker nvshmem-efa wrote (${why}); refusing to delete or write anything in ${dir}`,
    `pass a new or empty directory for --export, or delete ${file} yourself if the folder holds only patches`,
  );
}

/**
 * Refuses an --export DIR that is a file, a non-empty directory no export of ours wrote, or one whose part
 * folders are links or files (an export writes and deletes only in folders of its own): exit 2.
 */
export async function checkExportDir(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  if (!(await stat(dir)).isDirectory()) throw new UsageError(`--export ${dir} exists and is not a directory`, 'pass a new or empty directory for the patches');
  const entries = await readdir(dir);
  const marker = readMarker(dir);
  if (entries.length && !marker) {
    throw new UsageError(
      `--export ${dir} is not empty and holds no earlier nvshmem-efa export (it holds ${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ', …' : ''})`,
      `pass a new or empty directory, e.g. --export ${path.join(dir, 'nvshmem-efa-patches')}`,
    );
  }
  for (const part of new Set([...PARTS, ...(marker?.files ?? []).map((f) => f.split('/')[0]!)])) {
    const kind = entryKind(dir, part);
    if (kind === 'missing' || kind === 'dir') continue;
    const p = path.join(dir, part);
    const what = kind === 'symlink' ? `a symbolic link (to ${await readlink(p)})` : 'not a directory';
    throw new UsageError(`--export ${dir}: ${p} is ${what}; an export writes and deletes only in folders of its own`, `remove ${p} or pass a new or empty directory for --export`);
  }
  // Every listed entry is removed by the export: each must be a patch file it wrote, or gone.
  for (const f of marker?.files ?? []) {
    const kind = entryKind(dir, f);
    if (kind === 'missing' || kind === 'file') continue;
    const p = path.join(dir, f);
    throw new UsageError(
      `--export ${dir}: ${p}, listed in ${EXPORT_MARKER} as a patch an export wrote, is ${kindWords(kind)}; refusing to delete or write anything in ${dir}`,
      `move ${p} away if it is yours, or pass a new or empty directory for --export`,
    );
  }
}

const kindWords = (k: string) => (k === 'dir' ? 'a directory' : k === 'symlink' ? 'a symbolic link' : 'not a regular file');

/** Writes the export; returns the lines to print: what was written and the command that applies each part. */
export async function exportPatches(dir: string, parts: readonly ExportPart[], note: (s: string) => void = (s) => process.stderr.write(`note: ${s}\n`)): Promise<string[]> {
  await checkExportDir(dir);
  const old = readMarker(dir);
  // The marker first names every file this export may leave (the earlier export's and this one's), so an export
  // killed half-way is still an export the next one replaces whole, never a folder of unlisted files it refuses.
  const planned = parts.flatMap((p) => (p.changes.length ? [...seriesNames(p.changes), 'series'].map((n) => `${p.name}/${n}`) : []));
  await writeFileAtomic(path.join(dir, EXPORT_MARKER), JSON.stringify({ schema: 'nvshmem-efa-export/1', files: [...new Set([...(old?.files ?? []), ...planned])] }, null, 2) + '\n');
  for (const f of old?.files ?? []) {
    const kind = entryKind(dir, f);
    if (kind === 'file') await rm(path.join(dir, f), { force: true });
    // Changed since checkExportDir refused anything else (a race): left alone, and said so.
    else if (kind !== 'missing') note(`left ${path.join(dir, f)} alone: ${kindWords(kind)}, not a file an export wrote`);
  }
  for (const sub of new Set((old?.files ?? []).map((f) => f.split('/')[0]!))) {
    if (entryKind(dir, sub) === 'dir') await rmdir(path.join(dir, sub)).catch(() => undefined);
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
      `  git -C ${shellQuote(part.tree)} apply ${shellQuote(path.join(dir, part.name))}/*.patch${part.note ? `   # ${part.note}` : ''}`,
    );
  }
  await writeFileAtomic(path.join(dir, EXPORT_MARKER), JSON.stringify({ schema: 'nvshmem-efa-export/1', files: written }, null, 2) + '\n');
  return lines;
}
