"""Loads cuBLAS in every Python process of an efaemu DeepEP run before the test starts (EFAEMU_WARMUP_CUDA=1).

efaemu moves GPU data with CUDA copies in the application's own context. Loading a CUDA library (cuBLAS does it
when its first handle is made, at the first CUDA matmul; DeepEP's bench_kineto makes one) holds that context until
the GPU is idle, while a DeepEP kernel spins on data those copies must deliver: a deadlock of the emulator that no
NIC has (a NIC's DMA takes no driver lock). Seen on 2x H200 in the GDA-off run of test_low_latency.py (state dump:
main thread in cuLibraryLoadData under cublasCreate_v2, engine thread in cuMemcpyDtoHAsync for 79 s). Lazy module
loading is the same mechanism; checks.sh also sets CUDA_MODULE_LOADING=EAGER.

Put this directory first on PYTHONPATH (spawned children run it too). It then imports the sitecustomize it shadows.
"""
import importlib
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


_warm()
_chain()
