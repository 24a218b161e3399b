import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * Proof that a process is one this tool started, for the take-over of a dead run's lock (lock.ts): the lock names
 * the commands the run left running, but anyone who can write the work dir can forge a lock naming any process
 * (pid, start time and command line are all readable in /proc), and root's take-over would stop it.
 *
 * So each run draws a secret, puts it in the environment of every command it starts (NVSHMEM_EFA_RUN_TOKEN), and
 * writes into its lock only a hash of it bound to this lock: the work dir (device and inode) and the holder (pid
 * and start time). Before a take-over stops a process it reads /proc/<pid>/environ and stops it only if the token
 * there hashes to the lock's proof. A writer of the work dir cannot meet that for a process of its choice: the
 * secret is in no file, only in the environments of the run's own commands, which /proc shows only to their own
 * user and root (a user who can read them can signal them anyway). A proof copied from another lock names that
 * lock's work dir and holder, so it proves nothing here; one copied over a live run's lock keeps its holder, which
 * is alive, so nothing is taken over. A process that proves nothing is left running, and the note says so.
 */
export const TOKEN_VAR = 'NVSHMEM_EFA_RUN_TOKEN';

let token: string | undefined;

/** This process's secret, drawn on first use. */
export function runToken(): string {
  return (token ??= randomBytes(32).toString('hex'));
}

/** What a lock's holder is: its work dir and its own identity, so that a copied proof proves nothing elsewhere. */
export interface ProofScope {
  /** `dev:ino` of the work dir. */
  workDir: string;
  pid: number;
  procStart: string | null;
}

export function proofOf(secret: string, s: ProofScope): string {
  return createHash('sha256').update(`nvshmem-efa-run/1\0${secret}\0${s.workDir}\0${s.pid}\0${s.procStart ?? ''}`).digest('hex');
}

/** The token in the environment `pid` started with; undefined when it has none or /proc will not show it. */
function tokenOf(pid: number): string | undefined {
  let env: string;
  try {
    env = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined;
  }
  const prefix = `${TOKEN_VAR}=`;
  return env.split('\0').find((v) => v.startsWith(prefix))?.slice(prefix.length);
}

/** Whether `pid` carries the token whose proof is `proof` for the lock of `scope`. */
export function carriesProof(pid: number, proof: string, scope: ProofScope): boolean {
  const t = tokenOf(pid);
  if (t === undefined || !/^[0-9a-f]{64}$/.test(proof)) return false;
  return timingSafeEqual(Buffer.from(proofOf(t, scope), 'hex'), Buffer.from(proof, 'hex'));
}
