import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReportSchema } from '../../src/core/report.ts';
import { HOST_LIBFABRIC_ENV } from './host.ts';

export const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = path.join(ROOT, 'bin', 'nvshmem-efa.js');
/**
 * CI cannot download rdma-core's efa_io_defs.h: runs vendor our own test header instead, through a lock
 * that pins its checksum the way third_party/efa_gda/lock.json pins the upstream file.
 */
export const IO_DEFS = path.join(ROOT, 'test/efa_abi/efa_io_defs.h');
export const LOCK = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-lock-')), 'lock.json');
writeFileSync(
  LOCK,
  JSON.stringify({
    ...JSON.parse(readFileSync(path.join(ROOT, 'third_party/efa_gda/lock.json'), 'utf8')),
    sha256: createHash('sha256').update(readFileSync(IO_DEFS)).digest('hex'),
  }),
);
// NVSHMEM_EFA_GDRCOPY=0: a test host has no gdrapi.h, and a build would otherwise fetch GDRCopy (never in a test);
// test/integration/gdrcopy.test.ts removes it to exercise that step against a local archive.
export const ENV: NodeJS.ProcessEnv = { ...process.env, ...HOST_LIBFABRIC_ENV, CI: 'true', NO_COLOR: '1', NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, NVSHMEM_EFA_GDRCOPY: '0' };

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI to the end; stdout and stderr both kept, whatever the exit status. */
export function cli(args: string[], env: NodeJS.ProcessEnv = ENV): CliResult {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return { code: r.status ?? 128 + (r.signal ? os.constants.signals[r.signal] : 0), stdout: r.stdout, stderr: r.stderr };
}

/** A CLI process running in the background: its own process group, output collected as it comes. */
export interface Running {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (signals as 128 + n) and the seconds it took from `since`. */
  exited: Promise<{ code: number; at: number }>;
}

export function spawnCli(args: string[], env: NodeJS.ProcessEnv = ENV): Running {
  const child = spawn(process.execPath, [BIN, ...args], { env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<{ code: number; at: number }>((resolve) =>
    child.on('close', (code, sig) => resolve({ code: code ?? 128 + (sig ? os.constants.signals[sig] : 0), at: Date.now() })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

export async function waitFor(what: string, cond: () => boolean, timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Kills a background CLI's whole process group (cleanup after a failed assertion). */
export function killGroup(r: Running): void {
  try {
    process.kill(-r.child.pid!, 'SIGKILL');
  } catch {
    /* gone */
  }
}

export const report = (work: string) => ReportSchema.parse(JSON.parse(readFileSync(path.join(work, 'report.json'), 'utf8')));
export const stepStatus = (work: string) => Object.fromEntries(report(work).steps.map((s) => [s.id, s.status]));
export const tmp = (prefix = 'nvshmem-efa-work-') => mkdtempSync(path.join(os.tmpdir(), prefix));
