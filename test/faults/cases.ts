import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { BIN, ENV, IO_DEFS, LOCK } from '../helpers/cli.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';
import { killSignalCases } from './cases-kill-signals.ts';
import { digest, type Case, type Plan, type Sandbox } from './runner.ts';
import { identityWorkDirCases } from './cases-identity-workdirs.ts';
import { waitStreamRestCases } from './cases-waits-streams.ts';
import { bytesLinksCases } from './cases-bytes-links.ts';

/**
 * The fault campaign's cases, by class (issue 20): each is what a user, or an attacker on a shared node,
 * can do to a run, with the exit status the README's table gives and what must be left unchanged.
 * `patch --offline` needs no toolchain; `build` runs on the fake one (test/helpers/fake-toolchain.ts).
 */

const D = ['--efa-io-defs', IO_DEFS];
const patch = (src: string, work: string, ...more: string[]) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline', ...D, ...more];
const LIBFABRIC_CPP = 'src/modules/transport/libfabric/libfabric.cpp';
const MARKER = '.nvshmem-efa-workdir.json';
const EXPORT_MARKER = '.nvshmem-efa-export.json';

/** A run of the CLI that lays out a case (a work dir made by `patch`, a reference tree); it must succeed. */
function cliSync(args: string[]): void {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
  if (r.status !== 0) throw new Error(`setup: nvshmem-efa ${args[0]} exited ${r.status}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`);
}

/** Every file below `dir` whose name ends in `suffix` (stray staged files, backups). */
function strays(dir: string, re = /\.nvshmem-efa-(new|tmp|old|bak)/): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name));
      else if (re.test(e.name)) out.push(path.join(d, e.name));
    }
  };
  walk(dir);
  return out;
}

/** The tree an uninterrupted in-place patch produces from the same golden case. */
function cleanlyPatched(s: Sandbox, golden = 'v3.4-like'): string {
  const t = s.nvshmem(`reference-${golden}`, golden);
  cliSync([...patch(t, s.p('reference-work'), '--in-place')]);
  return t;
}

function sameTree(a: string, b: string): string | undefined {
  return digest(a) === digest(b) ? undefined : `${a} differs from a cleanly patched tree`;
}

const pathsCases: Case[] = [
  { id: 'src-missing', cls: 'paths', what: '--nvshmem-src names nothing', setup: (s) => ({ runs: [{ args: patch(s.p('nope'), s.p('w')), exit: 2, stderr: /--nvshmem-src .*does not exist/ }], check: () => (existsSync(s.p('w')) ? 'a work dir was made for a refused run' : undefined) }) },
  { id: 'src-file', cls: 'paths', what: '--nvshmem-src is a regular file', setup: (s) => ({ runs: [{ args: patch(s.file('f.txt'), s.p('w')), exit: 6, stderr: /--nvshmem-src .*not a directory/ }], protect: [s.p('f.txt')] }) },
  { id: 'src-empty-string', cls: 'paths', what: "--nvshmem-src ''", setup: (s) => ({ runs: [{ args: patch('', s.p('w')), exit: 2, stderr: /--nvshmem-src/ }], check: () => (existsSync(s.p('w', 'sources')) ? 'a clone or copy was attempted' : undefined) }) },
  { id: 'work-file', cls: 'paths', what: '--work-dir is a regular file', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.file('w')), exit: 6, stderr: /--work-dir .*not a directory/ }], protect: [s.p('w'), s.p('nvshmem')] }) },
  { id: 'work-under-file', cls: 'paths', what: '--work-dir below a regular file', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.file('f') + '/w'), exit: 6, stderr: /regular file|not a directory/ }], protect: [s.p('f'), s.p('nvshmem')] }) },
  { id: 'work-foreign', cls: 'paths', what: '--work-dir is a non-empty directory of the user', setup: (s) => { s.file('home/notes.txt'); return { runs: [{ args: patch(s.nvshmem(), s.p('home')), exit: 2, stderr: /not an nvshmem-efa work dir/ }], protect: [s.p('home'), s.p('nvshmem')] }; } },
  { id: 'deepep-file', cls: 'paths', what: '--deepep-src is a regular file', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--deepep-src', s.file('d')), exit: 6, stderr: /--deepep-src .*not a directory/ }], protect: [s.p('d'), s.p('nvshmem')] }) },
  { id: 'cuda-home-file', cls: 'paths', what: '--cuda-home is a regular file', setup: (s) => { const a = s.buildArgs(s.nvshmem(), s.p('w')); a[a.indexOf('--cuda-home') + 1] = s.file('cuda'); return { runs: [{ args: a, env: s.toolchain().env, exit: 6, stderr: /--cuda-home .*not a directory/ }], protect: [s.p('nvshmem')] }; } },
  { id: 'export-file', cls: 'paths', what: '--export is a regular file', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.file('e')), exit: 6, stderr: /--export .*not a directory/ }], protect: [s.p('e'), s.p('nvshmem')] }) },
  { id: 'odd-names', cls: 'paths', what: 'spaces, quotes and UTF-8 in every path', setup: (s) => ({ runs: [{ args: patch(s.nvshmem("my trees/nvshmem 'ü'"), s.p("work dir/é w")), exit: 0 }], protect: [s.p("my trees/nvshmem 'ü'")] }) },
  { id: 'efa-io-defs-missing', cls: 'paths', what: '--efa-io-defs names nothing', setup: (s) => ({ runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w'), '--offline', '--efa-io-defs', s.p('none.h')], exit: 2, stderr: /--efa-io-defs .*(no such file|does not exist)/ }] }) },
  { id: 'efa-io-defs-dir', cls: 'paths', what: '--efa-io-defs is a directory', setup: (s) => { mkdirSync(s.p('hdr')); return { runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w'), '--offline', '--efa-io-defs', s.p('hdr')], exit: 6, stderr: /--efa-io-defs .*(directory|not a regular file)/ }] }; } },
];

const symlinkCases: Case[] = [
  { id: 'link-out-of-tree', cls: 'symlinks', what: 'the source tree links to a directory outside it', setup: (s) => { const src = s.nvshmem(); s.file('elsewhere/x.h'); symlinkSync(s.p('elsewhere'), path.join(src, 'src/ext')); return { runs: [{ args: patch(src, s.p('w')), exit: 2, stderr: /outside the tree/ }], protect: [src, s.p('elsewhere')] }; } },
  { id: 'link-dangling', cls: 'symlinks', what: 'a dangling link in the source tree', setup: (s) => { const src = s.nvshmem(); symlinkSync(s.p('gone'), path.join(src, 'src/dangling.h')); return { runs: [{ args: patch(src, s.p('w')), exit: 2, stderr: /dangling/ }], protect: [src] }; } },
  { id: 'link-loop', cls: 'symlinks', what: 'a link loop in the source tree', setup: (s) => { const src = s.nvshmem(); symlinkSync('..', path.join(src, 'src/loop')); return { runs: [{ args: patch(src, s.p('w')), exit: 2, stderr: /loop/ }], protect: [src] }; } },
  { id: 'work-dir-is-link', cls: 'symlinks', what: '--work-dir is a link to a new directory', setup: (s) => { mkdirSync(s.p('real-w')); symlinkSync(s.p('real-w'), s.p('w')); return { runs: [{ args: patch(s.nvshmem(), s.p('w')), exit: 0 }], protect: [s.p('nvshmem')] }; } },
  {
    id: 'planted-source-link', cls: 'symlinks', what: "a link planted in the work dir in place of its NVSHMEM copy, to the user's tree (item 4)",
    setup: (s) => {
      const src = s.nvshmem();
      cliSync([...patch(src, s.p('w'))]);
      const victim = s.nvshmem('victim-tree');
      rmSync(s.p('w/sources/nvshmem'), { recursive: true, force: true });
      symlinkSync(victim, s.p('w/sources/nvshmem'));
      // The user's tree changes, so the copy step must run again (and must not patch through the link).
      writeFileSync(path.join(src, 'README.extra'), 'new\n');
      return { runs: [{ args: patch(src, s.p('w')), exit: 0 }], protect: [victim, src] };
    },
  },
  {
    id: 'planted-link-unchanged-src', cls: 'symlinks', what: 'a planted link to the user\'s tree and an unchanged source: the state is not trusted', setup: (s) => {
      const src = s.nvshmem();
      cliSync([...patch(src, s.p('w'))]);
      const victim = s.nvshmem('victim-tree');
      rmSync(s.p('w/sources/nvshmem'), { recursive: true, force: true });
      symlinkSync(victim, s.p('w/sources/nvshmem'));
      return { runs: [{ args: patch(src, s.p('w')), exit: 0 }], protect: [victim, src] };
    },
  },
  {
    id: 'clean-through-link', cls: 'symlinks', what: "clean with the work dir's downloads/ replaced by a link to the user's folder", setup: (s) => {
      cliSync([...patch(s.nvshmem(), s.p('w'))]);
      s.file('mine/archive.tar');
      rmSync(s.p('w/downloads'), { recursive: true, force: true });
      symlinkSync(s.p('mine'), s.p('w/downloads'));
      return { runs: [{ args: ['clean', '--work-dir', s.p('w')], exit: 0 }], protect: [s.p('mine')] };
    },
  },
];

const overlapCases: Case[] = [
  ...([['equal', (src: string) => src], ['inside', (src: string) => path.join(src, 'w')], ['containing', (src: string) => path.dirname(src)]] as const).map(([how, w]): Case => ({
    id: `work-${how}-src`, cls: 'overlap', what: `--work-dir ${how} --nvshmem-src`, setup: (s) => { const src = s.nvshmem('t/nvshmem'); return { runs: [{ args: patch(src, w(src)), exit: 2, stderr: /must not overlap/ }], protect: [s.p('t')] }; },
  })),
  { id: 'export-in-src', cls: 'overlap', what: '--export inside --nvshmem-src', setup: (s) => { const src = s.nvshmem(); return { runs: [{ args: patch(src, s.p('w'), '--export', path.join(src, 'patches')), exit: 2, stderr: /must not overlap/ }], protect: [src] }; } },
  { id: 'export-is-work', cls: 'overlap', what: '--export equal to --work-dir', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('w')), exit: 2, stderr: /must not overlap/ }], protect: [s.p('nvshmem')] }) },
  { id: 'deepep-is-nvshmem', cls: 'overlap', what: '--deepep-src equal to --nvshmem-src', setup: (s) => { const src = s.nvshmem(); return { runs: [{ args: patch(src, s.p('w'), '--deepep-src', src), exit: 2, stderr: /must not overlap/ }], protect: [src] }; } },
  { id: 'work-in-src-via-link', cls: 'overlap', what: '--work-dir inside the tree through a link', setup: (s) => { const src = s.nvshmem(); symlinkSync(src, s.p('alias')); return { runs: [{ args: patch(src, s.p('alias/w')), exit: 2, stderr: /must not overlap/ }], protect: [src] }; } },
  { id: 'overlap-grammar', cls: 'overlap', what: 'the overlap message reads as English', setup: (s) => { const src = s.nvshmem('t/nvshmem'); return { runs: [{ args: patch(src, s.p('t')), exit: 2, stderr: /^(?![\s\S]*is contains)[\s\S]*must not overlap/ }] }; } },
];

const readOnlyCases: Case[] = [
  { id: 'ro-in-place', cls: 'read-only', what: '--in-place on a read-only tree', setup: (s) => { const src = s.nvshmem(); s.readOnly(src); return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 6, stderr: /in-place/ }], protect: [src] }; } },
  { id: 'ro-source-copy', cls: 'read-only', what: 'a read-only tree in copy mode (it only reads it)', setup: (s) => { const src = s.nvshmem(); s.readOnly(src); return { runs: [{ args: patch(src, s.p('w')), exit: 0 }], protect: [src] }; } },
  { id: 'ro-work-parent', cls: 'read-only', what: '--work-dir under a read-only directory', setup: (s) => { mkdirSync(s.p('ro')); s.readOnly(s.p('ro')); return { runs: [{ args: patch(s.nvshmem(), s.p('ro/w')), exit: 6, stderr: /read-only/ }], protect: [s.p('nvshmem')] }; } },
  {
    id: 'ro-deepep-in-place', cls: 'read-only', what: '--in-place with a read-only DeepEP: NVSHMEM is not patched, or the message says it was', setup: (s) => {
      const src = s.nvshmem();
      const dp = s.deepep();
      s.readOnly(dp);
      return {
        runs: [{ args: patch(src, s.p('w'), '--in-place', '--deepep-src', dp), exit: 6, stderr: /nothing was changed|patched in place/ }],
        // NVSHMEM untouched: refused before it was patched in place.
        protect: [dp, src],
      };
    },
  },
];

const fullDiskCases: Case[] = [
  {
    id: 'full-work-disk', cls: 'full disk', what: 'the work dir on a full disk, then space freed (item 3: no lock left behind)', setup: (s) => {
      const src = s.nvshmem();
      const fs = s.tmpfs('small', 4096);
      s.fill(fs);
      return {
        runs: [
          { args: patch(src, path.join(fs, 'w')), exit: 6, stderr: new RegExp(`no space left on device[\\s\\S]*${fs.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`) },
          { args: ['clean', '--work-dir', path.join(fs, 'w'), '--dry-run'], exit: 0 },
        ],
        protect: [src],
        check: () => {
          rmSync(path.join(fs, '.filler'));
          const again = spawnSync(process.execPath, [BIN, ...patch(src, path.join(fs, 'w'))], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
          return again.status === 0 ? undefined : `after space was freed the rerun exits ${again.status}: ${again.stderr.split('\n').filter((l) => /^(error|fix):/.test(l)).join(' | ')}`;
        },
      };
    },
  },
  {
    id: 'full-source-disk-names-it', cls: 'full disk', what: 'a full disk elsewhere is not blamed on the source', setup: (s) => {
      const fs = s.tmpfs('small', 256);
      s.fill(fs);
      return { runs: [{ args: patch(s.nvshmem(), path.join(fs, 'w')), exit: 6, stderr: /^(?![\s\S]*source)[\s\S]*no space left/ }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'full-in-place', cls: 'full disk', what: '--in-place on a full disk: the tree untouched', setup: (s) => {
      const fs = s.tmpfs('small', 1024);
      const src = s.nvshmem();
      const t = path.join(fs, 'nvshmem');
      cpSync(src, t, { recursive: true });
      s.fill(fs);
      return { runs: [{ args: patch(t, s.p('w'), '--in-place'), exit: 6, stderr: /no space left/ }], protect: [t], check: () => (strays(t).length ? `stray files: ${strays(t).join(', ')}` : undefined) };
    },
  },
  {
    id: 'full-export', cls: 'full disk', what: '--export on a full disk', setup: (s) => {
      const fs = s.tmpfs('small', 256);
      s.fill(fs);
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', path.join(fs, 'e')), exit: 6, stderr: /no space left/ }], protect: [s.p('nvshmem')] };
    },
  },
];

const permissionCases: Case[] = [
  {
    id: 'unreadable-source', cls: 'permissions', what: 'a source tree this user cannot read', setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chmod', ['700', src]);
      return { runs: [{ args: patch(src, s.p('w')), asNobody: true, exit: 6, stderr: /^(?![\s\S]*writable)[\s\S]*readable/ }], protect: [src] };
    },
  },
  {
    id: 'unwritable-work', cls: 'permissions', what: 'a work dir this user cannot write', setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chmod', ['-R', 'a+rX', src]);
      mkdirSync(s.p('w'), { mode: 0o755 });
      return { runs: [{ args: patch(src, s.p('w')), asNobody: true, exit: 6, stderr: /writable/ }], protect: [src] };
    },
  },
  {
    id: 'unwritable-in-place', cls: 'permissions', what: '--in-place on a tree this user cannot write', setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chmod', ['-R', 'a+rX', src]);
      return { runs: [{ args: patch(src, s.p('w'), '--in-place'), asNobody: true, exit: 6, stderr: /^(?![\s\S]*--work-dir)[\s\S]*(--in-place|writable)/ }], protect: [src] };
    },
  },
];

/** A work dir `patch` made, then the user's files added where the README sends them. */
function workWithUserFiles(s: Sandbox): string {
  const w = s.p('w');
  cliSync([...patch(s.nvshmem(), w)]);
  return w;
}

const cleanCases: Case[] = [
  {
    id: 'clean-keeps-downloads', cls: 'ownership and clean', what: "clean keeps the user's archive in downloads/ and library in install/ (item 2)", setup: (s) => {
      const w = workWithUserFiles(s);
      const a = s.file('w/downloads/mine.tar');
      const b = s.file('w/install/mylib.so');
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [a, b] };
    },
  },
  { id: 'clean-foreign', cls: 'ownership and clean', what: 'clean on a directory that is not a work dir', setup: (s) => { s.file('d/a.txt'); return { runs: [{ args: ['clean', '--work-dir', s.p('d')], exit: 2 }], protect: [s.p('d')] }; } },
  {
    id: 'clean-marker-escape', cls: 'ownership and clean', what: 'a work-dir marker that lists ../ and absolute paths', setup: (s) => {
      const w = workWithUserFiles(s);
      const victim = s.file('victim.txt');
      const m = JSON.parse(readFileSync(path.join(w, MARKER), 'utf8'));
      m.created = [...(m.created ?? []), '../victim.txt', victim, '..', '.'];
      writeFileSync(path.join(w, MARKER), JSON.stringify(m));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [victim, s.p('nvshmem')] };
    },
  },
  { id: 'clean-garbage-marker', cls: 'ownership and clean', what: 'clean with a garbage marker beside user files', setup: (s) => { s.file('d/' + MARKER, '{garbage'); s.file('d/mine.txt'); return { runs: [{ args: ['clean', '--work-dir', s.p('d')], exit: 2 }], protect: [s.p('d/mine.txt')] }; } },
  { id: 'clean-missing', cls: 'ownership and clean', what: 'clean of a work dir that does not exist', setup: (s) => ({ runs: [{ args: ['clean', '--work-dir', s.p('nope')], exit: 0, stdout: /nothing to clean/ }] }) },
  { id: 'clean-dry-run', cls: 'ownership and clean', what: 'clean --dry-run deletes nothing', setup: (s) => { const w = workWithUserFiles(s); return { runs: [{ args: ['clean', '--work-dir', w, '--dry-run'], exit: 0, stdout: /would remove/ }], protect: [w] }; } },
  {
    id: 'clean-while-running', cls: 'ownership and clean', what: 'clean while a build holds the work dir', setup: (s) => {
      const t = s.toolchain();
      const w = s.p('w');
      startHungBuild(s, t, w);
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 7, stderr: /in use by another nvshmem-efa run/ }] };
    },
  },
];

/** Starts a build that hangs in NVSHMEM's compile and waits until it holds the lock; the sandbox stops it. */
function startHungBuild(s: Sandbox, t: ReturnType<Sandbox['toolchain']>, w: string): void {
  s.background(process.execPath, [BIN, ...s.buildArgs(s.nvshmem('hung-src'), w)], { ...ENV, ...t.env, FAKE_HANG: 'build', NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK });
  const deadline = Date.now() + 60_000;
  while (!existsSync(path.join(t.pids, 'tool')) && Date.now() < deadline) execFileSync('sleep', ['0.1']);
  s.onCleanup(() => {
    for (const n of ['tool', 'child', 'grandchild']) {
      try {
        process.kill(Number(readFileSync(path.join(t.pids, n), 'utf8')), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
  if (!existsSync(path.join(t.pids, 'tool'))) throw new Error('the hung build did not start within 60 s');
}

const exportCases: Case[] = [
  {
    id: 'export-traversal', cls: 'export', what: "an export marker listing ../victim.txt (item 1)", setup: (s) => {
      const victim = s.file('victim.txt');
      s.file(`evil/${EXPORT_MARKER}`, JSON.stringify({ schema: 'nvshmem-efa-export/1', files: ['../victim.txt'] }) + '\n');
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('evil')), exit: 2 }], protect: [victim] };
    },
  },
  {
    id: 'export-absolute', cls: 'export', what: 'an export marker listing an absolute path', setup: (s) => {
      const victim = s.file('victim.txt');
      s.file(`evil/${EXPORT_MARKER}`, JSON.stringify({ schema: 'nvshmem-efa-export/1', files: [victim] }) + '\n');
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('evil')), exit: 2 }], protect: [victim] };
    },
  },
  {
    id: 'export-lists-dir', cls: 'export', what: 'an export marker listing a directory', setup: (s) => {
      s.file('evil/nvshmem/keep/a.txt');
      s.file(`evil/${EXPORT_MARKER}`, JSON.stringify({ schema: 'nvshmem-efa-export/1', files: ['nvshmem/keep'] }) + '\n');
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('evil')), exit: 2 }], protect: [s.p('evil/nvshmem/keep')] };
    },
  },
  {
    id: 'export-lists-link', cls: 'export', what: 'an export marker listing a link to a file outside', setup: (s) => {
      const victim = s.file('victim.txt');
      mkdirSync(s.p('evil/nvshmem'), { recursive: true });
      symlinkSync(victim, s.p('evil/nvshmem/0001-x.patch'));
      s.file(`evil/${EXPORT_MARKER}`, JSON.stringify({ schema: 'nvshmem-efa-export/1', files: ['nvshmem/0001-x.patch'] }) + '\n');
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('evil')), exit: 2 }], protect: [victim] };
    },
  },
  { id: 'export-foreign', cls: 'export', what: '--export into a non-empty directory of the user', setup: (s) => { s.file('e/notes.txt'); return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('e')), exit: 2, stderr: /not empty/ }], protect: [s.p('e')] }; } },
  { id: 'export-dry-run', cls: 'export', what: '--export with --dry-run writes nothing', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('e'), '--dry-run'), exit: 0 }], check: () => (existsSync(s.p('e')) ? '--dry-run wrote the export' : undefined) }) },
  {
    id: 'export-twice', cls: 'export', what: 'a second export replaces the first, no stale patch left', setup: (s) => {
      const src = s.nvshmem();
      return {
        runs: [{ args: patch(src, s.p('w'), '--export', s.p('e')), exit: 0 }, { args: patch(src, s.p('w'), '--export', s.p('e')), exit: 0, stdout: /apply with/ }],
        protect: [src],
        check: () => (readdirSync(s.p('e/nvshmem')).some((n) => !/^\d{4}-.*\.patch$|^series$/.test(n)) ? 'stray files in the export' : undefined),
      };
    },
  },
];

const lockCases: Case[] = [
  {
    id: 'two-runs', cls: 'concurrency and locks', what: 'a second run while a build holds the work dir', setup: (s) => {
      const w = s.p('w');
      startHungBuild(s, s.toolchain(), w);
      return { runs: [{ args: patch(s.nvshmem(), w), exit: 7, stderr: /in use by another nvshmem-efa run: pid \d+/ }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'empty-lock', cls: 'concurrency and locks', what: 'a 0-byte lock left by a full disk (item 3)', setup: (s) => {
      const w = workWithUserFiles(s);
      s.file('w/.nvshmem-efa.lock', '');
      return { runs: [{ args: patch(s.nvshmem('n2'), w), exit: 0, stderr: /took over|lock/ }] };
    },
  },
  {
    id: 'garbage-lock', cls: 'concurrency and locks', what: 'a garbage lock whose writer is gone', setup: (s) => {
      const w = workWithUserFiles(s);
      s.file('w/.nvshmem-efa.lock', '\0\0{not json');
      return { runs: [{ args: patch(s.nvshmem('n2'), w), exit: 0 }] };
    },
  },
  {
    id: 'stale-lock-unrelated-child', cls: 'concurrency and locks', what: "a stale lock whose recorded child pid is now an unrelated process (item 4)", setup: (s) => {
      const w = workWithUserFiles(s);
      const pid = s.background('sleep', ['300']);
      execFileSync('sleep', ['0.2']);
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
      // Same pid and start time as recorded, but not the command the dead run had started.
      const lock = { pid: 999_999, host: os.hostname(), procStart: '1', command: 'nvshmem-efa build', startedAt: new Date().toISOString(), children: [{ pid, procStart: start, cmdline: ['cmake', '--build', '/x'] }] };
      s.file('w/.nvshmem-efa.lock', JSON.stringify(lock) + '\n');
      return {
        runs: [{ args: patch(s.nvshmem('n2'), w), exit: 0 }],
        check: () => {
          try {
            process.kill(pid, 0);
            return undefined;
          } catch {
            return `the unrelated process ${pid} was killed on take-over`;
          }
        },
      };
    },
  },
  {
    id: 'other-host-lock', cls: 'concurrency and locks', what: 'a lock held from another host', setup: (s) => {
      const w = workWithUserFiles(s);
      s.file('w/.nvshmem-efa.lock', JSON.stringify({ pid: 1, host: 'other-node', procStart: null, command: 'nvshmem-efa build', startedAt: new Date().toISOString(), children: [] }) + '\n');
      return { runs: [{ args: patch(s.nvshmem('n2'), w), exit: 7, stderr: /other-node/ }], protect: [w] };
    },
  },
  {
    id: 'report-during-rerun', cls: 'concurrency and locks', what: '`report` while a second build runs says the report is the one before it', setup: (s) => {
      const w = workWithUserFiles(s);
      startHungBuild(s, s.toolchain(), w);
      return { runs: [{ args: ['report', '--work-dir', w], exit: 0, stderr: /in progress[\s\S]*report of the run before it/ }] };
    },
  },
  {
    id: 'report-while-running', cls: 'concurrency and locks', what: '`report` while a build runs says it is running', setup: (s) => {
      const w = s.p('w');
      startHungBuild(s, s.toolchain(), w);
      return { runs: [{ args: ['report', '--work-dir', w], exit: 7, stderr: /running|in progress/ }] };
    },
  },
];

/** SIGKILL after `n` renames of an in-place patch's commit, then a rerun: the tree ends fully patched, nothing stray. */
function killAfterRenames(n: number): Case {
  return {
    id: `sigkill-after-${n}-renames`, cls: 'interruption', what: `SIGKILL after ${n} rename(s) of an --in-place patch, then a rerun (item 6)`, setup: (s) => {
      const src = s.nvshmem();
      const ref = cleanlyPatched(s);
      return {
        runs: [
          { args: patch(src, s.p('w'), '--in-place'), env: { NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES: String(n) }, exit: 137 },
          { args: patch(src, s.p('w'), '--in-place'), exit: 0 },
        ],
        check: () => sameTree(src, ref) ?? (strays(src).length ? `stray files: ${strays(src).join(', ')}` : undefined),
      };
    },
  };
}

/** SIGKILL right after the `n`th atomic write (marker, patch file, series, state, report), then the same command again. */
function killAfterWrites(what: 'export' | 'patch', n: number): Case {
  return {
    id: `sigkill-${what}-after-${n}-writes`, cls: 'interruption', what: `SIGKILL after ${n} atomic write(s) of \`patch${what === 'export' ? ' --export' : ''}\`, then a rerun`, setup: (s) => {
      const src = s.nvshmem();
      const args = what === 'export' ? patch(src, s.p('w'), '--export', s.p('e')) : patch(src, s.p('w'));
      let ref = '';
      if (what === 'export') cliSync(patch(src, s.p('ref-w'), '--export', s.p('ref-e')));
      else ref = cleanlyPatched(s);
      return {
        runs: [{ args, env: { NVSHMEM_EFA_TEST_KILL_AFTER_WRITES: String(n) }, exit: 137 }, { args, exit: 0 }],
        protect: [src],
        check: () => {
          if (what === 'export') return digest(s.p('e')) === digest(s.p('ref-e')) ? undefined : 'the export differs from one never interrupted';
          const tree = s.p('w/sources/nvshmem');
          return sameTree(tree, ref) ?? (strays(s.p('w')).length ? `stray files: ${strays(s.p('w')).join(', ')}` : undefined);
        },
      };
    },
  };
}

const interruptCases: Case[] = [
  ...[0, 1, 3, 6].map(killAfterRenames),
  ...[1, 2, 5].map((n) => killAfterWrites('export', n)),
  ...[1, 2, 3, 4].map((n) => killAfterWrites('patch', n)),
  {
    id: 'sigkill-journal-doctor', cls: 'interruption', what: 'doctor finds the journal of a killed in-place patch', setup: (s) => {
      const src = s.nvshmem();
      return {
        runs: [
          { args: patch(src, s.p('w'), '--in-place'), env: { NVSHMEM_EFA_TEST_KILL_AFTER_RENAMES: '2' }, exit: 137 },
          { args: ['doctor', '--nvshmem-src', src], exit: 1, reportOnly: true, stdout: /journal|interrupted|half/i },
        ],
      };
    },
  },
  {
    id: 'sigint-during-copy', cls: 'interruption', what: 'SIGINT while the source is copied, then a rerun', setup: (s) => {
      const src = s.nvshmem();
      for (let i = 0; i < 400; i++) s.file(`nvshmem/src/many/f${i}.h`, 'x'.repeat(2000));
      return { runs: [{ args: patch(src, s.p('w')), exit: 130, kill: { signal: 'SIGINT', when: () => existsSync(s.p('w/sources/nvshmem.partial')) } }, { args: patch(src, s.p('w')), exit: 0 }], protect: [src] };
    },
  },
  {
    id: 'sigterm-during-build', cls: 'interruption', what: 'SIGTERM during the NVSHMEM compile, then a rerun', setup: (s) => {
      const t = s.toolchain();
      const src = s.nvshmem();
      return {
        runs: [
          { args: s.buildArgs(src, s.p('w')), env: { ...t.env, FAKE_HANG: 'build' }, exit: 130, kill: { signal: 'SIGTERM', when: () => existsSync(path.join(t.pids, 'grandchild')) } },
          { args: s.buildArgs(src, s.p('w')), env: { ...t.env, FAKE_HANG: '' }, exit: 0 },
        ],
        protect: [src],
      };
    },
  },
];

const stateCases: Case[] = [
  { id: 'garbage-state', cls: 'corrupted state', what: 'state.json is garbage', setup: (s) => { const w = workWithUserFiles(s); s.file('w/state.json', '{"version":1,"steps":'); return { runs: [{ args: patch(s.p('nvshmem'), w), exit: 0 }], protect: [s.p('nvshmem')] }; } },
  {
    id: 'state-points-out', cls: 'corrupted state', what: "state.json names the user's tree as the work dir's copy", setup: (s) => {
      const w = workWithUserFiles(s);
      const victim = s.nvshmem('victim-tree');
      const st = readFileSync(path.join(w, 'state.json'), 'utf8').split(path.join(w, 'sources', 'nvshmem')).join(victim);
      writeFileSync(path.join(w, 'state.json'), st);
      return { runs: [{ args: patch(s.p('nvshmem'), w), exit: 0 }], protect: [victim, s.p('nvshmem')] };
    },
  },
  {
    id: 'copied-work-dir', cls: 'corrupted state', what: 'a copied work dir works on its own trees, not the original\'s (item 4)', setup: (s) => {
      const w = workWithUserFiles(s);
      cpSync(w, s.p('w2'), { recursive: true });
      const before = digest(w);
      // Without --efa-io-defs the patch step's inputs differ, so it runs: on the copy's own tree, never the original's.
      const args = patch(s.p('nvshmem'), s.p('w2')).filter((a, i, all) => a !== '--efa-io-defs' && all[i - 1] !== '--efa-io-defs');
      return { runs: [{ args, exit: 0 }], check: () => (digest(w) !== before ? 'the run on the copy changed the original work dir' : undefined) };
    },
  },
  { id: 'garbage-report', cls: 'corrupted state', what: '`report` of a damaged report.json: no report it can read, exit 4 as no build (issue 39)', setup: (s) => { const w = workWithUserFiles(s); s.file('w/report.json', '[1,2'); return { runs: [{ args: ['report', '--work-dir', w, '--json'], exit: 4 }] }; } },
  { id: 'garbage-report-env', cls: 'corrupted state', what: '`env` of a damaged report.json: no build it can read, exit 4 (issue 39)', setup: (s) => { const w = workWithUserFiles(s); s.file('w/report.json', '{"schema": 7}'); return { runs: [{ args: ['env', '--work-dir', w], exit: 4 }] }; } },
  {
    id: 'damaged-copy', cls: 'corrupted state', what: "a damaged work-dir copy: --force repairs it, and the message says so", setup: (s) => {
      const w = workWithUserFiles(s);
      writeFileSync(s.p('w/sources/nvshmem', LIBFABRIC_CPP), '/* damaged */\n');
      return { runs: [{ args: patch(s.p('nvshmem'), w), exit: 3, stderr: /--force/ }, { args: patch(s.p('nvshmem'), w, '--force'), exit: 0 }], protect: [s.p('nvshmem')] };
    },
  },
  { id: 'noop-rerun', cls: 'corrupted state', what: 'a no-op rerun does not claim fixes as applied', setup: (s) => { const w = workWithUserFiles(s); return { runs: [{ args: patch(s.p('nvshmem'), w), exit: 0, stdout: /^(?![\s\S]*\bapplied\s)/ }] }; } },
  { id: 'patch-says-where', cls: 'corrupted state', what: '`patch` says where the patched tree is', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), exit: 0, stdout: new RegExp(s.p('w', 'sources', 'nvshmem').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')) }] }) },
];

const treeCases: Case[] = [
  {
    id: 'markers-stripped', cls: 'look-alike trees', what: 'hooks present without their markers (item 5)', setup: (s) => {
      const src = s.nvshmem();
      cliSync([...patch(src, s.p('w0'), '--in-place')]);
      const f = path.join(src, LIBFABRIC_CPP);
      writeFileSync(f, readFileSync(f, 'utf8').split('\n').filter((l) => !/nvshmem-efa/.test(l)).join('\n'));
      return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 3 }], protect: [src] };
    },
  },
  { id: 'aws-efagda-tree', cls: 'look-alike trees', what: "a tree with AWS's own GDA transport (NVSHMEM_EFAGDA_SUPPORT)", setup: (s) => { const src = s.nvshmem(); const f = path.join(src, 'CMakeLists.txt'); writeFileSync(f, readFileSync(f, 'utf8') + '\noption(NVSHMEM_EFAGDA_SUPPORT "EFA GDA" ON)\n'); return { runs: [{ args: patch(src, s.p('w')), exit: 3, stderr: /EFAGDA/ }], protect: [src] }; } },
  { id: 'half-broken', cls: 'look-alike trees', what: 'a begin marker without its end', setup: (s) => { const src = s.nvshmem('nvshmem', 'half-broken'); return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 3 }], protect: [src] }; } },
  { id: 'empty-tree', cls: 'look-alike trees', what: 'an empty directory as --nvshmem-src', setup: (s) => { mkdirSync(s.p('empty')); return { runs: [{ args: patch(s.p('empty'), s.p('w')), exit: 3, stderr: /not an NVSHMEM source tree/ }], protect: [s.p('empty')] }; } },
  { id: 'cmake-only', cls: 'look-alike trees', what: 'a CMakeLists.txt and nothing else', setup: (s) => { s.file('t/CMakeLists.txt', 'project(nvshmem)\n'); return { runs: [{ args: patch(s.p('t'), s.p('w')), exit: 3 }], protect: [s.p('t')] }; } },
  { id: 'deepep-unknown', cls: 'look-alike trees', what: 'a DeepEP of unknown layout with --in-place: NVSHMEM untouched', setup: (s) => { const src = s.nvshmem(); const dp = materialize('unknown-layout', GOLDEN_DEEPEP); cpSync(dp, s.p('dp'), { recursive: true }); return { runs: [{ args: patch(src, s.p('w'), '--in-place', '--deepep-src', s.p('dp')), exit: 3 }], protect: [src, s.p('dp')] }; } },
];

const optionCases: Case[] = [
  ...([
    ['jobs-zero', ['--jobs', '0']],
    ['cuda-arch-35', ['--cuda-arch', '35']],
    ['cuda-arch-garbage', ['--cuda-arch', 'sm_x']],
    ['unknown-ref', ['--nvshmem-ref', 'v0.0.0']],
    ['unknown-deepep-ref', ['--deepep-ref', 'deadbeef']],
    ['unknown-libfabric-ref', ['--libfabric-ref', 'v9.9.9']],
    ['unknown-option', ['--frobnicate']],
  ] as const).map(([id, extra]): Case => ({
    id, cls: 'bad options', what: `build ${extra.join(' ')}`,
    setup: (s) => { const src = s.nvshmem(); const a = id === 'unknown-ref' ? s.buildArgs(src, s.p('w')).filter((x, i, all) => x !== '--nvshmem-src' && all[i - 1] !== '--nvshmem-src') : s.buildArgs(src, s.p('w')); return { runs: [{ args: [...a, ...extra], env: s.toolchain().env, exit: 2 }], protect: [src], check: () => (existsSync(s.p('w')) ? 'a refused command line wrote a work dir' : undefined) }; },
  })),
  { id: 'src-and-ref', cls: 'bad options', what: '--nvshmem-src with --nvshmem-ref', setup: (s) => ({ runs: [{ args: [...patch(s.nvshmem(), s.p('w')), '--nvshmem-ref', 'v3.4.5-0'], exit: 2, stderr: /mutually exclusive/ }] }) },
  // Issue 36, class 9: a count no machine has, a size of nothing, a prefix that names nothing.
  { id: 'jobs-huge', cls: 'bad options', what: 'build --jobs 99999999999999999999', setup: (s) => ({ runs: [{ args: [...s.buildArgs(s.nvshmem(), s.p('w')), '--jobs', '99999999999999999999', '--dry-run'], env: s.toolchain().env, exit: 2, stderr: /--jobs must be an integer from 1 to 4096/ }] }) },
  { id: 'bench-sizes-zero', cls: 'bad options', what: 'bench --sizes 0', setup: (s) => ({ runs: [{ args: ['bench', '--work-dir', s.p('w'), '--sizes', '0', '--dry-run'], exit: 2, stderr: /--sizes 0: expected .* at least 1 byte/ }] }) },
  { id: 'probe-root-missing', cls: 'bad options', what: 'probe --root /nonexistent', setup: (s) => ({ runs: [{ args: ['probe', '--work-dir', s.p('w'), '--root', s.p('nonexistent')], exit: 2, stderr: /--root .* does not exist/ }], check: () => (existsSync(s.p('w')) ? 'a work dir was made for a refused run' : undefined) }) },
  { id: 'in-place-no-src', cls: 'bad options', what: '--in-place without --nvshmem-src', setup: (s) => ({ runs: [{ args: ['patch', '--in-place', '--work-dir', s.p('w')], exit: 2 }] }) },
  { id: 'export-on-build', cls: 'bad options', what: '--export given to build', setup: (s) => ({ runs: [{ args: ['build', '--export', s.p('e'), '--work-dir', s.p('w')], exit: 2 }] }) },
  { id: 'selftest-typo', cls: 'bad options', what: 'selftest --work-dir with a typo (item 9): no build there, exit 4 as report, env, bench (issue 39)', setup: (s) => ({ runs: [{ args: ['selftest', '--work-dir', s.p('no-such-work')], exit: 4, stderr: /no-such-work/ }] }) },
  { id: 'selftest-bad-timeout', cls: 'bad options', what: 'selftest --timeout -1', setup: (s) => ({ runs: [{ args: ['selftest', '--work-dir', s.p('w'), '--timeout', '-1'], exit: 2 }] }) },
  { id: 'efa-io-defs-fifo', cls: 'bad options', what: '--efa-io-defs is a FIFO (item 8: no hang)', setup: (s) => { execFileSync('mkfifo', [s.p('fifo')]); return { runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w'), '--offline', '--efa-io-defs', s.p('fifo')], exit: 6, timeoutMs: 30_000, stderr: /--efa-io-defs/ }] }; } },
  { id: 'efa-io-defs-dev-zero', cls: 'bad options', what: '--efa-io-defs /dev/zero (item 8: no hang)', setup: (s) => ({ runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w'), '--offline', '--efa-io-defs', '/dev/zero'], exit: 6, timeoutMs: 30_000, stderr: /--efa-io-defs/ }] }) },
  { id: 'efa-io-defs-wrong', cls: 'bad options', what: '--efa-io-defs with the wrong checksum', setup: (s) => ({ runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w'), '--offline', '--efa-io-defs', s.file('x.h')], exit: 5 }], check: () => (existsSync(s.p('w')) ? 'a refused run wrote a work dir' : undefined) }) },
  { id: 'dry-run-wrong-io-defs', cls: 'bad options', what: 'build --dry-run with a wrong --efa-io-defs lists the refusal the build would stop on (exit 5) as a blocker: exit 8 (issue 39, item 5)', setup: (s) => { const a = s.buildArgs(s.nvshmem(), s.p('w'), ['--dry-run']); a[a.indexOf('--efa-io-defs') + 1] = s.file('x.h'); return { runs: [{ args: a, env: s.toolchain().env, exit: 8, stdout: /blocker: efa-io-defs: .*\(exit 5\)/ }] }; } },
  { id: 'dry-run-no-torch', cls: 'bad options', what: 'build --dry-run with DeepEP and no torch lists it as a blocker (the build exits 4): exit 8 (issue 39, item 5)', setup: (s) => ({ runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w'), ['--dry-run', '--deepep-src', s.deepep()]), env: { ...s.toolchain().env, PYTHON: '/bin/false' }, exit: 8, stderr: /torch/ }] }) },
  { id: 'dry-run-cmake-line', cls: 'bad options', what: 'build --dry-run prints the cmake line the build runs (item 7)', setup: (s) => ({ runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w'), ['--dry-run']), env: s.toolchain().env, exit: 0, stdout: new RegExp(`-S \\S*${s.p('w', 'sources', 'nvshmem').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`) }] }) },
];

const envCases: Case[] = [
  { id: 'io-defs-lock-garbage', cls: 'bad environment', what: 'NVSHMEM_EFA_EFA_IO_DEFS_LOCK names a garbage file', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: s.file('l.json', '{{') }, exit: 2, stderr: /NVSHMEM_EFA_EFA_IO_DEFS_LOCK/ }] }) },
  { id: 'io-defs-lock-missing', cls: 'bad environment', what: 'NVSHMEM_EFA_EFA_IO_DEFS_LOCK names nothing', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: s.p('none.json') }, exit: 2, stderr: /NVSHMEM_EFA_EFA_IO_DEFS_LOCK/ }] }) },
  { id: 'fabric-lock-invalid', cls: 'bad environment', what: 'NVSHMEM_EFA_FABRIC_LOCK fails its schema', setup: (s) => ({ runs: [{ args: [...s.buildArgs(s.nvshmem(), s.p('w')).filter((x, i, a) => x !== '--libfabric-home' && a[i - 1] !== '--libfabric-home'), '--libfabric-ref', 'v2.3.0'], env: { ...s.toolchain().env, NVSHMEM_EFA_FABRIC_LOCK: s.file('f.json', '{"libfabric": 3}') }, exit: 2, stderr: /NVSHMEM_EFA_FABRIC_LOCK/ }] }) },
  { id: 'home-nowhere', cls: 'bad environment', what: 'NVSHMEM_EFA_HOME points nowhere', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), env: { NVSHMEM_EFA_HOME: s.p('nowhere') }, exit: 2, stderr: /NVSHMEM_EFA_HOME/ }] }) },
  { id: 'cuda-home-env-wrong', cls: 'bad environment', what: 'CUDA_HOME=/nonexistent (refused like --cuda-home)', setup: (s) => { const a = s.buildArgs(s.nvshmem(), s.p('w')).filter((x, i, all) => x !== '--cuda-home' && all[i - 1] !== '--cuda-home'); return { runs: [{ args: a, env: { ...s.toolchain().env, CUDA_HOME: s.p('nonexistent') }, exit: 2, stderr: /CUDA_HOME/ }] }; } },
  { id: 'gdrcopy-home-env-wrong', cls: 'bad environment', what: 'GDRCOPY_HOME=/nonexistent names the variable', setup: (s) => ({ runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: { ...s.toolchain().env, GDRCOPY_HOME: s.p('nonexistent') }, exit: 2, stderr: /GDRCOPY_HOME/ }] }) },
  { id: 'python-missing', cls: 'bad environment', what: 'PYTHON names no interpreter, with DeepEP', setup: (s) => ({ runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w'), ['--deepep-src', s.deepep()]), env: { ...s.toolchain().env, PYTHON: s.p('no-python') }, exit: 4, stderr: /PYTHON|python/ }], protect: [s.p('nvshmem'), s.p('deepep')] }) },
  { id: 'mirror-unreachable', cls: 'bad environment', what: 'NVSHMEM_EFA_NVSHMEM_URL names no repository', setup: (s) => ({ runs: [{ args: ['patch', '--nvshmem-ref', 'v3.4.5-0', '--work-dir', s.p('w'), ...D], env: { NVSHMEM_EFA_NVSHMEM_URL: s.p('no-repo') }, exit: 4, stderr: /cannot clone/ }] }) },
];

// Issue 36, class 6: a reader that stops (`| head -1`), a full device or a closed descriptor for stdout or stderr
// crashes nothing and ends nothing early: the command exits with its own code (docs/cli.md, exit codes).
const streamCases: Case[] = [
  { id: 'help-to-full', cls: 'output streams', what: '--help > /dev/full', setup: () => ({ runs: [{ args: ['--help'], exit: 0, streams: { out: 'full' } }] }) },
  { id: 'patch-json-to-full', cls: 'output streams', what: 'patch --json > /dev/full: patched all the same', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--json'), exit: 0, streams: { out: 'full' } }], check: () => (existsSync(s.p('w', MARKER)) ? undefined : 'no work dir was made') }) },
  { id: 'patch-reader-stops', cls: 'output streams', what: 'patch --verbose | head -1: patched all the same', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--verbose'), exit: 0, streams: { out: 'reader-stops' } }], check: () => (existsSync(s.p('w', MARKER)) ? undefined : 'no work dir was made') }) },
  { id: 'dry-run-reader-stops', cls: 'output streams', what: 'build --dry-run | head -1', setup: (s) => ({ runs: [{ args: [...s.buildArgs(s.nvshmem(), s.p('w')), '--dry-run'], env: s.toolchain().env, exit: 0, streams: { out: 'reader-stops' } }] }) },
  { id: 'usage-stderr-closed', cls: 'output streams', what: 'patch --bogus 2>&-', setup: () => ({ runs: [{ args: ['patch', '--bogus'], exit: 2, streams: { err: 'closed' } }] }) },
  { id: 'usage-stderr-full', cls: 'output streams', what: 'patch --bogus 2>/dev/full', setup: () => ({ runs: [{ args: ['patch', '--bogus'], exit: 2, streams: { err: 'full' } }] }) },
  { id: 'refused-stderr-full', cls: 'output streams', what: 'a refused patch (no source) 2>/dev/full keeps its exit code', setup: (s) => ({ runs: [{ args: patch(s.p('nope'), s.p('w')), exit: 2, streams: { err: 'full' } }] }) },
  { id: 'patch-stderr-full', cls: 'output streams', what: 'patch 2>/dev/full (its progress lost): patched all the same', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), exit: 0, streams: { err: 'full' } }], check: () => (existsSync(s.p('w', MARKER)) ? undefined : 'no work dir was made') }) },
  { id: 'both-full', cls: 'output streams', what: 'patch >/dev/full 2>/dev/full', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), exit: 0, streams: { out: 'full', err: 'full' } }] }) },
];

export const CASES: readonly Case[] = [
  ...pathsCases, ...symlinkCases, ...overlapCases, ...readOnlyCases, ...fullDiskCases, ...permissionCases, ...cleanCases, ...exportCases,
  ...lockCases, ...interruptCases, ...stateCases, ...treeCases, ...optionCases, ...envCases, ...streamCases,
  ...identityWorkDirCases,
  ...killSignalCases,
  ...waitStreamRestCases,
  ...bytesLinksCases,
];
