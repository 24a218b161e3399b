import { rename, writeFile, stat, chmod, rm } from 'node:fs/promises';
import path from 'node:path';
import { makeDirs } from './make-dirs.ts';

/** Write through a temporary sibling and rename, so a crash leaves the old file or the new one, never half. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  await makeDirs(path.dirname(file));
  const tmp = `${file}.nvshmem-efa-tmp-${process.pid}`;
  let mode: number | undefined;
  try {
    mode = (await stat(file)).mode;
  } catch {
    /* new file */
  }
  try {
    await writeFile(tmp, data);
    if (mode !== undefined) await chmod(tmp, mode);
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}
