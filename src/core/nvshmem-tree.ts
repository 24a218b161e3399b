import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { scanCMake } from '../patchers/engine/cmake-scan.ts';

/** The project version from the top-level `project(... VERSION x.y.z.w)`, if the tree has one. */
export async function nvshmemVersion(dir: string): Promise<string | undefined> {
  try {
    const cmds = scanCMake(await readFile(path.join(dir, 'CMakeLists.txt'), 'utf8'));
    const project = cmds.find((c) => c.name === 'project');
    const i = project?.args.findIndex((a) => a.text === 'VERSION') ?? -1;
    return i >= 0 ? project!.args[i + 1]?.text : undefined;
  } catch {
    return undefined;
  }
}

/** Source files under `dir/src` that `#include <header>` (first few only): tells which headers the build needs. */
export async function filesIncluding(dir: string, header: string, max = 3): Promise<string[]> {
  const { readdir } = await import('node:fs/promises');
  const re = new RegExp(`^\\s*#\\s*include\\s*[<"]${header.replace('.', '\\.')}[>"]`, 'm');
  const hits: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(path.join(dir, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (hits.length >= max) return;
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(r);
      else if (/\.(c|cc|cpp|cu|h|hpp|cuh)$/.test(e.name) && re.test(await readFile(path.join(dir, r), 'utf8'))) hits.push(r);
    }
  };
  await walk('src');
  return hits;
}
