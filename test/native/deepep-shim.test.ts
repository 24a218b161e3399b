import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { skipTitle } from '../helpers/skip-title.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NVCC = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));

// The GDA variant includes <nvshmem_efa/...>: lay the transport headers out as an install would.
function gdaInclude(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gda-inc-'));
  mkdirSync(path.join(dir, 'nvshmem_efa'));
  // Every header the patch installs (the manifest's list), but efa_io_defs.h: the test ABI's copy below.
  const manifest = JSON.parse(readFileSync(path.join(ROOT, 'templates/transport_efa_gda/manifest.json'), 'utf8')) as { installHeaders: string[] };
  for (const f of manifest.installHeaders.filter((h) => h !== 'efa_io_defs.h'))
    cpSync(path.join(ROOT, 'templates/transport_efa_gda', f), path.join(dir, 'nvshmem_efa', f));
  cpSync(path.join(ROOT, 'test/efa_abi/efa_io_defs.h'), path.join(dir, 'nvshmem_efa/efa_io_defs.h'));
  return dir;
}

describe.skipIf(!NVCC)(skipTitle('DeepEP EFA shim (nvcc -rdc=true, sm_90, NVSHMEM-shaped test headers)', !NVCC && 'no nvcc in /usr/local/cuda/bin or /usr/local/bin'), () => {
  const variants: [string, string[]][] = [
    ['V1, the translation unit that defines the state', ['-DDEFINE_STATE']],
    ['V1, a kernel translation unit (extern state)', []],
    ['EPv2 legacy namespace', ['-DDEFINE_STATE', '-DNVSHMEM_EFA_SHIM_LEGACY_NAMESPACE']],
    ['with the EFA GDA device path', ['-DDEFINE_STATE', '-DNVSHMEM_EFA_SHIM_GDA', `-I${gdaInclude()}`]],
    ["with the EFA GDA device path, the post out of line (normal mode's internode.cu)", ['-DNVSHMEM_EFA_SHIM_GDA', '-DNVSHMEM_EFA_SHIM_PUT_OUT_OF_LINE', `-I${gdaInclude()}`]],
  ];
  it.each(variants)('compiles every call DeepEP makes: %s', (_name, flags) => {
    const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'shim-')), 'shim.o');
    execFileSync(NVCC!, ['-std=c++17', '-arch=sm_90', '-rdc=true', '-c', ...flags, '-I', path.join(ROOT, 'templates/deepep_efa'),
      '-I', path.join(ROOT, 'test/deepep/include'), path.join(ROOT, 'test/deepep/shim_usage.cu'), '-o', out], { stdio: 'pipe' });
    const syms = execFileSync('nm', [out], { encoding: 'utf8' });
    // Exactly one translation unit defines the state; the others reference it.
    if (flags.includes('-DDEFINE_STATE')) expect(syms).toMatch(/ [BDd] .*state_d/);
    else expect(syms).not.toMatch(/ [BDd] .*state_d/);
  });
});
