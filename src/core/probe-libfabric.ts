import { existsSync } from 'node:fs';
import path from 'node:path';
import type { DetectedEnv } from './environment.ts';

/** The libfabric `probe` builds against: its prefix (none: CMake's default search), version and where it came from. */
export interface ProbeLibfabric {
  home?: string;
  version?: string;
  from: string;
}

const hasHeaders = (home: string) => existsSync(path.join(home, 'include', 'rdma', 'fabric.h'));

/**
 * Only a libfabric that exists: where a pinned one is planned but not built yet, the environment names its future
 * prefix, and the probe announced that one while CMake linked the host's (issue 39). `named` says who chose the
 * home the environment was detected with (--libfabric-home, the work dir's build, LIBFABRIC_HOME).
 */
export function probeLibfabric(env: DetectedEnv, workDir: string, named?: string): ProbeLibfabric {
  const lf = env.libfabric;
  if (hasHeaders(lf.home)) return { home: lf.home, version: lf.version, from: named ?? "the host's" };
  const found = env.libfabricFound;
  const notBuilt = `the pinned libfabric ${lf.version} is not built in ${workDir}: \`nvshmem-efa build\` builds it`;
  if (found && hasHeaders(found.home)) return { home: found.home, version: found.version, from: `the host's; ${notBuilt}` };
  return { from: `none found in the usual prefixes, so CMake's default search; ${notBuilt}` };
}

/** The announcement before the build: "libfabric 1.17 at /usr (the host's; …)". */
export const describeProbeLibfabric = (l: ProbeLibfabric) => (l.home ? `libfabric ${l.version ?? '(version unknown)'} at ${l.home} (${l.from})` : `libfabric: ${l.from}`);
