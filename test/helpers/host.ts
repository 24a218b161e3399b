import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * What a test needs from the host, and why it is skipped when absent. `npm test` on a machine without the
 * libfabric headers skips (with this reason) the tests that compile against them; `.ci/run` installs them.
 * NVSHMEM_EFA_TEST_NO_LIBFABRIC=1 pretends they are absent (to check the skips).
 */
const libfabricPrefix = process.env.NVSHMEM_EFA_TEST_NO_LIBFABRIC === '1'
  ? undefined
  : [process.env.LIBFABRIC_HOME, '/opt/amazon/efa', '/usr/local/libfabric', '/usr'].find((h) => h && existsSync(path.join(h, 'include/rdma/fabric.h')));

export const NO_LIBFABRIC: string | undefined = libfabricPrefix
  ? undefined
  : 'no libfabric headers (include/rdma/fabric.h): apt-get install libfabric-dev, or run .ci/run, which installs them';

// Said once per test file that needs them, so a skip is never silent.
if (NO_LIBFABRIC) console.warn(`skipping the tests that compile against libfabric: ${NO_LIBFABRIC}`);

/** The title of a test or group that needs libfabric, with the reason appended when it is skipped. */
export function needsLibfabric(title: string): string {
  return NO_LIBFABRIC ? `${title} [skipped: ${NO_LIBFABRIC}]` : title;
}
