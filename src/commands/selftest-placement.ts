import { UsageError } from '../core/errors.ts';

/**
 * Where selftest's PEs go (issue 34): a run of N PEs puts PE r on GPU r mod U, U being the GPUs it uses. With
 * `--pes-per-gpu auto` (the default) U is as many GPUs as the host has, up to N, so a host with a GPU per PE keeps one
 * PE per GPU; with `--pes-per-gpu K`, U = ceil(N / K). A run with more PEs than the GPUs it uses is shared: the driver
 * time-slices its PEs, each a host of its own. native/efaemu/gpu/checks.sh places the PEs it starts by the same rule
 * (`checks.sh --placement N` prints it; a unit test compares the two); this module says it in the table and the report.
 */
export type PesPerGpu = 'auto' | number;

export interface Placement {
  pes: number;
  gpus: number;
  shared: boolean;
}

/** --pes-per-gpu: auto, or a positive integer. */
export function parsePesPerGpu(spec: string | undefined): PesPerGpu {
  const s = (spec ?? 'auto').trim();
  if (s === 'auto') return 'auto';
  if (/^[1-9]\d{0,2}$/.test(s)) return Number(s);
  throw new UsageError(`--pes-per-gpu ${s}: expected auto or a positive integer`, 'pass --pes-per-gpu auto (share the GPUs there are only where a check needs more PEs than GPUs) or e.g. --pes-per-gpu 2');
}

/** The placement of `pes` PEs on a host with `hostGpus` GPUs, or why there is none. */
export function place(pes: number, hostGpus: number, perGpu: PesPerGpu): Placement | { why: string } {
  if (hostGpus < 1) return { why: 'no GPU on this host' };
  const gpus = perGpu === 'auto' ? Math.min(pes, hostGpus) : Math.ceil(pes / perGpu);
  if (gpus > hostGpus) return { why: `${pes} PEs at ${perGpu} per GPU need ${gpus} GPUs; this host has ${hostGpus} (--pes-per-gpu auto shares the GPUs there are)` };
  return { pes, gpus, shared: pes > gpus };
}

/** "2 PEs, 1 per GPU" or "6 PEs on 1 GPU (time-sliced, each PE a host of its own)", as checks.sh says it. */
export function describePlacement(p: Placement): string {
  return p.shared ? `${p.pes} PEs on ${p.gpus} GPU${p.gpus === 1 ? '' : 's'} (time-sliced, each PE a host of its own)` : `${p.pes} PEs, 1 per GPU`;
}
