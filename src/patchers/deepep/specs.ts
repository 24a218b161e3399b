import type { InsertSpec, PatchSpec, ReplaceSpec } from '../engine/plan.ts';
import { markerLine } from '../engine/markers.ts';
import { literal, wholeLine } from '../engine/text.ts';
import { afterTheLine, theLine, theLineBetween } from './lines.ts';
import type { DeepEpLayout } from './layout.ts';
import { SHIM_FILE, shimFileSpec } from './template.ts';

const IBGDA_INCLUDE = '#include "ibgda_device.cuh"';
const INIT_CALL = 'nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);';
const IBGDA_ENV = "os.environ['NVSHMEM_IB_ENABLE_IBGDA'] = '1'";

function swapInclude(id: string, file: string, extra: string[], why: string): ReplaceSpec {
  return {
    kind: 'replace',
    id,
    file,
    parse: 'text',
    style: 'c',
    anchor: `the line ${IBGDA_INCLUDE}`,
    why,
    lines: [`// replaced ${IBGDA_INCLUDE} (mlx5 WQEs, IBGDA device state) with the EFA shim`, ...extra, `#include "${SHIM_FILE}"`],
    footprint: [wholeLine(`#include "${SHIM_FILE}"`)],
    locate: (doc) => theLine(doc, IBGDA_INCLUDE),
  };
}

function dropInclude(id: string, file: string, include: string, why: string): ReplaceSpec {
  return {
    kind: 'replace',
    id,
    file,
    parse: 'text',
    style: 'c',
    anchor: `the line ${include}`,
    why,
    lines: [`// removed ${include}: the NVSHMEM nvshmem-efa builds has no IBGDA`],
    footprint: [literal(`// removed ${include}:`)],
    locate: (doc) => theLine(doc, include),
  };
}

/**
 * Normal mode's internode.cu posts a chunk of tokens per put, where a call costs nothing measurable; inlined into
 * every kernel instantiation, the GDA post made it DeepEP's longest compile (150 s against 55 s without the GDA
 * path, on a 2-core host). A block of its own before the shim include, so a tree patched before it gains it.
 */
function putOutOfLine(file: string): InsertSpec {
  return {
    kind: 'insert',
    id: 'deepep-put-out-of-line:internode.cu',
    file,
    parse: 'text',
    style: 'c',
    anchor: `before ${IBGDA_INCLUDE} (or the shim include that replaced it)`,
    why: "normal mode's GDA put as a call: it posts per chunk of tokens, and inlined it was DeepEP's longest compile",
    lines: ['#define NVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE  // one put per chunk of tokens here: the GDA post is a call'],
    footprint: [/^[ \t]*#[ \t]*define[ \t]+NVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE\b/m],
    locate(doc) {
      const pristine = theLine(doc, IBGDA_INCLUDE);
      if (!('refuse' in pristine)) return { offset: pristine.start, indent: pristine.indent };
      const patched = theLine(doc, markerLine('c', 'begin', 'deepep-shim-include:internode.cu'));
      if ('refuse' in patched) return { refuse: `${pristine.refuse}, and no shim include block either` };
      return { offset: patched.start, indent: patched.indent };
    },
  };
}

function initState(file: string): InsertSpec {
  return {
    kind: 'insert',
    id: 'deepep-shim-init',
    file,
    parse: 'text',
    style: 'c',
    anchor: `after ${INIT_CALL}`,
    why: "DeepEP's device asserts read num_rc_per_pe / num_devices_initialized: without this they read 0 and trap (the seed left {1,1}, which fails both)",
    lines: ['EP_HOST_ASSERT(nvshmem_efa_shim::init_state() == 0);'],
    footprint: [literal('nvshmem_efa_shim::init_state(')],
    locate: (doc) => afterTheLine(doc, INIT_CALL),
  };
}

function ibgdaEnv(file: string): ReplaceSpec {
  return {
    kind: 'replace',
    id: 'deepep-ibgda-env',
    file,
    parse: 'text',
    style: 'hash',
    anchor: `the line ${IBGDA_ENV}`,
    why: 'NVSHMEM_IB_ENABLE_IBGDA=1 asks an IBGDA-less NVSHMEM for a transport it does not have; set it only where IBGDA exists',
    lines: [
      '# IBGDA only when the NVSHMEM in use has it (nvshmem-efa builds NVSHMEM without IBGDA)',
      "if os.environ.get('NVSHMEM_EFA_DEEPEP_IBGDA', '0') == '1':",
      `    ${IBGDA_ENV}`,
    ],
    footprint: [literal('NVSHMEM_EFA_DEEPEP_IBGDA')],
    locate: (doc) => theLine(doc, IBGDA_ENV),
  };
}

/**
 * The low-latency signals whose add DeepEP's code proves to be a write (one writer per slot per round, the slot
 * zeroed in another phase; the proof is in the shim, at nvshmem_efa_shim_signal_add_zeroed_single_writer). Each
 * is the remote branch of an if whose NVLink branch stores the same value: the shape is checked, not assumed.
 */
const LL_SIGNALS = [
  { site: 'dispatch-count', value: '-num_tokens_sent - 1', qp: 'dst_expert_local_idx', what: "dispatch's per-expert token count" },
  { site: 'combine-flag', value: '1', qp: 'local_expert_idx', what: "combine's per-expert finish flag" },
];
const SIGNAL_FN = 'nvshmem_efa_shim_signal_add_zeroed_single_writer';

function llSignal(file: string, sig: (typeof LL_SIGNALS)[number]): ReplaceSpec {
  const call = `nvshmemi_ibgda_amo_nonfetch_add(reinterpret_cast<int*>(dst_ptr), ${sig.value}, dst_rank, ${sig.qp});`;
  const nvlink = `st_release_sys_global(reinterpret_cast<int*>(dst_p2p_ptr), ${sig.value});`;
  return {
    kind: 'replace',
    id: `deepep-ll-signal:${sig.site}`,
    file,
    parse: 'text',
    style: 'c',
    anchor: `the line ${call} (between if (dst_p2p_ptr == 0) { and an else branch doing ${nvlink})`,
    why:
      `${sig.what} went through NVSHMEM's CPU proxy as a staged atomic add; the slot is 0 and has one writer per round, ` +
      'so over EFA GDA it is an RDMA write posted after the payload completed, with no CPU on the path (the add stays where GDA is off)',
    lines: [
      '// replaced nvshmemi_ibgda_amo_nonfetch_add: the slot has one writer per round and was zeroed by the previous call',
      '// (the NVLink branch below stores the same value), so the add is a write; over EFA GDA, posted after the payload',
      `// completed (the proof, with DeepEP's lines: ${SIGNAL_FN} in ${SHIM_FILE})`,
      `${SIGNAL_FN}(reinterpret_cast<int*>(dst_ptr), ${sig.value}, dst_rank, ${sig.qp});`,
    ],
    // This site's call: the other signal calls the same function with another value and queue.
    footprint: [literal(`${SIGNAL_FN}(reinterpret_cast<int*>(dst_ptr), ${sig.value}, dst_rank, ${sig.qp});`)],
    locate: (doc) => {
      const at = theLineBetween(doc, call, ['if (dst_p2p_ptr == 0) {'], ['} else {', nvlink]);
      if (!('refuse' in at)) return at;
      return {
        refuse:
          `${at.refuse}. The add is a write only under DeepEP's invariant (one writer per slot per round, the slot zeroed ` +
          'by the previous call), which its NVLink branch shows by storing the same value; this revision differs, so ' +
          'check the invariant in it before patching (DeepEP 567632d and EPv2 have this shape)',
      };
    },
  };
}

const CCCL_LINES = [
  '# CUDA 13 moved libcu++ (cuda/std/...) under include/cccl: "cuda/std/tuple: No such file or directory"',
  "_nvshmem_efa_cccl = os.path.join(os.environ.get('CUDA_HOME', '/usr/local/cuda'), 'include', 'cccl')",
  'if os.path.isdir(_nvshmem_efa_cccl):',
  '    include_dirs.append(_nvshmem_efa_cccl)',
];

export function deepEpSpecs(layout: DeepEpLayout, shim: string): PatchSpec[] {
  const swapWhy = 'DeepEP kernels call the IBGDA device layer, which needs NVSHMEM IBGDA (undefined nvshmemi_ibgda_device_state_d at link time without it)';
  if (layout === 'v1') {
    const k = 'csrc/kernels';
    return [
      swapInclude('deepep-shim-include:internode.cu', `${k}/internode.cu`, [], swapWhy),
      putOutOfLine(`${k}/internode.cu`),
      swapInclude('deepep-shim-include:internode_ll.cu', `${k}/internode_ll.cu`, [], swapWhy),
      ...LL_SIGNALS.map((sig) => llSignal(`${k}/internode_ll.cu`, sig)),
      swapInclude(
        'deepep-shim-include:runtime.cu',
        `${k}/runtime.cu`,
        ['#define NVSHMEM_EFA_SHIM_DEFINE_STATE  // the one translation unit that defines the shim state'],
        `${swapWhy}; runtime.cu also defines the shim's __device__ state, once (no multiple definition under -rdc=true)`,
      ),
      initState(`${k}/runtime.cu`),
      dropInclude('deepep-drop-ibgda-header', `${k}/configs.cuh`, '#include <device_host_transport/nvshmem_common_ibgda.h>',
        "nvshmem_common_ibgda.h declares nvshmemi_ibgda_device_state_d, which an IBGDA-less NVSHMEM does not define (nvlink error: Undefined reference to 'nvshmemi_ibgda_device_state_d')"),
      dropInclude('deepep-drop-mlx5dv', `${k}/configs.cuh`, '#include <infiniband/mlx5dv.h>',
        'mlx5dv.h comes from rdma-core\'s mlx5 provider, which EFA hosts need not have ("infiniband/mlx5dv.h: No such file or directory")'),
      ibgdaEnv('deep_ep/buffer.py'),
      {
        kind: 'insert',
        id: 'deepep-cccl-include',
        file: 'setup.py',
        parse: 'text',
        style: 'hash',
        anchor: "after include_dirs = ['csrc/']",
        why: 'CUDA 13 moved libcu++ under include/cccl: "cuda/std/tuple: No such file or directory"',
        lines: CCCL_LINES,
        footprint: [literal('_nvshmem_efa_cccl')],
        locate: (doc) => afterTheLine(doc, "include_dirs = ['csrc/']"),
      },
      shimFileSpec(k, shim),
    ];
  }
  const l = 'csrc/kernels/legacy';
  const legacyNs = '#define NVSHMEM_EFA_SHIM_LEGACY_NAMESPACE  // the shim functions go to deep_ep::legacy';
  return [
    swapInclude('deepep-shim-include:internode.cu', `${l}/internode.cu`, [legacyNs], swapWhy),
    putOutOfLine(`${l}/internode.cu`),
    swapInclude('deepep-shim-include:internode_ll.cu', `${l}/internode_ll.cu`, [legacyNs], swapWhy),
    ...LL_SIGNALS.map((sig) => llSignal(`${l}/internode_ll.cu`, sig)),
    {
      kind: 'insert',
      id: 'deepep-shim-state',
      file: 'csrc/kernels/backend/nvshmem.cu',
      parse: 'text',
      style: 'c',
      anchor: 'after #include <nvshmem.h>',
      why: "the shim's __device__ state is defined once, in the translation unit that initialises NVSHMEM",
      lines: ['#define NVSHMEM_EFA_SHIM_DEFINE_STATE', '#define NVSHMEM_EFA_SHIM_STATE_ONLY', `#include "../legacy/${SHIM_FILE}"`],
      footprint: [literal('NVSHMEM_EFA_SHIM_STATE_ONLY')],
      locate: (doc) => afterTheLine(doc, '#include <nvshmem.h>'),
    },
    initState('csrc/kernels/backend/nvshmem.cu'),
    ibgdaEnv('deep_ep/buffers/legacy.py'),
    shimFileSpec(l, shim),
  ];
}
