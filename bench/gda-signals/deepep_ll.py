#!/usr/bin/env python3
"""One rank of DeepEP's low-latency test for `nvshmem-efa bench` (bench/gda-signals/bench.sh starts two).

    deepep_ll.py DEEPEP_DIR [--num-tokens N] [--hidden N] [--num-topk N] [--num-experts N] [--use-logfmt]

Runs DeepEP's own tests/test_low_latency.py (imported, unmodified: its checks, its timing lines) as one process of a
2-"node" job (tests/utils.py reads WORLD_SIZE/RANK as nodes), with NVLink disabled. Each timed call of the test
(its bench() and bench_kineto()) is bracketed by snapshots of the emulated NIC's statistics, and what the NIC
carried in between is printed:

    WINDOW <name> rdm_ops=N rdm_recv_ops=N rdm_send_ops=N rdm_write_bytes=N gda_write_ops=N gda_write_bytes=N

(rdm: libfabric operations this process initiated, i.e. NVSHMEM's CPU proxy, and messages that arrived; gda:
GPU-posted WQEs). The snapshots need efaemu's
efaemu_stats_snapshot(label), which writes <EFAEMU_STATS>/efaemu-<pid>.<label>.json; without it (or not over efaemu)
one line says so: "WINDOW unavailable <why>".
"""
import argparse
import ctypes
import json
import os
import sys


def rdm_and_gda(doc):
    """The totals a window is judged by, from one efaemu statistics document. rdm_ops counts what this process
    initiated (write, read, send: NVSHMEM's proxy at work for this rank); rdm_recv_ops the messages that arrived,
    which a peer may have sent outside its own window (windows are per process: seen on 2x H200, rank 0's teardown
    message arriving while rank 1 was still in its last window)."""
    paths = doc.get('paths', {})
    rdm, gda = paths.get('rdm', {}), paths.get('gda', {})
    return {
        'rdm_ops': sum(rdm.get(k, {}).get('ops', 0) for k in ('write', 'read', 'send')),
        'rdm_recv_ops': rdm.get('recv', {}).get('ops', 0),
        'rdm_send_ops': rdm.get('send', {}).get('ops', 0),
        'rdm_write_bytes': rdm.get('write', {}).get('bytes', 0),
        'gda_write_ops': gda.get('write', {}).get('ops', 0),
        'gda_write_bytes': gda.get('write', {}).get('bytes', 0),
    }


def window_line(name, begin, end):
    a, b = rdm_and_gda(begin), rdm_and_gda(end)
    return 'WINDOW %s %s' % (name, ' '.join('%s=%d' % (k, b[k] - a[k]) for k in a))


class Snapshots:
    """efaemu's statistics at a point in time, through efaemu_stats_snapshot in the loaded provider."""

    def __init__(self, maps='/proc/self/maps', stats_dir=None):
        self.fn, self.why = None, None
        self.dir = stats_dir if stats_dir is not None else os.environ.get('EFAEMU_STATS')
        path = None
        try:
            with open(maps) as f:
                for line in f:
                    if 'libefa-fi' in line:
                        path = line.split()[-1]
                        break
        except OSError as e:
            self.why = 'cannot read %s: %s' % (maps, e)
            return
        if path is None:
            self.why = 'the efaemu provider is not loaded in this process (not over efaemu)'
        elif not self.dir:
            self.why = 'EFAEMU_STATS is not set'
        else:
            try:
                lib = ctypes.CDLL(path, mode=os.RTLD_NOW | getattr(os, 'RTLD_NOLOAD', 4))
                self.fn = lib.efaemu_stats_snapshot
                self.fn.argtypes = [ctypes.c_char_p]
                self.fn.restype = ctypes.c_int
            except (OSError, AttributeError) as e:
                self.why = 'this efaemu has no efaemu_stats_snapshot (%s)' % e

    def take(self, label):
        rc = self.fn(label.encode())
        if rc != 0:
            raise RuntimeError('efaemu_stats_snapshot(%s) returned %d' % (label, rc))
        with open(os.path.join(self.dir, 'efaemu-%d.%s.json' % (os.getpid(), label))) as f:
            return json.load(f)


class Windows:
    """Wraps the test's timed calls: a WINDOW line per call with what the NIC carried while it ran. The provider
    loads with NVSHMEM (inside deep_ep.Buffer), so it is looked up at the first timed call."""

    def __init__(self, sync, make=Snapshots):
        self.sync, self.make, self.snaps, self.count = sync, make, None, 0

    def wrap(self, name, fn):
        def call(*args, **kwargs):
            if self.snaps is None:
                self.snaps = self.make()
                if self.snaps.fn is None:
                    print('WINDOW unavailable %s' % self.snaps.why, flush=True)
            if self.snaps.fn is None:
                return fn(*args, **kwargs)
            self.count += 1
            label = '%s-%d' % (name, self.count)
            self.sync()
            begin = self.snaps.take(label + '-begin')
            result = fn(*args, **kwargs)
            self.sync()
            print(window_line(label, begin, self.snaps.take(label + '-end')), flush=True)
            return result
        return call


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('deepep_dir')
    p.add_argument('--num-tokens', type=int, default=128)
    p.add_argument('--hidden', type=int, default=7168)
    p.add_argument('--num-topk', type=int, default=8)
    p.add_argument('--num-experts', type=int, default=288)
    p.add_argument('--use-logfmt', action='store_true')
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.join(a.deepep_dir, 'tests'))
    sys.path.insert(0, a.deepep_dir)
    import torch
    import test_low_latency as t

    windows = Windows(torch.cuda.synchronize)
    t.bench = windows.wrap('bench', t.bench)
    t.bench_kineto = windows.wrap('bench_kineto', t.bench_kineto)
    args = argparse.Namespace(num_processes=1, num_tokens=a.num_tokens, hidden=a.hidden, num_topk=a.num_topk,
                              num_experts=a.num_experts, allow_mnnvl=False, disable_nvlink=True, use_logfmt=a.use_logfmt,
                              pressure_test=False, shrink_test=False)
    t.test_loop(0, 1, args)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
