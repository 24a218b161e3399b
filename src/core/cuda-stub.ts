import { rm } from 'node:fs/promises';
import path from 'node:path';
import { run } from './exec.ts';
import { writeFileAtomic } from './fs-atomic.ts';
import { makeDirs } from './make-dirs.ts';

/**
 * A link-time stand-in for libcuda.so on hosts without a driver (CPU-only build machines, trimmed toolkits
 * without lib64/stubs). It defines every driver entry point cuda.h declares, under the names the macros in
 * cuda.h map them to (cuMemAlloc -> cuMemAlloc_v2), so anything NVSHMEM links against it resolves. It is
 * used only to link; at run time the real driver's libcuda.so.1 is loaded instead (same soname).
 */
export function driverSymbols(preprocessedCudaH: string): string[] {
  const names = new Set<string>();
  for (const m of preprocessedCudaH.matchAll(/\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(/g)) names.add(m[1]!);
  return [...names].sort();
}

export async function buildCudaLinkStub(cudaHome: string, outDir: string, logPath: string): Promise<{ path: string; symbols: number }> {
  await makeDirs(outDir);
  // Preprocessed, a file that only includes cuda.h is cuda.h with its macros applied: the names to define.
  const includeC = path.join(outDir, 'include_cuda_h.c');
  await writeFileAtomic(includeC, '#include <cuda.h>\n');
  const lines = await run('cc', ['-E', '-P', `-I${path.join(cudaHome, 'include')}`, includeC], {
    fix: `check that ${cudaHome}/include/cuda.h exists and a C compiler (cc) is installed`,
    logPath,
  });
  const symbols = driverSymbols(lines.join('\n'));
  if (symbols.length < 100) throw new Error(`found only ${symbols.length} driver functions in cuda.h`);
  const stubC = path.join(outDir, 'libcuda_stub.c');
  await writeFileAtomic(stubC, symbols.map((s) => `int ${s}(void) { return 999; }\n`).join(''));
  const so = path.join(outDir, 'libcuda.so');
  const tmp = `${so}.tmp`;
  // The linker writes its output in place: nothing may stand at the name for it to write through.
  await rm(tmp, { force: true });
  await run('cc', ['-shared', '-fPIC', '-Wl,-soname,libcuda.so.1', '-o', tmp, stubC], { fix: 'check that a C compiler (cc) works', logPath });
  await run('mv', ['-f', tmp, so], { fix: 'check the work directory is writable', logPath });
  return { path: so, symbols: symbols.length };
}
