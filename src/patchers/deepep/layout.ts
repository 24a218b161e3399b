import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The two DeepEP layouts the patcher knows (as of DeepEP v1.2.1 .. 567632d, and EPv2):
 *  - v1: csrc/kernels/configs.cuh; IBGDA layer csrc/kernels/ibgda_device.cuh included by internode.cu,
 *    internode_ll.cu and runtime.cu (v1.2.1 .. 567632d, both configs.cuh include orders);
 *  - epv2: csrc/kernels/legacy/ (V1 kernels kept as deep_ep::legacy), NVSHMEM init in backend/nvshmem.cu.
 */
export type DeepEpLayout = 'v1' | 'epv2';

export function detectLayout(root: string): DeepEpLayout | { refuse: string } {
  const has = (p: string) => existsSync(path.join(root, p));
  if (has('csrc/kernels/configs.cuh') && has('csrc/kernels/ibgda_device.cuh')) return 'v1';
  if (has('csrc/kernels/legacy/ibgda_device.cuh') && has('csrc/kernels/backend/nvshmem.cu')) return 'epv2';
  const seen = ['csrc/kernels/configs.cuh', 'csrc/kernels/ibgda_device.cuh', 'csrc/kernels/legacy', 'csrc/kernels/backend/nvshmem.cu', 'setup.py']
    .filter(has);
  return {
    refuse:
      `not a DeepEP layout nvshmem-efa patches: neither csrc/kernels/configs.cuh + ibgda_device.cuh (V1, v1.2.1 .. 567632d) ` +
      `nor csrc/kernels/legacy/ + backend/nvshmem.cu (EPv2); found ${seen.length ? seen.join(', ') : 'none of them'}`,
  };
}
