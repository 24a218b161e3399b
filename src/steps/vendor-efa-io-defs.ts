import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { EnvironmentError, VerificationError } from '../core/errors.ts';
import { writeFileAtomic } from '../core/fs-atomic.ts';
import { packageRoot } from '../core/paths.ts';
import type { FixRecord } from '../patchers/engine/fix.ts';
import type { Step, VendoredResult } from './types.ts';
import { makeDirs } from '../core/make-dirs.ts';

const Lock = z.object({
  file: z.string(),
  repository: z.string(),
  path: z.string(),
  revision: z.string(),
  commit: z.string().regex(/^[0-9a-f]{40}$/),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  url: z.string().url(),
  license: z.string(),
});
export type EfaIoDefsLock = z.infer<typeof Lock>;

/** The pin of the upstream header; NVSHMEM_EFA_EFA_IO_DEFS_LOCK points elsewhere (tests, mirrors). */
export async function loadLock(env: NodeJS.ProcessEnv = process.env): Promise<EfaIoDefsLock> {
  const file = env.NVSHMEM_EFA_EFA_IO_DEFS_LOCK ?? path.join(packageRoot(), 'third_party', 'efa_gda', 'lock.json');
  return Lock.parse(JSON.parse(await readFile(file, 'utf8')));
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const origin = (l: EfaIoDefsLock) => `${l.repository} ${l.revision} (${l.commit.slice(0, 12)}) ${l.path}`;

async function download(url: string, signal: AbortSignal): Promise<Buffer> {
  const res = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]) });
  if (!res.ok) throw new Error(`HTTP ${res.status} ${res.statusText}`);
  return Buffer.from(await res.arrayBuffer());
}

/**
 * Vendors rdma-core's efa_io_defs.h, which the GDA device header includes: from --efa-io-defs, else the pinned
 * URL. A copy whose sha256 differs from the lock is refused. When no copy can be had (offline, or the download
 * fails) the build goes on without the GDA device API, the report says so, and a failed download is retried
 * on the next run.
 */
export const vendorEfaIoDefsStep: Step = {
  id: 'vendor-efa-io-defs',
  title: 'Vendor the EFA I/O definitions (efa_io_defs.h)',
  enabled: () => true,
  async stamp(ctx) {
    const lock = await loadLock();
    const given = ctx.opts.efaIoDefs ? sha256(await readFile(ctx.opts.efaIoDefs).catch(() => Buffer.from(''))) : null;
    return { lock, given, offline: ctx.opts.offline };
  },
  async run(ctx, io) {
    const lock = await loadLock();
    const base = { id: 'vendor-efa-io-defs', anchor: `${lock.file} from ${origin(lock)}, sha256 ${lock.sha256.slice(0, 16)}…` };
    const why = 'the GDA device header encodes WQEs with the upstream EFA I/O definitions; a different revision could move a field';
    let bytes: Buffer | undefined;
    let from: string;
    if (ctx.opts.efaIoDefs) {
      from = ctx.opts.efaIoDefs;
      bytes = await readFile(from).catch((e: NodeJS.ErrnoException) => {
        throw new EnvironmentError(`--efa-io-defs ${from}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`, `pass the path of ${lock.file} (${origin(lock)})`);
      });
    } else if (ctx.opts.offline) {
      const missing = '--offline and no --efa-io-defs';
      return warned(ctx, missing, { ...base, why, status: 'warned', detail: `${missing}: the GDA device API needs ${lock.file} and will be unavailable; get it with \`curl -LO ${lock.url}\` and pass --efa-io-defs PATH` });
    } else {
      from = process.env.NVSHMEM_EFA_EFA_IO_DEFS_URL ?? lock.url;
      io.progress(`downloading ${from}`);
      try {
        bytes = await download(from, ctx.signal);
      } catch (e) {
        if (ctx.signal.aborted) throw e;
        const missing = `download of ${from} failed (${(e as Error).message})`;
        return warned(ctx, missing, { ...base, why, status: 'warned', detail: `${missing}: the GDA device API needs ${lock.file} and will be unavailable; the next run retries the download, or pass --efa-io-defs PATH (see third_party/efa_gda/README.md)` });
      }
    }
    const got = sha256(bytes);
    if (got !== lock.sha256) {
      throw new VerificationError(
        `${from} is not the pinned ${lock.file}: sha256 ${got}, expected ${lock.sha256} (${origin(lock)})`,
        `use exactly ${lock.path} of ${lock.repository} at ${lock.revision}: ${lock.url}`,
      );
    }
    const dest = path.join(ctx.paths.vendor, lock.file);
    await makeDirs(ctx.paths.vendor);
    await writeFileAtomic(dest, bytes);
    io.progress(`${lock.file} ${lock.revision} verified`);
    const vendored: VendoredResult = { file: lock.file, path: dest, origin: origin(lock), sha256: got };
    return record(ctx, { vendored, fix: { ...base, file: dest, why, status: 'applied', detail: `verified sha256 ${got}` } });
  },
  restore(ctx, result) {
    const r = result as Outcome;
    if (r.vendored && !existsSync(r.vendored.path)) return false;
    // A failed download is not an answer to keep: the next run tries again (offline is in the stamp).
    if (!r.vendored && !ctx.opts.offline && !ctx.opts.efaIoDefs) return false;
    record(ctx, r);
    return true;
  },
};

interface Outcome {
  vendored: VendoredResult | null;
  /** Why there is no copy (when vendored is null). */
  missing?: string;
  fix: FixRecord;
}

function record(ctx: Parameters<Step['run']>[0], r: Outcome): Outcome {
  ctx.vendored = r.vendored ?? undefined;
  ctx.vendorMissing = r.missing;
  ctx.envFixes = [...ctx.envFixes.filter((f) => f.id !== r.fix.id), r.fix];
  return r;
}

const warned = (ctx: Parameters<Step['run']>[0], missing: string, fix: FixRecord) => record(ctx, { vendored: null, missing, fix });
