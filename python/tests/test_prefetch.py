"""tandem.data.CudaPrefetcher: the same batches, on the device, and host slots given back.

Runs with the built module (tandem.data.Loader as the source) or, where the module is not
built for this Python (the GPU check's interpreter), with python/tandem/prefetch.py alone and
lists of pinned tensors as the source. The CUDA cases skip, naming what they need, without a
GPU; TANDEM_REQUIRE_CUDA=1 (scripts/gpu-check.sh) turns those skips into failures.
"""

import gc
import os
import sys
import unittest

import torch

from data_files import CifarDirMixin

try:
    import tandem
    from tandem.prefetch import CudaPrefetcher
except ImportError:  # the extension is not built for this interpreter: the prefetcher alone
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tandem"))
    from prefetch import CudaPrefetcher
    tandem = None

HAS_CUDA = torch.cuda.is_available()
NEEDS = "needs a CUDA device visible to torch (torch.cuda.is_available() is False)"


def skip_without_cuda(f):
    if HAS_CUDA:
        return f
    if os.environ.get("TANDEM_REQUIRE_CUDA") == "1":
        def fail(self):
            self.fail(NEEDS + " and TANDEM_REQUIRE_CUDA=1")
        return fail
    return unittest.skip(NEEDS)(f)


def host_batches(n, pin):
    """n batches (float32 [4, 3, 8, 8] of k, int64 [4] labels), pinned when asked."""
    out = []
    for k in range(n):
        x, y = torch.full((4, 3, 8, 8), float(k)), torch.arange(4, dtype=torch.int64) + k
        out.append((x.pin_memory(), y.pin_memory()) if pin else (x, y))
    return out


class PrefetcherArgs(unittest.TestCase):
    def test_non_cuda_device_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"device 'cpu': expected a cuda device"):
            CudaPrefetcher([], device="cpu")

    def test_bad_depth_is_refused(self):
        for depth in (0, -1, 1.5):
            with self.assertRaisesRegex(ValueError, r"depth .*: expected an integer >= 1"):
                CudaPrefetcher([], device="cuda", depth=depth)

    @unittest.skipIf(HAS_CUDA, "this machine has a GPU: the no-GPU error cannot be seen")
    def test_without_a_gpu_the_error_names_it(self):
        with self.assertRaisesRegex(RuntimeError, r"torch sees no CUDA device"):
            CudaPrefetcher([], device="cuda")


class PrefetcherOnCuda(unittest.TestCase):
    @skip_without_cuda
    def test_batches_arrive_in_order_on_the_device(self):
        src = host_batches(7, pin=True)
        for depth in (1, 2, 5, 9):
            got = list(CudaPrefetcher(src, depth=depth))
            self.assertEqual(len(got), 7)
            for k, (x, y) in enumerate(got):
                self.assertEqual(x.device.type, "cuda")
                self.assertTrue(torch.equal(x.cpu(), src[k][0]))
                self.assertTrue(torch.equal(y.cpu(), src[k][1]))

    @skip_without_cuda
    def test_a_step_on_the_loop_stream_sees_the_copied_batch(self):
        # The loop runs on a stream of its own: what it reads must be the finished copy.
        src = host_batches(6, pin=True)
        loop = torch.cuda.Stream()
        sums = []
        with torch.cuda.stream(loop):
            for x, y in CudaPrefetcher(src, depth=3):
                sums.append((x * 2).sum())
        torch.cuda.synchronize()
        self.assertEqual([float(s) for s in sums], [2.0 * k * 4 * 3 * 8 * 8 for k in range(6)])

    @skip_without_cuda
    def test_pageable_batches_are_copied_too(self):
        src = host_batches(3, pin=False)
        got = list(CudaPrefetcher(src))
        self.assertTrue(all(torch.equal(g[0].cpu(), s[0]) for g, s in zip(got, src)))

    @skip_without_cuda
    def test_a_batch_that_is_not_tensors_is_a_type_error(self):
        with self.assertRaisesRegex(TypeError, r"a batch must be a tuple of torch tensors, got int"):
            list(CudaPrefetcher([1, 2]))


@unittest.skipIf(tandem is None, "needs the tandem module built for this Python (the source is a tandem.data.Loader)")
class PrefetcherOverTheLoader(CifarDirMixin, unittest.TestCase):
    def test_it_is_reachable_as_tandem_data(self):
        self.assertIs(tandem.data.CudaPrefetcher, CudaPrefetcher)

    @skip_without_cuda
    def test_same_batches_as_the_loader_and_slots_go_back(self):
        def loader():
            return tandem.data.Loader(self.dir, batch_size=8, num_workers=2, seed=5, shuffle=True,
                                      pin_memory=True, augment=False)

        want = [(x.clone(), y.clone()) for x, y in loader()]
        l = loader()
        got = [(x.cpu(), y.cpu()) for x, y in CudaPrefetcher(l, depth=3)]
        self.assertEqual(len(got), len(want))
        for (gx, gy), (wx, wy) in zip(got, want):
            self.assertTrue(torch.equal(gx, wx))
            self.assertTrue(torch.equal(gy, wy))
        gc.collect()
        self.assertEqual(l.held_batches, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
