import path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
// Only light modules here (node builtins, commander, data): --help and a usage mistake must answer within 0.15 s
// (issue 22; bench/results/help-time.md), so each command's implementation, and zod, execa, listr2 and
// tree-sitter with it, is imported inside its action. test/unit/cli-light.test.ts fails when a heavy one comes back.
import { SELFTEST_CHECKS } from './commands/selftest-checks.ts';
import { EFAEMU_MODES } from './commands/selftest-modes.ts';
import { exitCodeOf, FilesystemError, formatError, UsageError } from './core/errors.ts';
import { GDRCOPY_PREFIXES } from './core/gdrcopy-prefixes.ts';
import { installSignalHandlers, RERUN_RESUMES, setResume } from './core/signals.ts';
import { toolVersion } from './core/paths.ts';
import { checkDirectory } from './core/small-file.ts';
import { defaultWorkDir, WORK_DIR_VARIABLE } from './core/work-dir-default.ts';
import type { Command as Cmd, Options } from './options.ts';
import { DEEPEP_PINS, DEFAULT_NVSHMEM_REF, NVSHMEM_PINS } from './pins.ts';

const EXIT_CODES = `
Exit codes:
  0    success
  1    a step failed (the error names the log); selftest: a check failed
  2    invalid command line: an unknown option or a malformed value, an empty path, a path (option or
       variable) that names nothing where something must be, overlapping directories, a non-empty work dir or
       --export that is not ours, an unpinned ref, a --cuda-arch this nvcc cannot target, a lock named by a
       variable that is not JSON or not a lock
  3    a source tree (NVSHMEM or DeepEP) does not look as expected; the message says what was changed (nothing, unless it says so)
  4    a required tool or library is missing (a CUDA_HOME or GDRCOPY_HOME without the toolkit or headers included);
       report, env, selftest, bench: no build (or report) in the work dir, whether it exists or not
  5    a fetched or given source does not match its pin (--efa-io-defs included)
  6    the file system refused, or a path is of the wrong kind: a file where a directory is expected, a
       directory, FIFO or device where a file is expected, read-only or full disk, no permission; the
       message names the path and the option or variable
  7    the work dir is in use by another nvshmem-efa run (the message names its pid and command)
  8    dry run (build/patch --dry-run): the plan is whole, and the real run would stop on the blockers it
       lists (each with its fix and the code the run would exit with)
  130  interrupted: SIGINT, SIGTERM, SIGHUP or SIGQUIT, at any moment (the fix: line says how to resume)`;

/** The arguments of a version query: `--version`, `-V`, each with or without `--json`. */
const VERSION_ARGS = new Set(['--version', '-V', '--json']);

/** Options that name a directory: a file there is exit 6, in every command (checked before any action). */
const DIR_OPTIONS = new Set(['--nvshmem-src', '--deepep-src', '--cuda-home', '--libfabric-home', '--gdrcopy-home', '--work-dir', '--export', '--root', '--nvshmem-home', '--deepep-dir', '--efaemu-build', '--results', '--output-dir']);
/** Options whose empty value means something (no extra arguments). */
const MAY_BE_EMPTY = new Set(['--deepep-args']);

/**
 * Before any command runs: an empty value (`--nvshmem-src ''`, which would otherwise read as "not given" and
 * start a clone) is exit 2, and a directory option naming a file is exit 6, the same in every command.
 * Whether the path must exist is each command's business (a new --work-dir is created).
 */
function checkPathOptions(cmd: Command): void {
  for (const opt of cmd.options) {
    const flag = opt.long;
    const v: unknown = cmd.getOptionValue(opt.attributeName());
    if (!flag || typeof v !== 'string') continue;
    if (v.trim() === '' && !MAY_BE_EMPTY.has(flag)) throw new UsageError(`${flag} is empty`, `pass a value (${opt.flags}) or leave ${flag} out`);
    if (DIR_OPTIONS.has(flag)) checkDirectory(path.resolve(v), `${flag} ${path.resolve(v)}`, `pass a directory (${opt.flags}), or move the file away`, false);
  }
}

function addSourceOptions(c: Command): Command {
  return c
    .option('--nvshmem-src <dir>', 'NVSHMEM source tree to use (copied into the work dir unless --in-place)')
    .option('--nvshmem-ref <tag>', `pinned NVSHMEM tag to fetch and verify (default ${DEFAULT_NVSHMEM_REF}; pinned: ${NVSHMEM_PINS.map((p) => p.ref).join(', ')})`)
    .option('--work-dir <dir>', `where copies, builds, logs, state and the report go: new, empty, or an nvshmem-efa work dir, apart from the source trees (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--in-place', 'patch the --nvshmem-src tree itself instead of a copy')
    .option('--dry-run', 'show what would change (a unified diff; build: and the commands it runs) and change nothing; what the real run would stop on is listed as a blocker with its fix (exit 8)')
    .option('--offline', 'never use the network; a pinned ref must already be cached in the work dir')
    .option('--deepep-src <dir>', 'also patch (and, with build, build) this DeepEP checkout against the NVSHMEM built here')
    .option('--deepep-ref <ref>', `also fetch and verify a pinned DeepEP commit (pinned: ${DEEPEP_PINS.map((p) => p.ref).join(', ')}), then patch and build it; no default: DeepEP is left alone unless --deepep-src or --deepep-ref is given`)
    .option('--efa-io-defs <file>', "rdma-core's efa_io_defs.h pinned in third_party/efa_gda/lock.json (default: download it; checked by sha256)")
    // --device-api, the default since issue 23, is still taken (scripts of earlier versions pass it); help shows the way out.
    .addOption(new Option('--device-api', "route NVSHMEM's own device API over EFA GDA (the default)").hideHelp())
    .option('--no-device-api', "leave NVSHMEM's own device API (nvshmem_put*, p/g, signals, quiet, fence of any NVSHMEM program) on NVSHMEM's CPU proxy: build without the hooks that route it over EFA GDA (docs/device-api.md); in a build with them NVSHMEM_EFA_GDA_DEVICE_API=0 does the same at run time")
    .option('--force', 'rerun every step even if its inputs did not change')
    .option('--json', 'print machine-readable JSON on stdout; progress goes to stderr')
    .option('--verbose', 'print every step event and output line');
}

/**
 * A reader that went away (`| head -1`), a full device (`> /dev/full`) or a closed descriptor: what is written there is
 * lost, and the command goes on to its end and exits with its own code (the logs keep everything; docs/cli.md). Without
 * a listener Node ends the process on the stream's 'error' with a stack trace and exit 1.
 */
let outputErrorsQuiet = false;
function keepOutputErrorsQuiet(): void {
  // Always ours, whatever listens already: a stream piped into stdout listens there and removes itself on the error.
  if (outputErrorsQuiet) return;
  outputErrorsQuiet = true;
  for (const s of [process.stdout, process.stderr]) s.on('error', () => {});
}

/** What rerunning a command interrupted outside its steps does (the fix line of its exit 130; core/signals.ts). */
function resumeOf(cmd: Command): string {
  switch (cmd.name()) {
    case 'build':
      return RERUN_RESUMES;
    case 'patch':
      return cmd.getOptionValue('export') && !cmd.getOptionValue('dryRun') ? 'rerun the same command: it replaces the export whole' : RERUN_RESUMES;
    case 'clean':
      return 'rerun the same command: clean goes on with what is left (its record of what is ours goes last)';
    default:
      return 'rerun the same command';
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  // First: a signal at any moment from here on stops what was started, releases the lock and exits 130.
  installSignalHandlers();
  keepOutputErrorsQuiet();
  // Everything, the program's construction included (its version is read from NVSHMEM_EFA_HOME when set),
  // ends in a one-line error with the fix, never in an uncaught stack trace.
  try {
    return await runCli(argv);
  } catch (e) {
    process.stderr.write(formatError(e) + '\n');
    return exitCodeOf(e);
  }
}

async function runCli(argv: readonly string[]): Promise<number> {
  // A current directory removed under the shell (bin/nvshmem-efa.js says so too, before its loaders need it).
  try {
    process.cwd();
  } catch (e) {
    throw new FilesystemError(`the current directory no longer exists (${(e as NodeJS.ErrnoException).code}), so relative paths mean nothing`, 'cd to a directory that exists and rerun', '.', 'ENOENT');
  }
  const out = (s: string) => process.stdout.write(s + '\n');
  // --version [--json]: the version, the commit and the pins (issue 39), answered before commander, whose own
  // --version prints a bare string and knows no --json.
  const rest = argv.slice(2);
  if (rest.length > 0 && rest.every((a) => VERSION_ARGS.has(a)) && rest.some((a) => a !== '--json')) {
    const { renderVersion, versionInfo } = await import('./core/version-info.ts');
    const info = await versionInfo();
    out(rest.includes('--json') ? JSON.stringify(info, null, 2) : renderVersion(info));
    return 0;
  }
  let code = 0;
  const runPipeline = async (o: Options, which: 'build' | 'patch') => {
    const [{ runPipelineCommand }, { BUILD_STEPS, PATCH_STEPS }] = await Promise.all([import('./commands/run-pipeline.ts'), import('./steps/index.ts')]);
    return runPipelineCommand(o, which === 'build' ? BUILD_STEPS : PATCH_STEPS, out);
  };
  const program = new Command('nvshmem-efa')
    .description('Build NVSHMEM with an EFA GPU-Direct-Async transport, reproducibly, in one command.')
    .version(toolVersion(), '-V, --version', 'print the version, the commit it was built from and the pinned NVSHMEM, DeepEP, libfabric, rdma-core and GDRCopy (with --json: one JSON document)')
    // A usage mistake is said like every other failure, an error: line and a fix: line (per command below).
    .showHelpAfterError("fix: run 'nvshmem-efa --help' for the commands")
    .exitOverride()
    .addHelpText('after', EXIT_CODES)
    .hook('preAction', (_program, actionCommand) => {
      setResume(resumeOf(actionCommand));
      checkPathOptions(actionCommand);
    });

  const action = (cmd: Cmd, fn: (o: Options) => Promise<number>) => async (raw: Record<string, unknown>) => {
    const { resolveOptions } = await import('./options.ts');
    code = await fn(resolveOptions(cmd, raw));
  };

  addSourceOptions(program.command('build').description('detect, fetch or copy, patch, configure, build and install NVSHMEM; write the report'))
    .option('--jobs <n>', 'parallel build jobs (default: all cores)')
    .option('--cuda-arch <list>', 'CUDA architectures, e.g. 90 or "90;100" (default: detected GPUs, else 90)')
    .option('--cuda-home <dir>', 'CUDA toolkit (default: CUDA_HOME, else CUDA_PATH, else the toolkit of the nvcc on PATH, else /usr/local/cuda; a CUDA_HOME or CUDA_PATH that is set must be a toolkit)')
    .option('--libfabric-home <dir>', 'libfabric prefix (default: LIBFABRIC_HOME, else the first of /opt/amazon/efa, /usr/local/libfabric, pkg-config, /usr if it has EFA GDA, else one built from pinned sources)')
    .option('--libfabric-ref <tag>', 'build this pinned libfabric (v2.3.0, v2.6.0; see third_party/libfabric/lock.json) with EFA GDA, and rdma-core if the host\'s is older than 59')
    .option('--gdrcopy-home <dir>', `GDRCopy prefix (default: GDRCOPY_HOME, which must then hold include/gdrapi.h, else the first of ${GDRCOPY_PREFIXES.join(', ')} that holds it; none: its library libgdrapi is built from the source pinned in third_party/gdrcopy/lock.json into <work-dir>/install/gdrcopy (step gdrcopy); NVSHMEM_EFA_GDRCOPY=0 builds without GDRCopy instead, with a warning)`)
    .option('--nvshmem-static', "also build NVSHMEM 3.4's combined static library libnvshmem.a and nvshmem-info (off by default: they compile every host source a second time, about half of NVSHMEM's build)")
    .option('--no-overlap', "compile DeepEP after NVSHMEM's build instead of beside it (a cold build then needs about half the peak memory and takes longer)")
    .option('--deepep-gda <path>', "the GDA path of DeepEP's remote operations: shim (the default) or device-api (not with --no-device-api). " +
      "shim compiles the shim's own GDA path into DeepEP (-DNVSHMEM_EFA_SHIM_GDA); device-api leaves it out, so DeepEP's puts, signals and quiets are " +
      "NVSHMEM device API calls that NVSHMEM's device API hooks route over GDA (its signals are atomic adds there, which take NVSHMEM's proxy). The report's deepep-gda-path line says which path DeepEP takes")
    .action(action('build', async (o) => (o.dryRun ? (await import('./commands/dry-run.ts')).planOnly(o, out) : runPipeline(o, 'build'))));

  addSourceOptions(program.command('patch').description('fetch or copy NVSHMEM and apply the EFA GDA patches (no build)'))
    .option('--export <dir>', 'write git-apply-able .patch files for the pristine trees to DIR/nvshmem and DIR/deepep (each with its apply command); change nothing')
    .action(action('patch', async (o) => (o.dryRun || o.exportDir ? (await import('./commands/dry-run.ts')).planOnly(o, out) : runPipeline(o, 'patch'))));

  program
    .command('report')
    .description("print the last run's report (Markdown, or JSON with --json)")
    .option('--work-dir <dir>', `the work dir of the run (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--json', 'print report.json')
    .action(action('report', async (o) => (await import('./commands/report.ts')).reportCommand(o, out)));

  program
    .command('env')
    .description('print the run-time environment of the last build (the export block of its report): eval "$(nvshmem-efa env)"; exit 4 if there is none, 1 if it failed')
    .option('--work-dir <dir>', `the work dir of the build (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--json', 'print it as JSON (set: variables, prepend: path lists)')
    .option('--keep-set', 'variables already set in the environment keep their values (LD_LIBRARY_PATH is still prepended)')
    .action(action('env', async (o) => (await import('./commands/env.ts')).envCommand(o, out)));

  program
    .command('probe')
    .description('build (once) and run the standalone EFA/GDA probe (native/probe); exit 1 when a check fails')
    .option('--work-dir <dir>', `where the probe is built (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--libfabric-home <dir>', 'libfabric to build the probe against (GDA checks need >= 2.3.0)')
    .option('--cuda-home <dir>', 'CUDA toolkit (for cuda.h)')
    .option('--root <dir>', 'read /sys, /proc and /dev under this prefix (testing)')
    .option('--json', "print the probe's JSON document")
    .action(action('probe', async (o) => (await import('./commands/probe.ts')).probeCommand({ workDir: o.workDir, libfabricHome: o.libfabricHome, cudaHome: o.cudaHome, json: o.json, root: o.root }, out, (s) => process.stderr.write(s + '\n'))));

  program
    .command('doctor')
    .description('fast host checks, building nothing: every blocker build would stop on, run-time environment, pip NVSHMEM shadowing')
    .option('--libfabric-home <dir>', 'libfabric the build would use')
    .option('--cuda-home <dir>', 'CUDA toolkit the build would use')
    .option('--gdrcopy-home <dir>', 'GDRCopy the build would use')
    .option('--nvshmem-src <dir>', 'also check this NVSHMEM source tree: its version, its libfabric layout (single-rail or multi-rail) and whether every patch applies (nothing is written)')
    .option('--json', 'print the checks as JSON')
    .action(action('doctor', async (o) => (await import('./commands/doctor.ts')).doctorCommand(o, out)));

  program
    .command('bench')
    .description("one run on a host with 2 GPUs: put table (256 B .. 64 MiB), EFA GDA vs NVSHMEM's CPU proxy, and DeepEP low-latency dispatch/combine with signals over GDA vs the proxy, with the ratio (through efaemu it measures our device path and the emulator, not EFA)")
    .option('--work-dir <dir>', `the work dir of the build to measure (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--nvshmem-home <dir>', 'NVSHMEM install to use (default: the work dir\'s build)')
    .option('--deepep-dir <dir>', "DeepEP built in place (default: the work dir's DeepEP build; none: that part is skipped, and says so)")
    .option('--fabric <name>', 'efaemu (the emulated NIC, default) or efa (a host with 2 EFA NICs)', 'efaemu')
    .option('--efaemu-build <dir>', 'efaemu build (prov/libefa-fi.so) for --fabric efaemu')
    .option('--libfabric-home <dir>', "the libfabric efaemu was built against (default: the build's)")
    .option('--results <dir>', 'where logs, statistics and gda-signals.md go (default: <work-dir>/bench)')
    .option('--sizes <list>', 'put message sizes, e.g. 256,4K,1M (default 256 B .. 64 MiB in powers of 4)')
    .option('--bytes-per-size <n>', 'bytes moved per size and mode in the put table (default 64 MiB; at least 4 puts)')
    .option('--deepep-args <args>', 'test_low_latency.py options, e.g. "--num-tokens 64 --num-experts 32"')
    .option('--no-put', 'skip the put table')
    .option('--no-deepep', 'skip the DeepEP part')
    .option('--dry-run', 'print the command it would run and run nothing')
    .option('--json', "print the result as JSON (the script's own output goes to stderr)")
    .action(async (raw: Record<string, unknown>) => {
      const s = (k: string) => (typeof raw[k] === 'string' ? path.resolve(raw[k] as string) : undefined);
      const { benchCommand } = await import('./commands/bench.ts');
      code = await benchCommand({
        workDir: path.resolve(raw.workDir as string), nvshmemHome: s('nvshmemHome'), deepepDir: s('deepepDir'), fabric: raw.fabric as string,
        efaemuBuild: s('efaemuBuild'), libfabricHome: s('libfabricHome'), results: s('results'), sizes: raw.sizes as string | undefined,
        bytesPerSize: raw.bytesPerSize as string | undefined, deepepArgs: raw.deepepArgs as string | undefined, put: raw.put !== false,
        deepep: raw.deepep !== false, dryRun: raw.dryRun === true, json: raw.json === true,
      }, out);
    });

  program
    .command('selftest')
    .description('validate a build on a host with one GPU or more through efaemu, an emulated EFA NIC (protocol and code paths, not EFA speed): ' +
      'fi_info, fabtests, NVSHMEM put bandwidth and atomics, EFA GDA kernels, DeepEP low-latency, negative controls; prints a table ' +
      '(check, result, evidence), says why for every check it skips, exit 1 on any failure')
    .option('--work-dir <dir>', `the work dir of the build to validate (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--checks <list>', `comma-separated subset: ${SELFTEST_CHECKS.map((c) => c.id).join(', ')}`)
    .option('--libfabric-home <dir>', 'libfabric >= 2.3.0 to build efaemu against (default: the one the build used)')
    .option('--efaemu-build <dir>', 'a prebuilt efaemu build dir (default: built into the results dir)')
    .option('--pe-test <file>', 'a prebuilt native/efaemu/gpu/pe_test (default: built with nvcc against the build)')
    .option('--deepep-dir <dir>', "DeepEP built in place (default: the work dir's DeepEP build)")
    .option('--results <dir>', 'where logs and efaemu statistics go (default: <work-dir>/selftest)')
    .option('--timeout <seconds>', 'limit for each pair of processes (default 240)')
    .option('--efaemu-modes <modes>', `the unkind efaemu modes for the GDA and DeepEP checks: all (default), none, each (one run per mode, then one with all), or a comma list of ${EFAEMU_MODES.join(', ')}`, 'all')
    .option('--pattern-dir <dir>', 'prebuilt deepep_pattern programs (default: built with nvcc against the build)')
    .option('--pes-per-gpu <n>', 'PEs per GPU: auto (default: one per GPU where the host has a GPU for every PE of a check, else the GPUs there are shared, time-sliced, each PE a host of its own) or a number', 'auto')
    .option('--quick', `a smoke test in minutes: ${['gda_kernel', 'deepep_ll', 'neg_no_quiet', 'device_api (device_api_order on 2 and 4 PEs)'].join(', ')} under the efaemu modes (default all)`)
    .option('--dry-run', 'print the builds and checks.sh runs it would make and run nothing')
    .option('--json', 'print the checks as JSON')
    .action(async (raw: Record<string, unknown>) => {
      const str = (k: string) => (typeof raw[k] === 'string' ? path.resolve(raw[k] as string) : undefined);
      const timeout = raw.timeout === undefined ? undefined : Number(raw.timeout);
      if (timeout !== undefined && !(Number.isInteger(timeout) && timeout > 0)) throw new UsageError(`--timeout must be a positive integer, got '${String(raw.timeout)}'`, 'pass seconds, e.g. --timeout 300');
      const { selftestCommand } = await import('./commands/selftest.ts');
      code = await selftestCommand({
        workDir: path.resolve(String(raw.workDir)),
        checks: typeof raw.checks === 'string' ? raw.checks.split(',').map((c) => c.trim()).filter(Boolean) : undefined,
        libfabricHome: str('libfabricHome'), efaemuBuild: str('efaemuBuild'), peTest: str('peTest'), deepepDir: str('deepepDir'), results: str('results'),
        timeoutSec: timeout, efaemuModes: String(raw.efaemuModes), patternDir: str('patternDir'), pesPerGpu: String(raw.pesPerGpu), quick: raw.quick === true,
        dryRun: raw.dryRun === true, json: raw.json === true,
      }, out, (s) => process.stderr.write(s + '\n'));
    });

  program
    .command('launch')
    .description("run N copies of an NVSHMEM program on this host, bootstrapped by NVSHMEM's default PMI-1 (simple PMI) served by this command: " +
      "for programs that call nvshmem_init() (NVSHMEM's perftests and examples) where there is no hydra, srun or MPI; a failing rank ends the job, exit status: the first failure's")
    .argument('<command...>', 'the program and its arguments (after --)')
    .requiredOption('-n, --ranks <n>', 'how many ranks')
    .option('--one-gpu-each', 'CUDA_VISIBLE_DEVICES=<rank> for each rank: every process sees only its own GPU')
    .option('--output-dir <dir>', 'write each rank\'s output to DIR/rank<r>.log (default: the terminal, lines prefixed [r])')
    .option('--timeout <seconds>', 'stop the job after this long (exit 124; default: none)')
    .option('--grace <seconds>', 'once a rank failed, how long the others may take to end on their own before they are stopped', '15')
    .option('--dry-run', 'print each rank\'s environment and command and run nothing')
    .option('--json', 'print each rank\'s exit status and time as JSON (their output goes to stderr)')
    .action(async (command: string[], raw: Record<string, unknown>) => {
      const ranks = Number(raw.ranks);
      if (!(Number.isInteger(ranks) && ranks > 0)) throw new UsageError(`--ranks must be a positive integer, got '${String(raw.ranks)}'`, 'pass e.g. -n 2');
      const timeout = raw.timeout === undefined ? 0 : Number(raw.timeout);
      if (!(Number.isInteger(timeout) && timeout >= 0)) throw new UsageError(`--timeout must be a whole number of seconds, got '${String(raw.timeout)}'`, 'pass seconds, e.g. --timeout 300');
      const grace = Number(raw.grace);
      if (!(Number.isFinite(grace) && grace >= 0)) throw new UsageError(`--grace must be seconds, got '${String(raw.grace)}'`, 'pass seconds, e.g. --grace 5');
      const { launchCommand } = await import('./commands/launch.ts');
      code = await launchCommand({
        ranks, command, timeoutSec: timeout, graceSec: grace, oneGpuEach: raw.oneGpuEach === true,
        ...(typeof raw.outputDir === 'string' ? { outputDir: path.resolve(raw.outputDir) } : {}),
        dryRun: raw.dryRun === true, json: raw.json === true,
      }, out, (s) => process.stderr.write(s + '\n'));
    });

  program
    .command('clean')
    .description('delete what nvshmem-efa created in the work dir, never anything else (the dir itself only if nvshmem-efa made it and it is then empty)')
    .option('--work-dir <dir>', `the work dir to delete (when not given: ${WORK_DIR_VARIABLE} if set)`, defaultWorkDir())
    .option('--dry-run', 'say what would be deleted')
    .option('--json', 'print what was (with --dry-run: would be) removed and kept as JSON')
    .action(action('clean', async (o) => (await import('./commands/clean.ts')).cleanCommand(o, out)));

  for (const c of program.commands) c.showHelpAfterError(`fix: check the options: 'nvshmem-efa ${c.name()} --help' lists them`);

  try {
    await program.parseAsync(argv as string[]);
    return code;
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help and --version end here with exit code 0; usage mistakes with 2.
      return e.exitCode === 0 ? 0 : 2;
    }
    process.stderr.write(formatError(e) + '\n');
    return exitCodeOf(e);
  }
}
