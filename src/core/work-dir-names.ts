/**
 * File names of the work dir that several modules need: a module of their own, because lock.ts records into
 * work-dir.ts when it releases the lock and state.ts checks for another work dir's marker.
 */
export const LOCK_FILE = '.nvshmem-efa.lock';
export const MARKER_FILE = '.nvshmem-efa-workdir.json';
