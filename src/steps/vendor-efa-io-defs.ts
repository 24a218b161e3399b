import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod';
import { EnvironmentError, VerificationError } from '../core/errors.ts';
import { writeFileAtomic } from '../core/fs-atomic.ts';
import { readLockFile, readUserFile } from '../core/small-file.ts';
import { upToDate, type FixRecord } from '../patchers/engine/fix.ts';
import type { Step, VendoredResult } from './types.ts';
import { makeDirs } from '../core/make-dirs.ts';
import { boundedBody } from '../core/bounded-body.ts';
import { httpGet } from '../core/http-get.ts';

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
  // Checked as untrusted input: garbage, a schema mismatch or a FIFO is one line naming the variable.
  return readLockFile('NVSHMEM_EFA_EFA_IO_DEFS_LOCK', ['third_party', 'efa_gda', 'lock.json'], Lock, 'an efa_io_defs.h lock', env);
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
/** Where the pinned header comes from, as the vendored copy's first line and the report name it. */
export const efaIoDefsOrigin = (l: EfaIoDefsLock) => `${l.repository} ${l.revision} (${l.commit.slice(0, 12)}) ${l.path}`;
const origin = efaIoDefsOrigin;
/** Which lock pinned it, when not the package's own (a checksum refusal then names the variable). */
const pinnedBy = (env: NodeJS.ProcessEnv = process.env) => (env.NVSHMEM_EFA_EFA_IO_DEFS_LOCK ? `; pinned by NVSHMEM_EFA_EFA_IO_DEFS_LOCK=${env.NVSHMEM_EFA_EFA_IO_DEFS_LOCK}` : '');

/**
 * The bytes of --efa-io-defs, verified against the lock: a path that is not a regular file (a FIFO, /dev/zero,
 * a directory) is refused before any read, reads are capped (the header is about 10 KB), and another checksum
 * is exit 5. Preflight, the dry run and the step all read it through here.
 */
export async function readEfaIoDefs(file: string, lock: EfaIoDefsLock): Promise<Buffer> {
  const bytes = await readUserFile(file, `--efa-io-defs ${file}`, `pass the path of ${lock.file} (${origin(lock)})`);
  const got = sha256(bytes);
  if (got !== lock.sha256) {
    throw new VerificationError(
      `${file} is not the pinned ${lock.file}: sha256 ${got}, expected ${lock.sha256} (${origin(lock)}${pinnedBy()})`,
      `use exactly ${lock.path} of ${lock.repository} at ${lock.revision}: ${lock.url}`,
    );
  }
  return bytes;
}

async function download(url: string, signal: AbortSignal): Promise<Buffer> {
  const body = await httpGet(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]) });
  // The header is 8 KiB: a body past 1 MiB is not it, and 30 s bounds the whole download (above).
  const chunks: Uint8Array[] = [];
  for await (const c of boundedBody(body, { maxBytes: 1 << 20, stallMs: 30_000 })) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Why there is no copy with --offline and no --efa-io-defs (the report's device API line quotes it). */
export const OFFLINE_MISSING = '--offline and no --efa-io-defs';

/** Every way to provide the header when the download fails (issue 39: the failure stops the step). */
export function howToProvide(lock: EfaIoDefsLock): string {
  return `set NVSHMEM_EFA_EFA_IO_DEFS_URL to a mirror of it (sha256 still enforced); or download ${lock.url} (\`curl -LO\`) and pass --efa-io-defs PATH; or pass --offline to build without the GDA device API. Downloads honour https_proxy / HTTPS_PROXY (http_proxy for http://) and no_proxy, as curl does`;
}

/**
 * Vendors rdma-core's efa_io_defs.h, which the GDA device header includes: from --efa-io-defs, else the pinned
 * URL. A copy whose sha256 differs from the lock is refused (exit 5), and a download that fails stops the step
 * (exit 4) with every way to provide it. Only --offline without --efa-io-defs builds without it: then the GDA
 * device API is off, and the step line, the summary and the report say so.
 */
export const vendorEfaIoDefsStep: Step = {
  id: 'vendor-efa-io-defs',
  title: 'Vendor the EFA I/O definitions (efa_io_defs.h)',
  enabled: () => true,
  async stamp(ctx) {
    const lock = await loadLock();
    // A file that cannot be read stamps as empty; run() then refuses it with the reason.
    const given = ctx.opts.efaIoDefs ? sha256(await readUserFile(ctx.opts.efaIoDefs, '--efa-io-defs', '').catch(() => Buffer.from(''))) : null;
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
      bytes = await readEfaIoDefs(from, lock);
    } else if (ctx.opts.offline) {
      // The one way to build without the header is to ask for it: the step line, the summary and the report say so.
      io.note?.(`without ${lock.file}: GDA device API off (--offline, no --efa-io-defs)`);
      return warned(ctx, OFFLINE_MISSING, { ...base, why, status: 'warned', detail: `${OFFLINE_MISSING}: the GDA device API needs ${lock.file} and is left out of this build; get it with \`curl -LO ${lock.url}\` and pass --efa-io-defs PATH` });
    } else {
      from = process.env.NVSHMEM_EFA_EFA_IO_DEFS_URL ?? lock.url;
      io.progress(`downloading ${from}`);
      try {
        bytes = await download(from, ctx.signal);
      } catch (e) {
        if (ctx.signal.aborted) throw e;
        // A required input: a build that went on without it would claim a device API it does not have.
        throw new EnvironmentError(`cannot download ${lock.file} from ${from}: ${(e as Error).message}`, howToProvide(lock));
      }
    }
    const got = sha256(bytes);
    if (got !== lock.sha256) {
      throw new VerificationError(
        `${from} is not the pinned ${lock.file}: sha256 ${got}, expected ${lock.sha256} (${origin(lock)}${pinnedBy()})`,
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
    // Without a copy the step always runs again: it is cheap, and its line must say again what the build lacks.
    if (!r.vendored) return false;
    record(ctx, { ...r, fix: upToDate([r.fix])[0]! });
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
