// Records the URL of every module this Node process resolves, one per line, into the file named by the
// MODULE_TRACE variable: `node --import ./test/helpers/module-trace.mjs ...`. test/unit/cli-light.test.ts reads it
// to see what --help loads. Loaded twice: on the main thread it registers itself as a hook; on the hooks
// thread it is the hook.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread && process.env.MODULE_TRACE) register(import.meta.url, { data: process.env.MODULE_TRACE });

let out;
export function initialize(file) {
  out = file;
}

export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (out) appendFileSync(out, r.url + '\n');
  return r;
}
