import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, ENV, IO_DEFS, LOCK, report, tmp } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { GOLDEN_DEEPEP, materialize } from '../helpers/golden.ts';

/**
 * Issue 20, items 7 and 11: a dry run checks what the real run checks before its first long step, prints the
 * commands the real run would run, and writes nothing; the vendored efa_io_defs.h is in the diff or named.
 */

/** The real CLI with a time limit: a hang fails the test (signal set) instead of hanging it. */
function run(args: string[], env: NodeJS.ProcessEnv = ENV, timeoutMs = 90_000) {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { NVSHMEM_EFA_EFA_IO_DEFS_LOCK: LOCK, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const IO_DEFS_IN_TREE = 'src/modules/transport/libfabric/efa_gda/efa_io_defs.h';
const t = fakeToolchain();
const { LIBFABRIC_HOME: _lf, CUDA_HOME: _ch, CUDA_PATH: _cp, GDRCOPY_HOME: _gh, ...tenv } = t.env;
const homes = ['--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome];

/** The plan of `--dry-run --json` (issue 39, item 5): the whole plan, and what the real run would stop on. */
interface Plan {
  schema: string;
  dryRun: boolean;
  wouldFail: boolean;
  exitCode: number;
  blockers: { id: string; message: string; fix: string; exitCode: number }[];
  diff: string;
  build?: { commands: { argv: string[] }[]; notes: string[] };
}
const plan = (stdout: string) => JSON.parse(stdout) as Plan;

describe('build --dry-run lists what the build would stop on as blockers, and plans on (issue 39, item 5; issue 20, item 7)', () => {
  const src = materialize('v3.4-like');

  it('a wrong --efa-io-defs checksum: the whole plan, the blocker with its fix (the build exits 5), exit 8, nothing written', () => {
    const wrong = path.join(tmp('io-'), 'efa_io_defs.h');
    writeFileSync(wrong, '/* not the pinned file */\n');
    const w = path.join(tmp(), 'w');
    const r = run(['build', '--dry-run', '--nvshmem-src', src, '--work-dir', w, ...homes, '--efa-io-defs', wrong], tenv);
    expect(r.signal).toBeNull();
    expect(r.code, r.stderr).toBe(8);
    // The plan is whole: the diff and the build's commands, then the blocker with its fix.
    expect(r.stdout).toMatch(/^diff --git a\//);
    expect(r.stdout).toContain(` -S ${path.join(w, 'sources/nvshmem')} -B ${path.join(w, 'build/nvshmem')} `);
    expect(r.stdout).toMatch(/^# {3}blocker: efa-io-defs: .*is not the pinned efa_io_defs\.h: sha256.* \(exit 5\)$/m);
    expect(r.stdout).toMatch(/^# {5}fix: \S/m);
    expect(r.stdout).toContain(`not in this diff: ${IO_DEFS_IN_TREE}, the --efa-io-defs given is refused`);
    expect(r.stderr).toMatch(/the real build would stop on 1 blocker .*exit 8\).*is not the pinned efa_io_defs\.h/);
    const j = run(['build', '--dry-run', '--json', '--nvshmem-src', src, '--work-dir', w, ...homes, '--efa-io-defs', wrong], tenv);
    expect(j.code, j.stderr).toBe(8);
    const doc = plan(j.stdout);
    expect(doc).toMatchObject({ schema: 'nvshmem-efa-plan/1', dryRun: true, wouldFail: true, exitCode: 8 });
    expect(doc.blockers).toEqual([expect.objectContaining({ id: 'efa-io-defs', exitCode: 5, message: expect.stringMatching(/is not the pinned efa_io_defs\.h/), fix: expect.stringMatching(/\S/) })]);
    expect(doc.build?.commands).toHaveLength(3);
    expect(existsSync(w)).toBe(false);
  });

  it('DeepEP asked and the Python cannot import torch, or PYTHON names nothing: a blocker naming it (the build exits 4), exit 8', () => {
    const dp = materialize('v1', GOLDEN_DEEPEP);
    const w = path.join(tmp(), 'w');
    const torchBlocker = (r: ReturnType<typeof run>) => {
      expect(r.code, r.stderr).toBe(8);
      const doc = plan(r.stdout);
      expect(doc.blockers.map((b) => [b.id, b.exitCode])).toEqual([['python-torch', 4]]);
      // The setup.py command is in the plan all the same.
      expect(doc.build?.commands.some((c) => c.argv.includes('setup.py'))).toBe(true);
      return doc.blockers[0]!;
    };
    const noTorch = torchBlocker(run(['build', '--dry-run', '--json', '--nvshmem-src', src, '--deepep-src', dp, '--work-dir', w, ...homes], { ...tenv, PYTHON: '/bin/false' }));
    expect(noTorch.message).toMatch(/cannot import torch/);
    // torch 2.11+cu130 without the pip NVSHMEM it requires (uninstalled, as the old advice said): that package is the
    // fix, not reinstalling torch.
    const fake = path.join(tmp('py-'), 'python3');
    writeFileSync(fake, '#!/bin/bash\ncase "$2" in *importlib.metadata*) echo \'{"dir": "", "req": "nvidia-nvshmem-cu13==3.4.5"}\' ;; *) echo "ImportError: libnvshmem_host.so.3: cannot open shared object file" >&2; exit 1 ;; esac\n', { mode: 0o755 });
    const noNvshmem = torchBlocker(run(['build', '--dry-run', '--json', '--nvshmem-src', src, '--deepep-src', dp, '--work-dir', w, ...homes], { ...tenv, PYTHON: fake }));
    expect(noNvshmem.message).toContain('cannot import torch: it needs libnvshmem_host.so.3, from its pip package nvidia-nvshmem-cu13==3.4.5, which this environment lacks');
    expect(noNvshmem.fix).toContain(`${fake} -m pip install 'nvidia-nvshmem-cu13==3.4.5' and keep it`);
    const missing = path.join(tmp(), 'no-python3');
    const none = run(['build', '--dry-run', '--nvshmem-src', src, '--deepep-src', dp, '--work-dir', w, ...homes], { ...tenv, PYTHON: missing });
    expect(none.code, none.stderr).toBe(8);
    expect(none.stdout).toContain(`blocker: python-torch: PYTHON=${missing}`);
    expect(none.stderr).not.toMatch(/internal error/);
    expect(existsSync(w)).toBe(false);
  });

  it('--offline with a libfabric to build and no archives: a blocker naming the archive, the plan builds it', () => {
    const w = path.join(tmp(), 'w');
    const r = run(['build', '--dry-run', '--offline', '--nvshmem-src', src, '--work-dir', w, '--cuda-home', t.cudaHome, '--libfabric-ref', 'v2.3.0'], tenv);
    expect(r.code, r.stderr).toBe(8);
    expect(r.stdout).toMatch(/^# libfabric: build v2\.3\.0 from pinned sources/m);
    expect(r.stdout).toMatch(/^# {3}blocker: fabric-offline: --offline, and the pinned sources to build are not cached .*libfabric v2\.3\.0.*\(exit 4\)$/m);
    expect(existsSync(w)).toBe(false);
  });

  it('no CUDA toolkit and no cmake: every missing tool a blocker, the commands planned with placeholders', () => {
    const w = path.join(tmp(), 'w');
    const noCuda = tmp('no-cuda-');
    // PATH without the fake toolchain's cmake (the host's may have one: a PATH of an empty folder has none).
    const r = run(['build', '--dry-run', '--json', '--nvshmem-src', src, '--work-dir', w, '--cuda-home', noCuda, '--libfabric-home', t.libfabricHome, '--efa-io-defs', IO_DEFS], { ...tenv, PATH: tmp('empty-path-') });
    expect(r.code, r.stderr).toBe(8);
    const doc = plan(r.stdout);
    expect(doc.blockers.map((b) => b.id)).toEqual(expect.arrayContaining(['cuda', 'cmake']));
    for (const b of doc.blockers) expect([b.exitCode, b.fix.length > 0]).toEqual([4, true]);
    expect(doc.build?.commands[0]!.argv).toEqual(expect.arrayContaining(['<cmake>', '-DCUDA_HOME=<cuda-home>']));
    expect(doc.build?.notes.join('\n')).toMatch(/<cuda-home>, <cmake>: not found on this host \(see the blockers\)/);
    expect(existsSync(w)).toBe(false);
  });

  it('a work dir the build would refuse is refused by the dry run too (a file: 6; a foreign directory: 2)', () => {
    const d = tmp('foreign-');
    writeFileSync(path.join(d, 'notes.txt'), 'mine\n');
    const foreign = run(['build', '--dry-run', '--nvshmem-src', src, '--work-dir', d, ...homes], tenv);
    expect(foreign.code, foreign.stdout).toBe(2);
    expect(foreign.stderr).toMatch(/is not empty and is not an nvshmem-efa work dir/);
    const file = path.join(d, 'notes.txt');
    const asFile = run(['patch', '--dry-run', '--nvshmem-src', src, '--work-dir', file]);
    expect(asFile.code, asFile.stdout).toBe(6);
    expect(asFile.stderr).toMatch(/--work-dir .* not a directory/);
    expect(readdirSync(d)).toEqual(['notes.txt']);
  });
});

describe('build --dry-run prints the commands the build runs (item 7)', () => {
  it('the configure line is the one the build passes (work-dir copy, build dir, every -D), then build, install', () => {
    const src = materialize('v3.4-like');
    const w = path.join(tmp(), 'w');
    const args = ['--nvshmem-src', src, '--work-dir', w, ...homes, '--efa-io-defs', IO_DEFS, '--jobs', '3'];
    const dry = run(['build', '--dry-run', '--json', ...args], tenv);
    expect(dry.code, dry.stderr).toBe(0);
    expect(existsSync(w)).toBe(false);
    const doc = plan(dry.stdout);
    // A clean dry run: no blocker, exit 0, said in the plan too.
    expect(doc).toMatchObject({ schema: 'nvshmem-efa-plan/1', wouldFail: false, exitCode: 0, blockers: [] });
    const text = run(['build', '--dry-run', ...args], tenv);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).not.toMatch(/blocker/);
    expect(text.stderr).toBe('');
    expect(text.stdout).toContain(` -S ${path.join(w, 'sources/nvshmem')} -B ${path.join(w, 'build/nvshmem')} `);
    expect(text.stdout).toMatch(/-DNVSHMEM_EFA_NO_STATIC_LIB=ON/);
    expect(text.stdout).toContain(`--build ${path.join(w, 'build/nvshmem')} --parallel 3`);
    expect(text.stdout).toContain(`--install ${path.join(w, 'build/nvshmem')}`);

    const real = run(['build', ...args], tenv);
    expect(real.code, real.stderr).toBe(0);
    const [configure, build, install] = doc.build!.commands;
    expect(configure!.argv.slice(1)).toEqual(report(w).nvshmem.cmakeArgs);
    expect(build!.argv.slice(1)).toEqual(['--build', path.join(w, 'build/nvshmem'), '--parallel', '3']);
    expect(install!.argv.slice(1)).toEqual(['--install', path.join(w, 'build/nvshmem')]);
  });

  it('--in-place configures the tree itself; DeepEP asked: the setup.py command, where and with what', () => {
    const src = materialize('v3.4-like');
    const dp = materialize('v1', GOLDEN_DEEPEP);
    const w = path.join(tmp(), 'w');
    const r = run(['build', '--dry-run', '--in-place', '--nvshmem-src', src, '--deepep-src', dp, '--work-dir', w, ...homes, '--efa-io-defs', IO_DEFS, '--jobs', '2'], tenv);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(` -S ${src} -B ${path.join(w, 'build/nvshmem')} `);
    expect(r.stdout).toMatch(new RegExp(esc(`cd ${dp} && NVSHMEM_DIR=${path.join(w, 'install/nvshmem')} TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=2 CUDA_HOME=${t.cudaHome} ${t.python} setup.py build_ext --inplace`)));
    const copy = run(['build', '--dry-run', '--nvshmem-src', src, '--deepep-src', dp, '--work-dir', w, ...homes, '--efa-io-defs', IO_DEFS, '--jobs', '2'], tenv);
    expect(copy.stdout).toContain(`cd ${path.join(w, 'sources/deepep')} && NVSHMEM_DIR=`);
    expect(existsSync(w)).toBe(false);
  });
});

describe('patch --export --dry-run and the vendored efa_io_defs.h (items 7, 11)', () => {
  it('--export DIR --dry-run writes nothing and lists exactly what the export writes', () => {
    const src = materialize('v3.4-like');
    const base = tmp('export-');
    const e = path.join(base, 'e');
    const dry = run(['patch', '--nvshmem-src', src, '--export', e, '--dry-run', '--work-dir', path.join(base, 'w')]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(existsSync(e)).toBe(false);
    const listed = [...dry.stdout.matchAll(/^would write (\S+)$/gm)].map((m) => path.relative(e, m[1]!)).sort();
    const real = run(['patch', '--nvshmem-src', src, '--export', e, '--work-dir', path.join(base, 'w')]);
    expect(real.code, real.stderr).toBe(0);
    const written = readdirSync(path.join(e, 'nvshmem')).map((n) => `nvshmem/${n}`);
    expect(listed).toEqual([...written, '.nvshmem-efa-export.json'].sort());
  });

  it('without --efa-io-defs the diff and the export say the build vendors efa_io_defs.h; with it, it is in them', () => {
    const src = materialize('v3.4-like');
    const base = tmp('vendored-');
    const w = path.join(base, 'w');
    const said = new RegExp(`not in this (diff|export): ${esc(IO_DEFS_IN_TREE)}, which the build vendors from the pinned source`);
    const without = run(['patch', '--dry-run', '--nvshmem-src', src, '--work-dir', w]);
    expect(without.code, without.stderr).toBe(0);
    expect(without.stdout).toMatch(said);
    expect(without.stdout).not.toContain(`diff --git a/${IO_DEFS_IN_TREE}`);
    const withIt = run(['patch', '--dry-run', '--nvshmem-src', src, '--work-dir', w, '--efa-io-defs', IO_DEFS]);
    expect(withIt.code, withIt.stderr).toBe(0);
    expect(withIt.stdout).toContain(`diff --git a/${IO_DEFS_IN_TREE} b/${IO_DEFS_IN_TREE}`);
    expect(withIt.stdout).not.toMatch(said);
    const ex = run(['patch', '--nvshmem-src', src, '--work-dir', w, '--export', path.join(base, 'e1')]);
    expect(ex.stdout).toMatch(said);
    const ex2 = run(['patch', '--nvshmem-src', src, '--work-dir', w, '--export', path.join(base, 'e2'), '--efa-io-defs', IO_DEFS]);
    expect(ex2.code, ex2.stderr).toBe(0);
    expect(readdirSync(path.join(base, 'e2/nvshmem')).some((n) => n.endsWith('efa_io_defs.h.patch'))).toBe(true);
    // The exported patch creates the file the real patch step vendors, byte for byte.
    const p = readdirSync(path.join(base, 'e2/nvshmem')).find((n) => n.endsWith('efa_io_defs.h.patch'))!;
    const added = readFileSync(path.join(base, 'e2/nvshmem', p), 'utf8').split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++')).map((l) => l.slice(1));
    const real = run(['patch', '--nvshmem-src', src, '--work-dir', w, '--efa-io-defs', IO_DEFS]);
    expect(real.code, real.stderr).toBe(0);
    expect(added.join('\n') + '\n').toBe(readFileSync(path.join(w, 'sources/nvshmem', IO_DEFS_IN_TREE), 'utf8'));
  });
});
