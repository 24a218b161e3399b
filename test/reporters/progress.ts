// A line when each test file starts and one when it ends, with its time and counts (issue 39 item 9): `npm test` on
// a 2-core machine runs for many minutes and some files take several, so the default reporter (a line per finished
// file) left it silent for minutes. Printed to stderr, so stdout stays the default reporter's.
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

const ROOT = path.resolve(import.meta.dirname, '../..');
const name = (m: TestModule) => path.relative(ROOT, m.moduleId);
const stamp = (t0: number) => `${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s`;

export default class ProgressReporter implements Reporter {
  private t0 = Date.now();
  private started = new Map<string, number>();

  onTestRunStart() {
    this.t0 = Date.now();
  }

  onTestModuleStart(m: TestModule) {
    this.started.set(m.moduleId, Date.now());
    process.stderr.write(`[${stamp(this.t0)}] start  ${name(m)}\n`);
  }

  onTestModuleEnd(m: TestModule) {
    const took = ((Date.now() - (this.started.get(m.moduleId) ?? Date.now())) / 1000).toFixed(1);
    const tests = [...m.children.allTests()];
    const count = (s: string) => tests.filter((t) => t.result().state === s).length;
    const verdict = m.ok() ? 'ok    ' : 'FAILED';
    process.stderr.write(
      `[${stamp(this.t0)}] ${verdict} ${name(m)} in ${took} s: ${count('passed')} passed, ${count('failed')} failed, ${count('skipped')} skipped\n`,
    );
  }
}
