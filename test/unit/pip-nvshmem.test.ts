import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findPipNvshmem, requireTorch } from '../../src/core/pip-nvshmem.ts';

// A stand-in Python: `-c SCRIPT` answers the metadata probe with PROBE_JSON, and `import torch` as TORCH says
// (ok, nvshmem: the loader error torch 2.11+cu130 gives without its pip NVSHMEM, other: some other import error).
function fakePython(torch: 'ok' | 'nvshmem' | 'other', probe: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fake-python-'));
  const py = path.join(dir, 'python3');
  writeFileSync(py, `#!/bin/bash
case "$2" in
  *importlib.metadata*) echo '${probe}' ;;
  *"import torch"*)
    case ${torch} in
      ok) echo "2.11.0+cu130 13.0" ;;
      nvshmem) echo "ImportError: libnvshmem_host.so.3: cannot open shared object file: No such file or directory" >&2; exit 1 ;;
      *) echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1 ;;
    esac ;;
esac
`);
  chmodSync(py, 0o755);
  return py;
}

describe('pip NVSHMEM beside the build', () => {
  it('finds the package and torch\'s requirement from metadata (the real probe runs on this machine\'s Python)', async () => {
    expect(await findPipNvshmem(fakePython('ok', '{"dir": "/v/nvidia/nvshmem", "req": "nvidia-nvshmem-cu13==3.4.5"}'))).toEqual({ dir: '/v/nvidia/nvshmem', torchRequires: 'nvidia-nvshmem-cu13==3.4.5' });
    expect(await findPipNvshmem(fakePython('ok', '{"dir": "", "req": ""}'))).toEqual({});
    // The probe itself is valid Python and answers on a Python without torch or the package.
    expect(await findPipNvshmem('python3')).toEqual({});
  });

  it('a torch that cannot load libnvshmem_host: the pip package it requires is missing, with that package as the fix', async () => {
    const py = fakePython('nvshmem', '{"dir": "", "req": "nvidia-nvshmem-cu13==3.4.5"}');
    const e = await requireTorch(py).then(() => undefined, (x: Error & { fix?: string }) => x);
    expect(e?.message).toBe(`${py} cannot import torch: it needs libnvshmem_host.so.3, from its pip package nvidia-nvshmem-cu13==3.4.5, which this environment lacks`);
    expect(e?.fix).toMatch(new RegExp(`^${py.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} -m pip install 'nvidia-nvshmem-cu13==3\\.4\\.5' and keep it \\(torch links it\\)`));
    // Other import failures keep the generic message.
    const py2 = fakePython('other', '{}');
    const other = await requireTorch(py2, '; or drop --deepep-src').then(() => undefined, (x: Error & { fix?: string }) => x);
    expect(other?.message).toBe(`${py2} cannot import torch, which DeepEP's setup.py builds with`);
    expect(other?.fix).toMatch(/; or drop --deepep-src$/);
    expect(await requireTorch(fakePython('ok', '{}'), '', 'torch.__version__, torch.version.cuda')).toBe('2.11.0+cu130 13.0');
  });
});
