import { open, rename, writeFile, stat, chmod, rm } from 'node:fs/promises';
import { renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { makeDirs } from './make-dirs.ts';
import { chownHandle, type Owner } from './owner.ts';

/**
 * Test hook, set only by the fault campaign (test/faults): NVSHMEM_EFA_TEST_KILL_AFTER_WRITES=N makes the process
 * SIGKILL itself right after its Nth atomic write (state, markers, export files, report), the way `kill -9`, the
 * OOM killer or a crash would stop it between two commit points. Nothing else sets it.
 */
let writes = 0;
function killForTest(): void {
  const n = process.env.NVSHMEM_EFA_TEST_KILL_AFTER_WRITES;
  if (n && Number(n) === ++writes) process.kill(process.pid, 'SIGKILL');
}

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
  killForTest();
}

/**
 * Writes `data` and flushes it to the disk before returning: what the journal promises across a power loss.
 * `owner` and `mode` are set on the open file before the flush (owner first: a chown clears set-id bits).
 */
export async function writeDurable(file: string, data: Uint8Array | string, o: { owner?: Owner; mode?: number } = {}): Promise<void> {
  const fh = await open(file, 'w');
  try {
    await fh.writeFile(data);
    if (o.owner) await chownHandle(fh, o.owner);
    if (o.mode !== undefined) await fh.chmod(o.mode & 0o7777);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * writeFileAtomic for code that cannot wait (a process 'exit' handler, a child-process callback), in a
 * directory that exists: the same temporary sibling and rename, synchronously.
 */
export function writeFileAtomicSync(file: string, data: string): void {
  const tmp = `${file}.nvshmem-efa-tmp-${process.pid}`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, file);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* not there */
    }
    throw e;
  }
}
