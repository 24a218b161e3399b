import { detectEnvironment } from '../core/environment.ts';
import type { Step } from './types.ts';

/**
 * Always runs: it is how a rerun learns that nothing changed on the host. The preflight has usually
 * detected the environment already (to stop before any long step); then this step reports that result.
 */
export const detectEnvironmentStep: Step = {
  id: 'detect',
  title: 'Detect build environment',
  enabled: (ctx) => (ctx.opts.command === 'build' ? true : 'only the build needs it'),
  async run(ctx, io) {
    if (!ctx.env) {
      const { env, fixes } = await detectEnvironment({
        cudaHome: ctx.opts.cudaHome,
        libfabricHome: ctx.opts.libfabricHome,
        gdrcopyHome: ctx.opts.gdrcopyHome,
        cudaArch: ctx.opts.cudaArch,
        env: process.env,
      });
      ctx.env = env;
      ctx.envFixes = [...ctx.envFixes, ...fixes];
    }
    const env = ctx.env;
    io.progress(`CUDA ${env.cuda.version}, libfabric ${env.libfabric.version} (${env.libfabric.home}), arch ${env.cudaArch}`);
    return env;
  },
};
