"""Loads cuBLAS in every Python process of an efaemu DeepEP run before the test starts (EFAEMU_WARMUP_CUDA=1), and
on a shared GPU cuts DeepEP's benchmark loops (DEEPEP_BENCH_ITERS=N).

efaemu moves GPU data with CUDA copies in the application's own context. Loading a CUDA library (cuBLAS does it
when its first handle is made, at the first CUDA matmul; DeepEP's bench_kineto makes one) holds that context until
the GPU is idle, while a DeepEP kernel spins on data those copies must deliver: a deadlock of the emulator that no
NIC has (a NIC's DMA takes no driver lock). Seen on 2x H200 in the GDA-off run of test_low_latency.py (state dump:
main thread in cuLibraryLoadData under cublasCreate_v2, engine thread in cuMemcpyDtoHAsync for 79 s). Lazy module
loading is the same mechanism; checks.sh also sets CUDA_MODULE_LOADING=EAGER.

DEEPEP_BENCH_ITERS=N: DeepEP's test utilities (the `utils` module beside test_low_latency.py) run each benchmark with at
most N warm-up and N timed iterations (2 at least: bench drops the first). test_main times 220 dispatch + combine pairs
after its checks; with PEs time-sliced on one GPU each pair costs a timeslice or more (170 ms on one H200), so the
benchmarks were most of a DeepEP check's time, and they time the time-slicer, not the product. The checks are
unchanged. Unset or 0: DeepEP's own counts.

DEEPEP_KINETO_OUTPUT=1: bench_kineto no longer sends the process's stdout and stderr to /dev/null while it profiles.
A kernel's trap message, or DeepEP's receive timeout, printed then was lost (1x H200: deepep_silent_bound's injected
failure trapped inside bench_kineto and the log showed only "unspecified launch failure").

Put this directory first on PYTHONPATH (spawned children run it too). It then imports the sitecustomize it shadows.
"""
import functools
import importlib
import importlib.abc
import importlib.machinery
import os
import sys


def _warm():
    if os.environ.get('EFAEMU_WARMUP_CUDA') != '1':
        return
    try:
        import torch
        if not torch.cuda.is_available():
            return
        for dtype in (torch.float32, torch.bfloat16):
            a = torch.ones((64, 64), dtype=dtype, device='cuda')
            a @ a
        torch.cuda.synchronize()
        print('efaemu warm-up: cuBLAS loaded in pid %d before the test' % os.getpid(), file=sys.stderr, flush=True)
    except Exception as e:  # the test itself then says what is wrong with CUDA
        print('efaemu warm-up: skipped (%s)' % e, file=sys.stderr, flush=True)


def _patch(module, n, keep_output):
    bench, kineto = module.bench, module.bench_kineto

    @functools.wraps(bench)
    def trimmed_bench(fn, num_warmups=50, num_tests=50, post_fn=None):
        return bench(fn, num_warmups=min(num_warmups, n), num_tests=min(num_tests, max(n, 2)), post_fn=post_fn)

    @functools.wraps(kineto)
    def patched_kineto(fn, kernel_names, num_tests=30, *args, **kwargs):
        if keep_output:
            kwargs['suppress_kineto_output'] = False
        return kineto(fn, kernel_names, min(num_tests, n) if n else num_tests, *args, **kwargs)

    if n:
        module.bench = trimmed_bench
        print('efaemu: DeepEP benchmarks cut to %d iterations (DEEPEP_BENCH_ITERS) in pid %d' % (n, os.getpid()), file=sys.stderr, flush=True)
    module.bench_kineto = patched_kineto


class _DeepEPBenchTrim(importlib.abc.MetaPathFinder):
    """Finds DeepEP's tests/utils.py as the path finder would, and patches its benchmarks once it has run."""

    def __init__(self, n, keep_output):
        self.n, self.keep_output = n, keep_output

    def find_spec(self, name, path, target=None):
        if name != 'utils' or path is not None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
        if spec is None or not spec.origin or not os.path.exists(os.path.join(os.path.dirname(spec.origin), 'test_low_latency.py')):
            return None
        inner, n, keep = spec.loader, self.n, self.keep_output

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return inner.create_module(spec)

            def exec_module(self, module):
                inner.exec_module(module)
                _patch(module, n, keep)

        spec.loader = Loader()
        return spec


def _bench_iters():
    try:
        n = max(0, int(os.environ.get('DEEPEP_BENCH_ITERS') or 0))
    except ValueError:
        print('efaemu: DEEPEP_BENCH_ITERS=%s is not a number: DeepEP benchmarks not cut' % os.environ['DEEPEP_BENCH_ITERS'], file=sys.stderr, flush=True)
        n = 0
    keep = os.environ.get('DEEPEP_KINETO_OUTPUT') == '1'
    if n or keep:
        sys.meta_path.insert(0, _DeepEPBenchTrim(n, keep))


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop('sitecustomize', None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]
    try:
        importlib.import_module('sitecustomize')
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if 'sitecustomize' not in sys.modules and mine is not None:
            sys.modules['sitecustomize'] = mine


_bench_iters()
_warm()
_chain()
