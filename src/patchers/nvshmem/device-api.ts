import type { Doc, InsertSpec, Located } from '../engine/plan.ts';
import type { FunctionAnchor } from '../engine/cpp.ts';
import { afterLine, indentAt, lineStart, literal, nearestNames, wholeLine } from '../engine/text.ts';

/**
 * NVSHMEM's own device API over EFA GDA (issue 23): the hooks that send NVSHMEM's nvshmemi_transfer_* functions to
 * templates/transport_efa_gda/nvshmemx_efa_gda_device_api.cuh, and the __constant__ slot they read.
 *
 * Every remote RMA, signal, atomic, quiet and fence of NVSHMEM's device API (collectives included) passes through
 * the transfer functions once the NVLink test failed; each is one hook line first in its body, so with GDA off the
 * call pays a uniform constant load and a branch. The hook calls only parameters both layouts have: 3.5 adds
 * qp_index (and pe_hint, qp_handle, num_qps to quiet and fence), which GDA does not need: it picks its own rail.
 */
export const TRANSFER_DEVICE = 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in';
export const INIT_DEVICE = 'src/device/init/init_device.cu';

/** Compiled only where NVSHMEM has no IBGDA (whose transport state the slot's pointer would take) and for the GPU. */
const GUARD = '#if !defined(NVSHMEM_IBGDA_SUPPORT) && !defined(__clang_llvm_bitcode_lib__)';
export const DEVICE_API_MACRO = 'NVSHMEMI_EFA_GDA_DEVICE_API';
const SLOT = 'nvshmemi_efa_gda_api_d';

/** One transfer function: the template parameters and parameters its hook uses, and the call it makes. */
interface Hook {
  fn: string;
  templateParams: string[];
  params: string[];
  call: string;
}

export const HOOKS: readonly Hook[] = [
  { fn: 'nvshmemi_transfer_rma_p', templateParams: ['T'], params: ['rptr', 'value', 'pe'], call: 'nvshmemi_efa_gda_api_rma_p<T>(rptr, value, pe)' },
  { fn: 'nvshmemi_transfer_rma_g', templateParams: ['T'], params: ['rptr', 'pe'], call: 'nvshmemi_efa_gda_api_rma_g<T>(rptr, pe)' },
  { fn: 'nvshmemi_transfer_rma', templateParams: ['SCOPE', 'channel_op'], params: ['rptr', 'lptr', 'bytes', 'pe'], call: 'nvshmemi_efa_gda_api_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe)' },
  {
    fn: 'nvshmemi_transfer_put_signal',
    templateParams: ['SCOPE'],
    params: ['rptr', 'lptr', 'bytes', 'sig_addr', 'signal', 'sig_op', 'pe', 'is_nbi'],
    call: 'nvshmemi_efa_gda_api_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi)',
  },
  { fn: 'nvshmemi_transfer_rma_nbi', templateParams: ['SCOPE', 'channel_op'], params: ['rptr', 'lptr', 'bytes', 'pe'], call: 'nvshmemi_efa_gda_api_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe)' },
  { fn: 'nvshmemi_transfer_amo_fetch', templateParams: ['T'], params: ['rptr', 'value', 'compare', 'pe', 'op'], call: 'nvshmemi_efa_gda_api_amo_fetch<T>(rptr, value, compare, pe, op)' },
  { fn: 'nvshmemi_transfer_amo_nonfetch', templateParams: ['T'], params: ['rptr', 'value', 'pe', 'op'], call: 'nvshmemi_efa_gda_api_amo_nonfetch<T>(rptr, value, pe, op)' },
  { fn: 'nvshmemi_transfer_quiet', templateParams: ['SCOPE'], params: ['use_membar'], call: 'nvshmemi_efa_gda_api_quiet<SCOPE>(use_membar)' },
  { fn: 'nvshmemi_transfer_fence', templateParams: ['SCOPE'], params: [], call: 'nvshmemi_efa_gda_api_fence<SCOPE>()' },
];

/** The hook's line (inside #ifdef DEVICE_API_MACRO). */
export function hookLine(h: Hook): string {
  return `if (${SLOT}.on) return ${h.call};`;
}

function similarNames(doc: Doc, name: string): string {
  const near = nearestNames(name, doc.cpp?.functionNames ?? []);
  return near.length ? `nearest: ${near.map((n) => `${n}()`).join(', ')}; renamed?` : 'no function with a similar name';
}

/** The raw parse of a function, else the #if-flattened one, whichever `need` accepts; else the first refusal. */
function withFunction(doc: Doc, name: string, need: (f: FunctionAnchor) => string | Located): Located {
  const found = doc.cpp!.findFunction(name);
  if (!found) return { refuse: `no definition of ${name}() found (${similarNames(doc, name)})` };
  let first = '';
  for (const f of [found.raw, found.flattened]) {
    if (!f) continue;
    const r = need(f);
    if (typeof r !== 'string') return r;
    first ||= r;
  }
  return { refuse: `in ${name}(): ${first}` };
}

/** The text of a definition from the start of its template header (if any) up to the body. */
function headOf(doc: Doc, f: FunctionAnchor): string {
  const before = doc.src.slice(Math.max(0, f.start - 400), f.start);
  const tmpl = /template\s*<[^<>]*>\s*$/.exec(before.replace(/\s+$/, ' '));
  return (tmpl ? tmpl[0] : '') + doc.src.slice(f.start, f.body.start);
}

/** The names a parameter list declares (the last identifier of each comma-separated declaration). */
function declaredNames(list: string): string[] {
  return list
    .split(',')
    .map((d) => d.replace(/=.*$/s, '').trim())
    .map((d) => /([A-Za-z_]\w*)\s*(\[\s*\])?$/.exec(d)?.[1])
    .filter((n): n is string => !!n);
}

/** Why the function's shape does not fit the hook (missing parameters or template parameters), or undefined. */
export function hookShapeProblem(head: string, h: Hook): string | undefined {
  const tmpl = /template\s*<([^<>]*)>/.exec(head);
  const tnames = tmpl ? declaredNames(tmpl[1]!) : [];
  const params = /\(([^()]*)\)\s*$/.exec(head.trim());
  const pnames = params ? declaredNames(params[1]!) : [];
  const missingT = h.templateParams.filter((t) => !tnames.includes(t));
  const missingP = h.params.filter((p) => !pnames.includes(p));
  if (!missingT.length && !missingP.length) return undefined;
  const parts = [];
  if (missingT.length) parts.push(`template parameter${missingT.length > 1 ? 's' : ''} ${missingT.join(', ')} (found <${tnames.join(', ')}>)`);
  if (missingP.length) parts.push(`parameter${missingP.length > 1 ? 's' : ''} ${missingP.join(', ')} (found (${pnames.join(', ')}))`);
  return `the hook calls the GDA path with names this definition lacks: no ${parts.join('; no ')}`;
}

function hookSpec(h: Hook): InsertSpec {
  return {
    kind: 'insert',
    id: `device-api-hook:${h.fn.replace('nvshmemi_transfer_', '')}`,
    file: TRANSFER_DEVICE,
    parse: 'cpp',
    style: 'c',
    anchor: `${h.fn}(): first in the body, before the IBGDA/proxy choice`,
    why: `routes ${h.fn.replace('nvshmemi_transfer_', '')} through EFA GDA when the device API slot is on; otherwise one constant load and a branch`,
    lines: [`#ifdef ${DEVICE_API_MACRO}`, hookLine(h), '#endif'],
    footprint: [wholeLine(hookLine(h))],
    locate(doc) {
      return withFunction(doc, h.fn, (f) => {
        const problem = hookShapeProblem(headOf(doc, f), h);
        if (problem) return problem;
        const first = f.statements[0];
        const indent = first ? indentAt(doc.src, first.start) : '    ';
        return { offset: afterLine(doc.src, f.body.start), indent };
      });
    },
  };
}

/**
 * The glue's include, right after the include of proxy_device.cuh, whose functions the glue calls for what goes
 * through NVSHMEM's proxy (the file's includes sit inside its include guard, so none is top-level).
 */
const PROXY_INCLUDE = /^[ \t]*#[ \t]*include[ \t]+"non_abi\/device\/pt-to-pt\/proxy_device\.cuh"[ \t]*\r?$/gm;
function includeSpec(): InsertSpec {
  const include = '#include "nvshmemx_efa_gda_device_api.cuh"';
  return {
    kind: 'insert',
    id: 'device-api-include',
    file: TRANSFER_DEVICE,
    parse: 'cpp',
    style: 'c',
    anchor: 'after #include "non_abi/device/pt-to-pt/proxy_device.cuh"',
    why: 'declares the GDA entry points the hooks call and the slot; left out where NVSHMEM has IBGDA or builds the LLVM bitcode library',
    lines: [GUARD, `#define ${DEVICE_API_MACRO} 1`, include, '#endif'],
    footprint: [wholeLine(include)],
    locate(doc) {
      const hits = [...doc.src.matchAll(PROXY_INCLUDE)];
      if (hits.length !== 1) return { refuse: `expected one #include of non_abi/device/pt-to-pt/proxy_device.cuh, found ${hits.length}` };
      return { offset: afterLine(doc.src, hits[0]!.index!), indent: '' };
    },
  };
}

/** The slot itself: one __constant__ per module, in the device library's init_device.cu. */
function slotSpec(): InsertSpec {
  return {
    kind: 'insert',
    id: 'device-api-slot',
    file: INIT_DEVICE,
    parse: 'cpp',
    style: 'c',
    anchor: 'after the last unconditional top-level #include',
    why: "the device API's slot: a __constant__ of every module that links NVSHMEM's device library, which the host fills once GDA is active",
    lines: [GUARD, '#include "nvshmemx_efa_gda_api.h"', `__constant__ nvshmemx_efa_gda_api_slot_t ${SLOT};`, '#endif'],
    footprint: [literal(`nvshmemx_efa_gda_api_slot_t ${SLOT}`)],
    locate(doc) {
      const inc = doc.cpp!.lastTopLevelInclude;
      if (!inc) return { refuse: 'no unconditional top-level #include found' };
      return { offset: afterLine(doc.src, inc.end - 1), indent: '' };
    },
  };
}

/**
 * The slot's address as the module's transport state: NVSHMEM registers it with the module and copies the host's
 * value into it (init.cu), where IBGDA would register its own state. 3.4.5 and upstream 3.5 name the callback
 * nvshmemi_get_mem_handle; AWS's 3.5.7 branch nvshmemi_get_device_state_ptrs (returning int).
 */
const MEM_HANDLE_NAMES = ['nvshmemi_get_mem_handle', 'nvshmemi_get_device_state_ptrs'];
function memHandleSpec(): InsertSpec {
  const call = `cudaGetSymbolAddress(transport_dev_state_ptr, ${SLOT})`;
  return {
    kind: 'insert',
    id: 'device-api-state-ptr',
    file: INIT_DEVICE,
    parse: 'cpp',
    style: 'c',
    anchor: `${MEM_HANDLE_NAMES.join('() or ')}(): before its final return, or at the end of the body`,
    why: "hands NVSHMEM the slot's address as the module's transport state, so it is registered and filled in every module",
    lines: [GUARD, `if (${call} != cudaSuccess) *transport_dev_state_ptr = NULL;`, '#endif'],
    footprint: [literal(call)],
    locate(doc) {
      const name = MEM_HANDLE_NAMES.find((n) => doc.cpp!.findFunction(n));
      if (!name) return { refuse: `no definition of ${MEM_HANDLE_NAMES.join('() or ')}() found (${similarNames(doc, MEM_HANDLE_NAMES[0]!)})` };
      return withFunction(doc, name, (f) => {
        const head = doc.src.slice(f.start, f.body.start);
        if (!/\bvoid\s*\*\*\s*transport_dev_state_ptr\b/.test(head)) return 'no parameter `void **transport_dev_state_ptr`';
        const first = f.statements[0];
        const indent = first ? indentAt(doc.src, first.start) : '    ';
        // Before the final return (AWS's int version), else before the closing brace.
        const at = f.finalReturn ? lineStart(doc.src, f.finalReturn.start) : lineStart(doc.src, f.end - 1);
        return { offset: at, indent };
      });
    },
  };
}

/** The device side of the device API: the glue's include and the hooks, the slot and its registration. */
export function deviceApiSpecs(): InsertSpec[] {
  return [includeSpec(), ...HOOKS.map(hookSpec), slotSpec(), memHandleSpec()];
}
