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

/** DeepEP commits nvshmem-efa patches: short or full ref -> the commit the fetched tree must be. */
export const DEEPEP_PINS: readonly Pin[] = [
  { ref: '567632d', commit: '567632dd59810d77b3cc05553df953cc0f779799', note: 'last V1-only DeepEP commit (2026-02-03)' },
];

// No default DeepEP ref: DeepEP is patched and built only when --deepep-src or --deepep-ref names it (--help
// and the README say so); a default constant here read as if --deepep-ref had one.

export const DEEPEP_GIT_URL = 'https://github.com/deepseek-ai/DeepEP.git';
