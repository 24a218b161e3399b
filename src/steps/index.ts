import { buildDeepEpStep } from './build-deepep.ts';
import { buildFabtestsStep } from './build-fabtests.ts';
import { buildGdrcopyStep } from './build-gdrcopy.ts';
import { buildLibfabricStep } from './build-libfabric.ts';
import { buildRdmaCoreStep } from './build-rdma-core.ts';
import { buildNvshmemStep } from './build-nvshmem.ts';
import { getDeepEpStep } from './get-deepep.ts';
import { patchDeepEpStep } from './patch-deepep.ts';
import { probeStep } from './probe.ts';
import { detectEnvironmentStep } from './detect-environment.ts';
import { getNvshmemStep } from './get-nvshmem.ts';
import { patchNvshmemStep } from './patch-nvshmem.ts';
import type { Step } from './types.ts';
import { vendorEfaIoDefsStep } from './vendor-efa-io-defs.ts';

/**
 * The pipeline, in the order the README's command table lists it. The DeepEP steps run when --deepep-src /
 * --deepep-ref is given; DeepEP is fetched and patched before NVSHMEM builds so that a cold build compiles it
 * beside NVSHMEM (deepep-beside.ts: started by build-nvshmem, settled by build-deepep); the probe runs after
 * build-nvshmem; each is a Step with its own stamp. Checks that
 * need no step (paths, refs, layouts, tools) run before all of them (commands/preflight.ts), and the report
 * is written by the command after the steps, whether they succeed or not.
 */
export const BUILD_STEPS: readonly Step[] = [
  detectEnvironmentStep,
  getNvshmemStep,
  vendorEfaIoDefsStep,
  patchNvshmemStep,
  buildGdrcopyStep,
  buildRdmaCoreStep,
  buildLibfabricStep,
  buildFabtestsStep,
  getDeepEpStep,
  patchDeepEpStep,
  buildNvshmemStep,
  probeStep,
  buildDeepEpStep,
];
export const PATCH_STEPS: readonly Step[] = [getNvshmemStep, vendorEfaIoDefsStep, patchNvshmemStep, getDeepEpStep, patchDeepEpStep];
export { workPaths } from './work-paths.ts';
