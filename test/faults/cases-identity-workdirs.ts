import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BIN, ENV, IO_DEFS, LOCK } from '../helpers/cli.ts';
import type { Case, Sandbox } from './runner.ts';

/**
 * Issue 36, classes 2, 8 and 10: directories compared by identity, not by path (a bind mount, a symbolic link
 * on the way, an alias of a tree is the tree); work dirs of an older version and files of the wrong type where
 * the tool keeps its own (lock, marker, state.json); runs as nobody that do not depend on where the checkout sits.
 */

const D = ['--efa-io-defs', IO_DEFS];
const patch = (src: string, work: string, ...more: string[]) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline', ...D, ...more];
const OVERLAP = /must not overlap/;
const MARKER = '.nvshmem-efa-workdir.json';
const LOCK_FILE = '.nvshmem-efa.lock';

function cliSync(args: string[]): void {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK } });
  if (r.status !== 0) throw new Error(`setup: nvshmem-efa ${args[0]} exited ${r.status}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`);
}

/** A work dir `patch` made (sources/nvshmem, logs/, vendor/, state.json, the marker). */
function patched(s: Sandbox, rel = 'w'): string {
  const w = s.p(rel);
  cliSync(patch(s.nvshmem(`${rel}-src`), w));
  return w;
}

/** A work dir of a version before the marker: what `patch` made, without `.nvshmem-efa-workdir.json`. */
function oldWorkDir(s: Sandbox): string {
  const w = patched(s);
  rmSync(path.join(w, MARKER));
  return w;
}

/** A work dir on a tmpfs of its own (a copy that recurses into itself fills 32 MiB, not the disk). */
const smallWork = (s: Sandbox) => s.tmpfs('w', 32 * 1024);

const gone = (p: string, what: string) => () => (existsSync(p) ? `${what} (${p}) was left behind` : undefined);

const identityCases: Case[] = [
  {
    id: 'id-work-bound-in-src', cls: 'overlap by identity', what: '--work-dir also mounted (bind) inside --nvshmem-src', setup: (s) => {
      const src = s.nvshmem();
      s.bind(smallWork(s), path.join(src, 'mnt'));
      return { runs: [{ args: patch(src, s.p('w')), exit: 2, stderr: OVERLAP, timeoutMs: 60_000 }], protect: [src] };
    },
  },
  {
    id: 'id-build-work-bound-in-src', cls: 'overlap by identity', what: 'build: --work-dir also mounted inside --nvshmem-src', setup: (s) => {
      const src = s.nvshmem();
      s.bind(smallWork(s), path.join(src, 'mnt'));
      return { runs: [{ args: s.buildArgs(src, s.p('w')), env: s.toolchain().env, exit: 2, stderr: OVERLAP, timeoutMs: 60_000 }], protect: [src] };
    },
  },
  {
    id: 'id-src-bound-on-copy', cls: 'overlap by identity', what: "--nvshmem-src mounted on the work dir's own copy of it, then a rerun", setup: (s) => {
      const w = patched(s);
      const src = s.p('w-src');
      s.bind(src, path.join(w, 'sources/nvshmem'));
      // The source changes, so the copy is made again (and the old one removed).
      writeFileSync(path.join(src, 'README.extra'), 'new\n');
      return { runs: [{ args: patch(src, w), exit: 2, stderr: OVERLAP }], protect: [src] };
    },
  },
  {
    id: 'id-src-parent-bound-in-work', cls: 'overlap by identity', what: "the folder holding --nvshmem-src mounted inside the work dir's sources/", setup: (s) => {
      const w = patched(s);
      const src = s.nvshmem('t/nvshmem');
      s.bind(s.p('t'), path.join(w, 'sources/mine'));
      return { runs: [{ args: patch(src, w), exit: 2, stderr: OVERLAP }], protect: [s.p('t')] };
    },
  },
  {
    id: 'id-export-bound-into-src', cls: 'overlap by identity', what: '--export is a bind mount of a folder inside --nvshmem-src', setup: (s) => {
      const src = s.nvshmem();
      mkdirSync(path.join(src, 'patches'));
      s.bind(path.join(src, 'patches'), s.p('e'));
      return { runs: [{ args: patch(src, s.p('w'), '--export', s.p('e')), exit: 2, stderr: OVERLAP }], protect: [src] };
    },
  },
  {
    id: 'id-export-bound-into-deepep', cls: 'overlap by identity', what: '--export is a bind mount of a folder inside --deepep-src', setup: (s) => {
      const dp = s.deepep();
      mkdirSync(path.join(dp, 'patches'));
      s.bind(path.join(dp, 'patches'), s.p('e'));
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--deepep-src', dp, '--export', s.p('e')), exit: 2, stderr: OVERLAP }], protect: [dp, s.p('nvshmem')] };
    },
  },
  {
    id: 'id-export-bound-into-work', cls: 'overlap by identity', what: '--export is a bind mount of a folder inside the work dir', setup: (s) => {
      const w = patched(s);
      mkdirSync(path.join(w, 'exports'));
      s.bind(path.join(w, 'exports'), s.p('e'));
      return { runs: [{ args: patch(s.p('w-src'), w, '--export', s.p('e')), exit: 2, stderr: OVERLAP }], protect: [s.p('w-src')], check: () => (readdirSync(s.p('e')).length ? 'the export was written into the work dir' : undefined) };
    },
  },
  {
    id: 'id-deepep-work-bound', cls: 'overlap by identity', what: '--work-dir also mounted inside --deepep-src', setup: (s) => {
      const dp = s.deepep();
      s.bind(smallWork(s), path.join(dp, 'mnt'));
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--deepep-src', dp), exit: 2, stderr: OVERLAP, timeoutMs: 60_000 }], protect: [dp, s.p('nvshmem')] };
    },
  },
  {
    id: 'id-in-place-deepep-work-bound', cls: 'overlap by identity', what: '--in-place, the work dir also mounted inside --deepep-src', setup: (s) => {
      const dp = s.deepep();
      s.bind(smallWork(s), path.join(dp, 'mnt'));
      return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--in-place', '--deepep-src', dp), exit: 2, stderr: OVERLAP, timeoutMs: 60_000 }], protect: [dp, s.p('nvshmem')] };
    },
  },
  {
    id: 'id-in-place-work-in-alias', cls: 'overlap by identity', what: '--in-place on a bind-mount alias of the tree, --work-dir inside the tree by its own path', setup: (s) => {
      const src = s.nvshmem();
      s.bind(src, s.p('alias'));
      return { runs: [{ args: patch(s.p('alias'), path.join(src, 'w'), '--in-place'), exit: 2, stderr: OVERLAP }], protect: [src] };
    },
  },
  {
    id: 'id-symlinked-parent-of-alias', cls: 'overlap by identity', what: '--work-dir through a symbolic link to a folder holding a bind-mount alias of the tree', setup: (s) => {
      const src = s.nvshmem();
      s.bind(src, s.p('m/s'));
      symlinkSync(s.p('m'), s.p('L'));
      return { runs: [{ args: patch(src, s.p('L/s/w')), exit: 2, stderr: OVERLAP }], protect: [src] };
    },
  },
  {
    id: 'id-deepep-alias-of-nvshmem', cls: 'overlap by identity', what: '--deepep-src is a bind-mount alias of --nvshmem-src', setup: (s) => {
      const src = s.nvshmem();
      s.bind(src, s.p('alias'));
      return { runs: [{ args: patch(src, s.p('w'), '--deepep-src', s.p('alias')), exit: 2, stderr: OVERLAP }], protect: [src] };
    },
  },
  {
    id: 'id-work-alias-holds-src', cls: 'overlap by identity', what: '--work-dir is a bind-mount alias of the folder holding --nvshmem-src', setup: (s) => {
      const src = s.nvshmem('t/nvshmem');
      s.bind(s.p('t'), s.p('w'));
      return { runs: [{ args: patch(src, s.p('w')), exit: 2, stderr: OVERLAP }], protect: [s.p('t')] };
    },
  },
  {
    id: 'id-clean-src-bound-in-sources', cls: 'overlap by identity', what: "clean with --nvshmem-src mounted inside the work dir's sources/", setup: (s) => {
      const w = patched(s);
      const src = s.nvshmem('mine');
      s.bind(src, path.join(w, 'sources/mnt'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0, stdout: /mount/ }], protect: [src] };
    },
  },
  {
    id: 'id-clean-src-bound-on-copy', cls: 'overlap by identity', what: "clean with the user's tree mounted on the work dir's copy (sources/nvshmem)", setup: (s) => {
      const w = patched(s);
      const src = s.nvshmem('mine');
      s.bind(src, path.join(w, 'sources/nvshmem'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0, stdout: /mount/ }], protect: [src] };
    },
  },
  {
    id: 'id-clean-parent-bound-in-logs', cls: 'overlap by identity', what: "clean with the user's folder mounted inside logs/", setup: (s) => {
      const w = patched(s);
      s.file('home/notes.txt');
      s.bind(s.p('home'), path.join(w, 'logs/home'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0, stdout: /mount/ }], protect: [s.p('home')] };
    },
  },
];

const oldWorkDirCases: Case[] = [
  {
    id: 'old-clean-build-file', cls: 'old and odd work dirs', what: "clean of an older version's work dir (state.json only) keeps the user's build/mine.o", setup: (s) => {
      const w = oldWorkDir(s);
      mkdirSync(path.join(w, 'build/nvshmem'), { recursive: true });
      const mine = s.file('w/build/mine.o', '\x7fELF user object');
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0, stdout: /mine\.o/ }], protect: [mine], check: gone(path.join(w, 'build/nvshmem'), "the old version's build/nvshmem") };
    },
  },
  {
    id: 'old-clean-sources-file', cls: 'old and odd work dirs', what: "clean of an older version's work dir keeps the user's files in sources/", setup: (s) => {
      const w = oldWorkDir(s);
      const a = s.file('w/sources/notes.txt');
      s.file('w/sources/mytree/a.c', 'int main() {}\n');
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [a, s.p('w/sources/mytree')], check: gone(path.join(w, 'sources/nvshmem'), 'the copy sources/nvshmem') };
    },
  },
  {
    id: 'old-clean-logs-vendor-stubs', cls: 'old and odd work dirs', what: "clean of an older version's work dir keeps the user's files in logs/, vendor/, stubs/", setup: (s) => {
      const w = oldWorkDir(s);
      const mine = [s.file('w/logs/mine.txt'), s.file('w/vendor/mine.h'), s.file('w/stubs/libmine.so')];
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: mine, check: () => (existsSync(path.join(w, 'logs')) && readdirSync(path.join(w, 'logs')).some((n) => n.endsWith('.log')) ? 'the old logs were left behind' : undefined) };
    },
  },
  {
    id: 'old-clean-known-name-link', cls: 'old and odd work dirs', what: "an older version's work dir whose build/nvshmem is a link to the user's folder", setup: (s) => {
      const w = oldWorkDir(s);
      s.file('mine/CMakeCache.txt', '# the user build\n');
      mkdirSync(path.join(w, 'build'));
      symlinkSync(s.p('mine'), path.join(w, 'build/nvshmem'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [s.p('mine'), path.join(w, 'build/nvshmem')] };
    },
  },
  {
    id: 'old-clean-known-name-file', cls: 'old and odd work dirs', what: "an older version's work dir whose sources/deepep is the user's file, not a folder", setup: (s) => {
      const w = oldWorkDir(s);
      const f = s.file('w/sources/deepep', 'my notes on deepep\n');
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 0 }], protect: [f] };
    },
  },
  {
    id: 'old-patch-then-clean', cls: 'old and odd work dirs', what: "patch adopts an older version's work dir, then clean: the user's build/mine.o survives", setup: (s) => {
      const w = oldWorkDir(s);
      const mine = s.file('w/build/mine.o', 'user object');
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 0 }, { args: ['clean', '--work-dir', w], exit: 0 }], protect: [mine] };
    },
  },
  {
    id: 'old-build-then-clean', cls: 'old and odd work dirs', what: "build adopts an older version's work dir, then clean: the user's build/mine.o survives", setup: (s) => {
      const w = oldWorkDir(s);
      const mine = s.file('w/build/mine.o', 'user object');
      const t = s.toolchain();
      return { runs: [{ args: s.buildArgs(s.p('w-src'), w), env: t.env, exit: 0 }, { args: ['clean', '--work-dir', w], exit: 0 }], protect: [mine, s.p('w-src')], check: gone(path.join(w, 'build/nvshmem'), "the build's build/nvshmem") };
    },
  },
  {
    id: 'old-clean-dry-run', cls: 'old and odd work dirs', what: "clean --dry-run of an older version's work dir names the user's file it would keep", setup: (s) => {
      const w = oldWorkDir(s);
      s.file('w/build/mine.o');
      return { runs: [{ args: ['clean', '--work-dir', w, '--dry-run'], exit: 0, stdout: /would keep[\s\S]*build\/mine\.o|kept[\s\S]*build\/mine\.o/ }], protect: [w] };
    },
  },
];

/** The user's file inside a lock, marker or state.json that is a directory. */
function dirWithFile(s: Sandbox, rel: string): string {
  s.file(`${rel}/mine.txt`);
  return s.p(rel);
}

/** A socket file at `p` (left behind by a server that is gone): python binds one and exits. */
function socketAt(p: string): void {
  execFileSync('python3', ['-c', 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', p]);
}

const WRONG = /not a regular file|a directory|symbolic link|FIFO|socket/;

const oddTypeCases: Case[] = [
  {
    id: 'lock-is-dir', cls: 'old and odd work dirs', what: "the lock is a directory holding the user's file", setup: (s) => {
      const w = patched(s);
      const lock = dirWithFile(s, `w/${LOCK_FILE}`);
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: WRONG }, { args: ['clean', '--work-dir', w], exit: 6, stderr: WRONG }], protect: [lock] };
    },
  },
  {
    id: 'lock-is-fifo', cls: 'old and odd work dirs', what: 'the lock is a FIFO (no hang, not taken over)', setup: (s) => {
      const w = patched(s);
      execFileSync('mkfifo', [path.join(w, LOCK_FILE)]);
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /FIFO/, timeoutMs: 30_000 }], protect: [path.join(w, LOCK_FILE)] };
    },
  },
  {
    id: 'lock-is-fifo-clean', cls: 'old and odd work dirs', what: 'clean with a lock that is a FIFO', setup: (s) => {
      const w = patched(s);
      execFileSync('mkfifo', [path.join(w, LOCK_FILE)]);
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 6, stderr: /FIFO/, timeoutMs: 30_000 }], protect: [w] };
    },
  },
  {
    id: 'lock-is-symlink', cls: 'old and odd work dirs', what: "the lock is a symbolic link to the user's file", setup: (s) => {
      const w = patched(s);
      const mine = s.file('mine.txt');
      symlinkSync(mine, path.join(w, LOCK_FILE));
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /symbolic link/ }], protect: [mine, path.join(w, LOCK_FILE)] };
    },
  },
  {
    id: 'lock-is-symlink-clean', cls: 'old and odd work dirs', what: "clean with a lock that is a symbolic link to the user's file", setup: (s) => {
      const w = patched(s);
      const mine = s.file('mine.txt');
      symlinkSync(mine, path.join(w, LOCK_FILE));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 6, stderr: /symbolic link/ }], protect: [mine, w] };
    },
  },
  {
    id: 'lock-is-socket', cls: 'old and odd work dirs', what: 'the lock is a socket', setup: (s) => {
      const w = patched(s);
      socketAt(path.join(w, LOCK_FILE));
      return { runs: [{ args: s.buildArgs(s.p('w-src'), w), env: s.toolchain().env, exit: 6, stderr: /socket/, timeoutMs: 30_000 }], protect: [path.join(w, LOCK_FILE)] };
    },
  },
  {
    id: 'state-is-dir', cls: 'old and odd work dirs', what: "state.json is a directory holding the user's file", setup: (s) => {
      const w = patched(s);
      rmSync(path.join(w, 'state.json'));
      const st = dirWithFile(s, 'w/state.json');
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /state\.json/ }, { args: ['clean', '--work-dir', w], exit: 6, stderr: /state\.json/ }], protect: [st] };
    },
  },
  {
    id: 'state-is-fifo', cls: 'old and odd work dirs', what: 'state.json is a FIFO (no hang)', setup: (s) => {
      const w = patched(s);
      rmSync(path.join(w, 'state.json'));
      execFileSync('mkfifo', [path.join(w, 'state.json')]);
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /state\.json/, timeoutMs: 30_000 }], protect: [path.join(w, 'state.json')] };
    },
  },
  {
    id: 'state-is-symlink-clean', cls: 'old and odd work dirs', what: "clean with state.json a symbolic link to the user's file", setup: (s) => {
      const w = patched(s);
      const mine = s.file('mine.json', '{"version":1,"steps":{}}\n');
      rmSync(path.join(w, 'state.json'));
      symlinkSync(mine, path.join(w, 'state.json'));
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 6, stderr: /state\.json/ }], protect: [mine, path.join(w, 'state.json')] };
    },
  },
  {
    id: 'old-state-is-dir', cls: 'old and odd work dirs', what: "no marker, and state.json is a directory: not taken for an older version's work dir", setup: (s) => {
      const w = oldWorkDir(s);
      rmSync(path.join(w, 'state.json'));
      const st = dirWithFile(s, 'w/state.json');
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /state\.json/ }, { args: ['clean', '--work-dir', w], exit: 6, stderr: /state\.json/ }], protect: [st, w] };
    },
  },
  {
    id: 'marker-is-symlink', cls: 'old and odd work dirs', what: "the marker is a symbolic link to the user's copy of it", setup: (s) => {
      const w = patched(s);
      const mine = s.file('mine.json', readFileSync(path.join(w, MARKER), 'utf8'));
      rmSync(path.join(w, MARKER));
      symlinkSync(mine, path.join(w, MARKER));
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: /symbolic link/ }, { args: ['clean', '--work-dir', w], exit: 6, stderr: /symbolic link/ }], protect: [mine, w] };
    },
  },
  {
    id: 'marker-is-dir', cls: 'old and odd work dirs', what: "the marker is a directory holding the user's file", setup: (s) => {
      const w = patched(s);
      rmSync(path.join(w, MARKER));
      dirWithFile(s, `w/${MARKER}`);
      return { runs: [{ args: patch(s.p('w-src'), w), exit: 6, stderr: WRONG }, { args: ['clean', '--work-dir', w], exit: 6, stderr: WRONG }], protect: [w] };
    },
  },
  {
    id: 'marker-is-fifo', cls: 'old and odd work dirs', what: 'the marker is a FIFO (no hang)', setup: (s) => {
      const w = patched(s);
      rmSync(path.join(w, MARKER));
      execFileSync('mkfifo', [path.join(w, MARKER)]);
      return { runs: [{ args: ['clean', '--work-dir', w], exit: 6, stderr: /FIFO/, timeoutMs: 30_000 }], protect: [w] };
    },
  },
];

// Issue 36, class 10: a run as nobody works wherever the checkout sits (a clone in a `mktemp -d` folder, mode
// 0700, included): it runs a copy of the CLI that nobody can reach.
const placementCases: Case[] = [
  { id: 'nobody-version', cls: 'permissions', what: 'nobody runs --version, wherever the checkout sits', setup: () => ({ runs: [{ args: ['--version'], asNobody: true, exit: 0, stdout: /\d+\.\d+\.\d+/ }] }) },
  {
    id: 'nobody-patch', cls: 'permissions', what: 'nobody patches a tree it can read into a folder it owns', setup: (s) => {
      const src = s.nvshmem();
      execFileSync('chmod', ['-R', 'a+rX', src]);
      mkdirSync(s.p('mine'));
      execFileSync('chown', ['65534:65534', s.p('mine')]);
      return { runs: [{ args: patch(src, s.p('mine/w')), asNobody: true, exit: 0 }], protect: [src], check: () => (existsSync(s.p('mine/w', MARKER)) ? undefined : 'no work dir was made') };
    },
  },
];

export const identityWorkDirCases: Case[] = [...identityCases, ...oldWorkDirCases, ...oddTypeCases, ...placementCases];
