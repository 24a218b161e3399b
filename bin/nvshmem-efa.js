#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx so `npm ci && npx nvshmem-efa` needs no compile step.
import { register } from 'tsx/esm/api';
register();
const { main } = await import('../src/cli.ts');
process.exitCode = await main(process.argv);
