import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Two projects (issue 39 item 9): `fast`, what `npm test` runs on every change, and `slow`, the tests that compile
 * native code, build a container image or run the fault campaign (minutes each on 2 cores). `npm run test:slow`
 * runs the second, `npm run test:all` (and CI, .ci/run) both.
 */
const SLOW = ['test/native/**/*.test.ts', 'test/container/**/*.test.ts', 'test/faults/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    setupFiles: ['test/setup-env.ts'],
    // A line as each file starts and ends (stderr): a run is many minutes on 2 cores.
    reporters: ['default', './test/reporters/progress.ts'],
    // The bundle first (it may write dist/), then the guard that fails a run which leaves new files in the checkout.
    globalSetup: ['test/global-setup.ts', 'test/checkout-guard.ts'],
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...SLOW] } },
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
