import { existsSync } from 'node:fs';
import path from 'node:path';
import { openLog, queryTool, run } from '../core/exec.ts';
import { packageRoot } from '../core/paths.ts';

/**
 * efaemu, the emulated EFA NIC (native/efaemu), as `selftest` and `bench` get it when not handed a build
 * (--efaemu-build): built from this package's sources against the libfabric of the run, in the command's
 * results dir, so that the next run's build is incremental (cmake and ninja find it current).
 */

/** The provider library an efaemu build dir holds: what makes a directory one. */
export const EFAEMU_PROVIDER = path.join('prov', 'libefa-fi.so');

export const isEfaemuBuild = (dir: string): boolean => existsSync(path.join(dir, EFAEMU_PROVIDER));

/** Where a command builds efaemu under its results dir, and the build's log. */
export function efaemuBuildIn(results: string): { dir: string; logPath: string } {
  return { dir: path.join(results, 'efaemu-build'), logPath: path.join(results, 'efaemu-build.log') };
}

export async function buildEfaemu(libfabricHome: string, dir: string, logPath: string, signal: AbortSignal): Promise<void> {
  const log = await openLog(logPath);
  try {
    const src = path.join(packageRoot(), 'native', 'efaemu');
    const ninja = (await queryTool('ninja', ['--version'])) !== undefined;
    await run('cmake', ['-S', src, '-B', dir, ...(ninja ? ['-G', 'Ninja'] : []), `-DLIBFABRIC_PREFIX=${libfabricHome}`, '-DEFAEMU_TESTS=OFF'], {
      log, logPath, signal, fix: `read ${logPath}: efaemu needs cmake, a C++17 compiler and libfabric headers under ${libfabricHome}/include`,
    });
    await run('cmake', ['--build', dir], { log, logPath, signal, fix: `read the compiler error in ${logPath}` });
  } finally {
    await log.end();
  }
}
