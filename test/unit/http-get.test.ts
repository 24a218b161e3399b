// Downloads honour the proxy variables as curl does (issue 39, item 1): Node 20's global fetch ignored them, so a
// host behind a proxy saw every download fail. A local proxy started here proves where each request went.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { obtainSource } from '../../src/core/fabric-source.ts';
import { httpGet, proxyEnv } from '../../src/core/http-get.ts';

/** A plain HTTP proxy on 127.0.0.1: answers absolute-URI GETs itself, and refuses every CONNECT; it records both. */
function startProxy() {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`GET ${req.url}`);
    res.end('from the proxy');
  });
  server.on('connect', (req, socket) => {
    seen.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  return { server, seen };
}

const listen = (s: http.Server) => new Promise<string>((r) => s.listen(0, '127.0.0.1', () => r(`127.0.0.1:${(s.address() as AddressInfo).port}`)));
const text = async (body: ReadableStream<Uint8Array>) => {
  let s = '';
  for await (const c of body as unknown as AsyncIterable<Uint8Array>) s += Buffer.from(c).toString();
  return s;
};
const signal = () => AbortSignal.timeout(10_000);

describe('httpGet: the proxy variables, as curl reads them', () => {
  const proxy = startProxy();
  const origin = http.createServer((req, res) => res.end(`from the origin ${req.url}`));
  let proxyAt = '';
  let originAt = '';
  beforeAll(async () => {
    proxyAt = await listen(proxy.server);
    originAt = await listen(origin);
  });
  afterAll(() => {
    proxy.server.close();
    origin.close();
  });

  it('reads https_proxy before HTTPS_PROXY, takes http_proxy only in lower case, and no_proxy before NO_PROXY', () => {
    expect(proxyEnv({ https_proxy: 'a:1', HTTPS_PROXY: 'b:2', http_proxy: 'c:3', HTTP_PROXY: 'd:4', no_proxy: 'x', NO_PROXY: 'y' })).toEqual({ https: 'a:1', http: 'c:3', noProxy: 'x' });
    expect(proxyEnv({ HTTPS_PROXY: 'b:2', HTTP_PROXY: 'd:4', NO_PROXY: 'y' })).toEqual({ https: 'b:2', http: undefined, noProxy: 'y' });
  });

  it('with no proxy variable, goes straight to the server', async () => {
    proxy.seen.length = 0;
    expect(await text(await httpGet(`http://${originAt}/f`, { signal: signal(), env: {} }))).toBe('from the origin /f');
    expect(proxy.seen).toEqual([]);
  });

  it('sends an http:// URL through http_proxy (scheme optional, as in curl)', async () => {
    proxy.seen.length = 0;
    for (const p of [`http://${proxyAt}`, proxyAt]) expect(await text(await httpGet(`http://${originAt}/f`, { signal: signal(), env: { http_proxy: p } }))).toBe('from the proxy');
    expect(proxy.seen).toEqual([`GET http://${originAt}/f`, `GET http://${originAt}/f`]);
  });

  it('tunnels an https:// URL through https_proxy, or HTTPS_PROXY (CONNECT host:443), and says which variable when it fails', async () => {
    proxy.seen.length = 0;
    for (const env of [{ https_proxy: `http://${proxyAt}` }, { HTTPS_PROXY: `http://${proxyAt}` }]) {
      const e = await httpGet('https://efa-io-defs.example/efa_io_defs.h', { signal: signal(), env }).catch((x: Error) => x);
      expect(e).toBeInstanceOf(Error);
      expect((e as Error).message).toContain(`${Object.keys(env)[0]}=http://${proxyAt} is set`);
    }
    expect(proxy.seen).toEqual(['CONNECT efa-io-defs.example:443', 'CONNECT efa-io-defs.example:443']);
  });

  it('does not send https:// through http_proxy (curl does not either)', async () => {
    proxy.seen.length = 0;
    // The origin speaks no TLS: the handshake fails there, directly, and the proxy is never asked.
    const e = await httpGet(`https://${originAt}/f`, { signal: signal(), env: { http_proxy: `http://${proxyAt}` } }).catch((x: Error) => x);
    expect(e).toBeInstanceOf(Error);
    expect((e as Error).message).not.toContain('is set');
    expect(proxy.seen).toEqual([]);
  });

  it('bypasses the proxy for a host no_proxy (or NO_PROXY) names, and for no_proxy=*', async () => {
    proxy.seen.length = 0;
    for (const np of [{ no_proxy: '127.0.0.1' }, { NO_PROXY: 'localhost,127.0.0.1' }, { no_proxy: '*' }]) {
      expect(await text(await httpGet(`http://${originAt}/f`, { signal: signal(), env: { http_proxy: `http://${proxyAt}`, ...np } }))).toBe('from the origin /f');
    }
    // Another host is still proxied.
    expect(await text(await httpGet('http://mirror.example/f', { signal: signal(), env: { http_proxy: `http://${proxyAt}`, no_proxy: '127.0.0.1' } }))).toBe('from the proxy');
    expect(proxy.seen).toEqual(['GET http://mirror.example/f']);
  });

  it('a proxy that refuses the connection is an error naming the variable; an HTTP error status is one too', async () => {
    const refused = await httpGet(`http://${originAt}/f`, { signal: signal(), env: { http_proxy: 'http://127.0.0.1:1' } }).catch((x: Error) => x);
    expect((refused as Error).message).toBe('ECONNREFUSED (http_proxy=http://127.0.0.1:1 is set)');
    const missing = http.createServer((_, res) => res.writeHead(404).end());
    const at = await listen(missing);
    try {
      const e = await httpGet(`http://${at}/f`, { signal: signal(), env: {} }).catch((x: Error) => x);
      expect((e as Error).message).toBe('HTTP 404 Not Found');
    } finally {
      missing.close();
    }
  });
});

describe('the fabric archives are fetched through the same proxy (src/core/fabric-source.ts)', () => {
  it('a pinned archive named by an http:// URL of a host that does not exist arrives through http_proxy, verified by its sha256', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-proxy-'));
    mkdirSync(path.join(dir, 'tree/gdrcopy-2.5.1'), { recursive: true });
    writeFileSync(path.join(dir, 'tree/gdrcopy-2.5.1/README'), 'gdrcopy\n');
    const archive = path.join(dir, 'gdrcopy-2.5.1.tar.gz');
    execFileSync('tar', ['-czf', archive, '-C', path.join(dir, 'tree'), 'gdrcopy-2.5.1']);
    const bytes = readFileSync(archive);
    const seen: string[] = [];
    const proxy = http.createServer((req, res) => {
      seen.push(req.url!);
      res.end(bytes);
    });
    const at = await listen(proxy);
    const url = 'http://gdrcopy-mirror.example/v2.5.1.tar.gz';
    const pin = { ref: 'v2.5.1', version: '2.5.1', repository: 'https://gdrcopy-mirror.example/gdrcopy.git', commit: '0'.repeat(40), archive: { url, sha256: createHash('sha256').update(bytes).digest('hex'), file: 'gdrcopy-2.5.1.tar.gz' }, checksumFrom: 'test', note: 'test' };
    const saved = process.env.http_proxy;
    process.env.http_proxy = `http://${at}`;
    try {
      const io = { downloads: path.join(dir, 'w/downloads'), sources: path.join(dir, 'w/sources'), offline: false, signal: AbortSignal.timeout(20_000), logPath: path.join(dir, 'w/x.log'), progress: () => {} };
      const src = await obtainSource('gdrcopy', pin, { kind: 'archive', url }, io);
      expect(readFileSync(path.join(src.dir, 'README'), 'utf8')).toBe('gdrcopy\n');
      expect(seen).toEqual([url]);
    } finally {
      if (saved === undefined) delete process.env.http_proxy;
      else process.env.http_proxy = saved;
      proxy.close();
    }
  });
});
