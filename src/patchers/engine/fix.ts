/** What the tool did, or would do, about one thing it checked: the unit of every report. */
export type FixStatus = 'applied' | 'already-present' | 'refused' | 'warned';

export interface FixRecord {
  /** Stable identifier, e.g. `efa-gda-init`. */
  id: string;
  /** File the fix touches, relative to the tree it patched; absent for environment fixes. */
  file?: string;
  /** What it anchored on (a function, label, CMake command, tool or path). */
  anchor: string;
  /** Why the fix exists: the failure it prevents. */
  why: string;
  status: FixStatus;
  /** For refusals and warnings: what was found instead and what to try. */
  detail?: string;
}
