import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ProbeReportSchema, type ProbeReport } from '../../src/core/probe-schema.ts';
import { needsLibfabric, NO_LIBFABRIC } from '../helpers/host.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function buildProbe(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'probe-build-'));
  execFileSync('cmake', ['-S', path.join(ROOT, 'native/probe'), '-B', dir], { stdio: 'pipe' });
  execFileSync('cmake', ['--build', dir, '-j', '2'], { stdio: 'pipe' });
  return path.join(dir, 'nvshmem-efa-probe');
}

/** A fake /sys, /proc and /dev: the shapes the probe reads, written for this test. */
function fakeHost(o: { product?: string; efa: number; uverbs: number; efaVersion?: string; gpuNuma?: string[]; registryDwords?: string; gdrdrv?: { dev: boolean; version?: string } }): string {
  const r = mkdtempSync(path.join(os.tmpdir(), 'probe-root-'));
  const w = (p: string, s: string) => {
    mkdirSync(path.dirname(path.join(r, p)), { recursive: true });
    writeFileSync(path.join(r, p), s);
  };
  if (o.product) w('sys/devices/virtual/dmi/id/product_name', `${o.product}\n`);
  // PCIe: one switch per GPU under root complex pci0000:00; EFA device i sits under the switch of GPU i.
  const sw = (i: number) => `sys/devices/pci0000:00/0000:00:0${i + 1}.0`;
  mkdirSync(path.join(r, 'sys/class/infiniband'), { recursive: true });
  mkdirSync(path.join(r, 'sys/bus/pci/devices'), { recursive: true });
  for (let i = 0; i < o.efa; i++) {
    const dev = `${sw(i)}/0000:1${i}:00.0`;
    w(`${dev}/numa_node`, `${i % 2}\n`);
    w(`${dev}/vendor`, '0x1d0f\n');
    w(`${dev}/class`, '0x020000\n');
    mkdirSync(path.join(r, `sys/class/infiniband/rdmap${i}s0`), { recursive: true });
    symlinkSync(path.join(r, dev), path.join(r, `sys/class/infiniband/rdmap${i}s0/device`));
  }
  (o.gpuNuma ?? []).forEach((numa, i) => {
    const dev = `${sw(i)}/0000:2${i}:00.0`;
    w(`${dev}/numa_node`, `${numa}\n`);
    w(`${dev}/vendor`, '0x10de\n');
    w(`${dev}/class`, '0x030200\n');
    symlinkSync(path.join(r, dev), path.join(r, `sys/bus/pci/devices/0000:2${i}:00.0`));
  });
  for (let i = 0; i < o.uverbs; i++) w(`dev/infiniband/uverbs${i}`, '');
  if (o.efaVersion) w('sys/module/efa/version', `${o.efaVersion}\n`);
  if (o.registryDwords !== undefined) w('sys/module/nvidia/parameters/NVreg_RegistryDwords', `${o.registryDwords}\n`);
  if (o.gdrdrv?.dev) w('dev/gdrdrv', '');
  if (o.gdrdrv?.version) w('sys/module/gdrdrv/version', `${o.gdrdrv.version}\n`);
  w('proc/meminfo', 'MemTotal: 1 kB\nHugePages_Total:      16\n');
  return r;
}

function probe(bin: string, root: string, human = false): { code: number; out: string; doc?: ProbeReport } {
  const r = spawnSync(bin, ['--root', root, ...(human ? ['--human'] : [])], { encoding: 'utf8' });
  return { code: r.status!, out: r.stdout, ...(human ? {} : { doc: ProbeReportSchema.parse(JSON.parse(r.stdout)) }) };
}

const byId = (d: ProbeReport) => Object.fromEntries(d.checks.map((c) => [c.id, c]));

describe.skipIf(!!NO_LIBFABRIC)(needsLibfabric('native/probe (built against Debian libfabric, run on fake /sys trees)'), () => {
  const bin = NO_LIBFABRIC ? '' : buildProbe();

  it('an EFA host: counts against the instance type, module version, uverbs, PeerMappingOverride, topology by PCIe path', () => {
    const root = fakeHost({ product: 'p5en.48xlarge', efa: 2, uverbs: 2, efaVersion: '3.3.1', gpuNuma: ['0', '1'], registryDwords: 'PeerMappingOverride=1;' });
    const { doc } = probe(bin, root);
    const c = byId(doc!);
    expect(c['instance-type']).toMatchObject({ status: 'pass', evidence: 'p5en.48xlarge: 16 EFA interfaces expected' });
    expect(c['efa-devices']).toMatchObject({ status: 'warn', evidence: '2 of 16 expected: rdmap0s0, rdmap1s0' });
    expect(c['uverbs']?.status).toBe('pass');
    expect(c['efa-module']).toMatchObject({ status: 'pass', evidence: 'efa 3.3.1' });
    expect(c['peer-mapping-override']?.status).toBe('pass');
    expect(c['topology']).toMatchObject({ status: 'pass', evidence: '0000:20:00.0 (NUMA 0) -> rdmap0s0 (NUMA 0); 0000:21:00.0 (NUMA 1) -> rdmap1s0 (NUMA 1)' });
    // The same, for launchers that pin a rank to its GPU's NUMA node (examples/slurm/deepep-tests.sbatch).
    expect(doc!.topology).toEqual([
      { gpu: '0000:20:00.0', gpuNuma: '0', nic: 'rdmap0s0', nicNuma: '0' },
      { gpu: '0000:21:00.0', gpuNuma: '1', nic: 'rdmap1s0', nicNuma: '1' },
    ]);
    expect(c['hugepages']?.evidence).toContain('HugePages_Total 16');
    // Built against libfabric 1.17: the GDA check is skipped, never a build failure.
    expect(c['gda-ops']).toMatchObject({ status: 'skip', evidence: 'skip: libfabric < 2.3 (the probe was built against headers without FI_EFA_GDA_OPS)' });
  });

  it('flags an old efa module, invisible uverbs, a missing PeerMappingOverride and a GPU far from its NIC', () => {
    const root = fakeHost({ product: 'p5.48xlarge', efa: 2, uverbs: 0, efaVersion: '2.10.0', gpuNuma: ['1', '1'], registryDwords: 'RmEnableFoo=1' });
    const { doc, code } = probe(bin, root);
    const c = byId(doc!);
    expect(code).toBe(1);
    expect(c['uverbs']).toMatchObject({ status: 'fail' });
    expect(c['uverbs']?.fix).toContain('--device=/dev/infiniband/uverbs');
    expect(c['efa-module']).toMatchObject({ status: 'warn', evidence: 'efa 2.10.0 (< 3.3.0: no hardware completion counters)' });
    expect(c['peer-mapping-override']).toMatchObject({ status: 'warn' });
    expect(c['topology']?.status).toBe('warn');
    expect(doc!.verdict).toBe('not ready: fix the failed checks');
  });

  it('a host without EFA: one clear failure, a verdict that says so, GPU checks still reported', () => {
    const root = fakeHost({ efa: 0, uverbs: 0 });
    const { doc, code } = probe(bin, root);
    expect(code).toBe(1);
    expect(doc!.summary.fail).toBe(1);
    expect(byId(doc!)['efa-devices']?.evidence).toContain('no EFA device on this host');
    expect(doc!.verdict).toMatch(/^no EFA device/);
    expect(doc!.checks.map((c) => c.id)).toEqual(expect.arrayContaining(['gpu-driver', 'dmabuf-export', 'gpu-mr', 'iomemory-map']));
    const human = probe(bin, root, true).out;
    expect(human).toMatch(/^fail  EFA devices/m);
    expect(human).toMatch(/^verdict: no EFA device/m);
  });

  it('names the libfabric it loaded (issue 39): fi_version() and the real path of the shared object the loader picked', () => {
    const { doc } = probe(bin, fakeHost({ efa: 0, uverbs: 0 }));
    const lf = doc!.libfabric!;
    expect(lf.version).toMatch(/^\d+\.\d+$/);
    // The file itself (libfabric.so.1 -> libfabric.so.1.x.y), as the build found it with CMake's default search.
    expect(lf.path).toMatch(/^\/.*\/libfabric\.so\.\d+\.\d+\.\d+$/);
    expect(byId(doc!)['libfabric']?.evidence).toMatch(new RegExp(`^runtime ${lf.version.replace('.', '\\.')} loaded from ${lf.path.replace(/\./g, '\\.')}, headers `));
  });

  it("GDRCopy's kernel module where EFA devices are: missing or older than 2.4 fails with the fix (as doctor does); without EFA it is not looked at", () => {
    const efa = { product: 'p5.48xlarge', efa: 2, uverbs: 2, efaVersion: '3.3.1', gpuNuma: ['0', '1'], registryDwords: 'PeerMappingOverride=1;' };
    const ok = byId(probe(bin, fakeHost({ ...efa, gdrdrv: { dev: true, version: '2.5.1' } })).doc!);
    expect(ok['gdrdrv']).toMatchObject({ status: 'pass', evidence: 'gdrdrv 2.5.1, /dev/gdrdrv' });
    for (const [g, evidence] of [
      [undefined, /no \/dev\/gdrdrv: gdrdrv is not loaded/],
      [{ dev: false, version: '2.5.1' }, /gdrdrv 2\.5\.1 is loaded, but \/dev\/gdrdrv is missing/],
      [{ dev: true, version: '2.3' }, /gdrdrv 2\.3 is older than 2\.4/],
    ] as const) {
      const { doc, code } = probe(bin, fakeHost({ ...efa, gdrdrv: g }));
      const c = byId(doc!)['gdrdrv']!;
      expect(c.status, JSON.stringify(g)).toBe('fail');
      expect(c.evidence).toMatch(evidence);
      expect(c.fix).toMatch(/gdrdrv >= 2\.4.*insmod\.sh/);
      expect(code).toBe(1);
    }
    expect(byId(probe(bin, fakeHost({ efa: 0, uverbs: 0 })).doc!)['gdrdrv']?.status).toBe('skip');
  });

  it('refuses an unknown argument (exit 2)', () => {
    expect(spawnSync(bin, ['--bogus']).status).toBe(2);
  });
});
