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

/**
 * A step skipped as up to date changed nothing in this run: what its earlier run applied is reported as
 * already present, so a no-op rerun does not print it as applied.
 */
export function upToDate(fixes: readonly FixRecord[]): FixRecord[] {
  return fixes.map((f) => (f.status === 'applied' ? { ...f, status: 'already-present' as const } : f));
}
