/**
 * NVSHMEM releases nvshmem-efa is tested against: tag -> the commit the tag must resolve to. A fetched tree
 * whose HEAD differs is rejected (a moved tag or a tampered mirror).
 */
export interface Pin {
  ref: string;
  commit: string;
  note: string;
}

export const NVSHMEM_PINS: readonly Pin[] = [
  { ref: 'v3.4.5-0', commit: '131da55f643ac87c810ba0bc51d359258bf433a1', note: 'NVSHMEM 3.4.5 release' },
];

export const DEFAULT_NVSHMEM_REF = 'v3.4.5-0';

export const NVSHMEM_GIT_URL = 'https://github.com/NVIDIA/nvshmem.git';
