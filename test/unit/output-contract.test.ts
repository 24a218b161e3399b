import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ReportSchema } from '../../src/core/report.ts';
import { cli, ENV, IO_DEFS, tmp, type CliResult } from '../helpers/cli.ts';
import { fakeToolchain } from '../helpers/fake-toolchain.ts';
import { materialize } from '../helpers/golden.ts';

/**
 * Issue 39, item 6: one output contract, checked by running every command in each situation docs/cli.md
 * documents. Every command takes --json and prints one document whose `schema` names it ("### JSON output");
 * one situation is one exit code in every command that meets it ("### Exit codes"). Fast: fixture work dirs
 * (a real `patch` of the miniature NVSHMEM, and a copy of it made to look built), nothing compiled.
 *
 * `probe` is in every exit-code situation below but not in the --json one: answering means building native/probe
 * with cmake (minutes); its document is validated against `nvshmem-efa-probe/1` by the CLI itself and printed as `nvshmem-efa-probe/2` (test/unit/probe-json.test.ts)
 * (core/probe-build.ts) and tested in test/native/probe.test.ts.
 */

const SCHEMA = /^nvshmem-efa-[a-z]+\/[1-9]\d*$/;
const t = fakeToolchain();
const { LIBFABRIC_HOME: _lf, CUDA_HOME: _ch, CUDA_PATH: _cp, GDRCOPY_HOME: _gh, ...tenv } = t.env;
const TENV = { ...ENV, ...tenv };
const homes = ['--cuda-home', t.cudaHome, '--libfabric-home', t.libfabricHome];

/** The one JSON document of stdout, with its schema checked. */
function doc(r: CliResult, what: string): Record<string, unknown> {
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`${what}: stdout is not one JSON document (exit ${r.code}):\n${r.stdout.slice(0, 400)}\n${r.stderr.slice(0, 400)}`);
  }
  expect(Object.keys(d)[0], `${what}: schema comes first`).toBe('schema');
  expect(d.schema, what).toMatch(SCHEMA);
  return d;
}

let src: string;
/** A work dir after `patch`: a report, no build. */
let patched: string;
/** A copy of it made to look built: state.json's build-nvshmem result, an install prefix, a build report. */
let built: string;
/** The same, its build failed. */
let failed: string;

beforeAll(() => {
  src = materialize('v3.4-like');
  patched = path.join(tmp('contract-'), 'w');
  const r = cli(['patch', '--nvshmem-src', src, '--work-dir', patched, '--offline', '--efa-io-defs', IO_DEFS]);
  expect(r.code, r.stderr).toBe(0);
  const asBuilt = (ok: boolean) => {
    const dir = path.join(tmp('contract-'), 'w');
    cpSync(patched, dir, { recursive: true });
    const prefix = path.join(dir, 'install', 'nvshmem');
    mkdirSync(path.join(prefix, 'lib'), { recursive: true });
    const state = JSON.parse(readFileSync(path.join(dir, 'state.json'), 'utf8')) as { steps: Record<string, unknown> };
    state.steps['build-nvshmem'] = { stamp: 'x', finishedAt: 'y', result: { prefix, cmakeArgs: [`-DLIBFABRIC_HOME=${t.libfabricHome}`] } };
    writeFileSync(path.join(dir, 'state.json'), JSON.stringify(state));
    const report = ReportSchema.parse(JSON.parse(readFileSync(path.join(dir, 'report.json'), 'utf8')));
    const built = {
      ...report,
      command: 'build',
      ok,
      ...(ok ? {} : { error: { message: 'cmake failed (exit code 1)', fix: 'read the log' } }),
      runtimeEnv: { NVSHMEM_REMOTE_TRANSPORT: 'libfabric', LD_LIBRARY_PATH: `${path.join(prefix, 'lib')}:$LD_LIBRARY_PATH` },
    };
    writeFileSync(path.join(dir, 'report.json'), JSON.stringify(ReportSchema.parse(built)));
    return dir;
  };
  built = asBuilt(true);
  failed = asBuilt(false);
}, 120_000);

describe('every command takes --json and prints one document with a schema name (docs/cli.md, JSON output)', () => {
  it('build --dry-run, patch --dry-run, patch --export, patch: plan, export and report documents', () => {
    const w = path.join(tmp(), 'w');
    const plan = cli(['build', '--dry-run', '--json', '--nvshmem-src', src, '--work-dir', w, ...homes, '--efa-io-defs', IO_DEFS], TENV);
    expect(plan.code, plan.stderr).toBe(0);
    expect(doc(plan, 'build --dry-run')).toMatchObject({ schema: 'nvshmem-efa-plan/1', command: 'build', wouldFail: false, exitCode: 0, blockers: [] });
    const pplan = cli(['patch', '--dry-run', '--json', '--nvshmem-src', src, '--work-dir', w]);
    expect(pplan.code, pplan.stderr).toBe(0);
    expect(doc(pplan, 'patch --dry-run')).toMatchObject({ schema: 'nvshmem-efa-plan/1', command: 'patch' });
    for (const dry of [['--dry-run'], []]) {
      const e = path.join(tmp(), 'e');
      const ex = cli(['patch', '--export', e, ...dry, '--json', '--nvshmem-src', src, '--work-dir', w]);
      expect(ex.code, ex.stderr).toBe(0);
      expect(doc(ex, `patch --export ${dry.join(' ')}`)).toMatchObject({ schema: 'nvshmem-efa-export/1', dryRun: dry.length > 0 });
    }
    const real = cli(['patch', '--json', '--nvshmem-src', src, '--work-dir', w, '--offline']);
    expect(real.code, real.stderr).toBe(0);
    expect(doc(real, 'patch')).toMatchObject({ schema: 'nvshmem-efa-report/1', schemaVersion: 1, command: 'patch', ok: true });
  });

  it('report, env, doctor, bench, selftest, clean, launch and --version', () => {
    const report = cli(['report', '--json', '--work-dir', patched]);
    expect(report.code, report.stderr).toBe(0);
    expect(doc(report, 'report')).toMatchObject({ schema: 'nvshmem-efa-report/1', command: 'patch' });
    const env = cli(['env', '--json', '--work-dir', built]);
    expect(env.code, env.stderr).toBe(0);
    expect(doc(env, 'env').schema).toBe('nvshmem-efa-env/1');
    // doctor: its verdict is a value, and exit 1 exactly when it is fail (this host's toolchain decides which).
    const doctor = cli(['doctor', '--json', ...homes], TENV);
    const d = doc(doctor, 'doctor');
    expect(d).toMatchObject({ schema: 'nvshmem-efa-doctor/2', verdict: expect.stringMatching(/^(ok|warn|fail)$/), summary: expect.any(String) });
    expect(doctor.code, doctor.stderr).toBe(d.verdict === 'fail' ? 1 : 0);
    const bench = cli(['bench', '--dry-run', '--json', '--work-dir', built, '--fabric', 'efa']);
    expect(bench.code, bench.stderr).toBe(0);
    expect(doc(bench, 'bench --dry-run')).toMatchObject({ schema: 'nvshmem-efa-bench/1', dryRun: true });
    const selftest = cli(['selftest', '--dry-run', '--json', '--work-dir', built, '--checks', 'fi_info', '--libfabric-home', t.libfabricHome], TENV);
    expect(selftest.code, selftest.stderr).toBe(0);
    expect(doc(selftest, 'selftest --dry-run')).toMatchObject({ schema: 'nvshmem-efa-selftest/1', dryRun: true });
    const launchDry = cli(['launch', '-n', '2', '--dry-run', '--json', '--', 'true']);
    expect(launchDry.code, launchDry.stderr).toBe(0);
    expect(doc(launchDry, 'launch --dry-run')).toMatchObject({ schema: 'nvshmem-efa-launch/1', dryRun: true, ranks: [expect.objectContaining({ rank: 0 }), expect.objectContaining({ rank: 1 })] });
    const launch = cli(['launch', '-n', '1', '--json', '--', 'true']);
    expect(launch.code, launch.stderr).toBe(0);
    expect(doc(launch, 'launch')).toMatchObject({ schema: 'nvshmem-efa-launch/1', code: 0 });
    const version = cli(['--version', '--json']);
    expect(version.code, version.stderr).toBe(0);
    expect(doc(version, '--version').schema).toBe('nvshmem-efa-version/1');
    // clean last: it deletes the fixture (a copy of the patched work dir, so the others keep theirs).
    const w = path.join(tmp('contract-'), 'w');
    cpSync(patched, w, { recursive: true });
    const dry = cli(['clean', '--dry-run', '--json', '--work-dir', w]);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = doc(dry, 'clean --dry-run') as { removed: string[]; dryRun: boolean };
    expect(planned).toMatchObject({ schema: 'nvshmem-efa-clean/1', dryRun: true });
    expect(planned.removed.length).toBeGreaterThan(0);
    expect(existsSync(w)).toBe(true);
    const clean = cli(['clean', '--json', '--work-dir', w]);
    expect(clean.code, clean.stderr).toBe(0);
    expect(doc(clean, 'clean')).toMatchObject({ schema: 'nvshmem-efa-clean/1', dryRun: false, removed: planned.removed });
    const nothing = cli(['clean', '--json', '--work-dir', w]);
    expect(doc(nothing, 'clean of nothing')).toMatchObject({ removed: [], removedDir: false });
  });
});

/** Every command with the arguments it needs to get as far as its work dir (build and patch: a dry run). */
const WORK_DIR_COMMANDS: Record<string, (wd: string) => string[]> = {
  build: (wd) => ['build', '--dry-run', '--nvshmem-src', src, '--work-dir', wd, ...homes],
  patch: (wd) => ['patch', '--dry-run', '--nvshmem-src', src, '--work-dir', wd],
  report: (wd) => ['report', '--work-dir', wd],
  env: (wd) => ['env', '--work-dir', wd],
  probe: (wd) => ['probe', '--work-dir', wd],
  bench: (wd) => ['bench', '--work-dir', wd, '--fabric', 'efa', '--dry-run'],
  selftest: (wd) => ['selftest', '--work-dir', wd, '--dry-run'],
  clean: (wd) => ['clean', '--work-dir', wd],
};
const ALL_COMMANDS = [...Object.keys(WORK_DIR_COMMANDS), 'doctor', 'launch'];

/** The exit code with and without --json: the same (--json changes what is printed, never the code). */
function code(args: string[], what: string, env: NodeJS.ProcessEnv = TENV): number {
  const plain = cli(args, env);
  const json = cli([...args, '--json'], env);
  expect(json.code, `${what} --json: ${json.stderr}`).toBe(plain.code);
  if (plain.code !== 0) {
    // A failure is said as every failure is: an error: line and a fix: line on stderr.
    expect(plain.stderr, what).toMatch(/^error: /m);
    expect(plain.stderr, what).toMatch(/^fix: /m);
  }
  return plain.code;
}

describe('one situation, one exit code, in every command that meets it (docs/cli.md, Exit codes)', () => {
  it('an unknown option: 2, every command', () => {
    for (const c of ALL_COMMANDS) {
      const r = cli([c, '--no-such-option']);
      expect(r.code, `${c}: ${r.stderr}`).toBe(2);
    }
  });

  it('a --work-dir that is a file: 6, every command that takes one', () => {
    const file = path.join(tmp(), 'a-file');
    writeFileSync(file, 'x\n');
    for (const [c, args] of Object.entries(WORK_DIR_COMMANDS)) expect(code(args(file), c), c).toBe(6);
  });

  it('no build in the work dir (none there, an empty one, or one with a patch only): 4 in report, env, selftest and bench', () => {
    const empty = tmp('empty-');
    const none = path.join(tmp(), 'none');
    for (const c of ['report', 'env', 'selftest', 'bench']) {
      for (const [wd, what] of [[none, 'no such dir'], [empty, 'an empty dir']] as const) expect(code(WORK_DIR_COMMANDS[c]!(wd), `${c} (${what})`), `${c} (${what})`).toBe(4);
    }
    // A patch only: report has that run's report to print (exit 0); the others have no build.
    for (const c of ['env', 'selftest', 'bench']) expect(code(WORK_DIR_COMMANDS[c]!(patched), `${c} (a patch only)`), `${c} (a patch only)`).toBe(4);
    expect(code(WORK_DIR_COMMANDS.report!(patched), 'report (a patch only)')).toBe(0);
    // An install since deleted (env checks what it prints): no build either.
    const gone = path.join(tmp('contract-'), 'w');
    cpSync(built, gone, { recursive: true });
    // Its report names its own install (the copy's named the original's).
    const file = path.join(gone, 'report.json');
    writeFileSync(file, readFileSync(file, 'utf8').replaceAll(built, gone));
    rmSync(path.join(gone, 'install'), { recursive: true });
    expect(code(['env', '--work-dir', gone], 'env (install gone)')).toBe(4);
  });

  it('the last build failed: 1 in report and env; a work dir holding a build: 0', () => {
    expect(code(['report', '--work-dir', failed], 'report (failed)')).toBe(1);
    expect(code(['env', '--work-dir', failed], 'env (failed)')).toBe(1);
    expect(code(['report', '--work-dir', built], 'report (built)')).toBe(0);
    expect(code(['env', '--work-dir', built], 'env (built)')).toBe(0);
  });

  it('a dry run the real run would fail: 8 (build and patch), nothing written; a clean one 0', () => {
    const wrong = path.join(tmp('io-'), 'efa_io_defs.h');
    writeFileSync(wrong, '/* not the pinned file */\n');
    for (const c of ['build', 'patch']) {
      const w = path.join(tmp(), 'w');
      expect(code([...WORK_DIR_COMMANDS[c]!(w), '--efa-io-defs', wrong], `${c} --dry-run (wrong --efa-io-defs)`)).toBe(8);
      expect(code([...WORK_DIR_COMMANDS[c]!(w), '--efa-io-defs', IO_DEFS], `${c} --dry-run`)).toBe(0);
      expect(existsSync(w)).toBe(false);
    }
  });
});
