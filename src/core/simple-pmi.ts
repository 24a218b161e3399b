import net from 'node:net';

/**
 * The process-manager side of the "simple PMI" wire protocol (PMI-1, MPICH's simple_pmi, which NVSHMEM carries in
 * src/modules/bootstrap/pmi/simple-pmi and uses by default: NVSHMEM_BOOTSTRAP=PMI, NVSHMEM_BOOTSTRAP_PMI=PMI). It
 * serves one job of `size` ranks on the loopback: each rank finds it through PMI_PORT=127.0.0.1:<port>, with
 * PMI_RANK and PMI_SIZE in its environment, and speaks newline-terminated `cmd=<name> key=value ...` lines.
 *
 * Why it exists: NVSHMEM's perftests and examples call nvshmem_init(), whose bootstrap is PMI unless the build has
 * MPI (their unique-id path needs MPI too), and a GPU host may have no hydra (nvshmrun), srun or PMIx. This is the
 * smallest launcher NVSHMEM's own client accepts, with nothing to install.
 *
 * What it answers, as the client reads it: init -> response_to_init (rc=0 for version 1), get_maxes -> maxes,
 * get_my_kvsname, get_appnum, get_universe_size, put -> put_result, get -> get_result (rc=-1 for a missing key),
 * barrier_in -> barrier_out once every rank entered, finalize -> finalize_ack, abort exitcode=N -> the job's end.
 */

/** Limits the client reads with get_maxes: hydra's. NVSHMEM puts values of at most half vallen_max, so its 1024-byte lines (SPMIU_MAXLINE) hold them. */
export const PMI_MAXES = { kvsname_max: 256, keylen_max: 256, vallen_max: 1024 } as const;
export const KVS_NAME = 'nvshmem_efa_kvs';

export type PmiEnd =
  | { kind: 'finalized' }
  | { kind: 'abort'; rank: number | undefined; exitcode: number }
  | { kind: 'protocol-error'; detail: string }
  /** A rank's connection closed before it finalized (it exited or crashed). */
  | { kind: 'lost'; rank: number | undefined };

export interface PmiServer {
  port: number;
  /** PMI_PORT and PMI_SIZE; PMI_RANK is each rank's own. */
  env(rank: number): Record<string, string>;
  /** Resolves once every rank finalized, or at the first abort, protocol error or lost rank. */
  ended: Promise<PmiEnd>;
  close(): Promise<void>;
}

/** Parses `cmd=put kvsname=k key=a value=b==`: space-separated words, each split at its first '=' (base64 values end in '='). */
export function parsePmiLine(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const w of line.trim().split(/ +/)) {
    if (!w) continue;
    const eq = w.indexOf('=');
    if (eq <= 0) throw new Error(`not key=value: '${w}'`);
    out[w.slice(0, eq)] = w.slice(eq + 1);
  }
  return out;
}

interface Conn {
  sock: net.Socket;
  rank?: number;
  finalized: boolean;
  buf: string;
}

export async function startPmiServer(size: number, o: { trace?: (s: string) => void } = {}): Promise<PmiServer> {
  if (!Number.isInteger(size) || size < 1) throw new Error(`PMI job size must be a positive integer, got ${size}`);
  const kvs = new Map<string, string>();
  const conns = new Set<Conn>();
  let barrier: Conn[] = [];
  let finalized = 0;
  let settle!: (e: PmiEnd) => void;
  let done = false;
  const ended = new Promise<PmiEnd>((resolve) => (settle = resolve));
  const end = (e: PmiEnd) => {
    if (done) return;
    done = true;
    settle(e);
  };
  const send = (c: Conn, line: string) => {
    o.trace?.(`-> ${c.rank ?? '?'} ${line}`);
    c.sock.write(line + '\n');
  };

  const handle = (c: Conn, line: string) => {
    o.trace?.(`<- ${c.rank ?? '?'} ${line}`);
    let m: Record<string, string>;
    try {
      m = parsePmiLine(line);
    } catch (e) {
      end({ kind: 'protocol-error', detail: `rank ${c.rank ?? '?'}: ${(e as Error).message}` });
      return;
    }
    switch (m.cmd) {
      case 'init': {
        const ok = m.pmi_version === '1';
        send(c, `cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=${ok ? 0 : -1}`);
        if (!ok) end({ kind: 'protocol-error', detail: `rank ${c.rank ?? '?'} asked for PMI version ${m.pmi_version}; this launcher speaks version 1` });
        return;
      }
      case 'initack':
        // Only clients given PMI_ID send it; ours get PMI_RANK and PMI_SIZE instead (the protocol's other way).
        c.rank = Number(m.pmiid);
        send(c, 'cmd=initack');
        send(c, `cmd=set size=${size}`);
        send(c, `cmd=set rank=${c.rank}`);
        send(c, 'cmd=set debug=0');
        return;
      case 'get_maxes':
        send(c, `cmd=maxes kvsname_max=${PMI_MAXES.kvsname_max} keylen_max=${PMI_MAXES.keylen_max} vallen_max=${PMI_MAXES.vallen_max}`);
        return;
      case 'get_my_kvsname':
        send(c, `cmd=my_kvsname kvsname=${KVS_NAME}`);
        return;
      case 'get_appnum':
        send(c, 'cmd=appnum appnum=0');
        return;
      case 'get_universe_size':
        send(c, `cmd=universe_size size=${size}`);
        return;
      case 'put':
        if (m.key === undefined) return send(c, 'cmd=put_result rc=-1 msg=no_key');
        kvs.set(m.key, m.value ?? '');
        send(c, 'cmd=put_result rc=0 msg=success');
        return;
      case 'get': {
        const v = m.key === undefined ? undefined : kvs.get(m.key);
        send(c, v === undefined ? `cmd=get_result rc=-1 msg=key_${m.key ?? ''}_not_found` : `cmd=get_result rc=0 msg=success value=${v}`);
        return;
      }
      case 'barrier_in':
        barrier.push(c);
        if (barrier.length === size) {
          const all = barrier;
          barrier = [];
          for (const b of all) send(b, 'cmd=barrier_out');
        }
        return;
      case 'finalize':
        c.finalized = true;
        finalized++;
        send(c, 'cmd=finalize_ack');
        if (finalized === size) end({ kind: 'finalized' });
        return;
      case 'abort':
        end({ kind: 'abort', rank: c.rank, exitcode: Number(m.exitcode ?? 1) });
        return;
      default:
        end({ kind: 'protocol-error', detail: `rank ${c.rank ?? '?'} sent '${m.cmd ?? line}', which this launcher does not serve` });
    }
  };

  const server = net.createServer((sock) => {
    const c: Conn = { sock, finalized: false, buf: '' };
    conns.add(c);
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      c.buf += d;
      for (let nl = c.buf.indexOf('\n'); nl !== -1; nl = c.buf.indexOf('\n')) {
        const line = c.buf.slice(0, nl);
        c.buf = c.buf.slice(nl + 1);
        if (line.trim()) handle(c, line);
      }
    });
    sock.on('error', () => {}); // a rank that dies mid-write: 'close' says so
    sock.on('close', () => {
      conns.delete(c);
      if (!c.finalized) end({ kind: 'lost', rank: c.rank });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    env: (rank) => ({ PMI_PORT: `127.0.0.1:${port}`, PMI_RANK: String(rank), PMI_SIZE: String(size) }),
    ended,
    close: async () => {
      for (const c of conns) c.sock.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
