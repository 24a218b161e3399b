import { UsageError } from '../core/errors.ts';

/**
 * The unkind efaemu modes of issue 21 that `selftest` turns on for the GDA and DeepEP checks, and how
 * `--efaemu-modes` picks the runs. checks.sh owns the environment each mode sets (it also runs without Node.js:
 * `checks.sh --modes` lists them); this list must name the same modes (a unit test compares them).
 */
export const EFAEMU_MODES = ['place_order', 'defer', 'duplicate', 'silent', 'wqe128'] as const;
export type EfaemuMode = (typeof EFAEMU_MODES)[number];

/** What each mode models (for --help and the dry run); the facts are in native/efaemu/README.md. */
export const MODE_MODELS: Record<EfaemuMode, string> = {
  place_order: 'EFAEMU_PLACE_ORDER: writes of one initiator to one target placed out of order (SRD is unordered)',
  defer: 'EFAEMU_PLACE_DEFER_US: the completion comes when the target NIC has the data, the bytes land later',
  duplicate: 'EFAEMU_DUPLICATE: a write placed once more after its completion (delivered-once is not promised)',
  silent: 'EFAEMU_SILENT_AFTER_ERROR: after a QP error nothing more completes',
  wqe128: 'EFAEMU_WQE_SIZE=128: an efa-direct device with 128-byte WQEs',
};

/** One pass of checks.sh: the modes it runs the mode-taking checks under, and its label (table, results dir). */
export interface ModeRun {
  label: string;
  modes: EfaemuMode[];
}

/**
 * --efaemu-modes: `all` (default; one run with every mode), `none` (one run without), `each` (one run per mode,
 * then one with all: what issue 21's acceptance asks for), or a comma list of modes (one run with those).
 */
export function parseEfaemuModes(spec: string | undefined): ModeRun[] {
  const s = (spec ?? 'all').trim();
  const fix = `pass all, none, each, or a comma list of: ${EFAEMU_MODES.join(', ')}`;
  if (s === 'all') return [{ label: 'all', modes: [...EFAEMU_MODES] }];
  if (s === 'none' || s === '') return [{ label: 'none', modes: [] }];
  if (s === 'each') return [...EFAEMU_MODES.map((m) => ({ label: m, modes: [m] })), { label: 'all', modes: [...EFAEMU_MODES] }];
  const names = s.split(',').map((x) => x.trim()).filter(Boolean);
  const bad = names.filter((n) => !(EFAEMU_MODES as readonly string[]).includes(n));
  if (bad.length) throw new UsageError(`--efaemu-modes: unknown mode${bad.length > 1 ? 's' : ''} ${bad.join(', ')}`, fix);
  const modes = EFAEMU_MODES.filter((m) => names.includes(m));
  return [{ label: modes.join(','), modes }];
}

/** The value of checks.sh's EFAEMU_MODES for a run (the script maps each name to its environment). */
export function modesEnv(run: ModeRun): string {
  return run.modes.length ? run.modes.join(',') : 'none';
}
