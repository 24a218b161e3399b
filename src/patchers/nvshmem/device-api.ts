import type { Doc, InsertSpec, Located, OwnedFileSpec, PatchSpec } from '../engine/plan.ts';
import type { FunctionAnchor } from '../engine/cpp.ts';
import { afterLine, indentAt, lineStart, literal, wholeLine } from '../engine/text.ts';
import { bodyIndent, firstInBody, similarNames, withFunction } from './find-function.ts';
import { OWNER_MARK, vendoredContent, type Template, type VendoredFile } from './template.ts';

/**
 * NVSHMEM's own device API over EFA GDA (issue 23): the hooks that send NVSHMEM's nvshmemi_transfer_* calls to
 * templates/transport_efa_gda/nvshmemx_efa_gda_device_api.cuh, and the __constant__ slot they read.
 *
 * Every remote RMA, signal, atomic, quiet and fence of NVSHMEM's device API (collectives included) passes through
 * the transfer functions once the NVLink test failed. The hook sits at the caller: nvshmemi_transfer_api.cuh, the
 * header every application translation unit reaches them through, ends by including
 * nvshmemx_efa_gda_device_api_hooks.cuh, which turns each call into `if (slot.on) entry(...); else
 * nvshmemi_transfer_X(...);` in the caller's code. So with GDA off a call pays a uniform constant load, its compare
 * and a branch, and NVSHMEM's transfer functions in the device library are compiled exactly as NVSHMEM wrote them: a
 * hook inside them cannot meet that bar, because ptxas saves at every entry the registers the GDA call needs
 * (bench/results/device-api-ptxas-cost.md). The device library defines the entries (the include at the end of
 * transfer_device.cuh). Where the transfer functions are compiled into the application itself
 * (NVSHMEM_ENABLE_ALL_DEVICE_INLINING, numba), they carry a hook line first in their bodies instead, inlined there.
 * The hooks use only parameters both layouts have: 3.5 adds qp_index (and pe_hint, qp_handle, num_qps to quiet and
 * fence), which GDA does not need: it picks its own rail.
 */
export const TRANSFER_DEVICE = 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in';
export const INIT_DEVICE = 'src/device/init/init_device.cu';
export const TRANSFER_API = 'src/include/non_abi/device/pt-to-pt/nvshmemi_transfer_api.cuh';
/**
 * Where the public headers also go in the source tree: under src/include, which every NVSHMEM target (the device
 * library's own project included) has on its include path, as nvshmem_efa/, the directory they are installed in.
 * So `#include "nvshmem_efa/..."` resolves in NVSHMEM's build and in every application's (transfer_device.cuh is
 * installed and included by NVSHMEM's device headers) without a CMake change.
 */
export const HEADERS_DIR = 'src/include/nvshmem_efa';

/** Compiled only where NVSHMEM has no IBGDA (whose transport state the slot's pointer would take) and for the GPU. */
const GUARD = '#if !defined(NVSHMEM_IBGDA_SUPPORT) && !defined(__clang_llvm_bitcode_lib__)';
/** Defined where the transfer functions are compiled into the application (inlined): the in-body hooks are on. */
export const DEVICE_API_MACRO = 'NVSHMEMI_EFA_GDA_DEVICE_API';
/** Defined where transfer_device.cuh is compiled as the device library: the entries are instantiated there. */
const ENTRIES_MACRO = 'NVSHMEMI_EFA_GDA_DEVICE_API_ENTRIES';
/** Defined in every translation unit that compiles the transfer functions: no caller hook there. */
const NO_CALLER_HOOK = 'NVSHMEMI_EFA_GDA_NO_CALLER_HOOK';
/** NVSHMEM's own test for compiling the transfer functions into the application (nvshmem_defines.h and others). */
const INLINED = '#if defined(NVSHMEM_ENABLE_ALL_DEVICE_INLINING) || defined(__NVSHMEM_NUMBA_SUPPORT__)';
/** The device-side slot every hook reads (also how a tree with the hooks is recognised). */
export const DEVICE_API_SLOT = 'nvshmemi_efa_gda_api_d';

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
  return `if (${DEVICE_API_SLOT}.on) return ${h.call};`;
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
    why: `routes ${h.fn.replace('nvshmemi_transfer_', '')} through EFA GDA where the transfer functions are compiled into the application (all device inlining, numba), inlined there; compiled out of the device library, whose callers are hooked instead`,
    lines: [`#ifdef ${DEVICE_API_MACRO}`, hookLine(h), '#endif'],
    footprint: [wholeLine(hookLine(h))],
    locate(doc) {
      return withFunction(doc, h.fn, (f) => {
        return hookShapeProblem(headOf(doc, f), h) ?? firstInBody(doc, f);
      });
    },
  };
}

/** Right after the line matching `re` exactly once in the file (for top-level anchors the parse does not index). */
function afterOnlyLine(doc: Doc, re: RegExp, what: string): Located {
  const hits = [...doc.src.matchAll(new RegExp(re.source, 'gm'))];
  if (hits.length !== 1) return { refuse: `expected one ${what}, found ${hits.length}` };
  return { offset: afterLine(doc.src, hits[0]!.index!), indent: '' };
}

/**
 * The glue's include, right after the include of proxy_device.cuh, whose functions the glue calls for what goes
 * through NVSHMEM's proxy (the file's includes sit inside its include guard, so none is top-level). It also says
 * which of the two ways this translation unit hooks: the in-body hooks where the transfer functions are compiled
 * into the application, else (the device library) the entries' instantiations at the end of the file.
 */
const PROXY_INCLUDE = /^[ \t]*#[ \t]*include[ \t]+"non_abi\/device\/pt-to-pt\/proxy_device\.cuh"[ \t]*\r?$/;
function includeSpec(): InsertSpec {
  const include = '#include "nvshmem_efa/nvshmemx_efa_gda_device_api.cuh"';
  return {
    kind: 'insert',
    id: 'device-api-include',
    file: TRANSFER_DEVICE,
    parse: 'cpp',
    style: 'c',
    anchor: 'after #include "non_abi/device/pt-to-pt/proxy_device.cuh"',
    why: 'defines the GDA entries the hooks call and declares the slot; left out where NVSHMEM has IBGDA or builds the LLVM bitcode library',
    lines: [GUARD, include, INLINED, `#define ${DEVICE_API_MACRO} 1`, '#else', `#define ${ENTRIES_MACRO} 1`, '#endif', '#endif'],
    footprint: [wholeLine(include)],
    locate: (doc) => afterOnlyLine(doc, PROXY_INCLUDE, '#include of non_abi/device/pt-to-pt/proxy_device.cuh'),
  };
}

/**
 * First in transfer_device.cuh's include guard, before anything it includes (3.5's includes
 * nvshmemi_transfer_api.cuh): a translation unit that compiles the transfer functions gets no caller hook, whose
 * macros would rename their definitions.
 */
const TRANSFER_GUARD = /^#[ \t]*define[ \t]+TRANSFER_DEVICE_CUH[ \t]*\r?$/;
function noCallerHookSpec(): InsertSpec {
  const define = `#define ${NO_CALLER_HOOK} 1`;
  return {
    kind: 'insert',
    id: 'device-api-no-caller-hook',
    file: TRANSFER_DEVICE,
    parse: 'text',
    style: 'c',
    anchor: 'after #define TRANSFER_DEVICE_CUH (the include guard)',
    why: 'where the transfer functions themselves are compiled, the calls are not hooked at the caller (the device library keeps NVSHMEM\'s bodies; inlined ones carry the hook)',
    lines: [define],
    footprint: [wholeLine(define)],
    locate: (doc) => afterOnlyLine(doc, TRANSFER_GUARD, '#define TRANSFER_DEVICE_CUH'),
  };
}

/** The last line of a file, an #endif closing its include guard `#ifndef guard`, or the refusal. */
function guardEnd(doc: Doc, guard: string): Located {
  if (!new RegExp(`^#[ \\t]*ifndef[ \\t]+${guard}\\b`, 'm').test(doc.src)) return { refuse: `no ${guard} include guard` };
  const hits = [...doc.src.matchAll(/^[ \t]*#[ \t]*endif\b.*$/gm)];
  const last = hits[hits.length - 1];
  if (!last || doc.src.slice(last.index! + last[0].length).trim() !== '') return { refuse: `the file does not end with the #endif of its ${guard} include guard` };
  return { offset: last.index!, indent: '' };
}

/** The entries, instantiated where the device library compiles transfer_device.cuh: last in its include guard. */
function entriesSpec(): InsertSpec {
  const include = '#include "nvshmem_efa/nvshmemx_efa_gda_device_api_entries.cuh"';
  return {
    kind: 'insert',
    id: 'device-api-entries',
    file: TRANSFER_DEVICE,
    parse: 'text',
    style: 'c',
    anchor: 'before the #endif of the TRANSFER_DEVICE_CUH include guard (the end of the file)',
    why: "instantiates the GDA entries in the device library, for every type and scope NVSHMEM instantiates its transfer functions for: the callers' hooks link to them",
    lines: [`#ifdef ${ENTRIES_MACRO}`, include, '#endif'],
    footprint: [wholeLine(include)],
    locate: (doc) => guardEnd(doc, 'TRANSFER_DEVICE_CUH'),
  };
}

/** The hook at the caller: last in nvshmemi_transfer_api.cuh, after NVSHMEM's declarations of the transfer functions. */
function callerHookSpec(): InsertSpec {
  const include = '#include "nvshmem_efa/nvshmemx_efa_gda_device_api_hooks.cuh"';
  return {
    kind: 'insert',
    id: 'device-api-caller-hook',
    file: TRANSFER_API,
    parse: 'text',
    style: 'c',
    anchor: 'before the #endif of the _NVSHMEMI_TRANSFER_H_ include guard (the end of the file)',
    why: "routes every call of the transfer functions through EFA GDA when the slot is on, in the caller's code; otherwise one constant load, its compare and a branch, then NVSHMEM's unchanged function",
    lines: [GUARD, include, '#endif'],
    footprint: [wholeLine(include)],
    locate: (doc) => guardEnd(doc, '_NVSHMEMI_TRANSFER_H_'),
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
    lines: [GUARD, '#include "nvshmem_efa/nvshmemx_efa_gda_api.h"', `__constant__ nvshmemx_efa_gda_api_slot_t ${DEVICE_API_SLOT};`, '#endif'],
    footprint: [literal(`nvshmemx_efa_gda_api_slot_t ${DEVICE_API_SLOT}`)],
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
  const call = `cudaGetSymbolAddress(transport_dev_state_ptr, ${DEVICE_API_SLOT})`;
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
        // Before the final return (AWS's int version), else before the closing brace.
        // (AWS's 3.5.7 returns through a cleanup label, `out:` then `return status;`: after the label, so every path
        // runs it; a label on the return's own line would put the insertion before the label, skipped by its gotos.)
        if (f.finalReturn && doc.src.slice(lineStart(doc.src, f.finalReturn.start), f.finalReturn.start).trim())
          return 'the final return shares its line with a label or another statement: no line before it that every path reaches';
        const at = f.finalReturn ? lineStart(doc.src, f.finalReturn.start) : lineStart(doc.src, f.end - 1);
        return { offset: at, indent: bodyIndent(doc, f) };
      });
    },
  };
}

/** The device side of the device API: the glue's include, the hooks (at the callers, and in the bodies for inlining), the entries, the slot and its registration. */
export function deviceSideSpecs(): InsertSpec[] {
  return [noCallerHookSpec(), includeSpec(), ...HOOKS.map(hookSpec), entriesSpec(), callerHookSpec(), slotSpec(), memHandleSpec()];
}

/* --- the host side: filling the slot ------------------------------------------------------------------------ */

export const TRANSPORT_CPP = 'src/host/transport/transport.cpp';
export const INIT_CU = 'src/host/init/init.cu';
const HOST_SLOT = 'nvshmemi_efa_gda_api_h';
/** The modules' slots, counted by registration (NVSHMEM's own map of transport states exists only with IBGDA). */
const MODULES = 'nvshmemi_efa_gda_api_slots';
const HOST_GUARD = '#if !defined(NVSHMEM_IBGDA_SUPPORT)';

/**
 * The host's copy of the slot, next to the transport plugin's handle (file-static in transport.cpp, which is why
 * the slot is fetched there): NVSHMEM's host library defines it, init.cu copies it.
 */
function hostSlotSpec(): InsertSpec {
  return {
    kind: 'insert',
    id: 'device-api-host-slot',
    file: TRANSPORT_CPP,
    parse: 'text',
    style: 'c',
    anchor: 'after `static void *transport_lib = NULL;`',
    why: "the host's copy of the device API slot, filled from the transport plugin and copied into every module",
    lines: [HOST_GUARD, '#include "nvshmem_efa/nvshmemx_efa_gda_api.h"', `nvshmemx_efa_gda_api_slot_t ${HOST_SLOT};`, '#endif'],
    footprint: [literal(`nvshmemx_efa_gda_api_slot_t ${HOST_SLOT};`)],
    locate: (doc) => afterOnlyLine(doc, /^static[ \t]+void[ \t]*\*[ \t]*transport_lib[ \t]*=[ \t]*NULL[ \t]*;[ \t]*$/, '`static void *transport_lib = NULL;` line'),
  };
}

/**
 * After the remote transport connected its endpoints (GDA starts there) and before NVSHMEM copies its state into the
 * modules: ask the plugin for the slot. A plugin without the function (another transport, an unpatched build) and a
 * failed request leave it zero: the proxy path.
 */
const CONNECT_CALL = 'connect_endpoints';
const UPDATE_CALL = 'nvshmemi_update_device_state';
function hostFillSpec(): InsertSpec {
  const dlsym = 'dlsym(transport_lib, "nvshmemx_efa_gda_get_api_slot")';
  return {
    kind: 'insert',
    id: 'device-api-host-fill',
    file: TRANSPORT_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: `nvshmemi_setup_connections(): before the ${UPDATE_CALL}() call that follows ${CONNECT_CALL}()`,
    why: "fills the host's slot from the transport plugin once GDA started (in connect_endpoints), before NVSHMEM copies its state into every module",
    lines: [
      HOST_GUARD,
      '{',
      '    nvshmemx_efa_gda_api_slot_t efa_gda_slot = nvshmemx_efa_gda_api_slot_t();',
      '    typedef int (*get_api_slot_fn)(nvshmemx_efa_gda_api_slot_t *);',
      `    get_api_slot_fn get_api_slot = transport_lib ? (get_api_slot_fn)${dlsym} : NULL;`,
      '    if (get_api_slot && get_api_slot(&efa_gda_slot) != 0) efa_gda_slot = nvshmemx_efa_gda_api_slot_t();',
      `    ${HOST_SLOT} = efa_gda_slot;`,
      '}',
      '#endif',
    ],
    footprint: [literal(dlsym)],
    locate(doc) {
      return withFunction(doc, 'nvshmemi_setup_connections', (f) => {
        const connect = f.calls.filter((c) => c.name === CONNECT_CALL);
        if (connect.length !== 1) return `expected one ${CONNECT_CALL}() call, found ${connect.length}`;
        const updates = f.calls.filter((c) => c.name === UPDATE_CALL && c.span.start > connect[0]!.span.start);
        if (updates.length !== 1) return `expected one ${UPDATE_CALL}() call after ${CONNECT_CALL}(), found ${updates.length}`;
        const at = lineStart(doc.src, updates[0]!.span.start);
        return { offset: at, indent: indentAt(doc.src, at) };
      });
    },
  };
}

/** At finalize, before NVSHMEM updates the modules after closing each transport: the slot goes off first. */
function hostClearSpec(): InsertSpec {
  const clear = `${HOST_SLOT} = nvshmemx_efa_gda_api_slot_t();`;
  return {
    kind: 'insert',
    id: 'device-api-host-clear',
    file: TRANSPORT_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: 'nvshmemi_transport_finalize(): first in the body',
    why: 'turns the slot off before the transports close, so the state update after each finalize leaves no module pointing at freed GDA state',
    lines: [HOST_GUARD, clear, '#endif'],
    footprint: [wholeLine(clear)],
    locate(doc) {
      return withFunction(doc, 'nvshmemi_transport_finalize', (f) => firstInBody(doc, f));
    },
  };
}

/**
 * Where NVSHMEM copies its device state into every registered module (and, with IBGDA, IBGDA's state into every
 * registered transport pointer): the host's slot into every registered transport pointer, which without IBGDA is
 * the slot of each module (init_device.cu, patched).
 */
function hostCopySpec(): InsertSpec {
  const copy = `cudaMemcpy(it->first, &${HOST_SLOT}, sizeof(${HOST_SLOT}), cudaMemcpyHostToDevice)`;
  return {
    kind: 'insert',
    id: 'device-api-host-copy',
    file: INIT_CU,
    parse: 'cpp',
    style: 'c',
    anchor: `${UPDATE_CALL}(): before its final return`,
    why: "copies the host's slot into the slot of every module NVSHMEM registered, each time NVSHMEM updates their device state",
    lines: [
      HOST_GUARD,
      `for (auto it = ${MODULES}.cbegin(); status == 0 && it != ${MODULES}.cend(); ++it) {`,
      `    status = ${copy};`,
      '}',
      '#endif',
    ],
    footprint: [literal(copy)],
    locate(doc) {
      return withFunction(doc, UPDATE_CALL, (f) => {
        const body = doc.src.slice(f.body.start, f.end);
        if (!/\bint\s+status\b/.test(body)) return 'no local `int status`';
        if (!f.finalReturn || !/^return\s+status\s*;$/.test(doc.src.slice(f.finalReturn.start, f.finalReturn.end).trim())) return 'no final `return status;`';
        return { offset: lineStart(doc.src, f.finalReturn.start), indent: indentAt(doc.src, f.finalReturn.start) };
      });
    },
  };
}

/** What init.cu needs, before the first function that uses it (register_state_ptr): the host's slot and the map. */
function hostDeclSpec(): InsertSpec {
  const decl = `extern nvshmemx_efa_gda_api_slot_t ${HOST_SLOT};`;
  return {
    kind: 'insert',
    id: 'device-api-host-decl',
    file: INIT_CU,
    parse: 'cpp',
    style: 'c',
    anchor: 'before the definition of register_state_ptr()',
    why: "declares the host's slot (defined in transport.cpp) and the map of the modules' slots it is copied into",
    lines: [HOST_GUARD, '#include <map>', '#include "nvshmem_efa/nvshmemx_efa_gda_api.h"', decl, `static std::map<void *, int> ${MODULES};`, '#endif'],
    footprint: [wholeLine(decl)],
    locate(doc) {
      return withFunction(doc, 'register_state_ptr', (f) => ({ offset: lineStart(doc.src, f.start), indent: '' }));
    },
  };
}

/**
 * Registering and dropping a module's slot. Without IBGDA, NVSHMEM's register_state_ptr() refuses a transport
 * pointer ("IBGDA not enabled by host lib") and unregister_state_ptr() ignores it; these keep the device API's
 * slots in a map of their own, counted as NVSHMEM counts the device states, and hand NVSHMEM's own code a NULL.
 */
function hostRegisterSpec(kind: 'register' | 'unregister'): InsertSpec {
  const fn = `${kind}_state_ptr`;
  const lines =
    kind === 'register'
      ? ['if (transport != NULL) {', `    ${MODULES}[transport]++;`, '    transport = NULL;', '}']
      : [
          'if (transport != NULL) {',
          `    auto efa_gda_slot = ${MODULES}.find(transport);`,
          `    if (efa_gda_slot != ${MODULES}.end() && --efa_gda_slot->second <= 0) ${MODULES}.erase(efa_gda_slot);`,
          '    transport = NULL;',
          '}',
        ];
  return {
    kind: 'insert',
    id: `device-api-host-${kind}`,
    file: INIT_CU,
    parse: 'cpp',
    style: 'c',
    anchor: `${fn}(): first in the body`,
    why:
      kind === 'register'
        ? "keeps each module's device API slot (its transport state pointer) for the copies, where NVSHMEM without IBGDA would refuse it"
        : "drops a module's device API slot when the module goes, so no copy targets a module that is gone",
    lines: [HOST_GUARD, ...lines, '#endif'],
    footprint: [wholeLine(lines[1]!)],
    locate(doc) {
      return withFunction(doc, fn, (f) => {
        const head = doc.src.slice(f.start, f.body.start);
        if (!/\bvoid\s*\*\s*transport\s*\)/.test(head)) return 'no last parameter `void *transport`';
        return firstInBody(doc, f);
      });
    },
  };
}

/** The host side: the slot in NVSHMEM's host library, filled from the plugin, registered per module, copied, cleared. */
export function hostApiSpecs(): InsertSpec[] {
  return [hostSlotSpec(), hostFillSpec(), hostClearSpec(), hostRegisterSpec('register'), hostRegisterSpec('unregister'), hostDeclSpec(), hostCopySpec()];
}

/** The installed headers (and the vendored efa_io_defs.h), copied to src/include/nvshmem_efa/ (see HEADERS_DIR). */
export function deviceApiHeaderSpecs(t: Template, vendored: VendoredFile[] = []): OwnedFileSpec[] {
  const why = 'the GDA headers the device API hooks include, where NVSHMEM\'s own targets find them under the name they are installed by';
  const specs: OwnedFileSpec[] = [];
  for (const name of t.manifest.installHeaders) {
    const file = t.files.find((f) => f.name === name);
    const v = vendored.find((x) => x.name === name);
    const content = file?.content ?? (v ? vendoredContent(t, v) : undefined);
    if (content === undefined) continue; // efa_io_defs.h when it could not be had: the include then fails loudly
    specs.push({ kind: 'owned-file', id: `device-api-header:${name}`, file: `${HEADERS_DIR}/${name}`, anchor: `templates/${t.manifest.name}/${name}`, why, content, ownerMark: OWNER_MARK });
  }
  return specs;
}

/** Everything the device API patch writes into NVSHMEM. */
export function deviceApiSpecs(t: Template, vendored: VendoredFile[] = []): PatchSpec[] {
  return [...deviceSideSpecs(), ...hostApiSpecs(), ...deviceApiHeaderSpecs(t, vendored)];
}
