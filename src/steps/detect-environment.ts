import { detectEnvironment } from '../core/environment.ts';
import type { Step } from './types.ts';

/** Always runs: it is how a rerun learns that nothing changed on the host. */
export const detectEnvironmentStep: Step = {
  id: 'detect',
  title: 'Detect build environment',
  enabled: (ctx) => (ctx.opts.command === 'build' ? true : 'only the build needs it'),
  async run(ctx, io) {
    const { env, fixes } = await detectEnvironment({
      cudaHome: ctx.opts.cudaHome,
      libfabricHome: ctx.opts.libfabricHome,
      gdrcopyHome: ctx.opts.gdrcopyHome,
      cudaArch: ctx.opts.cudaArch,
      env: process.env,
    });
    ctx.env = env;
    ctx.envFixes = fixes;
    io.progress(`CUDA ${env.cuda.version}, libfabric ${env.libfabric.version} (${env.libfabric.home}), arch ${env.cudaArch}`);
    return env;
  },
};
