import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, ENV, IO_DEFS, LOCK, tmp } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';
import { skipTitle } from '../helpers/skip-title.ts';

/**
 * Issue 20, items 8, 9 and 10: bad files, variables and options are one-line errors naming the option or the
 * variable and the fix, with the exit code of the README's table; nothing hangs on a FIFO or a device.
 */

/** The real CLI with a time limit: a hang fails the test (signal set) instead of hanging it. */
function run(args: string[], env: NodeJS.ProcessEnv = ENV, timeoutMs = 60_000) {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** One error line, a fix line, no stack trace. */
function oneLine(stderr: string): void {
  expect(stderr).not.toMatch(/internal error/);
  expect(stderr).not.toMatch(/^\s+at .*:\d+:\d+\)?$/m);
  expect(stderr).not.toMatch(/"code":|invalid_type/);
  expect(stderr.match(/^error: /gm)?.length, stderr).toBe(1);
  expect(stderr).toMatch(/^fix: /m);
}

const t = fakeToolchain();
const { LIBFABRIC_HOME: _lf, CUDA_HOME: _ch, CUDA_PATH: _cp, GDRCOPY_HOME: _gh, ...tenv } = t.env;
const src = materialize('v3.4-like');
const file = (name: string, content = 'x\n') => {
  const f = path.join(tmp('f-'), name);
  writeFileSync(f, content);
  return f;
};
const dryBuild = (extra: string[], env: NodeJS.ProcessEnv = tenv) => run(['build', '--dry-run', '--nvshmem-src', src, '--work-dir', path.join(tmp(), 'w'), '--efa-io-defs', IO_DEFS, ...extra], env);
const homes = ['--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome];

describe('lock files, NVSHMEM_EFA_HOME and --efa-io-defs that are not what they should be (item 8)', () => {
  it('NVSHMEM_EFA_EFA_IO_DEFS_LOCK: garbage, missing (exit 2) or not a regular file (exit 6) names the variable', () => {
    const w = path.join(tmp(), 'w');
    for (const [lock, code] of [[file('l.json', '{{ garbage'), 2], [path.join(tmp(), 'none.json'), 2], [tmp('dir-'), 6], [file('l.json', '{"file": 3}'), 2]] as const) {
      const r = run(['patch', '--nvshmem-src', src, '--work-dir', w, '--offline'], { ...ENV, NVSHMEM_EFA_EFA_IO_DEFS_LOCK: lock });
      expect(r.code, `${lock}: ${r.stderr}`).toBe(code);
      expect(r.stderr).toContain(`NVSHMEM_EFA_EFA_IO_DEFS_LOCK=${lock}`);
      oneLine(r.stderr);
    }
    expect(existsSync(w)).toBe(false);
  });

  it('NVSHMEM_EFA_FABRIC_LOCK: garbage or schema-invalid is exit 2 naming the variable and the field, no zod dump', () => {
    const garbage = dryBuild(homes, { ...tenv, NVSHMEM_EFA_FABRIC_LOCK: file('f.json', 'garbage') });
    expect(garbage.code, garbage.stderr).toBe(2);
    expect(garbage.stderr).toMatch(/NVSHMEM_EFA_FABRIC_LOCK=\S+ is not JSON/);
    oneLine(garbage.stderr);
    const invalid = dryBuild(homes, { ...tenv, NVSHMEM_EFA_FABRIC_LOCK: file('f.json', '{"schema":"nvshmem-efa-fabric-lock/1","libfabric":3}') });
    expect(invalid.code, invalid.stderr).toBe(2);
    expect(invalid.stderr).toMatch(/NVSHMEM_EFA_FABRIC_LOCK=\S+ is not a fabric lock: libfabric: /);
    oneLine(invalid.stderr);
  });

  it('NVSHMEM_EFA_HOME pointing nowhere (exit 2) or at a file (exit 6) names the variable', () => {
    const nowhere = path.join(tmp(), 'nowhere');
    for (const [home, code] of [[nowhere, 2], [file('home'), 6], [tmp('empty-home-'), 2]] as const) {
      for (const args of [['patch', '--nvshmem-src', src, '--work-dir', path.join(tmp(), 'w'), '--offline'], ['--version']]) {
        const r = run(args, { ...ENV, NVSHMEM_EFA_HOME: home });
        expect(r.code, `${args[0]} ${home}: ${r.stderr}`).toBe(code);
        expect(r.stderr).toContain(`NVSHMEM_EFA_HOME=${home}`);
        oneLine(r.stderr);
      }
    }
  });

  it('--efa-io-defs a FIFO, /dev/zero or a directory: exit 6 at once, no hang', () => {
    const fifo = path.join(tmp('fifo-'), 'efa_io_defs.h');
    execFileSync('mkfifo', [fifo]);
    for (const f of [fifo, '/dev/zero', tmp('dir-')]) {
      for (const cmd of [['patch', '--offline'], ['build', '--dry-run', ...homes]]) {
        const w = path.join(tmp(), 'w');
        const r = run([cmd[0]!, '--nvshmem-src', src, '--work-dir', w, '--efa-io-defs', f, ...cmd.slice(1)], tenv, 30_000);
        expect(r.signal, `${cmd[0]} --efa-io-defs ${f} hung`).toBeNull();
        expect(r.code, r.stderr).toBe(6);
        expect(r.stderr).toMatch(new RegExp(`--efa-io-defs ${f} is (not a regular file|a directory)`));
        oneLine(r.stderr);
        expect(existsSync(w)).toBe(false);
      }
    }
  });
});

describe('archives named by NVSHMEM_EFA_*_URL that are not files (item 8)', () => {
  it('a FIFO as the libfabric / rdma-core archive: exit 6 naming the variable, no hang', () => {
    const fifo = path.join(tmp('fifo-'), 'libfabric.tar.bz2');
    execFileSync('mkfifo', [fifo]);
    const w = path.join(tmp(), 'w');
    const r = run(['build', '--nvshmem-src', src, '--work-dir', w, '--cuda-home', t.cudaHome, '--libfabric-ref', 'v2.3.0', '--efa-io-defs', IO_DEFS],
      { ...tenv, NVSHMEM_EFA_SYSROOT: tmp('sysroot-'), NVSHMEM_EFA_LIBFABRIC_URL: fifo, NVSHMEM_EFA_RDMA_CORE_URL: fifo }, 90_000);
    expect(r.signal, 'the build hung reading the FIFO').toBeNull();
    expect(r.code, r.stderr).toBe(6);
    expect(r.stderr).toMatch(/NVSHMEM_EFA_(RDMA_CORE|LIBFABRIC)_URL=\S+ is not a regular file \(a FIFO\)/);
    expect(r.stderr).not.toMatch(/internal error/);
  });
});

describe('variables that are set but wrong are refused like the options (item 9)', () => {
  it('CUDA_HOME: nonexistent exit 2, a file exit 6, no toolkit a blocker (exit 4 in the build, 8 in a dry run), each naming CUDA_HOME', () => {
    // A missing toolkit is what the build would stop on (exit 4): the dry run lists it as a blocker, exit 8 (issue 39).
    for (const [home, code] of [[path.join(tmp(), 'nonexistent'), 2], [file('cuda'), 6], [tmp('not-cuda-'), 8]] as const) {
      const r = dryBuild(['--libfabric-home', t.libfabricHome], { ...tenv, CUDA_HOME: home });
      expect(r.code, `${home}: ${r.stderr}`).toBe(code);
      expect(r.stderr).toContain(`CUDA_HOME=${home}`);
      if (code === 8) expect(r.stdout).toMatch(new RegExp(`^# {3}blocker: cuda: CUDA_HOME=${home}: .*\\(exit 4\\)$`, 'm'));
      oneLine(r.stderr);
    }
    // --cuda-home wins over CUDA_HOME, as documented.
    expect(dryBuild(homes, { ...tenv, CUDA_HOME: path.join(tmp(), 'nonexistent') }).code).toBe(0);
  });

  it('GDRCOPY_HOME: nonexistent exit 2, without include/gdrapi.h a blocker (exit 4 in the build, 8 in a dry run), each naming GDRCOPY_HOME', () => {
    for (const [home, code] of [[path.join(tmp(), 'nonexistent'), 2], [tmp('not-gdrcopy-'), 8]] as const) {
      const r = dryBuild(homes, { ...tenv, GDRCOPY_HOME: home });
      expect(r.code, `${home}: ${r.stderr}`).toBe(code);
      if (code === 8) expect(r.stdout).toMatch(/^# {3}blocker: gdrcopy: GDRCOPY_HOME=.*\(exit 4\)$/m);
      expect(r.stderr).toContain(`GDRCOPY_HOME=${home}`);
      oneLine(r.stderr);
    }
  });
});

describe('the exit-code table holds for paths and options (item 10)', () => {
  it('a file where a directory is expected is exit 6 for every path option, naming it', () => {
    const f = file('plain-file');
    const dp = materialize('v1', GOLDEN_DEEPEP);
    const w = () => path.join(tmp(), 'w');
    const cases: [string, string[]][] = [
      ['--nvshmem-src', ['patch', '--nvshmem-src', f, '--work-dir', w(), '--offline']],
      ['--deepep-src', ['patch', '--nvshmem-src', src, '--deepep-src', f, '--work-dir', w(), '--offline']],
      ['--work-dir', ['patch', '--nvshmem-src', src, '--work-dir', f, '--offline']],
      ['--export', ['patch', '--nvshmem-src', src, '--deepep-src', dp, '--export', f, '--work-dir', w()]],
      ['--cuda-home', ['build', '--nvshmem-src', src, '--work-dir', w(), '--cuda-home', f, '--libfabric-home', t.libfabricHome, '--offline']],
      ['--libfabric-home', ['build', '--nvshmem-src', src, '--work-dir', w(), '--cuda-home', t.cudaHome, '--libfabric-home', f, '--offline']],
      ['--gdrcopy-home', ['build', '--nvshmem-src', src, '--work-dir', w(), ...homes, '--gdrcopy-home', f, '--offline']],
      ['--nvshmem-src', ['doctor', '--nvshmem-src', f]],
      ['--work-dir', ['report', '--work-dir', f]],
      ['--work-dir', ['selftest', '--work-dir', f]],
    ];
    const wrong: string[] = [];
    for (const [flag, args] of cases) {
      const r = run(args, tenv);
      if (r.code !== 6 || !r.stderr.includes(`${flag} ${f} is not a directory`)) wrong.push(`${args[0]} ${flag}: exit ${r.code}: ${r.stderr.split('\n')[0]}`);
      else oneLine(r.stderr);
    }
    expect(wrong).toEqual([]);
  });

  it('an unknown option, or one of another command, is exit 2 with error: and fix: lines', () => {
    for (const args of [['build', '--frobnicate'], ['build', '--export', tmp()]]) {
      const r = run(args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^error: unknown option/m);
      expect(r.stderr).toMatch(/^fix: .*nvshmem-efa build --help/m);
    }
  });

  it('a path that does not exist is exit 2, naming the option', () => {
    const none = path.join(tmp(), 'none');
    const r = run(['patch', '--nvshmem-src', none, '--work-dir', path.join(tmp(), 'w'), '--offline']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--nvshmem-src ${none} does not exist`);
    oneLine(r.stderr);
  });

  it("an empty path option is exit 2, naming it, and nothing is cloned or written", () => {
    const w = path.join(tmp(), 'w');
    const cases: [string, string[]][] = [
      ['--nvshmem-src', ['patch', '--nvshmem-src', '', '--work-dir', w]],
      ['--work-dir', ['patch', '--nvshmem-src', src, '--work-dir', '', '--offline']],
      ['--efa-io-defs', ['patch', '--nvshmem-src', src, '--work-dir', w, '--efa-io-defs', '']],
      ['--cuda-home', ['build', '--nvshmem-src', src, '--work-dir', w, '--cuda-home', '']],
      ['--work-dir', ['selftest', '--work-dir', '']],
    ];
    for (const [flag, args] of cases) {
      const r = run(args, tenv);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`${flag} is empty`);
      oneLine(r.stderr);
    }
    expect(existsSync(w)).toBe(false);
  });

  it('--cuda-arch this nvcc cannot target is exit 2 with the list it supports', () => {
    // An nvcc that lists its targets (CUDA 11+): only those are accepted.
    const cuda = path.join(tmp('cuda-'), 'cuda');
    mkdirSync(path.join(cuda, 'bin'), { recursive: true });
    mkdirSync(path.join(cuda, 'include'));
    writeFileSync(path.join(cuda, 'include/cuda.h'), '');
    writeFileSync(path.join(cuda, 'include/nvml.h'), '');
    writeFileSync(path.join(cuda, 'bin/nvcc'), '#!/bin/sh\ncase "$1" in --list-gpu-arch) printf "compute_80\\ncompute_90\\n" ;; *) echo "Cuda compilation tools, release 12.4, V12.4.131" ;; esac\n');
    chmodSync(path.join(cuda, 'bin/nvcc'), 0o755);
    const listed = dryBuild(['--cuda-home', cuda, '--libfabric-home', t.libfabricHome, '--cuda-arch', '90;100']);
    expect(listed.code, listed.stderr).toBe(2);
    expect(listed.stderr).toMatch(/--cuda-arch 90;100: .*cannot target 100 \(it supports 80, 90\)/);
    oneLine(listed.stderr);
    expect(dryBuild(['--cuda-home', cuda, '--libfabric-home', t.libfabricHome, '--cuda-arch', '90a']).code).toBe(0);
    // The fake toolchain's nvcc (release 13.0) lists nothing: CUDA 13 dropped everything below sm_75.
    const old = dryBuild([...homes, '--cuda-arch', '35']);
    expect(old.code, old.stderr).toBe(2);
    expect(old.stderr).toMatch(/--cuda-arch 35: .*\(CUDA 13\.0\) cannot target 35 \(it supports 75 and newer\)/);
    oneLine(old.stderr);
  });

  it.skipIf(!existsSync('/usr/local/cuda/bin/nvcc'))(skipTitle('--cuda-arch 35 against the real nvcc: exit 2 listing what it supports', !existsSync('/usr/local/cuda/bin/nvcc') && 'no /usr/local/cuda/bin/nvcc'), () => {
    const list = execFileSync('/usr/local/cuda/bin/nvcc', ['--list-gpu-arch'], { encoding: 'utf8' }).match(/compute_(\d+)/g)!.map((s) => s.slice(8));
    const r = dryBuild(['--cuda-home', '/usr/local/cuda', '--libfabric-home', t.libfabricHome, '--cuda-arch', '35']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`cannot target 35 (it supports ${[...new Set(list)].sort((a, b) => Number(a) - Number(b)).join(', ')})`);
  });
});
