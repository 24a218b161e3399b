import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = path.join(ROOT, 'test/efa_abi/abi_check.sh');
const run = (args: string[]) => spawnSync('bash', [SCRIPT, ...args], { encoding: 'utf8' });

// Upstream headers are not in the repository; where a developer or the GPU acceptance run has them, the
// real comparison runs (EFA_ABI_UPSTREAM_IO / EFA_ABI_UPSTREAM_FI: colon-separated directories).
const upstreamIo = (process.env.EFA_ABI_UPSTREAM_IO ?? '').split(':').filter((d) => existsSync(path.join(d, 'efa_io_defs.h')));
const upstreamFi = (process.env.EFA_ABI_UPSTREAM_FI ?? '').split(':').filter((d) => existsSync(path.join(d, 'rdma/fi_ext_efa.h')));

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('ABI conformance check (test/efa_abi/abi_check.sh)'), () => {
  it('matches a header with the same layout', () => {
    const r = run(['--io', path.join(ROOT, 'test/efa_abi'), '--fi', path.join(ROOT, 'test/efa_abi/include')]);
    expect(r.stdout).toMatch(/^match: .*efa_io_defs\.h \(\d+ definitions\)$/m);
    expect(r.stdout).toMatch(/^match: .*fi_ext_efa\.h \(\d+ definitions\)$/m);
    expect(r.status).toBe(0);
  });

  it('reports a moved field, a changed mask and a reordered ops member', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'abi-'));
    const io = readFileSync(path.join(ROOT, 'test/efa_abi/efa_io_defs.h'), 'utf8')
      .replace('    uint16_t ah;\n    uint16_t reserved;\n    uint32_t qkey;', '    uint32_t qkey;\n    uint16_t ah;\n    uint16_t reserved;')
      .replace('#define EFA_IO_TX_META_DESC_COMP_REQ_MASK BIT(4)', '#define EFA_IO_TX_META_DESC_COMP_REQ_MASK BIT(5)');
    writeFileSync(path.join(dir, 'efa_io_defs.h'), io);
    mkdirSync(path.join(dir, 'inc/rdma'), { recursive: true });
    const fi = readFileSync(path.join(ROOT, 'test/efa_abi/include/rdma/fi_ext_efa.h'), 'utf8').replace(
      /(    int \(\*query_addr\)[^;]*;\n)(    int \(\*query_qp_wqs\)[^;]*;\n)/,
      '$2$1',
    );
    writeFileSync(path.join(dir, 'inc/rdma/fi_ext_efa.h'), fi);
    const r = run(['--io', dir, '--fi', path.join(dir, 'inc')]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('-offsetof(efa_io_tx_meta_desc, ah) 12');
    expect(r.stdout).toContain('-EFA_IO_TX_META_DESC_COMP_REQ_MASK 16');
    expect(r.stdout).toContain('-offsetof(fi_efa_ops_gda, query_addr) 0');
  });

  it('refuses to pass with nothing to compare', () => {
    expect(run([]).status).toBe(2);
  });

  it.skipIf(upstreamIo.length + upstreamFi.length === 0)(skipTitle('matches the upstream headers given in EFA_ABI_UPSTREAM_IO / _FI', upstreamIo.length + upstreamFi.length === 0 && 'neither variable names a directory with the upstream header'), () => {
    const args = [...upstreamIo.flatMap((d) => ['--io', d]), ...upstreamFi.flatMap((d) => ['--fi', d])];
    const r = run(args);
    expect(r.stdout).not.toContain('MISMATCH');
    expect(r.status).toBe(0);
  });
});

