import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { IO_DEFS, ROOT } from '../helpers/cli.ts';
import type { Case, Sandbox } from './runner.ts';

/**
 * Issue 36, classes 6, 7 and 9: terminal output bounded per line, nothing that waits forever (a git that never
 * returns or asks for a password, a download whose body never ends or stops, a FIFO where a header should be, a
 * build tool's background child holding the output pipe), and the rest (a deleted current directory, `--json` with
 * `--export`, file names that are not UTF-8, an NVSHMEM_EFA_HOME missing a template).
 */

const D = ['--efa-io-defs', IO_DEFS];
const patch = (src: string, work: string, ...more: string[]) => ['patch', '--nvshmem-src', src, '--work-dir', work, '--offline', ...D, ...more];
/** stderr or stdout no longer than this: what bounded per line means for a run whose tool printed megabytes. */
const under64k = (rest = '') => new RegExp(`^(?![\\s\\S]{65536})${rest}`);

function alive(pidFile: string): boolean {
  if (!existsSync(pidFile)) return false;
  const pid = Number(readFileSync(pidFile, 'utf8'));
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function killPidFile(pidFile: string): void {
  if (!existsSync(pidFile)) return;
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** A `git` first on PATH whose clone hangs (quiet), or hangs only when it may prompt (prompt); other verbs are git's. */
function fakeGit(s: Sandbox, mode: 'quiet' | 'prompt'): { env: Record<string, string>; pid: string } {
  const real = spawnSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).stdout.trim() || '/usr/bin/git';
  const pid = s.p('git.pid');
  const bin = s.p('gitbin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(
    path.join(bin, 'git'),
    `#!/bin/sh
[ "$1" = clone ] || exec ${real} "$@"
echo "Cloning into '$(eval echo \\\${$#})'..." >&2
if [ "${mode}" = prompt ] && [ "$GIT_TERMINAL_PROMPT" = 0 ]; then
  echo "fatal: could not read Username for 'https://example.invalid': terminal prompts disabled" >&2; exit 128
fi
# The prompt, or a server gone quiet: nothing more, ever.
echo $$ > "${pid}"; exec sleep 300
`,
  );
  chmodSync(path.join(bin, 'git'), 0o755);
  s.onCleanup(() => killPidFile(pid));
  return { env: { PATH: `${bin}:${process.env.PATH}`, NVSHMEM_EFA_NVSHMEM_URL: 'https://example.invalid/nvshmem.git' }, pid };
}

/** A local HTTP server in a process of its own: a body that never ends (endless) or that stops after a byte (stall). */
async function httpServer(s: Sandbox, mode: 'endless' | 'stall'): Promise<string> {
  const portFile = s.p(`http-${mode}.port`);
  const script = `
const http = require('http'), fs = require('fs');
const [mode, portFile] = process.argv.slice(1);
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  if (mode === 'stall') { res.write('/'); return; }
  const chunk = Buffer.alloc(65536, 120);
  const pump = () => { while (res.write(chunk)) {} res.once('drain', pump); };
  pump();
});
server.listen(0, '127.0.0.1', () => { fs.writeFileSync(portFile + '.tmp', String(server.address().port)); fs.renameSync(portFile + '.tmp', portFile); });`;
  s.background(process.execPath, ['-e', script, mode, portFile]);
  for (let i = 0; i < 200 && !existsSync(portFile); i++) await new Promise((r) => setTimeout(r, 50));
  if (!existsSync(portFile)) throw new Error('setup: the local HTTP server did not start');
  return `http://127.0.0.1:${readFileSync(portFile, 'utf8')}/efa_io_defs.h`;
}

/** A FIFO in place of one of the fake libfabric's headers. */
function fifoHeader(s: Sandbox, rel: string): string {
  const h = path.join(s.toolchain().libfabricHome, rel);
  rmSync(h, { force: true });
  mkdirSync(path.dirname(h), { recursive: true });
  const r = spawnSync('mkfifo', [h]);
  if (r.status !== 0) throw new Error(`setup: mkfifo ${h} failed`);
  return h;
}

/** A name whose bytes are not UTF-8 (Latin-1 é), created below `dir`. */
function latin1Name(dir: string, stem = 'caf', ext = '.h', asDir = false): void {
  const p = Buffer.concat([Buffer.from(`${dir}/${stem}`), Buffer.from([0xe9]), Buffer.from(ext)]);
  if (asDir) mkdirSync(p);
  else writeFileSync(p, 'the user\'s own bytes\n');
}

/** A copy of the package (package.json, templates/, third_party/) for NVSHMEM_EFA_HOME, without `drop`. */
function packageCopy(s: Sandbox, drop: string, fifo = false): string {
  const home = s.p('nvshmem-efa-home');
  mkdirSync(home, { recursive: true });
  for (const f of ['package.json', 'templates', 'third_party']) cpSync(path.join(ROOT, f), path.join(home, f), { recursive: true });
  rmSync(path.join(home, drop), { force: true });
  if (fifo) spawnSync('mkfifo', [path.join(home, drop)]);
  return home;
}

const logHasLineOf = (file: string, n: number) => () => (existsSync(file) && statSync(file).size > n ? undefined : `${file} does not hold the whole ${n}-byte line`);

const waitCases: Case[] = [
  {
    id: 'git-clone-goes-quiet', cls: 'nothing waits forever', what: 'a git clone that prints one line, then nothing, ever (a server that stopped sending)',
    setup: (s) => {
      const g = fakeGit(s, 'quiet');
      return {
        runs: [{ args: ['patch', '--work-dir', s.p('w'), ...D], env: { ...g.env, NVSHMEM_EFA_CLONE_QUIET_S: '2' }, exit: 4, stderr: /cannot clone NVSHMEM .*git printed nothing for 2 s and was stopped/, timeoutMs: 60_000 }],
        check: () => (alive(g.pid) ? 'the hung git was left running' : undefined),
      };
    },
  },
  {
    id: 'git-clone-asks-password', cls: 'nothing waits forever', what: 'a git clone that would wait on a password prompt (a private mirror)',
    setup: (s) => {
      const g = fakeGit(s, 'prompt');
      return {
        runs: [{ args: ['patch', '--work-dir', s.p('w'), ...D], env: g.env, exit: 4, stderr: /cannot clone NVSHMEM .*terminal prompts disabled/, timeoutMs: 60_000 }],
        check: () => (existsSync(g.pid) ? 'git was let prompt (GIT_TERMINAL_PROMPT not 0)' : undefined),
      };
    },
  },
  {
    id: 'download-never-ends', cls: 'nothing waits forever', what: "efa_io_defs.h from a mirror whose body never ends",
    setup: async (s) => {
      const url = await httpServer(s, 'endless');
      return { runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w')], env: { NVSHMEM_EFA_EFA_IO_DEFS_URL: url }, exit: 4, stderr: /error: cannot download efa_io_defs\.h from http:\/\/127\.0\.0\.1:\d+\/efa_io_defs\.h: the body is larger than 1048576 bytes/, timeoutMs: 60_000 }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'download-stalls', cls: 'nothing waits forever', what: 'efa_io_defs.h from a mirror that sends a byte, then nothing, connection open',
    setup: async (s) => {
      const url = await httpServer(s, 'stall');
      return { runs: [{ args: ['patch', '--nvshmem-src', s.nvshmem(), '--work-dir', s.p('w')], env: { NVSHMEM_EFA_EFA_IO_DEFS_URL: url }, exit: 4, stderr: /error: cannot download efa_io_defs\.h from http:\/\/127\.0\.0\.1:\d+\/efa_io_defs\.h: /, timeoutMs: 90_000 }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'fifo-fabric-h', cls: 'nothing waits forever', what: 'a FIFO at LIBFABRIC_HOME/include/rdma/fabric.h (build)',
    setup: (s) => {
      fifoHeader(s, 'include/rdma/fabric.h');
      return { runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: s.toolchain().env, exit: 6, stderr: /fabric\.h is not a regular file \(a FIFO\)/, timeoutMs: 60_000 }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'fifo-fi-ext-efa', cls: 'nothing waits forever', what: 'a FIFO at LIBFABRIC_HOME/include/rdma/fi_ext_efa.h (build)',
    setup: (s) => {
      fifoHeader(s, 'include/rdma/fi_ext_efa.h');
      return { runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: s.toolchain().env, exit: 6, stderr: /fi_ext_efa\.h is not a regular file \(a FIFO\)/, timeoutMs: 60_000 }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'fifo-fabric-h-doctor', cls: 'nothing waits forever', what: 'a FIFO at fabric.h of --libfabric-home (doctor)',
    setup: (s) => {
      fifoHeader(s, 'include/rdma/fabric.h');
      return { runs: [{ args: ['doctor', '--libfabric-home', s.toolchain().libfabricHome], env: s.toolchain().env, exit: 6, stderr: /fabric\.h is not a regular file \(a FIFO\)/, timeoutMs: 60_000 }], protect: [s.p('nvshmem')] };
    },
  },
  {
    id: 'background-child-holds-stdout', cls: 'nothing waits forever', what: "the build tool leaves a child holding its output pipe (a compiler cache server)",
    setup: (s) => {
      const bg = path.join(s.toolchain().pids, 'bg');
      s.onCleanup(() => killPidFile(bg));
      return { runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: { ...s.toolchain().env, FAKE_BG_HOLD: '1' }, exit: 0, timeoutMs: 60_000 }], protect: [s.p('nvshmem')], check: () => (existsSync(bg) ? undefined : 'the fake build did not leave its background child (the case proves nothing)') };
    },
  },
];

const streamCases: Case[] = [
  {
    id: 'long-line-failure', cls: 'output streams', what: 'a failing build tool prints a 27 MB line: the terminal gets it cut, the log whole',
    setup: (s) => ({
      runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: { ...s.toolchain().env, FAKE_LONG_LINE: '27000000', FAKE_LONG_LINE_FAIL: '1' }, exit: 1, stderr: under64k('[\\s\\S]*x{100}… \\(26995904 more characters in the log\\)'), stdout: under64k(), timeoutMs: 90_000 }],
      protect: [s.p('nvshmem')],
      check: logHasLineOf(s.p('w/logs/build-nvshmem.log'), 27_000_000),
    }),
  },
  {
    id: 'long-line-success', cls: 'output streams', what: 'a build tool prints a 5 MB line and succeeds: nothing of it floods the terminal',
    setup: (s) => ({
      runs: [{ args: s.buildArgs(s.nvshmem(), s.p('w')), env: { ...s.toolchain().env, FAKE_LONG_LINE: '5000000' }, exit: 0, stderr: under64k(), stdout: under64k(), timeoutMs: 90_000 }],
      protect: [s.p('nvshmem')],
      check: logHasLineOf(s.p('w/logs/build-nvshmem.log'), 5_000_000),
    }),
  },
];

const restCases: Case[] = [
  { id: 'cwd-gone-version', cls: 'the rest', what: '--version from a current directory that was removed', setup: () => ({ runs: [{ args: ['--version'], cwdGone: true, exit: 6, stderr: /current directory no longer exists/ }] }) },
  { id: 'cwd-gone-patch', cls: 'the rest', what: 'patch (absolute paths) from a current directory that was removed', setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w')), cwdGone: true, exit: 6, stderr: /current directory no longer exists/ }], protect: [s.p('nvshmem')], check: () => (existsSync(s.p('w')) ? 'a work dir was made' : undefined) }) },
  { id: 'cwd-gone-doctor', cls: 'the rest', what: 'doctor from a current directory that was removed', setup: () => ({ runs: [{ args: ['doctor'], cwdGone: true, exit: 6, stderr: /current directory no longer exists/ }] }) },
  {
    id: 'export-json', cls: 'the rest', what: 'patch --export DIR --json prints one JSON document',
    setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('exp'), '--json'), exit: 0, stdout: /^\{\n {2}"schema": "nvshmem-efa-export\/1",\n {2}"export": "[^"]+exp",\n {2}"dryRun": false,\n {2}"wouldFail": false,[\s\S]*"parts": \[[\s\S]*"apply": "git -C [\s\S]*\}\n$/ }], protect: [s.p('nvshmem')] }),
  },
  {
    id: 'export-json-dry-run', cls: 'the rest', what: 'patch --export DIR --dry-run --json: a JSON plan, nothing written',
    setup: (s) => ({ runs: [{ args: patch(s.nvshmem(), s.p('w'), '--export', s.p('exp'), '--dry-run', '--json'), exit: 0, stdout: /^\{\n {2}"schema": "nvshmem-efa-export\/1",\n {2}"export": "[^"]+exp",\n {2}"dryRun": true,[\s\S]*"files": \[\n {8}"[^"]+\.patch"[\s\S]*\}\n$/ }], protect: [s.p('nvshmem')], check: () => (existsSync(s.p('exp')) ? '--dry-run wrote the export' : undefined) }),
  },
  {
    id: 'non-utf8-name-nvshmem', cls: 'the rest', what: 'a Latin-1 file name in the NVSHMEM tree (copy mode)',
    setup: (s) => { const src = s.nvshmem(); latin1Name(path.join(src, 'src')); return { runs: [{ args: patch(src, s.p('w')), exit: 3, stderr: /src\/caf\\xe9\.h: a file name that is not UTF-8[\s\S]*fix: rename it/ }], protect: [src] }; },
  },
  {
    id: 'non-utf8-dir-nvshmem', cls: 'the rest', what: 'a Latin-1 directory name in the NVSHMEM tree',
    setup: (s) => { const src = s.nvshmem(); latin1Name(src, 'docs-', '', true); return { runs: [{ args: patch(src, s.p('w')), exit: 3, stderr: /docs-\\xe9: a file name that is not UTF-8/ }], protect: [src] }; },
  },
  {
    id: 'non-utf8-name-in-place', cls: 'the rest', what: 'a Latin-1 file name in a tree patched --in-place: refused, the tree untouched',
    setup: (s) => { const src = s.nvshmem(); latin1Name(path.join(src, 'src')); return { runs: [{ args: patch(src, s.p('w'), '--in-place'), exit: 3, stderr: /not UTF-8/ }], protect: [src] }; },
  },
  {
    id: 'non-utf8-name-deepep', cls: 'the rest', what: 'a Latin-1 file name in the DeepEP tree',
    setup: (s) => { const dp = s.deepep(); latin1Name(dp); return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--deepep-src', dp), exit: 3, stderr: /caf\\xe9\.h: a file name that is not UTF-8/ }], protect: [dp, s.p('nvshmem')] }; },
  },
  {
    id: 'home-missing-template', cls: 'the rest', what: 'NVSHMEM_EFA_HOME names a copy of the package that lacks a template',
    setup: (s) => { const home = packageCopy(s, 'templates/transport_efa_gda/manifest.json'); return { runs: [{ args: patch(s.nvshmem(), s.p('w')), env: { NVSHMEM_EFA_HOME: home }, exit: 2, stderr: /NVSHMEM_EFA_HOME=.*: templates\/transport_efa_gda\/manifest\.json does not exist[\s\S]*fix: unset NVSHMEM_EFA_HOME/ }], protect: [s.p('nvshmem'), home] }; },
  },
  {
    id: 'home-template-fifo', cls: 'the rest', what: 'NVSHMEM_EFA_HOME names a copy whose template is a FIFO',
    setup: (s) => { const home = packageCopy(s, 'templates/transport_efa_gda/manifest.json', true); return { runs: [{ args: patch(s.nvshmem(), s.p('w')), env: { NVSHMEM_EFA_HOME: home }, exit: 2, stderr: /NVSHMEM_EFA_HOME=.*manifest\.json is not a regular file \(a FIFO\)/, timeoutMs: 60_000 }], protect: [s.p('nvshmem')] }; },
  },
  {
    id: 'home-missing-shim', cls: 'the rest', what: "NVSHMEM_EFA_HOME names a copy that lacks DeepEP's shim",
    setup: (s) => { const home = packageCopy(s, 'templates/deepep_efa/nvshmem_efa_shim.cuh'); const dp = s.deepep(); return { runs: [{ args: patch(s.nvshmem(), s.p('w'), '--deepep-src', dp), env: { NVSHMEM_EFA_HOME: home }, exit: 2, stderr: /NVSHMEM_EFA_HOME=.*nvshmem_efa_shim\.cuh does not exist/ }], protect: [s.p('nvshmem'), dp] }; },
  },
];

export const waitStreamRestCases: Case[] = [...waitCases, ...streamCases, ...restCases];
