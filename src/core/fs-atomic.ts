import { lstat, open, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { closeSync, constants, fstatSync, lstatSync, openSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { makeDirs } from './make-dirs.ts';
import { chownHandle, type Owner } from './owner.ts';

/**
 * Every file nvshmem-efa writes is created fresh, never written through what stands at its name: anyone who can
 * write the work dir (or a user's tree, for a patch's staged files) could have put a symbolic link there, or a
 * hard link to one of their files, and the tool may run as root. So a name is unlinked first (a link itself
 * goes, never what it points to) and the file is created with O_CREAT|O_EXCL|O_NOFOLLOW, which fails instead of
 * following a link put back in between; whole files are then renamed over their name, which replaces a link
 * there, never writes into its target.
 */
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_APPEND, O_NONBLOCK } = constants;
const FRESH = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;

/**
 * Test hook, set only by the fault campaign (test/faults): NVSHMEM_EFA_TEST_KILL_AFTER_WRITES=N makes the process
 * SIGKILL itself right after its Nth atomic write (state, markers, export files, report), the way `kill -9`, the
 * OOM killer or a crash would stop it between two commit points. Nothing else sets it.
 */
let writes = 0;
// Stryker disable all: a mutant here kills the test runner itself (SIGKILL), not a test; the campaign guards it.
function killForTest(): void {
  const n = process.env.NVSHMEM_EFA_TEST_KILL_AFTER_WRITES;
  if (n && Number(n) === ++writes) process.kill(process.pid, 'SIGKILL');
}
// Stryker restore all

/**
 * Temporary siblings being written: removed should the process exit meanwhile (a signal stops a command at once
 * outside its steps, core/signals.ts), so that no stray file is left beside the one it was to replace.
 */
const inFlight = new Set<string>();
process.on('exit', () => {
  for (const t of inFlight) {
    try {
      unlinkSync(t);
    } catch {
      /* not there */
    }
  }
});

const code = (e: unknown) => (e as NodeJS.ErrnoException).code;

/**
 * Opens `file` as a new, empty file of this process: whatever stands at its name (a link, a hard link, a FIFO, a
 * stale file) is unlinked first. A directory there is not removed: its unlink error (EISDIR, EPERM) is raised.
 */
export async function openFresh(file: string, flags = 0, mode = 0o666): Promise<FileHandle> {
  for (let attempt = 0; ; attempt++) {
    try {
      await unlink(file);
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
    }
    try {
      return await open(file, FRESH | flags, mode);
    } catch (e) {
      // Put back between the unlink and the open (EEXIST): unlinked again, a few times, then raised.
      if (code(e) !== 'EEXIST' || attempt >= 4) throw e;
    }
  }
}

/** openFresh for code that cannot wait: returns a file descriptor. */
export function openFreshSync(file: string, flags = 0, mode = 0o666): number {
  for (let attempt = 0; ; attempt++) {
    try {
      unlinkSync(file);
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
    }
    try {
      return openSync(file, FRESH | flags, mode);
    } catch (e) {
      if (code(e) !== 'EEXIST' || attempt >= 4) throw e;
    }
  }
}

/** Errors of opening an existing name for appending that mean "not a plain file of ours": replaced by a fresh one. */
const NOT_PLAIN = new Set(['ENOENT', 'ELOOP', 'ENXIO', 'EMLINK']);

/** Whether an open file may be appended to: a regular file with this one name, of this user. */
const appendable = (st: { isFile(): boolean; nlink: number; uid: number }) => st.isFile() && st.nlink === 1 && (process.geteuid === undefined || st.uid === process.geteuid());

/**
 * Opens a log for appending (a step's log collects each of its runs): the file there is kept only when it is a
 * regular file with a single link, owned by this user, checked on the open file (no race with the check). A
 * symbolic link (O_NOFOLLOW: ELOOP), a hard link to someone's file, a FIFO (O_NONBLOCK: ENXIO, never a wait for
 * a reader) or a device is replaced by a fresh file instead of being written through.
 */
export async function openForAppend(file: string): Promise<FileHandle> {
  try {
    const fh = await open(file, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK);
    if (appendable(await fh.stat())) return fh;
    await fh.close();
  } catch (e) {
    if (!NOT_PLAIN.has(code(e) ?? '')) throw e;
  }
  return openFresh(file, O_APPEND);
}

/** openForAppend for code that cannot wait: returns a file descriptor. */
export function openForAppendSync(file: string): number {
  try {
    const fd = openSync(file, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK);
    if (appendable(fstatSync(fd))) return fd;
    closeSync(fd);
  } catch (e) {
    if (!NOT_PLAIN.has(code(e) ?? '')) throw e;
  }
  return openFreshSync(file, O_APPEND);
}

/** The mode of the regular file at `file` (not a link's target), to give its replacement; undefined if none. */
async function modeOf(file: string): Promise<number | undefined> {
  try {
    const st = await lstat(file);
    return st.isFile() ? st.mode & 0o7777 : undefined;
  } catch {
    return undefined;
  }
}

/** Write through a temporary sibling and rename, so a crash leaves the old file or the new one, never half. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  await makeDirs(path.dirname(file));
  const tmp = `${file}.nvshmem-efa-tmp-${process.pid}`;
  inFlight.add(tmp);
  const mode = await modeOf(file);
  try {
    const fh = await openFresh(tmp);
    try {
      await fh.writeFile(data);
      if (mode !== undefined) await fh.chmod(mode);
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  } finally {
    inFlight.delete(tmp);
  }
  killForTest();
}

/**
 * Writes `data` into a fresh file and flushes it to the disk before returning: what the journal promises across
 * a power loss. `owner` and `mode` are set on the open file before the flush (owner first: a chown clears set-id
 * bits).
 */
export async function writeDurable(file: string, data: Uint8Array | string, o: { owner?: Owner; mode?: number } = {}): Promise<void> {
  const fh = await openFresh(file);
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
 * directory that exists: the same fresh temporary sibling and rename, synchronously.
 */
export function writeFileAtomicSync(file: string, data: string): void {
  const tmp = `${file}.nvshmem-efa-tmp-${process.pid}`;
  let mode: number | undefined;
  try {
    const st = lstatSync(file);
    if (st.isFile()) mode = st.mode & 0o7777;
  } catch {
    /* new file */
  }
  try {
    const fd = openFreshSync(tmp, 0, mode ?? 0o666);
    try {
      writeFileSync(fd, data);
    } finally {
      closeSync(fd);
    }
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
