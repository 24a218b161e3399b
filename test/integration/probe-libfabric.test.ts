// `probe` names the libfabric it builds against and the one it loaded (issue 39, item 7): it announced the pinned
// libfabric's prefix in the work dir, which did not exist, and then ran on the host's. Real cmake and the host's
// libfabric; --root points at an empty fake /sys, so no device is needed.
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProbeJsonSchema } from '../../src/core/probe-schema.ts';
import { cli, ENV, tmp } from '../helpers/cli.ts';
import { libfabricPrefix, NO_LIBFABRIC } from '../helpers/host.ts';
import { skipTitle } from '../helpers/skip-title.ts';

const CUDA = ['/usr/local/cuda'].find((h) => existsSync(path.join(h, 'include', 'cuda.h')));
const skip = NO_LIBFABRIC ?? (CUDA ? undefined : 'no CUDA toolkit at /usr/local/cuda (cuda.h): the probe includes it');

/** An empty fake host: the probe reads /sys, /proc and /dev under it. */
const fakeRoot = () => {
  const r = tmp('probe-root-');
  mkdirSync(path.join(r, 'sys/class/infiniband'), { recursive: true });
  return r;
};
// Without LIBFABRIC_HOME: on a host whose libfabric cannot do GDA the plan is to build the pinned one.
const { LIBFABRIC_HOME: _named, ...UNNAMED } = ENV;

describe.skipIf(!!skip)(skipTitle('probe: the libfabric it builds against exists, and the probe says which one it loaded', skip), () => {
  it('no libfabric built in the work dir: announces the host\'s (never the unbuilt prefix), and reports the object it loaded', () => {
    const work = path.join(tmp(), 'w');
    const r = cli(['probe', '--work-dir', work, '--cuda-home', CUDA!, '--root', fakeRoot(), '--json'], UNNAMED);
    expect([0, 1], r.stderr).toContain(r.code);
    const announce = r.stderr.split('\n').find((l) => l.startsWith('building the probe'))!;
    expect(announce).not.toContain(path.join(work, 'install', 'libfabric'));
    expect(announce).toMatch(new RegExp(`against libfabric \\S+ at ${libfabricPrefix} \\(the host's`));
    const doc = ProbeJsonSchema.parse(JSON.parse(r.stdout));
    expect(doc.libfabric?.path).toMatch(/\/libfabric\.so\.\d+/);
    expect(existsSync(doc.libfabric!.path)).toBe(true);
    expect(r.stderr).toContain(`the probe loaded libfabric ${doc.libfabric!.version} from ${doc.libfabric!.path}`);
    // The libfabric check's evidence says the same.
    expect(doc.checks.find((c) => c.id === 'libfabric')?.evidence).toContain(`runtime ${doc.libfabric!.version} loaded from ${doc.libfabric!.path}`);
  }, 180_000);

  it('a libfabric built in the work dir (here: the host\'s headers and library linked there) is the one announced, and named as the build\'s', () => {
    const work = path.join(tmp(), 'w');
    // A first probe makes it a work dir (and configures the probe's build against the host's libfabric).
    const first = cli(['probe', '--work-dir', work, '--cuda-home', CUDA!, '--root', fakeRoot(), '--json'], UNNAMED);
    expect([0, 1], first.stderr).toContain(first.code);
    const prefix = path.join(work, 'install', 'libfabric');
    mkdirSync(prefix, { recursive: true });
    symlinkSync(path.join(libfabricPrefix!, 'include'), path.join(prefix, 'include'));
    const lib = ['lib/x86_64-linux-gnu', 'lib/aarch64-linux-gnu', 'lib64', 'lib'].map((d) => path.join(libfabricPrefix!, d)).find((d) => existsSync(path.join(d, 'libfabric.so')))!;
    symlinkSync(lib, path.join(prefix, 'lib'));
    const r = cli(['probe', '--work-dir', work, '--cuda-home', CUDA!, '--root', fakeRoot(), '--json'], UNNAMED);
    expect([0, 1], r.stderr).toContain(r.code);
    expect(r.stderr).toMatch(new RegExp(`against libfabric \\S+ at ${prefix} \\(built by nvshmem-efa in ${work}\\)`));
    expect(ProbeJsonSchema.parse(JSON.parse(r.stdout)).libfabric?.path).toMatch(/\/libfabric\.so\.\d+/);
    // CMake looked again (its cache kept what it found the first time): the probe now links the work dir's prefix.
    expect(readFileSync(path.join(work, 'build', 'probe', 'CMakeCache.txt'), 'utf8')).toContain(`FABRIC_LIB:FILEPATH=${path.join(prefix, 'lib', 'libfabric.so')}`);
  }, 180_000);
});
