import path from 'node:path';
import type { CMakeCommand } from '../engine/cmake-scan.ts';
import type { Doc, InsertSpec, Located, PatchSpec } from '../engine/plan.ts';
import { afterLine, escapeRe, indentAt, lineOf, wholeLine } from '../engine/text.ts';
import type { Template } from './template.ts';

export const SRC_CMAKE = 'src/CMakeLists.txt';
export const MODULE_CMAKE = 'src/modules/transport/libfabric/CMakeLists.txt.in';
export const SYMBOLS = 'nvshmem_transport.sym';
const TARGET = 'nvshmem_transport_libfabric';

function commandsFor(doc: Doc, name: string, firstArg: string): CMakeCommand[] {
  return doc.cmake!.filter((c) => c.name === name && c.args[0]?.text === firstArg);
}

/** After the single `target_link_libraries(<target> ...)`: the target exists by then. */
function afterTargetLink(doc: Doc, target = TARGET): Located {
  const links = commandsFor(doc, 'target_link_libraries', target);
  if (links.length !== 1) {
    const other = doc.cmake!.filter((c) => c.args.some((a) => a.text.includes(target))).map((c) => `${c.name}() line ${c.line}`);
    return {
      refuse: `expected exactly one target_link_libraries(${target} ...), found ${links.length} (commands naming ${target}: ${other.join(', ') || 'none'})`,
    };
  }
  const cmd = links[0]!;
  if (doc.src.slice(cmd.end, afterLine(doc.src, cmd.end)).trim() !== '') {
    return { refuse: `target_link_libraries(${target} ...) at line ${cmd.line} is followed by more code on its line` };
  }
  return { offset: afterLine(doc.src, cmd.end), indent: indentAt(doc.src, cmd.start) };
}

/**
 * NVSHMEM 3.4's combined static library: `nvshmem` (libnvshmem.a) compiles every host source a second time
 * next to nvshmem_host, about half of NVSHMEM's build, and nvshmem-info links it; both are installed by one
 * `TARGETS nvshmem nvshmem_host nvshmem-info ...` line. AWS's NVSHMEM 3.5.7 branch has neither the library nor the line.
 */
export const NO_STATIC_LIB_VAR = 'NVSHMEM_EFA_NO_STATIC_LIB';
/** Why the library is left out: the patches' and the build report's reason. */
export const STATIC_LIB_WHY =
  "libnvshmem.a (NVSHMEM 3.4's combined static library) compiles every host source a second time, about half of NVSHMEM's build; DeepEP and the probe link libnvshmem_host.so and libnvshmem_device.a";
const INSTALL_LIBS_VAR = 'NVSHMEM_EFA_INSTALL_LIBS';
const STATIC_INSTALL_LINE = /^([ \t]*)TARGETS[ \t]+nvshmem[ \t]+nvshmem_host[ \t]+nvshmem-info(?=[ \t]|$)(.*)$/gm;
const PATCHED_INSTALL_LINE = new RegExp(`^[ \\t]*TARGETS[ \\t]+\\$\\{${INSTALL_LIBS_VAR}\\}(.*)$`, 'gm');

/** What follows nvshmem-info on the install line (in a pristine or an already patched file), or undefined when
 *  the file has no combined static library (or more than one such line, which the patch will not guess at). */
export function staticLibInstallTail(src: string): string | undefined {
  const tails = [...src.matchAll(STATIC_INSTALL_LINE)].map((m) => m[2]!);
  const patched = [...src.matchAll(PATCHED_INSTALL_LINE)].map((m) => m[1]!);
  const all = [...tails, ...patched];
  return all.length === 1 ? all[0] : undefined;
}

export function staticLibSpecs(tail: string): PatchSpec[] {
  const why = STATIC_LIB_WHY;
  return [
    {
      kind: 'insert',
      id: 'nvshmem-static-lib-switch',
      file: SRC_CMAKE,
      parse: 'cmake',
      style: 'hash',
      anchor: 'after target_link_libraries(nvshmem-info ...)',
      why,
      lines: [
        `# nvshmem-efa build sets ${NO_STATIC_LIB_VAR} unless given --nvshmem-static; unset, this is NVSHMEM's own build.`,
        `if(${NO_STATIC_LIB_VAR})`,
        '  set_target_properties(nvshmem nvshmem-info PROPERTIES EXCLUDE_FROM_ALL ON)',
        `  set(${INSTALL_LIBS_VAR} nvshmem_host)`,
        'else()',
        `  set(${INSTALL_LIBS_VAR} nvshmem nvshmem_host nvshmem-info)`,
        'endif()',
      ],
      footprint: [new RegExp(`^[ \\t]*if[ \\t]*\\([ \\t]*${NO_STATIC_LIB_VAR}[ \\t]*\\)`, 'm')],
      locate: (doc) => afterTargetLink(doc, 'nvshmem-info'),
    },
    {
      kind: 'replace',
      id: 'nvshmem-static-lib-install',
      file: SRC_CMAKE,
      parse: 'cmake',
      style: 'hash',
      anchor: 'the line TARGETS nvshmem nvshmem_host nvshmem-info ... of install()',
      why,
      lines: [`# replaced TARGETS nvshmem nvshmem_host nvshmem-info: the libraries ${NO_STATIC_LIB_VAR} chose`, `TARGETS \${${INSTALL_LIBS_VAR}}${tail}`],
      footprint: [PATCHED_INSTALL_LINE],
      locate(doc) {
        const hits = [...doc.src.matchAll(STATIC_INSTALL_LINE)];
        if (hits.length !== 1) return { refuse: `expected one install() line TARGETS nvshmem nvshmem_host nvshmem-info ..., found ${hits.length}` };
        const m = hits[0]!;
        const inInstall = doc.cmake!.some((c) => c.name === 'install' && c.start < m.index! && m.index! < c.end);
        if (!inInstall) return { refuse: `TARGETS nvshmem nvshmem_host nvshmem-info at line ${lineOf(doc.src, m.index!)} is not inside install()` };
        return { start: m.index!, end: afterLine(doc.src, m.index!), indent: m[1]! };
      },
    },
  ];
}

function templateSources(t: Template, fromDir: string): string[] {
  return t.manifest.sources.map((s) => path.posix.relative(fromDir, `${t.manifest.destination}/${s}`));
}

export function cmakeSpecs(t: Template): InsertSpec[] {
  const why =
    'compiles the EFA GDA transport into nvshmem_transport_libfabric (CUDA headers; the driver itself is dlopen()ed so the transport still loads where GDA cannot run) and installs the GDA device headers';
  const installDir = t.manifest.installHeaders.map((f) => path.posix.relative('src', `${t.manifest.destination}/${f}`));
  const body = (fromDir: string) => [
    `target_sources(${TARGET} PRIVATE ${templateSources(t, fromDir).join(' ')})`,
    `target_link_libraries(${TARGET} PRIVATE CUDA::toolkit \${CMAKE_DL_LIBS})`,
  ];
  // The template's sources added to the transport: in no CMake file but one we patched.
  const addsSources = (fromDir: string) => [
    new RegExp(`\\btarget_sources\\s*\\(\\s*${TARGET}\\s+PRIVATE\\s+${escapeRe(templateSources(t, fromDir)[0]!)}(?=[\\s)])`),
  ];
  // OPTIONAL: efa_io_defs.h is vendored only when its pinned copy could be had (third_party/efa_gda).
  const install = [
    `install(FILES ${installDir.map((f) => `\${CMAKE_CURRENT_SOURCE_DIR}/${f}`).join(' ')}`,
    `        DESTINATION ${t.manifest.installDir} OPTIONAL)`,
  ];
  const transportDir = 'src/modules/transport';
  const exported = [...t.manifest.headers, ...t.manifest.sources].map((f) =>
    path.posix.relative(transportDir, `${t.manifest.destination}/${f}`),
  );
  return [
    {
      kind: 'insert',
      id: 'efa-gda-cmake',
      file: SRC_CMAKE,
      parse: 'cmake',
      style: 'hash',
      anchor: `after target_link_libraries(${TARGET} ...)`,
      why,
      lines: [...body('src'), ...install],
      footprint: addsSources('src'),
      locate: afterTargetLink,
    },
    {
      kind: 'insert',
      id: 'efa-gda-cmake-exports',
      file: SRC_CMAKE,
      parse: 'cmake',
      style: 'hash',
      anchor: 'set(TRANSPORT_EXPORTS ...) after libfabric/libfabric.h',
      why: 'ships the EFA GDA sources with the transport-plugin sources NVSHMEM installs, so the module build (CMakeLists.txt.in) finds them',
      lines: exported,
      footprint: exported.map(wholeLine),
      locate(doc) {
        const sets = commandsFor(doc, 'set', 'TRANSPORT_EXPORTS');
        if (sets.length !== 1) return { refuse: `expected one set(TRANSPORT_EXPORTS ...), found ${sets.length}` };
        const arg = sets[0]!.args.find((a) => a.text === 'libfabric/libfabric.h');
        if (!arg) return { refuse: `set(TRANSPORT_EXPORTS ...) at line ${sets[0]!.line} does not list libfabric/libfabric.h` };
        if (doc.src.slice(arg.end, afterLine(doc.src, arg.end)).trim() !== '') {
          return { refuse: 'libfabric/libfabric.h is not alone on its line in set(TRANSPORT_EXPORTS ...)' };
        }
        return { offset: afterLine(doc.src, arg.end), indent: indentAt(doc.src, arg.start) };
      },
    },
    {
      kind: 'insert',
      id: 'efa-gda-cmake-module',
      file: MODULE_CMAKE,
      parse: 'cmake',
      style: 'hash',
      anchor: `after target_link_libraries(${TARGET} ...)`,
      why,
      lines: body('src/modules/transport/libfabric'),
      footprint: addsSources('src/modules/transport/libfabric'),
      locate: afterTargetLink,
    },
    {
      kind: 'insert',
      id: 'efa-gda-symbols',
      file: SYMBOLS,
      parse: 'text',
      style: 'c',
      anchor: 'the global: list of the transport version script',
      why: `the version script hides every symbol not listed; ${t.manifest.exportPattern} must stay visible to dlsym`,
      lines: [`${t.manifest.exportPattern};`],
      footprint: [wholeLine(`${t.manifest.exportPattern};`)],
      locate(doc) {
        const m = /^([ \t]*)global:[^\n]*\n/m.exec(doc.src);
        if (!m) return { refuse: 'no `global:` line' };
        if (!/;\s*$/.test(m[0])) return { refuse: 'the `global:` line does not end with a complete symbol entry' };
        return { offset: m.index + m[0].length, indent: m[1]! };
      },
    },
  ];
}
