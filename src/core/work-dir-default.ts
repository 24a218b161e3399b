/** The work dir when neither --work-dir nor NVSHMEM_EFA_WORK_DIR is given. */
export const DEFAULT_WORK_DIR = '.nvshmem-efa';
/** The variable that names the work dir of every command (the container image and the Slurm scripts set it). */
export const WORK_DIR_VARIABLE = 'NVSHMEM_EFA_WORK_DIR';

/**
 * The default of --work-dir: NVSHMEM_EFA_WORK_DIR when set, else .nvshmem-efa. The CLI reads it itself so that
 * `nvshmem-efa env` (or report, selftest, ...) in a container or a batch job finds the build its entrypoint made
 * without repeating the path. An empty value counts as unset (`VAR= cmd` is how a shell clears it for one command).
 * A module of its own: cli.ts needs it to build --help, before options.ts (zod) is loaded.
 */
export function defaultWorkDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = env[WORK_DIR_VARIABLE];
  return v !== undefined && v.trim() !== '' ? v : DEFAULT_WORK_DIR;
}
