// The areas `npm run mutate` measures (issue 37): for each, the source Stryker mutates and the only test files
// run against it. Only these files, so that one area takes minutes: the whole suite is 20+ minutes per run on a
// 2-core machine, and Stryker runs the covering tests once per mutant.
//
// Tests that spawn the CLI (test/integration/*) are left out on purpose: Stryker's vitest runner activates a mutant
// in the test process only, so a child process always runs the original code and those tests could kill nothing.

/** @typedef {{ mutate: string[], tests: string[], why: string }} Area */

/** @type {Record<string, Area>} */
export const AREAS = {
  engine: {
    why: 'the patch engine: anchors, #if flattening, CMake scan, markers, plan/apply, journal',
    mutate: ['src/patchers/engine/**/*.ts'],
    tests: [
      'test/unit/engine.test.ts',
      'test/unit/engine-parts.test.ts',
      'test/unit/engine-commit.test.ts',
      'test/unit/engine-plan.test.ts',
      'test/unit/apply.test.ts',
      'test/unit/apply-modes.test.ts',
      'test/unit/journal.test.ts',
      'test/unit/hooks.test.ts',
      'test/unit/nvshmem-layout.test.ts',
      'test/unit/messages.test.ts',
      'test/golden/nvshmem.golden.test.ts',
      'test/golden/deepep.golden.test.ts',
      'test/golden/device-api.golden.test.ts',
    ],
  },
  reliability: {
    why: 'the lock, atomic writes, the work dir, untrusted state files, overlap checks, the state store',
    mutate: [
      'src/core/lock.ts',
      'src/core/fs-atomic.ts',
      'src/core/work-dir.ts',
      'src/core/untrusted.ts',
      'src/core/overlap.ts',
      'src/core/state.ts',
    ],
    tests: [
      'test/unit/fs-atomic.test.ts',
      'test/unit/work-dir.test.ts',
      'test/unit/owned-files.test.ts',
      'test/unit/identity-overlap.test.ts',
      'test/unit/core.test.ts',
      'test/unit/lock.test.ts',
      'test/unit/untrusted.test.ts',
      'test/unit/state.test.ts',
      'test/unit/overlap.test.ts',
      'test/unit/fs-atomic-race.test.ts',
      'test/unit/work-dir-claim.test.ts',
      'test/unit/lock-nolink.test.ts',
      'test/unit/lock-faults.test.ts',
    ],
  },
  specs: {
    why: 'the patch specs: NVSHMEM (libfabric.cpp hooks, CMake, device API, layout, template) and DeepEP',
    mutate: ['src/patchers/nvshmem/**/*.ts', 'src/patchers/deepep/**/*.ts'],
    tests: [
      'test/unit/hooks.test.ts',
      'test/unit/nvshmem-layout.test.ts',
      'test/unit/patch-spec-memo.test.ts',
      'test/unit/messages.test.ts',
      'test/golden/nvshmem.golden.test.ts',
      'test/golden/deepep.golden.test.ts',
      'test/golden/device-api.golden.test.ts',
    ],
  },
  stamps: {
    why: 'how a step decides it is up to date: the pipeline compares stamps, each step says what its stamp holds',
    mutate: ['src/pipeline.ts', 'src/steps/*.ts'],
    // The in-process tests that run steps; the rerun tests (test/integration/rebuild.test.ts and others) spawn the CLI.
    tests: ['test/unit/core.test.ts', 'test/unit/patch-spec-memo.test.ts', 'test/unit/fabric.test.ts', 'test/unit/run-pipeline-messages.test.ts'],
  },
  selftest: {
    why: "selftest's verdict code in TypeScript",
    mutate: ['src/commands/selftest*.ts'],
    tests: ['test/unit/selftest.test.ts'],
  },
};
