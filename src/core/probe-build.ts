import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { tracked } from './kill-tree.ts';
import type { DetectedEnv } from './environment.ts';
import { CommandFailedError } from './errors.ts';
import { openLog, run } from './exec.ts';
import { packageRoot } from './paths.ts';
import { ProbeReportSchema, type ProbeReport } from './probe-schema.ts';

/**
 * Configures and builds native/probe in `buildDir` against the libfabric at `libfabricHome` (undefined: CMake's
 * default search); cmake makes reruns cheap.
 */
export async function buildProbe(env: DetectedEnv, libfabricHome: string | undefined, buildDir: string, logPath: string, signal?: AbortSignal): Promise<string> {
  // A build dir configured from another copy of the tool (an upgrade, another checkout) makes cmake refuse
  // ("does not match the source used to generate cache"): start it again.
  const src = path.join(packageRoot(), 'native', 'probe');
  const cache = await readFile(path.join(buildDir, 'CMakeCache.txt'), 'utf8').catch(() => '');
  const home = /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(cache)?.[1];
  if (home && path.resolve(home) !== path.resolve(src)) await rm(buildDir, { recursive: true, force: true });
  const log = await openLog(logPath);
  try {
    const common = { log, logPath, signal };
    await run(env.cmake.path, ['-S', path.join(packageRoot(), 'native', 'probe'), '-B', buildDir, ...(env.ninja ? ['-G', 'Ninja'] : []),
      // -U: CMake keeps what find_path/find_library found in its cache, so a libfabric built or named since the
      // last configure would otherwise never replace the one found then.
      '-UFABRIC_INCLUDE', '-UFABRIC_LIB', `-DLIBFABRIC_HOME=${libfabricHome ?? ''}`, `-DCUDA_HOME=${env.cuda.home}`],
      { ...common, fix: `read the CMake error above (libfabric headers under ${libfabricHome ? `${libfabricHome}/include` : "the system's include paths"}, cuda.h under ${env.cuda.home}/include)` });
    await run(env.cmake.path, ['--build', buildDir], { ...common, fix: 'read the compiler error above' });
  } finally {
    await log.end();
  }
  return path.join(buildDir, 'nvshmem-efa-probe');
}

const PROBE_TIMEOUT_MS = 60_000;

/** Runs the probe and validates what it printed; a failing check is not an error here (exit status 1). */
export async function runProbe(bin: string, root?: string): Promise<ProbeReport> {
  if (!existsSync(bin)) throw new Error(`probe binary ${bin} missing`);
  const { execa } = await import('execa'); // loaded on first use (core/exec.ts says why)
  // The probe reads sysfs and libraries' answers; a minute is ample, and a probe stuck in a driver call must not hold
  // the command forever (issue 36, class 7).
  const r = await tracked(execa(bin, root ? ['--root', root] : [], { reject: false, stdin: 'ignore', timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL' }));
  if (r.timedOut) throw new CommandFailedError(`nvshmem-efa-probe did not finish within ${PROBE_TIMEOUT_MS / 1000} s and was stopped`, 'a device or driver call hangs: check dmesg and the EFA driver (modinfo efa), then rerun', undefined, String(r.stderr).split('\n').slice(-10));
  if (r.exitCode !== 0 && r.exitCode !== 1) {
    throw new CommandFailedError(`nvshmem-efa-probe exited with ${r.exitCode ?? r.signal}`, 'rerun with --verbose and report the output', undefined, String(r.stderr).split('\n').slice(-10));
  }
  try {
    return ProbeReportSchema.parse(JSON.parse(String(r.stdout)));
  } catch (e) {
    throw new CommandFailedError(`nvshmem-efa-probe printed a document that does not match its schema: ${(e as Error).message.slice(0, 300)}`, 'rebuild the probe: delete the probe build dir and rerun', undefined, []);
  }
}
