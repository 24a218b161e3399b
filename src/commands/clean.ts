import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from '../core/errors.ts';
import { STATE_FILE } from '../core/state.ts';
import type { Options } from '../options.ts';

/** Removes the work dir, but only one this tool made (it holds state.json), never an arbitrary folder. */
export async function cleanCommand(opts: Options, out: (s: string) => void): Promise<number> {
  const dir = opts.workDir;
  if (!existsSync(dir)) {
    out(`${dir}: nothing to clean`);
    return 0;
  }
  const entries = await readdir(dir);
  if (entries.length && !existsSync(path.join(dir, STATE_FILE))) {
    throw new UsageError(`${dir} is not an nvshmem-efa work directory (no ${STATE_FILE}); refusing to delete it`, 'pass the --work-dir a build used, or delete the folder yourself');
  }
  if (opts.dryRun) {
    out(`would remove ${dir}`);
    return 0;
  }
  await rm(dir, { recursive: true, force: true });
  out(`removed ${dir}`);
  return 0;
}
