import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    setupFiles: ['test/setup-env.ts'],
    // A line as each file starts and ends (stderr): a run is many minutes on 2 cores.
    reporters: ['default', './test/reporters/progress.ts'],
    globalSetup: ['test/global-setup.ts'],
  },
});
