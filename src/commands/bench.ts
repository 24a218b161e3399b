import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError, UsageError } from '../core/errors.ts';
import { packageRoot } from '../core/paths.ts';
import { STATE_FILE } from '../core/state.ts';
import { shellQuote } from '../core/shell-quote.ts';
import { buildEfaemu, EFAEMU_PROVIDER, efaemuBuildIn, isEfaemuBuild } from './efaemu-build.ts';
import { withInterrupts } from './run-pipeline.ts';

/**
 * `nvshmem-efa bench`: what GPU-initiated networking buys, in one run on a host with 2 GPUs. The work is done by
 * bench/gda-signals/bench.sh (it runs without Node.js on GPU hosts): a put table, EFA GDA vs NVSHMEM's CPU proxy,
 * over 256 B .. 64 MiB, and DeepEP's low-latency dispatch and combine with the shim's signals over GDA vs
 * through the proxy, with their ratio. This command finds the build in the work dir and hands it over.
 */
export interface BenchOptions {
  workDir: string;
  nvshmemHome?: string;
  deepepDir?: string;
  fabric: string;
  efaemuBuild?: string;
  libfabricHome?: string;
  results?: string;
  sizes?: string;
  bytesPerSize?: string;
  deepepArgs?: string;
  put: boolean;
  deepep: boolean;
  dryRun: boolean;
}

export const BENCH_SCRIPT = path.join('bench', 'gda-signals', 'bench.sh');

/** What the work dir's last build produced: the NVSHMEM prefix, the DeepEP module, the libfabric it used. */
export function builtInWorkDir(workDir: string): { prefix?: string; deepepDir?: string; libfabricHome?: string } {
  let steps: Record<string, { result?: unknown }> = {};
  try {
    steps = JSON.parse(readFileSync(path.join(workDir, STATE_FILE), 'utf8')).steps ?? {};
  } catch {
    return {};
  }
  const b = steps['build-nvshmem']?.result as { prefix?: string; cmakeArgs?: string[] } | undefined;
  const d = steps['build-deepep']?.result as { module?: string } | undefined;
  const lf = b?.cmakeArgs?.find((a) => a.startsWith('-DLIBFABRIC_HOME='))?.slice('-DLIBFABRIC_HOME='.length);
  return { prefix: b?.prefix, deepepDir: d?.module ? path.dirname(d.module) : undefined, libfabricHome: lf };
}

/** efaemu to build before the script runs (no --efaemu-build given): against which libfabric, where, its log. */
export interface EfaemuToBuild {
  libfabricHome: string;
  dir: string;
  logPath: string;
}

export interface BenchInvocation {
  script: string;
  args: string[];
  env: Record<string, string>;
  efaemuToBuild?: EfaemuToBuild;
}

/** The script, its arguments and environment for these options; refuses what cannot run with the fix to try. */
export function benchInvocation(o: BenchOptions, root = packageRoot()): BenchInvocation {
  if (o.fabric !== 'efaemu' && o.fabric !== 'efa') throw new UsageError(`--fabric ${o.fabric}: expected efaemu or efa`, 'pass --fabric efaemu (the emulated NIC) or --fabric efa (a host with EFA NICs)');
  if (o.sizes !== undefined && !/^\d+[KkMm]?(,\d+[KkMm]?)*$/.test(o.sizes)) throw new UsageError(`--sizes ${o.sizes}: expected a comma-separated list like 256,4K,1M`, 'pass e.g. --sizes 256,4K,64K,1M,64M');
  if (o.bytesPerSize !== undefined && !/^[1-9]\d*$/.test(o.bytesPerSize)) throw new UsageError(`--bytes-per-size must be a positive integer, got '${o.bytesPerSize}'`, 'pass e.g. --bytes-per-size 67108864');
  const built = builtInWorkDir(o.workDir);
  const nvshmemHome = o.nvshmemHome ?? built.prefix;
  if (!nvshmemHome || !existsSync(path.join(nvshmemHome, 'lib'))) {
    throw new EnvironmentError(
      nvshmemHome ? `the NVSHMEM install ${nvshmemHome} has no lib/` : `no NVSHMEM build in ${o.workDir}`,
      `run nvshmem-efa build --work-dir ${o.workDir} first, or pass --nvshmem-home DIR`,
    );
  }
  const env: Record<string, string> = { NVSHMEM_HOME: nvshmemHome };
  const deepepDir = o.deepepDir ?? built.deepepDir;
  if (deepepDir && o.deepep) env.DEEPEP_DIR = deepepDir;
  const results = o.results ?? path.join(o.workDir, 'bench');
  let efaemuToBuild: EfaemuToBuild | undefined;
  if (o.fabric === 'efaemu') {
    const lf = o.libfabricHome ?? built.libfabricHome;
    if (o.efaemuBuild) {
      if (!isEfaemuBuild(o.efaemuBuild)) {
        throw new EnvironmentError(`--efaemu-build ${o.efaemuBuild} has no ${EFAEMU_PROVIDER}`, 'pass the dir efaemu was built in, or leave --efaemu-build out (bench builds efaemu, as selftest does), or --fabric efa on a host with EFA NICs');
      }
      if (!lf) throw new EnvironmentError('--fabric efaemu needs the libfabric efaemu was built against', 'pass --libfabric-home DIR');
      env.EFAEMU_BUILD = o.efaemuBuild;
    } else {
      // As selftest does: built from this package's native/efaemu, in the results dir (incremental next time).
      if (!lf || !existsSync(path.join(lf, 'include', 'rdma', 'fabric.h'))) {
        throw new EnvironmentError(
          `--fabric efaemu needs the emulated NIC (--efaemu-build), or a libfabric to build it against: ${lf ? `${lf} has no include/rdma/fabric.h` : `none given, and the build in ${o.workDir} names none`}`,
          'pass --libfabric-home DIR (libfabric >= 2.3.0; bench builds efaemu against it), or --efaemu-build DIR, or --fabric efa on a host with EFA NICs',
        );
      }
      efaemuToBuild = { libfabricHome: lf, ...efaemuBuildIn(path.resolve(results)) };
      env.EFAEMU_BUILD = efaemuToBuild.dir;
    }
    env.LIBFABRIC_HOME = lf;
  }
  env.RESULTS = results;
  const args = ['--fabric', o.fabric];
  if (o.sizes) args.push('--sizes', o.sizes);
  if (o.bytesPerSize) args.push('--bytes-per-size', o.bytesPerSize);
  if (o.deepepArgs) args.push('--deepep-args', o.deepepArgs);
  if (!o.put) args.push('--no-put');
  if (!o.deepep) args.push('--no-deepep');
  const script = path.join(root, BENCH_SCRIPT);
  if (!existsSync(script)) throw new EnvironmentError(`${script} is missing from this copy of nvshmem-efa`, 'reinstall nvshmem-efa (its package ships bench/gda-signals/), or run the script from a checkout');
  return { script, args, env, ...(efaemuToBuild ? { efaemuToBuild } : {}) };
}


export async function benchCommand(o: BenchOptions, out: (s: string) => void): Promise<number> {
  const inv = benchInvocation(o);
  const line = [...Object.entries(inv.env).map(([k, v]) => `${k}=${shellQuote(v)}`), 'bash', shellQuote(inv.script), ...inv.args.map(shellQuote)].join(' ');
  const b = inv.efaemuToBuild;
  if (o.dryRun) {
    if (b) out(`would build efaemu against ${b.libfabricHome} into ${b.dir}`);
    out(`would run: ${line}`);
    return 0;
  }
  if (b) {
    await withInterrupts(async (signal) => {
      await mkdir(path.dirname(b.logPath), { recursive: true });
      process.stderr.write(`building efaemu against ${b.libfabricHome} in ${b.dir} (log ${b.logPath})\n`);
      await buildEfaemu(b.libfabricHome, b.dir, b.logPath, signal);
    });
  }
  process.stderr.write(`running: ${line}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [inv.script, ...inv.args], { stdio: 'inherit', env: { ...process.env, ...inv.env } });
    child.on('error', reject);
    // The script's exit codes are the CLI's: 0 passed, 1 a part failed, 2 usage, 4 an input is missing.
    child.on('close', (code, sig) => resolve(sig ? 130 : [0, 1, 2, 4].includes(code ?? 1) ? (code ?? 1) : 1));
  });
}
