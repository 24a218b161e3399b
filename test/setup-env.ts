// Every test process (and every CLI it spawns with process.env) starts with NVSHMEM_EFA_GDRCOPY=0: a test host has
// no gdrapi.h, and a build would otherwise fetch GDRCopy from github.com (never in a test: CI has no network).
// test/integration/gdrcopy.test.ts removes it to run that step against an archive served from 127.0.0.1.
process.env.NVSHMEM_EFA_GDRCOPY ??= '0';
// NVSHMEM_EFA_WORK_DIR is every command's default --work-dir: a developer's own (or a container's) must not steer
// the CLIs the tests start; the tests that need it set it themselves.
delete process.env.NVSHMEM_EFA_WORK_DIR;
// Python run by a test (native/efaemu/gpu/warmup/sitecustomize.py, bench scripts) would leave __pycache__ beside the
// sources it imports, in the checkout: a test writes only under its temporary directories.
process.env.PYTHONDONTWRITEBYTECODE ??= '1';
