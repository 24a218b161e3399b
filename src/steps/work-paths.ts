import path from 'node:path';
import type { WorkPaths } from './types.ts';

/** Where everything goes under a work dir: its own module, so a command that only needs the paths (a dry run) loads none of the steps. */
export function workPaths(workDir: string): WorkPaths {
  return {
    workDir,
    logs: path.join(workDir, 'logs'),
    sources: path.join(workDir, 'sources'),
    build: path.join(workDir, 'build', 'nvshmem'),
    install: path.join(workDir, 'install', 'nvshmem'),
    stubs: path.join(workDir, 'stubs'),
    vendor: path.join(workDir, 'vendor', 'efa_gda'),
    report: workDir,
    downloads: path.join(workDir, 'downloads'),
  };
}
