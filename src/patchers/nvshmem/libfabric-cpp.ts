import type { CheckSpec, Doc, InsertSpec } from '../engine/plan.ts';
import type { FunctionAnchor, Span } from '../engine/cpp.ts';
import { afterLine, callOf, lineStart, startsLine, wholeLine } from '../engine/text.ts';
import { bodyIndent, withFunction } from './find-function.ts';
import { detectLayout, LIBFABRIC_H, type LayoutId } from './layout.ts';
import type { Template } from './template.ts';

export { LIBFABRIC_H };
export const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const CONNECT = 'nvshmemt_libfabric_connect_endpoints';
const FINALIZE = 'nvshmemt_libfabric_finalize';
const GET_MEM_HANDLE = 'nvshmemt_libfabric_get_mem_handle';
const RELEASE_MEM_HANDLE = 'nvshmemt_libfabric_release_mem_handle';


/** The body's text without comments (offsets are not kept): for shape checks on statements. */
function codeOf(doc: Doc, f: FunctionAnchor): string {
  return doc.src.slice(f.body.start, f.end).replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
}

/**
 * Where a block inserted before the statement at `stmtStart` goes so that the comment block right above that
 * statement (no blank line between) stays with it: the start of that comment block's first line.
 */
function beforeLeadingComments(doc: Doc, f: FunctionAnchor, stmtStart: number): number {
  const prevEnd = Math.max(f.body.start + 1, ...f.statements.filter((st) => st.end <= stmtStart).map((st) => st.end));
  let at = lineStart(doc.src, stmtStart);
  for (;;) {
    const gap = doc.src.slice(prevEnd, at);
    // The last comment of the gap, if only blanks without an empty line stand between it and `at`.
    const m = /(\/\*(?:(?!\/\*)[\s\S])*?\*\/|\/\/[^\n]*)[ \t]*\n[ \t]*$/.exec(gap);
    if (!m) return at;
    const start = prevEnd + m.index;
    if (!startsLine(doc.src, start)) return at;
    at = lineStart(doc.src, start);
  }
}

function labelsOf(f: FunctionAnchor): string {
  return [...f.labels.keys()].join(', ') || 'none';
}

/** Label `out:` of the function, on a line of its own; or what is wrong. */
function outLabel(doc: Doc, f: FunctionAnchor): Span | string {
  const out = f.labels.get('out');
  if (!out) return `no label out: (labels: ${labelsOf(f)})`;
  if (!startsLine(doc.src, out.start)) return 'label out: does not start its line';
  return out;
}

const STATE_ANCHOR: Record<LayoutId, string> = {
  'single-rail': 'struct nvshmemt_libfabric_state_t { fabric, domain, prov_info, provider, eps }',
  'multi-rail':
    'struct nvshmemt_libfabric_state_t { vectors prov_infos, fabrics, domains, eps; provider, max_nic_per_pe, num_selected_devs, num_selected_domains }, nvshmemt_libfabric_mem_handle_t { hdls[1 + NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE] }',
};

function stateShapeCheck(layout: LayoutId): CheckSpec {
  return {
    kind: 'check',
    id: 'libfabric-state-shape',
    file: LIBFABRIC_H,
    parse: 'cpp',
    anchor: STATE_ANCHOR[layout],
    why: 'the GDA hooks are written for one of two layouts of the transport state: single-rail (one fabric, domain and fi_info) or multi-rail (one of each per domain); anything else would mis-compile or pass the wrong NICs',
    verify(doc) {
      const found = detectLayout(doc.cpp!);
      if ('refuse' in found) return found.refuse;
      return found.layout.id === layout ? undefined : `libfabric.h has the ${found.layout.id} layout, but the plan was made for ${layout}`;
    },
  };
}

const INCLUDE_ANCHOR = 'after the last unconditional top-level #include';

function includeSpec(t: Template): InsertSpec {
  const header = `${t.manifest.destination.split('/').pop()}/${t.manifest.headers[0]}`;
  return {
    kind: 'insert',
    id: 'efa-gda-include',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: INCLUDE_ANCHOR,
    why: 'declares the EFA GDA hooks; an include inside #ifdef NVSHMEM_USE_GDRCOPY would vanish without GDRCopy',
    lines: [`#include "${header}"`],
    footprint: [wholeLine(`#include "${header}"`)],
    locate(doc) {
      const inc = doc.cpp!.lastTopLevelInclude;
      if (!inc) return { refuse: 'no unconditional top-level #include found' };
      return { offset: afterLine(doc.src, inc.end - 1), indent: '' };
    },
  };
}

/** The bootstrap adapter both init hooks build before calling into GDA. */
const BOOT_LINES = [
  '    nvshmemt_efa_gda_bootstrap_t efa_gda_boot;',
  '    efa_gda_boot.my_pe = t->my_pe;',
  '    efa_gda_boot.n_pes = t->n_pes;',
  '    efa_gda_boot.allgather = [](const void *in, void *out, int bytes, void *ctx) -> int {',
  '        bootstrap_handle_t *h = (bootstrap_handle_t *)ctx;',
  '        return h->allgather(in, out, bytes, h);',
  '    };',
  '    efa_gda_boot.ctx = t->boot_handle;',
];
const GDA_GUARD = 'if (status == 0 && state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA && nvshmemt_efa_gda_enabled()) {';
const GDA_FALLBACK_WARN = '        NVSHMEMI_WARN_PRINT("%s; using the libfabric proxy path\\n", nvshmemx_efa_gda_status());';

/** What both layouts' connect_endpoints must have for the init hook: `t`, `state`, out:, enabled and AV-filled endpoints. */
function connectCommon(doc: Doc, f: FunctionAnchor): Span | string {
  const fnText = doc.src.slice(f.start, f.body.start);
  if (!/\bnvshmem_transport_t\s+t\b/.test(fnText)) return 'the first parameter is not `nvshmem_transport_t t`';
  if (!/\bstate\s*=\s*\(nvshmemt_libfabric_state_t\s*\*\)\s*t->state\b/.test(doc.src.slice(f.body.start, f.end))) {
    return 'no local `state = (nvshmemt_libfabric_state_t *)t->state`';
  }
  const out = f.labels.get('out');
  if (!out) return `no label out: (labels: ${labelsOf(f)})`;
  const before = (n: string) => f.calls.some((c) => c.name === n && c.span.start < out.start);
  const missing = ['fi_enable', 'fi_av_insert'].filter((n) => !before(n));
  if (missing.length) return `no ${missing.join(' or ')}() call before label out:`;
  if (!startsLine(doc.src, out.start)) return 'label out: does not start its line';
  return out;
}

function singleRailInit(): InsertSpec {
  return {
    kind: 'insert',
    id: 'efa-gda-init',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: `${CONNECT}(): before label out:, after fi_enable() and fi_av_insert()`,
    why: 'starts EFA GDA only on the success path, once every endpoint is enabled and addresses are exchanged',
    lines: [
      '/* EFA GDA uses endpoints of its own; if it fails on any PE it stays off everywhere and these endpoints are',
      ' * untouched. The all-gather adapter keeps the GDA sources free of NVSHMEM headers. */',
      GDA_GUARD,
      ...BOOT_LINES,
      '    if (nvshmemt_efa_gda_init(state->prov_info, &efa_gda_boot) != 0) {',
      GDA_FALLBACK_WARN,
      '    }',
      '}',
    ],
    footprint: [callOf('nvshmemt_efa_gda_init')],
    locate(doc) {
      return withFunction(doc, CONNECT, (f) => {
        const out = connectCommon(doc, f);
        if (typeof out === 'string') return out;
        return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
      });
    },
  };
}

/**
 * Multi-rail: prov_infos is [first NIC (host domain), first NIC, second NIC, ...] in the order NVSHMEM selected
 * the NICs (selected_dev_ids), and the proxy path round-robins over domains 1..num_selected_domains-1. Those
 * entries, and only those, are the rails GDA runs on; entry 0 would open the first NIC twice.
 */
function multiRailInit(): InsertSpec {
  return {
    kind: 'insert',
    id: 'efa-gda-init',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: `${CONNECT}(): before label out:, after fi_enable() and fi_av_insert(); rails = prov_infos[1..] (one proxy domain per NIC)`,
    why: 'starts EFA GDA on every rail of the PE (one per selected NIC) only on the success path, once every endpoint is enabled and addresses are exchanged',
    lines: [
      '/* EFA GDA uses endpoints of its own, one per rail; if it fails on any PE it stays off everywhere and these',
      ' * endpoints are untouched. prov_infos[0] is the host domain, on the same NIC as prov_infos[1]; prov_infos[1..]',
      " * are the proxy domains, one per selected NIC in NVSHMEM's order: those are the rails. The all-gather adapter",
      ' * keeps the GDA sources free of NVSHMEM headers. */',
      GDA_GUARD,
      ...BOOT_LINES,
      '    const int efa_gda_rails = (int)state->prov_infos.size() - 1;',
      '    if (nvshmemt_efa_gda_init_rails(efa_gda_rails > 0 ? state->prov_infos.data() + 1 : NULL, efa_gda_rails,',
      '                                    &efa_gda_boot) != 0) {',
      GDA_FALLBACK_WARN,
      '    }',
      '}',
    ],
    footprint: [callOf('nvshmemt_efa_gda_init_rails')],
    locate(doc) {
      return withFunction(doc, CONNECT, (f) => {
        const code = codeOf(doc, f);
        if (!/\bstate->num_selected_domains\s*=\s*state->num_selected_devs\s*\+\s*1\s*;/.test(code)) {
          return 'no `state->num_selected_domains = state->num_selected_devs + 1;` (a host domain plus one proxy domain per NIC): which prov_infos entries are the rails is not known';
        }
        const pushes = code.match(/\bstate->prov_infos\.push_back\s*\(/g)?.length ?? 0;
        const hostThenRails = /\bif\s*\(\s*state->prov_infos\.size\(\)\s*==\s*0\s*\)\s*state->prov_infos\.push_back\(\s*(\w+)\s*\)\s*;\s*state->prov_infos\.push_back\(\s*\1\s*\)\s*;/;
        if (pushes !== 2 || !hostThenRails.test(code)) {
          return (
            'prov_infos is not filled as [first NIC (host domain), then one entry per selected NIC]: expected ' +
            '`if (state->prov_infos.size() == 0) state->prov_infos.push_back(info);` followed by `state->prov_infos.push_back(info);` ' +
            `and no other push_back (found ${pushes} state->prov_infos.push_back call(s))`
          );
        }
        const out = connectCommon(doc, f);
        if (typeof out === 'string') return out;
        return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
      });
    },
  };
}

function registerRegion(layout: LayoutId): InsertSpec {
  return {
    kind: 'insert',
    id: 'efa-gda-register-region',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: layout === 'multi-rail' ? `${GET_MEM_HANDLE}(): before label out:, after the fi_mr_regattr() loop over every domain` : `${GET_MEM_HANDLE}(): before label out:`,
    why: 'GDA kernels address the symmetric heap through their own registration: each remotely accessible region NVSHMEM registers (on every PE, in the same order) is registered by GDA once, on each of its rails, after NVSHMEM\'s own registrations succeeded, and its rkeys and base exchanged',
    lines: ['if (status == 0 && !local_only && nvshmemt_efa_gda_active()) nvshmemt_efa_gda_register_region(buf, length);'],
    footprint: [callOf('nvshmemt_efa_gda_register_region')],
    locate(doc) {
      return withFunction(doc, GET_MEM_HANDLE, (f) => {
        const head = doc.src.slice(f.start, f.body.start);
        const missing = ['buf', 'length', 'local_only'].filter((p) => !new RegExp(`\\b${p}\\b`).test(head));
        if (missing.length) return `no parameter named ${missing.join(', ')}`;
        if (!/\bint\s+status\b/.test(doc.src.slice(f.body.start, f.end))) return 'no local `int status`';
        const out = outLabel(doc, f);
        if (typeof out === 'string') return out;
        const reg = f.calls.filter((c) => c.name === 'fi_mr_regattr' && c.span.start < out.start);
        if (reg.length === 0) return 'no fi_mr_regattr() call before label out:';
        if (layout === 'multi-rail') {
          // status == 0 at out: then means NVSHMEM registered the region on every domain (each failure jumps there).
          const stmt = doc.src.slice(reg[0]!.statement.start, reg[0]!.statement.end);
          const loop = /^for\s*\([^;]*;\s*\w+\s*<\s*(\w+)->domains\.size\(\)\s*;/.exec(stmt);
          if (reg.length !== 1 || !loop || !new RegExp(`fi_mr_regattr\\(\\s*${loop[1]}->domains\\[\\s*\\w+\\s*\\]`).test(stmt)) {
            return `fi_mr_regattr() is not called once, in a \`for (...; i < state->domains.size(); ...)\` loop on domains[i] (found ${reg.length} call(s)${loop ? '' : ', not in such a loop'}): the GDA hook must follow NVSHMEM's registration on every domain`;
          }
        }
        return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
      });
    },
  };
}

function releaseRegion(): InsertSpec {
  return {
    kind: 'insert',
    id: 'efa-gda-release-region',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: `${RELEASE_MEM_HANDLE}(): before label out:`,
    why: 'drops the GDA registration of a region NVSHMEM releases (on every rail), so no GDA domain holds an MR on freed memory',
    lines: ['if (nvshmemt_efa_gda_active()) nvshmemt_efa_gda_release_region(fabric_handle->buf);'],
    footprint: [callOf('nvshmemt_efa_gda_release_region')],
    locate(doc) {
      return withFunction(doc, RELEASE_MEM_HANDLE, (f) => {
        const body = doc.src.slice(f.body.start, f.end);
        if (!/\bfabric_handle\s*=\s*\(nvshmemt_libfabric_mem_handle_t\s*\*\)\s*mem_handle\b/.test(body)) {
          return 'no local `fabric_handle = (nvshmemt_libfabric_mem_handle_t *)mem_handle`';
        }
        const out = outLabel(doc, f);
        if (typeof out === 'string') return out;
        return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
      });
    },
  };
}

function fini(layout: LayoutId): InsertSpec {
  // Multi-rail: the fi_infos init_rails was given point into all_prov_info, which finalize frees before it closes
  // anything; GDA goes before that too.
  const first = layout === 'multi-rail' ? ['fi_freeinfo', 'fi_close'] : ['fi_close'];
  return {
    kind: 'insert',
    id: 'efa-gda-fini',
    file: LIBFABRIC_CPP,
    parse: 'cpp',
    style: 'c',
    anchor: layout === 'multi-rail' ? `${FINALIZE}(): before the statement holding the first fi_freeinfo() or fi_close()` : `${FINALIZE}(): before the statement holding the first fi_close()`,
    why: 'GDA has its own efa-direct fabric, domain, endpoint and AV per rail (never NVSHMEM\'s); it goes first, so its GPU mappings and CQ memory are released while NVSHMEM\'s CUDA context, fi_infos and transport are still whole',
    lines: ['nvshmemt_efa_gda_fini();'],
    footprint: [callOf('nvshmemt_efa_gda_fini')],
    locate(doc) {
      return withFunction(doc, FINALIZE, (f) => {
        if (!f.calls.some((c) => c.name === 'fi_close')) return 'no fi_close() call';
        const call = f.calls.find((c) => first.includes(c.name))!;
        if (!startsLine(doc.src, call.statement.start)) return `the statement holding ${call.name}() does not start its line`;
        // Multi-rail finalize explains the fi_freeinfo() in a comment above it, which stays with it.
        const offset = layout === 'multi-rail' ? beforeLeadingComments(doc, f, call.statement.start) : lineStart(doc.src, call.statement.start);
        return { offset, indent: bodyIndent(doc, f) };
      });
    },
  };
}

/** The libfabric.h check and the libfabric.cpp hooks of one layout, in the order the report lists them. */
export function libfabricCppSpecs(t: Template, layout: LayoutId = 'single-rail'): (InsertSpec | CheckSpec)[] {
  return [
    stateShapeCheck(layout),
    includeSpec(t),
    layout === 'multi-rail' ? multiRailInit() : singleRailInit(),
    registerRegion(layout),
    releaseRegion(),
    fini(layout),
  ];
}
