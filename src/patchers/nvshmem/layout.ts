import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CppIndex } from '../engine/cpp.ts';
import { indexCpp } from '../engine/cpp.ts';

/**
 * The two shapes of NVSHMEM's libfabric transport the patcher knows. The state struct tells them apart, and
 * each has its own hook set (libfabric-cpp.ts): the GDA init hook passes one fi_info (single-rail) or the fi_info
 * of every rail (multi-rail).
 */
export type LayoutId = 'single-rail' | 'multi-rail';

export interface NvshmemLayout {
  id: LayoutId;
  /** What the report, `patch --dry-run` and `doctor` print after "NVSHMEM libfabric layout: ". */
  summary: string;
}

export const LAYOUTS: Record<LayoutId, NvshmemLayout> = {
  'single-rail': { id: 'single-rail', summary: 'single-rail (one fabric, domain and fi_info per PE, as in NVIDIA NVSHMEM 3.2.5 to 3.5.x)' },
  'multi-rail': {
    id: 'multi-rail',
    summary: "multi-rail (per-PE domains vector, up to NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE NICs, as in AWS's devel-aws-2025-11-25)",
  },
};

/** The line the report, the run output, `patch --dry-run` and `doctor` print. */
export function layoutLine(layout: Pick<NvshmemLayout, 'summary'>): string {
  return `NVSHMEM libfabric layout: ${layout.summary}`;
}

export const STATE_STRUCT = 'nvshmemt_libfabric_state_t';
const MEM_HANDLE_STRUCT = 'nvshmemt_libfabric_mem_handle_t';

type Shape = readonly (readonly [field: string, decl: RegExp])[];

/** NVIDIA NVSHMEM 3.3 to 3.5: one fabric, one domain, one fi_info, an array of endpoints. */
const SINGLE_RAIL: Shape = [
  ['fabric', /struct fid_fabric \*\s*fabric;/],
  ['domain', /struct fid_domain \*\s*domain;/],
  ['prov_info', /struct fi_info \*\s*prov_info;/],
  ['provider', /\bprovider;/],
  ['eps', /\*\s*eps;/],
];

/**
 * AWS's multi-rail transport (NVSHMEM 3.5.7 devel-aws-2025-11-25): one vector entry per domain, domain 0 the
 * host domain on the first NIC, then one proxy domain per selected NIC (num_selected_domains =
 * num_selected_devs + 1, checked in connect_endpoints by the init hook).
 */
const MULTI_RAIL: Shape = [
  ['prov_infos', /^std::vector<\s*struct fi_info \*\s*> prov_infos;$/],
  ['fabrics', /^std::vector<\s*struct fid_fabric \*\s*> fabrics;$/],
  ['domains', /^std::vector<\s*struct fid_domain \*\s*> domains;$/],
  ['eps', /^std::vector<\s*nvshmemt_libfabric_endpoint_t \*\s*> eps;$/],
  ['provider', /\bprovider;$/],
  ['max_nic_per_pe', /^int max_nic_per_pe;$/],
  ['num_selected_devs', /^int num_selected_devs;$/],
  ['num_selected_domains', /^int num_selected_domains;$/],
];

/** One memory-handle slot per domain: the host domain plus up to NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE proxy domains. */
const MULTI_RAIL_HDLS = /^nvshmemt_libfabric_mem_handle_ep_t hdls\[\s*1 \+ NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE\s*\];$/;

const mismatches = (fields: Map<string, string>, shape: Shape) => shape.filter(([name, re]) => !re.test(fields.get(name) ?? '')).map(([name]) => name);

export type Detected = { layout: NvshmemLayout } | { refuse: string };

/** Which layout libfabric.h has, from the fields of its state struct (and, for multi-rail, its memory handle). */
export function detectLayout(cpp: CppIndex): Detected {
  const fields = cpp.structFields(STATE_STRUCT);
  if (!fields) return { refuse: `no struct ${STATE_STRUCT} defined` };
  const single = mismatches(fields, SINGLE_RAIL);
  if (single.length === 0) return { layout: LAYOUTS['single-rail'] };
  const multi = mismatches(fields, MULTI_RAIL);
  if (multi.length === 0) {
    const hdls = cpp.structFields(MEM_HANDLE_STRUCT)?.get('hdls');
    if (hdls && MULTI_RAIL_HDLS.test(hdls)) return { layout: LAYOUTS['multi-rail'] };
    return {
      refuse:
        `${STATE_STRUCT} has the multi-rail vectors, but ${MEM_HANDLE_STRUCT} ${hdls ? `has \`${hdls}\`` : 'has no hdls field'} where the multi-rail layout has ` +
        '`hdls[1 + NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE]` (one registration per domain: the host domain plus one per NIC); nvshmem-efa does not patch this variant',
    };
  }
  const seen = [...fields.entries()].filter(([k]) => /fabric|domain|eps|prov|nic|selected|host|proxy/.test(k)).map(([, decl]) => `\`${decl}\``);
  // The upstream successor of the AWS branch splits host and proxy domains into two counts.
  const split = fields.has('num_host_domains') || fields.has('num_proxy_domains')
    ? '; its num_host_domains/num_proxy_domains split is a later multi-rail shape than AWS\'s devel-aws-2025-11-25, not yet supported'
    : '';
  return {
    refuse:
      `${STATE_STRUCT} matches neither layout nvshmem-efa patches: single-rail lacks ${single.join(', ')}; multi-rail lacks or differs in ` +
      `${multi.join(', ')} (found ${seen.join(', ') || 'none of their fields'})${split}`,
  };
}

export const LIBFABRIC_H = 'src/modules/transport/libfabric/libfabric.h';

/**
 * The layout of the tree at `root`, or why it is none (undefined: no libfabric.h at all, which the plan refuses
 * with its own explanation).
 */
export async function treeLayout(root: string): Promise<Detected | undefined> {
  let src: string;
  try {
    src = await readFile(path.join(root, LIBFABRIC_H), 'utf8');
  } catch {
    return undefined;
  }
  const cpp = await indexCpp(src);
  const detected = detectLayout(cpp);
  cpp.release();
  return detected;
}
