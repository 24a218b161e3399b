import type { CheckSpec, Doc, InsertSpec, Located } from '../engine/plan.ts';
import type { FunctionAnchor } from '../engine/cpp.ts';
import { afterLine, indentAt, lineStart, nearestNames, startsLine } from '../engine/text.ts';
import type { Template } from './template.ts';

export const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
export const LIBFABRIC_H = 'src/modules/transport/libfabric/libfabric.h';
const CONNECT = 'nvshmemt_libfabric_connect_endpoints';
const FINALIZE = 'nvshmemt_libfabric_finalize';
const GET_MEM_HANDLE = 'nvshmemt_libfabric_get_mem_handle';
const RELEASE_MEM_HANDLE = 'nvshmemt_libfabric_release_mem_handle';

/** A renamed anchor: the nearest function names by edit distance, closest first. */
function similarNames(doc: Doc, name: string): string {
  const near = nearestNames(name, doc.cpp?.functionNames ?? []);
  return near.length ? `nearest: ${near.map((n) => `${n}()`).join(', ')}; renamed?` : 'no function with a similar name';
}

/**
 * Picks the raw or the `#if`-flattened parse of a function, whichever satisfies `need`; refuses when neither
 * does. This is the "use an anchor only outside ERROR nodes, else flatten, else refuse" rule.
 */
function withFunction(doc: Doc, name: string, need: (f: FunctionAnchor) => string | Located): Located {
  const found = doc.cpp!.findFunction(name);
  if (!found) return { refuse: `no definition of ${name}() found (${similarNames(doc, name)})` };
  let firstProblem = '';
  // The flattened parse is made only if the raw one does not do.
  for (const pick of [() => found.raw, () => found.flattened]) {
    const f = pick();
    if (!f) continue;
    const r = need(f);
    if (typeof r !== 'string') return r;
    firstProblem ||= r;
  }
  return { refuse: `in ${name}(): ${firstProblem}` };
}

function bodyIndent(doc: Doc, f: FunctionAnchor): string {
  const first = f.statements[0];
  return first ? indentAt(doc.src, first.start) : '    ';
}

export function libfabricCppSpecs(t: Template): (InsertSpec | CheckSpec)[] {
  const header = `${t.manifest.destination.split('/').pop()}/${t.manifest.headers[0]}`;
  return [
    {
      kind: 'check',
      id: 'libfabric-state-shape',
      file: LIBFABRIC_H,
      parse: 'cpp',
      anchor: 'struct nvshmemt_libfabric_state_t { fabric, domain, prov_info, provider, eps }',
      why: 'the GDA hooks pass the single fabric/domain of NVIDIA NVSHMEM 3.x; multi-rail forks keep vectors of them',
      verify(doc) {
        const fields = doc.cpp!.structFields('nvshmemt_libfabric_state_t');
        if (!fields) return 'no struct nvshmemt_libfabric_state_t defined';
        const expect: [string, RegExp][] = [
          ['fabric', /struct fid_fabric \*\s*fabric;/],
          ['domain', /struct fid_domain \*\s*domain;/],
          ['prov_info', /struct fi_info \*\s*prov_info;/],
          ['provider', /\bprovider;/],
          ['eps', /\*\s*eps;/],
        ];
        const wrong = expect.filter(([name, re]) => !re.test(fields.get(name) ?? ''));
        if (wrong.length === 0) return undefined;
        const seen = [...fields.entries()]
          .filter(([k]) => /fabric|domain|eps|prov/.test(k))
          .map(([, decl]) => `\`${decl}\``);
        return (
          `nvshmemt_libfabric_state_t does not have the expected ${wrong.map(([n]) => n).join(', ')} field(s) ` +
          `(found ${seen.join(', ') || 'none of them'}); this looks like a fork with vectors of endpoints/domains, which nvshmem-efa does not patch`
        );
      },
    },
    {
      kind: 'insert',
      id: 'efa-gda-include',
      file: LIBFABRIC_CPP,
      parse: 'cpp',
      style: 'c',
      anchor: 'after the last unconditional top-level #include',
      why: 'declares the EFA GDA hooks; an include inside #ifdef NVSHMEM_USE_GDRCOPY would vanish without GDRCopy',
      lines: [`#include "${header}"`],
      locate(doc) {
        const inc = doc.cpp!.lastTopLevelInclude;
        if (!inc) return { refuse: 'no unconditional top-level #include found' };
        return { offset: afterLine(doc.src, inc.end - 1), indent: '' };
      },
    },
    {
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
        `if (status == 0 && state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA && nvshmemt_efa_gda_enabled()) {`,
        '    nvshmemt_efa_gda_bootstrap_t efa_gda_boot;',
        '    efa_gda_boot.my_pe = t->my_pe;',
        '    efa_gda_boot.n_pes = t->n_pes;',
        '    efa_gda_boot.allgather = [](const void *in, void *out, int bytes, void *ctx) -> int {',
        '        bootstrap_handle_t *h = (bootstrap_handle_t *)ctx;',
        '        return h->allgather(in, out, bytes, h);',
        '    };',
        '    efa_gda_boot.ctx = t->boot_handle;',
        '    if (nvshmemt_efa_gda_init(state->prov_info, &efa_gda_boot) != 0) {',
        '        NVSHMEMI_WARN_PRINT("%s; using the libfabric proxy path\\n", nvshmemx_efa_gda_status());',
        '    }',
        '}',
      ],
      locate(doc) {
        return withFunction(doc, CONNECT, (f) => {
          const fnText = doc.src.slice(f.start, f.body.start);
          if (!/\bnvshmem_transport_t\s+t\b/.test(fnText)) return 'the first parameter is not `nvshmem_transport_t t`';
          if (!/\bstate\s*=\s*\(nvshmemt_libfabric_state_t\s*\*\)\s*t->state\b/.test(doc.src.slice(f.body.start, f.end))) {
            return 'no local `state = (nvshmemt_libfabric_state_t *)t->state`';
          }
          const out = f.labels.get('out');
          if (!out) return `no label out: (labels: ${[...f.labels.keys()].join(', ') || 'none'})`;
          const before = (n: string) => f.calls.some((c) => c.name === n && c.span.start < out.start);
          const missing = ['fi_enable', 'fi_av_insert'].filter((n) => !before(n));
          if (missing.length) return `no ${missing.join(' or ')}() call before label out:`;
          if (!startsLine(doc.src, out.start)) return 'label out: does not start its line';
          return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
        });
      },
    },
    {
      kind: 'insert',
      id: 'efa-gda-register-region',
      file: LIBFABRIC_CPP,
      parse: 'cpp',
      style: 'c',
      anchor: `${GET_MEM_HANDLE}(): before label out:`,
      why: 'GDA kernels address the symmetric heap through their own registration: each remotely accessible region NVSHMEM registers (on every PE, in the same order) is registered on the GDA domain and its rkey and base exchanged',
      lines: ['if (status == 0 && !local_only && nvshmemt_efa_gda_active()) nvshmemt_efa_gda_register_region(buf, length);'],
      locate(doc) {
        return withFunction(doc, GET_MEM_HANDLE, (f) => {
          const head = doc.src.slice(f.start, f.body.start);
          const missing = ['buf', 'length', 'local_only'].filter((p) => !new RegExp(`\\b${p}\\b`).test(head));
          if (missing.length) return `no parameter named ${missing.join(', ')}`;
          if (!/\bint\s+status\b/.test(doc.src.slice(f.body.start, f.end))) return 'no local `int status`';
          const out = f.labels.get('out');
          if (!out) return `no label out: (labels: ${[...f.labels.keys()].join(', ') || 'none'})`;
          if (!f.calls.some((c) => c.name === 'fi_mr_regattr' && c.span.start < out.start)) return 'no fi_mr_regattr() call before label out:';
          if (!startsLine(doc.src, out.start)) return 'label out: does not start its line';
          return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
        });
      },
    },
    {
      kind: 'insert',
      id: 'efa-gda-release-region',
      file: LIBFABRIC_CPP,
      parse: 'cpp',
      style: 'c',
      anchor: `${RELEASE_MEM_HANDLE}(): before label out:`,
      why: 'drops the GDA registration of a region NVSHMEM releases, so the GDA domain holds no MR on freed memory',
      lines: ['if (nvshmemt_efa_gda_active()) nvshmemt_efa_gda_release_region(fabric_handle->buf);'],
      locate(doc) {
        return withFunction(doc, RELEASE_MEM_HANDLE, (f) => {
          const body = doc.src.slice(f.body.start, f.end);
          if (!/\bfabric_handle\s*=\s*\(nvshmemt_libfabric_mem_handle_t\s*\*\)\s*mem_handle\b/.test(body)) {
            return 'no local `fabric_handle = (nvshmemt_libfabric_mem_handle_t *)mem_handle`';
          }
          const out = f.labels.get('out');
          if (!out) return `no label out: (labels: ${[...f.labels.keys()].join(', ') || 'none'})`;
          if (!startsLine(doc.src, out.start)) return 'label out: does not start its line';
          return { offset: lineStart(doc.src, out.start), indent: bodyIndent(doc, f) };
        });
      },
    },
    {
      kind: 'insert',
      id: 'efa-gda-fini',
      file: LIBFABRIC_CPP,
      parse: 'cpp',
      style: 'c',
      anchor: `${FINALIZE}(): before the statement holding the first fi_close()`,
      why: 'GDA has its own efa-direct fabric, domain, endpoint and AV (never NVSHMEM\'s); it goes first, so its GPU mappings and CQ memory are released while NVSHMEM\'s CUDA context and transport are still whole',
      lines: ['nvshmemt_efa_gda_fini();'],
      locate(doc) {
        return withFunction(doc, FINALIZE, (f) => {
          const first = f.calls.find((c) => c.name === 'fi_close');
          if (!first) return 'no fi_close() call';
          if (!startsLine(doc.src, first.statement.start)) return 'the statement holding fi_close() does not start its line';
          return { offset: lineStart(doc.src, first.statement.start), indent: bodyIndent(doc, f) };
        });
      },
    },
  ];
}
