import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod';
import { writeFileAtomic } from './fs-atomic.ts';
import { readSmallFile } from './untrusted.ts';
import { MARKER_FILE } from './work-dir-names.ts';

/**
 * What each finished step saw (its stamp: a hash of its inputs) and produced. A step's entry is dropped
 * before it runs and written only after it finishes, so a run killed at any point resumes at the first step
 * without a matching entry.
 *
 * The results hold absolute paths (the copy of the tree, the install prefix). The file records the real path
 * of the work dir it was written for: a copied or moved work dir (cp -a) must not go on patching and building
 * the original's trees, so there its state is not trusted and every step reruns.
 */
const StepEntry = z.object({ stamp: z.string(), result: z.unknown(), finishedAt: z.string() });
const StateFile = z.object({ version: z.literal(1), workDir: z.string().optional(), steps: z.record(z.string(), StepEntry) });
export type StepEntry = z.infer<typeof StepEntry>;

export const STATE_FILE = 'state.json';

/** True when `json` is a state file of this tool (how a work dir made before the marker is recognised). */
export function isStateFile(json: unknown): boolean {
  return StateFile.safeParse(json).success;
}

const real = (p: string) => {
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
};

/**
 * For a state of an earlier version (no work dir recorded): the other nvshmem-efa work dir one of its recorded
 * trees or prefixes lies in, if any (the original of a copied work dir).
 */
function foreignWorkDir(steps: Record<string, StepEntry>, workDir: string): string | undefined {
  const own = real(workDir);
  const found: string[] = [];
  const visit = (v: unknown, key: string) => {
    if (typeof v === 'string' && (key === 'dir' || key === 'prefix' || key === 'path') && path.isAbsolute(v)) found.push(v);
    else if (Array.isArray(v)) v.forEach((x) => visit(x, key));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) visit(x, k);
  };
  for (const e of Object.values(steps)) visit(e.result, '');
  for (const p of found) {
    for (let d = path.dirname(p); d !== path.dirname(d); d = path.dirname(d)) {
      if (!existsSync(path.join(d, MARKER_FILE)) && !existsSync(path.join(d, STATE_FILE))) continue;
      if (real(d) !== own) return d;
      break;
    }
  }
  return undefined;
}

export class StateStore {
  private constructor(
    private readonly file: string,
    private readonly workDir: string,
    private data: z.infer<typeof StateFile>,
  ) {}

  static async open(workDir: string, note: (s: string) => void = (s) => process.stderr.write(`note: ${s}\n`)): Promise<StateStore> {
    const file = path.join(workDir, STATE_FILE);
    const workDirReal = real(workDir);
    let data: z.infer<typeof StateFile> = { version: 1, workDir: workDirReal, steps: {} };
    // Not followed if it is a link, never read past a sane size; an unreadable or foreign state is treated as
    // empty: everything reruns, nothing is trusted.
    const got = readSmallFile(file, 64 << 20);
    if (got.kind === 'bad') note(`${file} is ${got.why}, not a state nvshmem-efa wrote; every step reruns`);
    if (got.kind === 'ok') {
      let parsed: ReturnType<typeof StateFile.safeParse> | undefined;
      try {
        parsed = StateFile.safeParse(JSON.parse(got.text));
      } catch {
        /* not JSON: as if there were none */
      }
      if (parsed?.success) {
        const other = parsed.data.workDir !== undefined ? (parsed.data.workDir !== workDirReal ? parsed.data.workDir : undefined) : foreignWorkDir(parsed.data.steps, workDir);
        if (other) note(`${file} was written for the work dir ${other} (this one is a copy, or was moved); its steps are not trusted here and rerun`);
        else data = { ...parsed.data, workDir: workDirReal };
      }
    }
    return new StateStore(file, workDirReal, data);
  }

  get(step: string): StepEntry | undefined {
    return this.data.steps[step];
  }

  async begin(step: string): Promise<void> {
    if (!(step in this.data.steps)) return;
    delete this.data.steps[step];
    await this.save();
  }

  async finish(step: string, stamp: string, result: unknown): Promise<void> {
    this.data.steps[step] = { stamp, result, finishedAt: new Date().toISOString() };
    await this.save();
  }

  private save(): Promise<void> {
    return writeFileAtomic(this.file, JSON.stringify({ ...this.data, workDir: this.workDir }, null, 2) + '\n');
  }
}
