import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { NVSHMEM_BUILD_OUTPUTS } from '../../src/core/nvshmem-tree.ts';
import { BIN, ENV, IO_DEFS, LOCK } from '../helpers/cli.ts';
import type { Case, Sandbox } from './runner.ts';

/**
 * Issue 36, classes 1 and 3: the bytes, owners and modes of the user's files are kept exactly (a patch changes
 * only the bytes of its edits, whatever the encoding and line ends around them), and nothing the tool writes
 * goes through a link (a symbolic or hard link in place of a log, the state, the report, a marker, an exported
 * patch or a staged file is replaced, never written through).
 */

const D = ['--efa-io-defs', IO_DEFS];
const patch = (src: string, work: string, ...more: string[]) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline', ...D, ...more];
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const SRC_CMAKE = 'src/CMakeLists.txt';
const INIT_CU = 'src/host/init/init.cu';
const NOBODY = 65534;

/** A run of the CLI that lays out a case; it must succeed. */
function cli(args: string[], env: NodeJS.ProcessEnv = {}): void {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...env } });
  if (r.status !== 0) throw new Error(`setup: nvshmem-efa ${args[0]} exited ${r.status}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`);
}

/** Every regular file below `dir`, relative, sorted. */
function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.name === '.git') continue;
      if (e.isDirectory()) walk(path.join(d, e.name), path.join(rel, e.name));
      else if (e.isFile()) out.push(path.join(rel, e.name));
    }
  };
  walk(dir, '');
  return out;
}

/** How a comment line starts in this file, or undefined for files left alone (linker scripts, data). */
function commentOf(rel: string): string | undefined {
  if (/(^|\/)CMakeLists\.txt(\.in)?$|\.cmake$|\.py$/.test(rel)) return '#';
  if (/\.(c|cc|cpp|cu|cuh|h|hpp)(\.in)?$/.test(rel)) return '//';
  return undefined;
}

/** Each empty line of every source file below `dir` becomes a comment line holding `payload` (bytes). */
function commentBlankLines(dir: string, payload: Buffer): void {
  for (const rel of files(dir)) {
    const c = commentOf(rel);
    if (!c) continue;
    const f = path.join(dir, rel);
    const b = readFileSync(f);
    const parts: Buffer[] = [];
    let from = 0;
    for (let i = b.indexOf('\n\n'); i !== -1; i = b.indexOf('\n\n', from)) {
      parts.push(b.subarray(from, i + 1), Buffer.from(`${c} `), payload);
      from = i + 1;
    }
    parts.push(b.subarray(from));
    writeFileSync(f, Buffer.concat(parts));
  }
}

const PLACEHOLDER = Buffer.from('nvshmem-efa-campaign-placeholder');
/** Latin-1 (©, é) and bytes that are no UTF-8 at all: a lone continuation byte, a cut sequence, an encoded surrogate. */
const LATIN1 = Buffer.from([0xa9, 0x20, 0x32, 0x30, 0x32, 0x34, 0x20, 0x63, 0x61, 0x66, 0xe9]);
const INVALID = Buffer.from([0x80, 0x20, 0xe2, 0x82, 0x20, 0xed, 0xa0, 0x80, 0x20, 0xff, 0xfe]);

function replaceAll(b: Buffer, from: Buffer, to: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (let i = b.indexOf(from); i !== -1; i = b.indexOf(from, at)) {
    parts.push(b.subarray(at, i), to);
    at = i + from.length;
  }
  parts.push(b.subarray(at));
  return Buffer.concat(parts);
}

/**
 * Twin trees: `odd` with `payload` in a comment line in place of each blank line, `twin` with an ASCII placeholder
 * there, patched cleanly by `patchTwin` during setup. `check(patched)` then says whether the odd tree, once
 * patched, is byte for byte the patched twin with the placeholder put back as the payload: every byte outside
 * the patch's edits kept, whatever it is.
 */
function twins(s: Sandbox, payload: Buffer, make: (rel: string) => string, patchTwin: (twin: string) => void) {
  const odd = make('odd');
  const twin = make('twin');
  commentBlankLines(odd, payload);
  commentBlankLines(twin, PLACEHOLDER);
  patchTwin(twin);
  return {
    odd,
    twin,
    /** `generated`: files a build writes into the tree (NVSHMEM's version.txt), not compared. */
    check(patched = odd, generated: readonly string[] = []): string | undefined {
      const got = files(patched).filter((f) => !generated.includes(f));
      const want = files(twin);
      if (got.join('\n') !== want.join('\n')) return `the patched tree has other files than its twin: ${got.filter((f) => !want.includes(f)).concat(want.filter((f) => !got.includes(f))).slice(0, 3).join(', ')}`;
      for (const rel of want) {
        const exp = replaceAll(readFileSync(path.join(twin, rel)), PLACEHOLDER, payload);
        const b = readFileSync(path.join(patched, rel));
        if (!b.equals(exp)) {
          let i = 0;
          while (i < b.length && b[i] === exp[i]) i++;
          return `${rel}: bytes differ from offset ${i} (found ${JSON.stringify(b.subarray(i, i + 12).toString('latin1'))}, expected ${JSON.stringify(exp.subarray(i, i + 12).toString('latin1'))})`;
        }
      }
      return undefined;
    },
  };
}

/** Rewrites each listed file of `dir` through `f` (bytes in, bytes out). */
function rewrite(dir: string, rels: readonly string[], f: (b: Buffer) => Buffer): void {
  for (const rel of rels) writeFileSync(path.join(dir, rel), f(readFileSync(path.join(dir, rel))));
}

/** The files a patch of the v3.4-like tree edits (besides those it creates). */
const EDITED = [
  'nvshmem_transport.sym', SRC_CMAKE, 'src/device/init/init_device.cu', INIT_CU, 'src/host/transport/transport.cpp',
  'src/include/non_abi/device/pt-to-pt/nvshmemi_transfer_api.cuh', 'src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in',
  'src/modules/transport/libfabric/CMakeLists.txt.in', LIBFABRIC_CPP,
];

/** A pristine tree and the same tree patched cleanly, to compare a variant's result with. */
function withReference(s: Sandbox) {
  const ref = s.nvshmem('reference');
  cli(patch(ref, s.p('reference-work'), '--in-place'));
  return ref;
}

/** Owner, group and mode of every entry below `dir` (what `--in-place` must keep), relative path first. */
function owners(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string, rel: string) => {
    const st = lstatSync(d);
    out.set(rel || '.', `${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`);
    if (st.isDirectory()) for (const n of readdirSync(d)) walk(path.join(d, n), rel ? `${rel}/${n}` : n);
  };
  walk(dir, '');
  return out;
}

const ownerOf = (p: string) => {
  const st = lstatSync(p);
  return `${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
};

/** Every entry below `dir` (the new ones too) owned by `uid:gid`, or what is not. */
function allOwnedBy(dir: string, uid: number, gid: number): string | undefined {
  const wrong = [...owners(dir)].filter(([, o]) => !o.startsWith(`${uid}:${gid} `));
  return wrong.length ? `not owned by ${uid}:${gid} after the patch: ${wrong.slice(0, 4).map(([p, o]) => `${p} (${o})`).join(', ')}${wrong.length > 4 ? `, … (${wrong.length})` : ''}` : undefined;
}

function expectOwner(p: string, want: string, label: string): string | undefined {
  const got = ownerOf(p);
  return got === want ? undefined : `${label}: ${got}, was ${want}`;
}

/** A file of the user's outside every tree: what a link planted by someone else points to. */
const victimOf = (s: Sandbox) => s.file('home/victim.txt', 'the user\'s own file: nothing may be written into it\n');

const bytesCases: Case[] = [
  {
    id: 'latin1-in-place', cls: 'bytes and owners', what: '--in-place on files with Latin-1 bytes (©, é) in comments: every byte outside the edits kept',
    setup: (s) => {
      const t = twins(s, LATIN1, (rel) => s.nvshmem(rel), (twin) => cli(patch(twin, s.p('w-twin'), '--in-place')));
      return { runs: [{ args: patch(t.odd, s.p('w'), '--in-place'), exit: 0 }], check: () => t.check() };
    },
  },
  {
    id: 'invalid-utf8-in-place', cls: 'bytes and owners', what: '--in-place on files with bytes that are no UTF-8 (a lone continuation byte, a cut sequence, 0xff)',
    setup: (s) => {
      const t = twins(s, INVALID, (rel) => s.nvshmem(rel), (twin) => cli(patch(twin, s.p('w-twin'), '--in-place')));
      return { runs: [{ args: patch(t.odd, s.p('w'), '--in-place'), exit: 0 }], check: () => t.check() };
    },
  },
  {
    id: 'latin1-copy-mode', cls: 'bytes and owners', what: "copy mode: the work dir's patched copy of a Latin-1 tree keeps every byte outside the edits",
    setup: (s) => {
      const t = twins(s, LATIN1, (rel) => s.nvshmem(rel), (twin) => cli(patch(twin, s.p('w-twin'), '--in-place')));
      return { runs: [{ args: patch(t.odd, s.p('w')), exit: 0 }], protect: [t.odd], check: () => t.check(s.p('w/sources/nvshmem')) };
    },
  },
  {
    id: 'latin1-export-applies', cls: 'bytes and owners', what: '--export of a Latin-1 tree: `git apply` of the export gives the bytes --in-place gives',
    setup: (s) => {
      const t = twins(s, LATIN1, (rel) => s.nvshmem(rel), (twin) => cli(patch(twin, s.p('w-twin'), '--in-place')));
      return {
        runs: [{ args: patch(t.odd, s.p('w'), '--export', s.p('e')), exit: 0 }],
        protect: [t.odd],
        check: () => {
          const applied = s.p('applied');
          cpSync(t.odd, applied, { recursive: true });
          const dir = s.p('e/nvshmem');
          const patches = readdirSync(dir).filter((n) => n.endsWith('.patch')).sort().map((n) => path.join(dir, n));
          const r = spawnSync('git', ['apply', ...patches], { cwd: applied, encoding: 'utf8' });
          if (r.status !== 0) return `git apply of the export fails: ${r.stderr.trim().split('\n')[0]}`;
          return t.check(applied);
        },
      };
    },
  },
  {
    id: 'latin1-untouched-file', cls: 'bytes and owners', what: 'a Latin-1 file the patch does not edit, --in-place and in the copy',
    setup: (s) => {
      const src = s.nvshmem();
      const f = path.join(src, 'src/host/latin1-notes.cpp');
      writeFileSync(f, Buffer.concat([Buffer.from('// '), LATIN1, Buffer.from('\r\nint x;\n'), INVALID]));
      return {
        runs: [{ args: patch(src, s.p('w')), exit: 0 }, { args: patch(src, s.p('w2'), '--in-place'), exit: 0 }],
        protect: [f],
        check: () => (readFileSync(s.p('w/sources/nvshmem/src/host/latin1-notes.cpp')).equals(readFileSync(f)) ? undefined : "the work dir's copy of the Latin-1 file differs from it"),
      };
    },
  },
  {
    id: 'latin1-deepep-in-place', cls: 'bytes and owners', what: '--in-place on a DeepEP tree with Latin-1 bytes in comments',
    setup: (s) => {
      const src = s.nvshmem();
      const t = twins(s, LATIN1, (rel) => s.deepep(rel), (twin) => cli(patch(src, s.p('w-twin'), '--deepep-src', twin, '--in-place')));
      return { runs: [{ args: patch(s.nvshmem('nvshmem-2'), s.p('w'), '--deepep-src', t.odd, '--in-place'), exit: 0 }], check: () => t.check() };
    },
  },
  {
    id: 'latin1-build-in-place', cls: 'bytes and owners', what: '`build --in-place` (fake toolchain) on a Latin-1 tree: the bytes outside the edits kept',
    setup: (s) => {
      const t = twins(s, LATIN1, (rel) => s.nvshmem(rel), (twin) => cli(patch(twin, s.p('w-twin'), '--in-place')));
      return { runs: [{ args: s.buildArgs(t.odd, s.p('w'), ['--in-place']), env: s.toolchain().env, exit: 0 }], check: () => t.check(t.odd, NVSHMEM_BUILD_OUTPUTS) };
    },
  },
  {
    id: 'latin1-dry-run', cls: 'bytes and owners', what: '`patch --dry-run` of a tree with bytes that are no UTF-8: a diff, nothing written',
    setup: (s) => {
      const src = s.nvshmem();
      commentBlankLines(src, INVALID);
      return { runs: [{ args: patch(src, s.p('w'), '--dry-run'), exit: 0, stdout: /^diff --git a\// }], protect: [src] };
    },
  },
  {
    id: 'crlf-in-place', cls: 'bytes and owners', what: '--in-place on CRLF files: CRLF kept, the inserted lines end in CRLF too',
    setup: (s) => {
      const ref = withReference(s);
      const src = s.nvshmem();
      rewrite(src, EDITED, (b) => replaceAll(b, Buffer.from('\n'), Buffer.from('\r\n')));
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }, { args: patch(src, s.p('w'), '--in-place'), exit: 0, stdout: /^(?![\s\S]*\bapplied\s)/ }],
        check: () => {
          for (const rel of EDITED) {
            const want = replaceAll(readFileSync(path.join(ref, rel)), Buffer.from('\n'), Buffer.from('\r\n'));
            if (!readFileSync(path.join(src, rel)).equals(want)) return `${rel} is not the cleanly patched file with CRLF line ends`;
          }
          return undefined;
        },
      };
    },
  },
  {
    id: 'crlf-export-applies', cls: 'bytes and owners', what: '--export of a CRLF tree: `git apply` of the export gives the bytes --in-place gives',
    setup: (s) => {
      const crlf = (rel: string) => {
        const t = s.nvshmem(rel);
        rewrite(t, EDITED, (b) => replaceAll(b, Buffer.from('\n'), Buffer.from('\r\n')));
        return t;
      };
      const src = crlf('nvshmem');
      const inPlace = crlf('in-place');
      cli(patch(inPlace, s.p('w-in-place'), '--in-place'));
      return {
        runs: [{ args: patch(src, s.p('w'), '--export', s.p('e')), exit: 0 }],
        protect: [src],
        check: () => {
          const applied = s.p('applied');
          cpSync(src, applied, { recursive: true });
          const dir = s.p('e/nvshmem');
          const r = spawnSync('git', ['apply', ...readdirSync(dir).filter((n) => n.endsWith('.patch')).sort().map((n) => path.join(dir, n))], { cwd: applied, encoding: 'utf8' });
          if (r.status !== 0) return `git apply of the export fails: ${r.stderr.trim().split('\n')[0]}`;
          return EDITED.find((rel) => !readFileSync(path.join(applied, rel)).equals(readFileSync(path.join(inPlace, rel))));
        },
      };
    },
  },
  {
    id: 'bom-in-place', cls: 'bytes and owners', what: '--in-place on files that start with a UTF-8 byte order mark',
    setup: (s) => {
      const ref = withReference(s);
      const src = s.nvshmem();
      const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
      rewrite(src, EDITED, (b) => Buffer.concat([BOM, b]));
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        check: () => EDITED.find((rel) => !readFileSync(path.join(src, rel)).equals(Buffer.concat([BOM, readFileSync(path.join(ref, rel))]))),
      };
    },
  },
  {
    id: 'no-final-newline', cls: 'bytes and owners', what: '--in-place on files without a final newline: no inserted line glued to the last one',
    setup: (s) => {
      const ref = withReference(s);
      const src = s.nvshmem();
      rewrite(src, EDITED, (b) => b.subarray(0, b.lastIndexOf('\n')));
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        check: () => {
          for (const rel of EDITED) {
            const got = readFileSync(path.join(src, rel), 'latin1');
            const want = readFileSync(path.join(ref, rel), 'latin1');
            // Kept without its final newline, or given one where a block now follows the last line.
            if (got !== want && `${got}\n` !== want) return `${rel} is neither the cleanly patched file nor it without its final newline`;
          }
          return undefined;
        },
      };
    },
  },
  {
    id: 'owner-kept-in-place', cls: 'bytes and owners', what: "--in-place as root on a tree owned by nobody: every patched and created file and directory keeps the tree's owner",
    setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, src]);
      return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }], check: () => allOwnedBy(src, NOBODY, NOBODY) };
    },
  },
  {
    id: 'in-place-as-owner', cls: 'bytes and owners', what: '--in-place run by the tree\'s owner (nobody, not root): patched, every file still its own, modes kept',
    setup: (s) => {
      const src = s.nvshmem();
      chmodSync(path.join(src, LIBFABRIC_CPP), 0o640);
      execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, src]);
      mkdirSync(s.p('w'));
      chownSync(s.p('w'), NOBODY, NOBODY);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), asNobody: true, exit: 0 }],
        check: () => allOwnedBy(src, NOBODY, NOBODY) ?? expectOwner(path.join(src, LIBFABRIC_CPP), `${NOBODY}:${NOBODY} 640`, LIBFABRIC_CPP),
      };
    },
  },
  {
    id: 'owners-mixed-kept', cls: 'bytes and owners', what: '--in-place as root: each patched file keeps its own owner and group (1234:2345, nobody:users)',
    setup: (s) => {
      const src = s.nvshmem();
      chownSync(path.join(src, LIBFABRIC_CPP), 1234, 2345);
      chownSync(path.join(src, SRC_CMAKE), NOBODY, 100);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        check: () => expectOwner(path.join(src, LIBFABRIC_CPP), '1234:2345 644', LIBFABRIC_CPP) ?? expectOwner(path.join(src, SRC_CMAKE), `${NOBODY}:100 644`, SRC_CMAKE),
      };
    },
  },
  {
    id: 'modes-kept', cls: 'bytes and owners', what: '--in-place keeps modes 0640, 0755 and 0600 of the files it patches',
    setup: (s) => {
      const src = s.nvshmem();
      const want: [string, number][] = [[LIBFABRIC_CPP, 0o640], [SRC_CMAKE, 0o755], [INIT_CU, 0o600]];
      for (const [rel, m] of want) chmodSync(path.join(src, rel), m);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        check: () => want.map(([rel, m]) => expectOwner(path.join(src, rel), `0:0 ${m.toString(8)}`, rel)).find(Boolean),
      };
    },
  },
  {
    id: 'setgid-file-owner', cls: 'bytes and owners', what: '--in-place as root on a file owned by nobody with mode 2775: owner first, then the mode (chown clears set-id bits)',
    setup: (s) => {
      const src = s.nvshmem();
      const f = path.join(src, INIT_CU);
      chownSync(f, NOBODY, NOBODY);
      chmodSync(f, 0o2775);
      return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }], check: () => expectOwner(f, `${NOBODY}:${NOBODY} 2775`, INIT_CU) };
    },
  },
  {
    id: 'setgid-dir-created', cls: 'bytes and owners', what: '--in-place as root in setgid directories of group users: created files and directories get the directory\'s owner and group',
    setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chown', ['-R', `${NOBODY}:100`, src]);
      execFileSync('find', [src, '-type', 'd', '-exec', 'chmod', 'g+s', '{}', '+']);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        check: () => allOwnedBy(src, NOBODY, 100) ?? expectOwner(path.join(src, 'src/modules/transport/libfabric/efa_gda'), `${NOBODY}:100 2755`, 'the created efa_gda/'),
      };
    },
  },
  {
    id: 'owner-after-sigkill', cls: 'bytes and owners', what: 'a tree owned by nobody, --in-place killed after 2 renames, then completed by a rerun: owners kept',
    setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, src]);
      return {
        runs: [
          { args: patch(src, s.p('w'), '--in-place'), env: { NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES: '2' }, exit: 137 },
          { args: patch(src, s.p('w'), '--in-place'), exit: 0 },
        ],
        check: () => allOwnedBy(src, NOBODY, NOBODY),
      };
    },
  },
  {
    id: 'owner-after-rollback', cls: 'bytes and owners', what: 'a killed --in-place rolled back (a staged file gone): the restored files keep owner, group and mode',
    setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, src]);
      chmodSync(path.join(src, LIBFABRIC_CPP), 0o640);
      const before = owners(src);
      return {
        runs: [
          { args: patch(src, s.p('w'), '--in-place'), env: { NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES: '3' }, exit: 137 },
          // The first staged file still there goes: the next run must roll back, not complete.
          { args: ['doctor', '--nvshmem-src', src], exit: 1, reportOnly: true },
        ],
        check: () => {
          const staged = files(src).filter((f) => f.endsWith('.nvshmem-efa-new'));
          if (!staged.length) return 'no staged file left to remove (the kill came too late)';
          unlinkSync(path.join(src, staged[0]!));
          const r = spawnSync(process.execPath, [BIN, ...patch(src, s.p('w'), '--in-place')], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
          if (!/rolled it back/.test(r.stderr)) return `the rerun did not roll back (exit ${r.status}): ${r.stderr.split('\n').filter((l) => /^(error|fix):|rolled|completed/.test(l)).join(' | ').slice(0, 200)}`;
          const after = owners(src);
          const wrong = [...before].filter(([p, o]) => after.has(p) && after.get(p) !== o);
          return wrong.length ? `owner, group or mode changed: ${wrong.slice(0, 3).map(([p, o]) => `${p} ${after.get(p)}, was ${o}`).join(', ')}` : undefined;
        },
      };
    },
  },
  {
    id: 'copy-keeps-modes', cls: 'bytes and owners', what: "copy mode: the work dir's copy keeps 0755 and 0600 files and a 0700 directory's privacy, drops set-id bits",
    setup: (s) => {
      const src = s.nvshmem();
      const script = s.file('nvshmem/scripts/run.sh', '#!/bin/sh\n');
      chmodSync(script, 0o755);
      chmodSync(s.file('nvshmem/private/secret.h', '// mine\n'), 0o600);
      chmodSync(s.p('nvshmem/private'), 0o700);
      chmodSync(s.file('nvshmem/scripts/suid', '#!/bin/sh\n'), 0o4755);
      return {
        runs: [{ args: patch(src, s.p('w')), exit: 0 }],
        protect: [src],
        check: () => {
          const c = s.p('w/sources/nvshmem');
          const m = (rel: string) => (statSync(path.join(c, rel)).mode & 0o7777).toString(8);
          const got = { 'scripts/run.sh': m('scripts/run.sh'), 'private/secret.h': m('private/secret.h'), private: m('private'), 'scripts/suid': m('scripts/suid') };
          const want = { 'scripts/run.sh': '755', 'private/secret.h': '600', private: '700', 'scripts/suid': '755' };
          return JSON.stringify(got) === JSON.stringify(want) ? undefined : `modes in the copy ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`;
        },
      };
    },
  },
];

/** Plants `how` (a hard or symbolic link to `victim`) at `at`, replacing what is there. */
function plant(how: 'hard' | 'sym', victim: string, at: string): void {
  rmSync(at, { force: true });
  mkdirSync(path.dirname(at), { recursive: true });
  if (how === 'hard') linkSync(victim, at);
  else symlinkSync(victim, at);
}

/** A build whose NVSHMEM step runs (its stamp is gone) with `how` links in place of every build step's log. */
function linkedBuildLogs(how: 'hard' | 'sym'): Case {
  return {
    id: `log-${how === 'hard' ? 'hardlink' : 'symlink'}-build`, cls: 'links in the work dir', what: `\`build\` with each step's log a ${how === 'hard' ? 'hard' : 'symbolic'} link to a user's file`,
    setup: (s) => {
      const victim = victimOf(s);
      const src = s.nvshmem();
      const w = s.p('w');
      cli(patch(src, w));
      for (const step of ['get-nvshmem', 'vendor-efa-io-defs', 'patch-nvshmem', 'build-nvshmem', 'detect-environment', 'probe']) plant(how, victim, path.join(w, 'logs', `${step}.log`));
      return { runs: [{ args: s.buildArgs(src, w), env: s.toolchain().env, exit: 0 }], protect: [victim, src], check: () => (statSync(path.join(w, 'logs/build-nvshmem.log')).size > 0 ? undefined : 'the build log is empty') };
    },
  };
}

/** A work dir made by `patch`, then `name` in it replaced by a `how` link to a user's file, then `patch` again (it rewrites `name`). */
/** `refused`: the rerun refuses the work dir instead (a state.json that is a symbolic link is someone else's: item 4),
 * which writes through nothing either; the link is then left where it is. */
function linkedRunFile(name: string, how: 'hard' | 'sym', refused?: RegExp): Case {
  return {
    id: `${name.replace(/^\./, '').replace(/[^a-z0-9]+/gi, '-')}-${how === 'hard' ? 'hardlink' : 'symlink'}`.replace(/-+/g, '-').toLowerCase(), cls: 'links in the work dir',
    what: `${name} in the work dir a ${how === 'hard' ? 'hard' : 'symbolic'} link to a user's file, then a rerun that rewrites it`,
    setup: (s) => {
      const src = s.nvshmem();
      const w = s.p('w');
      cli(patch(src, w));
      // The user's file holds what was there, so that reading through the link finds the tool's own content.
      const victim = s.file('home/victim', readFileSync(path.join(w, name), 'utf8'));
      plant(how, victim, path.join(w, name));
      // A changed source: every step runs again and rewrites the state, the report and the marker.
      writeFileSync(path.join(src, 'README.extra'), 'changed\n');
      if (refused) return { runs: [{ args: patch(src, w), exit: 6, stderr: refused }], protect: [victim, src] };
      return {
        runs: [{ args: patch(src, w), exit: 0 }],
        protect: [victim, src],
        check: () => (lstatSync(path.join(w, name)).isSymbolicLink() ? `${name} is still a link` : undefined),
      };
    },
  };
}

const linkCases: Case[] = [
  linkedBuildLogs('hard'),
  linkedBuildLogs('sym'),
  {
    id: 'log-fifo-build', cls: 'links in the work dir', what: '`build` with a FIFO in place of its NVSHMEM log: replaced, no hang',
    setup: (s) => {
      const src = s.nvshmem();
      const w = s.p('w');
      cli(patch(src, w));
      execFileSync('mkfifo', [path.join(w, 'logs/build-nvshmem.log')]);
      return { runs: [{ args: s.buildArgs(src, w), env: s.toolchain().env, exit: 0, timeoutMs: 60_000 }], check: () => (statSync(path.join(w, 'logs/build-nvshmem.log')).isFile() ? undefined : 'the log is not a regular file') };
    },
  },
  {
    id: 'log-hardlink-rebuild', cls: 'links in the work dir', what: 'a second `build` (--force) after the log was hard-linked to a user\'s file',
    setup: (s) => {
      const src = s.nvshmem();
      const w = s.p('w');
      cli(s.buildArgs(src, w), s.toolchain().env);
      const victim = victimOf(s);
      plant('hard', victim, path.join(w, 'logs/build-nvshmem.log'));
      return { runs: [{ args: s.buildArgs(src, w, ['--force']), env: s.toolchain().env, exit: 0 }], protect: [victim, src] };
    },
  },
  {
    id: 'logs-dir-symlink', cls: 'links in the work dir', what: "logs/ a symbolic link to a user's folder: refused before anything is written",
    setup: (s) => {
      const src = s.nvshmem();
      const w = s.p('w');
      cli(patch(src, w));
      victimOf(s);
      s.file('home/build-nvshmem.log', 'the user\'s notes\n');
      rmSync(path.join(w, 'logs'), { recursive: true, force: true });
      symlinkSync(s.p('home'), path.join(w, 'logs'));
      return { runs: [{ args: s.buildArgs(src, w), env: s.toolchain().env, exit: 2, stderr: /logs is a symbolic link/ }], protect: [s.p('home'), src] };
    },
  },
  linkedRunFile('state.json', 'hard'),
  linkedRunFile('state.json', 'sym', /state\.json is a symbolic link \(to [^)]*victim\)/),
  linkedRunFile('report.md', 'hard'),
  linkedRunFile('report.json', 'sym'),
  linkedRunFile('.nvshmem-efa-workdir.json', 'hard'),
  {
    id: 'export-patch-hardlink', cls: 'links in the work dir', what: "an exported patch hard-linked to a user's file, then a second export",
    setup: (s) => {
      const src = s.nvshmem();
      cli(patch(src, s.p('w'), '--export', s.p('e')));
      const victim = victimOf(s);
      const first = readdirSync(s.p('e/nvshmem')).find((n) => n.endsWith('.patch'))!;
      plant('hard', victim, s.p('e/nvshmem', first));
      plant('hard', victim, s.p('e/nvshmem/series'));
      return { runs: [{ args: patch(src, s.p('w'), '--export', s.p('e')), exit: 0 }], protect: [victim, src], check: () => (readFileSync(s.p('e/nvshmem/series'), 'utf8').includes(first) ? undefined : 'the second export has no series') };
    },
  },
  {
    id: 'export-marker-hardlink', cls: 'links in the work dir', what: "the export's marker hard-linked to a user's file, then a second export",
    setup: (s) => {
      const src = s.nvshmem();
      cli(patch(src, s.p('w'), '--export', s.p('e')));
      const victim = s.file('home/victim.json', readFileSync(s.p('e/.nvshmem-efa-export.json'), 'utf8'));
      plant('hard', victim, s.p('e/.nvshmem-efa-export.json'));
      return { runs: [{ args: patch(src, s.p('w'), '--export', s.p('e')), exit: 0 }], protect: [victim, src] };
    },
  },
  {
    id: 'staged-symlink-in-place', cls: 'links in the work dir', what: "--in-place with libfabric.cpp's staged name a symbolic link to a user's file outside the tree",
    setup: (s) => {
      const src = s.nvshmem();
      const ref = withReference(s);
      const victim = victimOf(s);
      plant('sym', victim, path.join(src, `${LIBFABRIC_CPP}.nvshmem-efa-new`));
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }],
        protect: [victim],
        check: () => {
          const f = path.join(src, LIBFABRIC_CPP);
          if (lstatSync(f).isSymbolicLink()) return `${LIBFABRIC_CPP} became a symbolic link`;
          return readFileSync(f).equals(readFileSync(path.join(ref, LIBFABRIC_CPP))) ? undefined : `${LIBFABRIC_CPP} is not the cleanly patched file`;
        },
      };
    },
  },
  {
    id: 'staged-hardlink-in-place', cls: 'links in the work dir', what: "--in-place with CMakeLists.txt's staged name a hard link to a user's file",
    setup: (s) => {
      const src = s.nvshmem();
      const victim = victimOf(s);
      plant('hard', victim, path.join(src, `${SRC_CMAKE}.nvshmem-efa-new`));
      return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 0 }], protect: [victim] };
    },
  },
  {
    id: 'staged-symlink-copy-mode', cls: 'links in the work dir', what: "copy mode with a staged name in the source tree a symbolic link: copied as a file, the user's file untouched",
    setup: (s) => {
      const src = s.nvshmem();
      const victim = victimOf(s);
      // Inside the tree, so the copy follows it (it copies what links point to): the copy's staged name is a file of its own.
      const inTree = s.file('nvshmem/notes/victim.txt', 'inside the tree\n');
      plant('sym', inTree, path.join(src, `${LIBFABRIC_CPP}.nvshmem-efa-new`));
      return { runs: [{ args: patch(src, s.p('w')), exit: 0 }], protect: [victim, src] };
    },
  },
  {
    id: 'rollback-tmp-symlink', cls: 'links in the work dir', what: "a killed --in-place rolled back with each file's restore name a symbolic link to a user's file",
    setup: (s) => {
      const src = s.nvshmem();
      const victim = victimOf(s);
      const was = readFileSync(victim);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place'), env: { NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES: '3' }, exit: 137 }],
        check: () => {
          const staged = files(src).filter((f) => f.endsWith('.nvshmem-efa-new'));
          if (!staged.length) return 'no staged file left to remove (the kill came too late)';
          unlinkSync(path.join(src, staged[0]!));
          // The rollback puts each replaced file's old bytes at <file>.nvshmem-efa-old, then renames it back.
          for (const rel of EDITED) plant('sym', victim, path.join(src, `${rel}.nvshmem-efa-old`));
          const r = spawnSync(process.execPath, [BIN, ...patch(src, s.p('w'), '--in-place')], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
          if (!readFileSync(victim).equals(was)) return 'the rollback wrote into the user\'s file through a link';
          if (!/rolled it back/.test(r.stderr)) return `the rerun did not roll back (exit ${r.status})`;
          const left = EDITED.filter((rel) => existsSync(path.join(src, `${rel}.nvshmem-efa-old`)) || lstatSync(path.join(src, rel)).isSymbolicLink());
          return left.length ? `left behind or linked: ${left.join(', ')}` : undefined;
        },
      };
    },
  },
  {
    id: 'clean-hardlinked-log', cls: 'links in the work dir', what: "clean with a log hard-linked to a user's file: the link removed, the file kept",
    setup: (s) => {
      const w = s.p('w');
      cli(patch(s.nvshmem(), w));
      const victim = victimOf(s);
      plant('hard', victim, path.join(w, 'logs/patch-nvshmem.log'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [victim], check: () => (existsSync(path.join(w, 'logs')) ? 'clean left logs/' : undefined) };
    },
  },
];

export const bytesLinksCases: Case[] = [...bytesCases, ...linkCases];
