import type { CheckSpec, Doc, InsertSpec, Located } from '../engine/plan.ts';
import type { FunctionAnchor } from '../engine/cpp.ts';
import { afterLine, indentAt, lineStart, startsLine } from '../engine/text.ts';
import type { Template } from './template.ts';

export const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
export const LIBFABRIC_H = 'src/modules/transport/libfabric/libfabric.h';
const CONNECT = 'nvshmemt_libfabric_connect_endpoints';
const FINALIZE = 'nvshmemt_libfabric_finalize';

function similarNames(doc: Doc, name: string): string {
  const stem = name.split('_').slice(0, 2).join('_');
  const near = (doc.cpp?.functionNames ?? []).filter((n) => n.startsWith(stem) && n !== name);
  return near.length ? `functions with that prefix: ${near.slice(0, 6).join(', ')}` : 'no function with a similar name';
}

/**
 * Picks the raw or the `#if`-flattened parse of a function, whichever satisfies `need`; refuses when neither
 * does. This is the "use an anchor only outside ERROR nodes, else flatten, else refuse" rule.
 */
function withFunction(doc: Doc, name: string, need: (f: FunctionAnchor) => string | Located): Located {
  const found = doc.cpp!.findFunction(name);
  if (!found) return { refuse: `no definition of ${name}() found (${similarNames(doc, name)})` };
  let firstProblem = '';
  for (const f of [found.raw, found.flattened]) {
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
        '/* EFA GDA uses endpoints of its own; if it fails it stays off and these endpoints are untouched. */',
        `if (status == 0 && state->provider == NVSHMEMT_LIBFABRIC_PROVIDER_EFA && nvshmemt_efa_gda_enabled()) {`,
        '    if (nvshmemt_efa_gda_init(t, state->fabric, state->domain, state->prov_info) != 0) {',
        '        NVSHMEMI_WARN_PRINT("EFA GDA is off (%s); using the libfabric proxy path\\n",',
        '                            nvshmemx_efa_gda_status());',
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
      id: 'efa-gda-fini',
      file: LIBFABRIC_CPP,
      parse: 'cpp',
      style: 'c',
      anchor: `${FINALIZE}(): before the statement holding the first fi_close()`,
      why: 'GDA resources live on the NVSHMEM domain and fabric: they must go before any endpoint, CQ, AV, domain or fabric is closed',
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
