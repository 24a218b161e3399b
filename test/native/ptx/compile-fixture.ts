/**
 * Compiles test/native/ptx/gda_post_path.cu to PTX against a copy of the templates, laid out as an install has them
 * (nvshmem_efa/ with the transport's device headers and the test ABI's efa_io_defs.h, the shim beside it), with any
 * edits applied to that copy: the mutants the store-order test must catch.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const GDA = path.join(ROOT, 'templates/transport_efa_gda');
const SHIM = 'nvshmem_efa_shim.cuh';

/** NVSHMEM_EFA_TEST_NO_NVCC=1 pretends there is none (to check the skip and the failure without it). */
export const NVCC = process.env.NVSHMEM_EFA_TEST_NO_NVCC === '1'
  ? undefined
  : ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => existsSync(p));
export const NO_NVCC = NVCC
  ? undefined
  : 'no nvcc at /usr/local/cuda/bin or /usr/local/bin: install a CUDA toolkit (on Debian: nvidia-cuda-toolkit, from non-free)';

/** One text replacement in one template header (a file of templates/transport_efa_gda, or the shim). */
export interface Edit {
  file: string;
  from: string;
  to: string;
}

/** Lays the templates out in a fresh directory with edits applied; each edit's text must occur exactly once. */
export function layTemplates(edits: Edit[] = []): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gda-ptx-'));
  mkdirSync(path.join(dir, 'nvshmem_efa'));
  const manifest = JSON.parse(readFileSync(path.join(GDA, 'manifest.json'), 'utf8')) as { installHeaders: string[] };
  for (const f of manifest.installHeaders.filter((h) => h !== 'efa_io_defs.h')) cpSync(path.join(GDA, f), path.join(dir, 'nvshmem_efa', f));
  cpSync(path.join(ROOT, 'test/efa_abi/efa_io_defs.h'), path.join(dir, 'nvshmem_efa/efa_io_defs.h'));
  cpSync(path.join(ROOT, 'templates/deepep_efa', SHIM), path.join(dir, SHIM));
  for (const e of edits) {
    const file = path.join(dir, e.file === SHIM ? SHIM : path.join('nvshmem_efa', e.file));
    const text = readFileSync(file, 'utf8');
    const n = text.split(e.from).length - 1;
    // A mutant whose anchor moved would be the real code and pass: say so instead.
    if (n !== 1) throw new Error(`${e.file}: the text to mutate occurs ${n} times (want 1), update the mutant: ${JSON.stringify(e.from)}`);
    writeFileSync(file, text.replace(e.from, e.to));
  }
  return dir;
}

/** nvcc -ptx of the fixture for sm_90 against the laid-out templates in dir; resolves to the PTX text. */
export async function compileFixture(dir: string, defines: string[] = []): Promise<string> {
  if (!NVCC) throw new Error(NO_NVCC);
  const out = path.join(dir, 'gda_post_path.ptx');
  await promisify(execFile)(NVCC, ['-std=c++17', '-arch=sm_90', '-rdc=true', '-ptx', ...defines.map((d) => `-D${d}`), '-I', dir,
    '-I', path.join(ROOT, 'test/deepep/include'), path.join(ROOT, 'test/native/ptx/gda_post_path.cu'), '-o', out], { maxBuffer: 16 << 20 });
  return readFileSync(out, 'utf8');
}

/** The fixture's PTX against the templates with edits applied (-D defines); the copy is removed afterwards. */
export async function fixturePtx(edits: Edit[] = [], defines: string[] = []): Promise<string> {
  const dir = layTemplates(edits);
  try {
    return await compileFixture(dir, defines);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
