import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { mergedInstall, outsidePrefixFixes, stagedInstall } from '../../src/core/fabric-source.ts';

/**
 * The two ways a fabric build installs from its DESTDIR stage: stagedInstall replaces the prefix, mergedInstall
 * adds to it (fabtests into libfabric's). Both install nothing outside the prefix and name what they left out.
 */
const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-stage-'));
const put = (root: string, rel: string, s = rel) => {
  mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  writeFileSync(path.join(root, rel), s);
};

describe('staged installs', () => {
  it('stagedInstall moves the prefix into place and names every file the install put outside it', async () => {
    const w = tmp();
    const prefix = path.join(w, 'install', 'lf');
    put(prefix, 'lib/old.so');
    const r = await stagedInstall(prefix, path.join(w, 'stage'), async (d) => {
      put(path.join(d, prefix), 'lib/libfabric.so');
      put(d, 'etc/libfabric.conf');
    });
    expect(r.outside).toEqual(['/etc/libfabric.conf']);
    expect(existsSync(path.join(prefix, 'lib/libfabric.so'))).toBe(true);
    expect(existsSync(path.join(prefix, 'lib/old.so'))).toBe(false);
    expect(existsSync(path.join(w, 'stage'))).toBe(false);
  });

  it('mergedInstall adds to the prefix, never over a file already there, and names what it put outside', async () => {
    const w = tmp();
    const prefix = path.join(w, 'install', 'lf');
    put(prefix, 'bin/fi_info', 'libfabric');
    const r = await mergedInstall(prefix, path.join(w, 'stage'), async (d) => {
      put(path.join(d, prefix), 'bin/fi_info', 'fabtests');
      put(path.join(d, prefix), 'bin/fi_rma_bw');
      put(d, 'usr/share/fabtests/test_configs/efa.yaml');
    });
    expect(r.clashes).toEqual(['bin/fi_info']);
    expect(r.outside).toEqual(['/usr/share/fabtests/test_configs/efa.yaml']);
    expect(readFileSync(path.join(prefix, 'bin/fi_info'), 'utf8')).toBe('libfabric');
    expect(existsSync(path.join(prefix, 'bin/fi_rma_bw'))).toBe(true);
    expect(existsSync(path.join(w, 'usr'))).toBe(false);
  });

  it('what an install put outside the prefix is one warned fix per package, naming the first 8 files', () => {
    expect(outsidePrefixFixes('libfabric', '/w/install/lf', [])).toEqual([]);
    const files = Array.from({ length: 10 }, (_, i) => `/etc/f${i}`);
    const [f] = outsidePrefixFixes('fabtests', '/w/install/lf', files);
    expect(f).toEqual({ id: 'fabtests-install-outside-prefix', anchor: '/w/install/lf', why: 'a work-dir build writes nothing outside the work dir', status: 'warned', detail: `fabtests' install also wanted ${files.slice(0, 8).join(', ')} and 2 more; not installed` });
    expect(outsidePrefixFixes('rdma-core', '/p', ['/etc/x'])[0]?.detail).toBe("rdma-core's install also wanted /etc/x; not installed");
  });
});
