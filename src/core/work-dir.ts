import { existsSync } from 'node:fs';
import { readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { FilesystemError, UsageError } from './errors.ts';
import { writeFileAtomic } from './fs-atomic.ts';
import { LOCK_FILE } from './lock.ts';
import { REPORT_JSON, REPORT_MD } from './report.ts';
import { isStateFile, STATE_FILE } from './state.ts';
import { makeDirs } from './make-dirs.ts';

/**
 * A run writes only into a work dir that is new, empty, or already ours, because `clean` deletes and runs
 * overwrite: a home directory or a source tree passed as --work-dir must never be either. The marker says
 * the directory is ours and lists the top-level entries nvshmem-efa created there, which are all `clean`
 * ever removes.
 */
export const MARKER_FILE = '.nvshmem-efa-workdir.json';

const Marker = z.object({
  schema: z.literal('nvshmem-efa-workdir/1'),
  /** True when nvshmem-efa made the directory itself; only then may `clean` remove it (once empty). */
  createdDir: z.boolean(),
  created: z.array(z.string()),
});
type Marker = z.infer<typeof Marker>;

/** Top-level names of the work-dir layout (what `workPaths` and the report write), besides the marker. */
export const LAYOUT_NAMES = ['logs', 'sources', 'build', 'install', 'stubs', 'vendor', STATE_FILE, REPORT_JSON, REPORT_MD, LOCK_FILE] as const;

/** Temporary files of writeFileAtomic and the lock take-over: ours by name. */
const isOurTemp = (name: string) => /\.nvshmem-efa-tmp-\d+$/.test(name) || name.startsWith(`${LOCK_FILE}.`);

async function readMarker(dir: string): Promise<Marker | undefined> {
  try {
    return Marker.parse(JSON.parse(await readFile(path.join(dir, MARKER_FILE), 'utf8')));
  } catch {
    return undefined;
  }
}

/** A work dir made by an nvshmem-efa without the marker: its state.json is ours. */
async function isLegacyWorkDir(dir: string): Promise<boolean> {
  try {
    return isStateFile(JSON.parse(await readFile(path.join(dir, STATE_FILE), 'utf8')));
  } catch {
    return false;
  }
}

async function statOrUndefined(p: string) {
  try {
    return await stat(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

function notADirectory(dir: string): FilesystemError {
  return new FilesystemError(`--work-dir ${dir} exists and is not a directory`, `pass a directory path (a new one is created), or move ${dir} away`, dir, 'ENOTDIR');
}

/**
 * Makes `dir` this tool's work dir, or refuses (exit 2) a non-empty directory that is not one. `names` are
 * the top-level entries this run may create; those not present yet are recorded as ours.
 */
export async function claimWorkDir(dir: string, names: readonly string[] = LAYOUT_NAMES): Promise<void> {
  const st = await statOrUndefined(dir);
  let marker: Marker | undefined;
  if (!st) {
    await makeDirs(dir);
    marker = { schema: 'nvshmem-efa-workdir/1', createdDir: true, created: [...names] };
  } else if (!st.isDirectory()) {
    throw notADirectory(dir);
  } else {
    marker = await readMarker(dir);
    if (marker) {
      const more = names.filter((n) => !marker!.created.includes(n) && !existsSync(path.join(dir, n)));
      if (more.length === 0) return;
      marker = { ...marker, created: [...marker.created, ...more] };
    } else {
      const entries = (await readdir(dir)).filter((n) => n !== MARKER_FILE);
      if (entries.length === 0) {
        marker = { schema: 'nvshmem-efa-workdir/1', createdDir: false, created: [...names] };
      } else if (await isLegacyWorkDir(dir)) {
        // Made by an earlier nvshmem-efa: its layout entries are ours, anything else stays the user's.
        marker = { schema: 'nvshmem-efa-workdir/1', createdDir: false, created: [...names] };
      } else {
        const shown = entries.slice(0, 5).join(', ') + (entries.length > 5 ? `, … (${entries.length} entries)` : '');
        throw new UsageError(
          `--work-dir ${dir} is not empty and is not an nvshmem-efa work dir (it holds ${shown}); refusing to write into it`,
          `pass a new or empty directory, e.g. --work-dir ${path.join(dir, 'nvshmem-efa-work')}`,
        );
      }
    }
  }
  await writeFileAtomic(path.join(dir, MARKER_FILE), JSON.stringify(marker, null, 2) + '\n');
}

export interface CleanPlan {
  /** Entries to remove (absolute paths), all created by nvshmem-efa. */
  remove: string[];
  /** Entries left alone because nvshmem-efa did not create them. */
  keep: string[];
  /** Whether the directory itself goes too (made by nvshmem-efa, and empty afterwards). */
  removeDir: boolean;
}

/** What `clean` may delete in `dir`: only what this tool created; refuses a directory that is not ours. */
export async function planClean(dir: string): Promise<CleanPlan | undefined> {
  const st = await statOrUndefined(dir);
  if (!st) return undefined;
  if (!st.isDirectory()) throw notADirectory(dir);
  const entries = await readdir(dir);
  const marker = await readMarker(dir);
  let created: readonly string[];
  let createdDir = false;
  if (marker) {
    created = marker.created;
    createdDir = marker.createdDir;
  } else if (await isLegacyWorkDir(dir)) {
    created = LAYOUT_NAMES;
  } else if (entries.length === 0) {
    return undefined;
  } else {
    throw new UsageError(
      `${dir} is not an nvshmem-efa work directory (no ${MARKER_FILE} or ${STATE_FILE} of ours); refusing to delete anything in it`,
      'pass the --work-dir a build used, or delete the folder yourself',
    );
  }
  const ours = (n: string) => n === MARKER_FILE || created.includes(n) || isOurTemp(n);
  const remove = entries.filter(ours).map((n) => path.join(dir, n));
  const keep = entries.filter((n) => !ours(n)).map((n) => path.join(dir, n));
  return { remove, keep, removeDir: createdDir && keep.length === 0 };
}

export async function applyClean(dir: string, plan: CleanPlan): Promise<void> {
  // The marker goes last: an interrupted clean can be rerun and still knows what is ours.
  const marker = path.join(dir, MARKER_FILE);
  for (const p of plan.remove.filter((p) => p !== marker)) await rm(p, { recursive: true, force: true });
  await rm(marker, { force: true });
  if (plan.removeDir) await rmdir(dir);
}
