import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from './fs-atomic.ts';

/**
 * What each finished step saw (its stamp: a hash of its inputs) and produced. A step's entry is dropped
 * before it runs and written only after it finishes, so a run killed at any point resumes at the first step
 * without a matching entry.
 */
const StepEntry = z.object({ stamp: z.string(), result: z.unknown(), finishedAt: z.string() });
const StateFile = z.object({ version: z.literal(1), steps: z.record(z.string(), StepEntry) });
export type StepEntry = z.infer<typeof StepEntry>;

export const STATE_FILE = 'state.json';

/** True when `json` is a state file of this tool (how a work dir made before the marker is recognised). */
export function isStateFile(json: unknown): boolean {
  return StateFile.safeParse(json).success;
}

export class StateStore {
  private constructor(
    private readonly file: string,
    private data: z.infer<typeof StateFile>,
  ) {}

  static async open(workDir: string): Promise<StateStore> {
    const file = path.join(workDir, STATE_FILE);
    let data: z.infer<typeof StateFile> = { version: 1, steps: {} };
    try {
      const parsed = StateFile.safeParse(JSON.parse(await readFile(file, 'utf8')));
      // An unreadable or foreign state is treated as empty: everything reruns, nothing is trusted.
      if (parsed.success) data = parsed.data;
    } catch {
      /* first run */
    }
    return new StateStore(file, data);
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
    return writeFileAtomic(this.file, JSON.stringify(this.data, null, 2) + '\n');
  }
}
