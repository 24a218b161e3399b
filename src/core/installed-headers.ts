import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * Installed headers that cannot compile because a header they include with quotes ("x.h", resolved next to
 * the including file) is not installed, directly or through another header: e.g. the GDA device headers
 * when efa_io_defs.h could not be vendored. Returns each with the missing file at the end of its chain.
 */
export async function headersWithMissingIncludes(dir: string): Promise<{ file: string; missing: string }[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /\.(h|hpp|cuh)$/.test(n));
  } catch {
    return [];
  }
  const includes = new Map<string, string[]>();
  for (const n of names) {
    const src = await readFile(path.join(dir, n), 'utf8');
    includes.set(n, [...src.matchAll(/^\s*#\s*include\s*"([^"]+)"/gm)].map((m) => m[1]!));
  }
  const missingOf = (n: string, seen: Set<string>): string | undefined => {
    if (seen.has(n)) return undefined;
    seen.add(n);
    for (const inc of includes.get(n) ?? []) {
      if (!includes.has(inc)) return inc;
      const deeper = missingOf(inc, seen);
      if (deeper) return deeper;
    }
    return undefined;
  };
  const out: { file: string; missing: string }[] = [];
  for (const n of names.sort()) {
    const missing = missingOf(n, new Set());
    if (missing) out.push({ file: n, missing });
  }
  return out;
}

/** Removes installed headers that cannot compile (see above); returns what was removed and why. */
export async function withdrawBrokenHeaders(dir: string): Promise<{ file: string; missing: string }[]> {
  const broken = await headersWithMissingIncludes(dir);
  for (const b of broken) await rm(path.join(dir, b.file), { force: true });
  return broken;
}
