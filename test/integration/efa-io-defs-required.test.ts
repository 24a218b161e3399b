// efa_io_defs.h is a required input (issue 39, item 1): a download that fails stops its step with every way to
// provide it, and only --offline builds without it, with the step line, the summary and the report all saying the
// GDA device API is off and why (it was "warned" among 87 fix lines, exit 0, and the report said the device API was
// "on"). Downloads go through the proxy the environment names, as curl's do.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV, IO_DEFS, report, spawnCli, stepStatus, tmp } from '../helpers/cli.ts';
import { materialize } from '../helpers/golden.ts';

/** Serves efa_io_defs.h (or 503 while `down`), directly or as an HTTP proxy; records what it was asked. */
const seen: string[] = [];
let down = true;
const server = http.createServer((req, res) => {
  seen.push(req.url!);
  if (down) return void res.writeHead(503, 'Service Unavailable').end('busy');
  res.writeHead(200).end(readFileSync(IO_DEFS));
});
let at = '';
beforeAll(() => new Promise<void>((r) => server.listen(0, '127.0.0.1', () => ((at = `127.0.0.1:${(server.address() as AddressInfo).port}`), r()))));
afterAll(() => void server.close());

async function patch(extra: string[], env: NodeJS.ProcessEnv) {
  const work = path.join(tmp(), 'w');
  const r = spawnCli(['patch', '--nvshmem-src', materialize('v3.4-like'), '--work-dir', work, ...extra], { ...ENV, ...env });
  const { code } = await r.exited;
  return { code, stdout: r.stdout(), stderr: r.stderr(), work };
}

describe('efa_io_defs.h: a failed download fails the step; --offline builds without it and says so everywhere', () => {
  it('a download that fails is exit 4 naming the URL and why, the fix gives the mirror variable, --efa-io-defs and --offline', async () => {
    down = true;
    const url = `http://${at}/efa_io_defs.h`;
    const r = await patch([], { NVSHMEM_EFA_EFA_IO_DEFS_URL: url });
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toContain(`error: cannot download efa_io_defs.h from ${url}: HTTP 503 Service Unavailable`);
    const fix = r.stderr.split('\n').find((l) => l.startsWith('fix: '))!;
    for (const way of ['NVSHMEM_EFA_EFA_IO_DEFS_URL', '--efa-io-defs PATH', '--offline']) expect(fix).toContain(way);
    expect(stepStatus(r.work)).toMatchObject({ 'vendor-efa-io-defs': 'failed', 'patch-nvshmem': 'not-run' });
    expect(report(r.work).ok).toBe(false);
  }, 120_000);

  it('--offline without --efa-io-defs: exit 0, and the step line, the summary and the report say the device API is off and why', async () => {
    const r = await patch(['--offline'], {});
    expect(r.code, r.stderr).toBe(0);
    // The step line (the line renderer, on stderr) and the summary's step list.
    expect(r.stderr).toMatch(/Vendor the EFA I\/O definitions \(efa_io_defs\.h\) \(without efa_io_defs\.h: GDA device API off \(--offline, no --efa-io-defs\)\)/);
    expect(r.stdout).toMatch(/done .* vendor-efa-io-defs \(without efa_io_defs\.h: GDA device API off/);
    expect(r.stdout).toMatch(/^NVSHMEM device API over GDA: off: --offline and no --efa-io-defs: /m);
    const rep = report(r.work);
    expect(rep.nvshmemDeviceApi?.status).toBe('off');
    expect(rep.nvshmemDeviceApi?.reason).toMatch(/^--offline and no --efa-io-defs: .*pass --efa-io-defs PATH/);
    const md = readFileSync(path.join(r.work, 'report.md'), 'utf8');
    expect(md).toContain('- NVSHMEM device API over GDA: off: --offline and no --efa-io-defs');
    expect(md).not.toMatch(/device API over GDA: on/);
  }, 120_000);

  it('downloads through http_proxy (the URL names a host that does not exist: only the proxy can answer); no_proxy bypasses it', async () => {
    down = false;
    seen.length = 0;
    const r = await patch([], { NVSHMEM_EFA_EFA_IO_DEFS_URL: 'http://efa-mirror.example/efa_io_defs.h', http_proxy: `http://${at}` });
    expect(r.code, r.stderr).toBe(0);
    expect(seen).toEqual(['http://efa-mirror.example/efa_io_defs.h']);
    expect(report(r.work).fixes.find((f) => f.id === 'vendor-efa-io-defs')?.status).toBe('applied');
    expect(report(r.work).nvshmemDeviceApi?.status).toBe('on');
    seen.length = 0;
    // With the origin in no_proxy the request goes to it directly (a proxy at a closed port would refuse it).
    const direct = await patch([], { NVSHMEM_EFA_EFA_IO_DEFS_URL: `http://${at}/efa_io_defs.h`, http_proxy: 'http://127.0.0.1:1', no_proxy: '127.0.0.1' });
    expect(direct.code, direct.stderr).toBe(0);
    expect(seen).toEqual(['/efa_io_defs.h']);
  }, 120_000);
});
