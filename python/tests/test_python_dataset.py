"""tandem.data.Loader over a Python data set (__len__ / __getitem__), called from tandem's
workers under the GIL."""

import gc
import threading
import unittest

import numpy as np

import tandem


class Squares:
    """Sample i: float32 [2, 3] of i * 10 + (0..5), label i % 5."""
    num_classes = 5

    def __init__(self, n=22):
        self.n = n
        self.threads = set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        self.threads.add(threading.get_ident())
        return np.arange(6, dtype=np.float32).reshape(2, 3) + np.float32(10 * i), i % 5


class Bytes:
    """Sample i: 4 bytes i, i+1, i+2, i+3 and no label."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        return bytes([i, i + 1, i + 2, i + 3])


class Broken(Squares):
    def __getitem__(self, i):
        if i == 13:
            raise KeyError("no sample 13 here")
        if i == 17:
            return np.zeros((3, 2), np.float32), 0
        if i == 19:
            return np.zeros((2, 3), np.float64), 0
        if i == 20:
            return np.zeros((2, 3), np.float32), 9  # outside num_classes
        return super().__getitem__(i)


def collect(loader):
    return [tuple(np.array(f) for f in b) for b in loader]


class PythonDatasetTest(unittest.TestCase):
    def test_batches_equal_the_samples_for_any_num_workers(self):
        ds = Squares()
        want_x = np.stack([ds[i][0] for i in range(22)])
        want_y = np.array([i % 5 for i in range(22)], np.int64)
        for w in (0, 1, 2, 3):
            l = tandem.data.Loader(ds, batch_size=4, num_workers=w, output="numpy")
            ds.threads.clear()  # the constructor reads dataset[0] on the caller's thread
            self.assertEqual(l.fields, [
                {"name": "inputs", "dtype": "f32", "shape": [2, 3], "role": "input"},
                {"name": "labels", "dtype": "i64", "shape": [], "role": "target"}])
            self.assertEqual(len(l), 6)
            got = collect(l)
            np.testing.assert_array_equal(np.concatenate([x for x, _ in got]), want_x)
            np.testing.assert_array_equal(np.concatenate([y for _, y in got]), want_y)
            if w > 0:
                self.assertNotIn(threading.get_ident(), ds.threads, "workers call __getitem__, not the caller")

    def test_shuffle_resume_and_drop_last(self):
        ds = Squares()
        ref = collect(tandem.data.Loader(ds, batch_size=4, shuffle=True, seed=9, output="numpy"))
        order = np.concatenate([x[:, 0, 0] for x, _ in ref]) / 10
        self.assertEqual(sorted(order.tolist()), list(range(22)))
        self.assertNotEqual(order.tolist(), list(range(22)))
        for w in (1, 2):
            got = collect(tandem.data.Loader(ds, batch_size=4, num_workers=w, shuffle=True, seed=9, output="numpy"))
            for (a, b), (c, d) in zip(got, ref):
                np.testing.assert_array_equal(a, c)
                np.testing.assert_array_equal(b, d)
        l = tandem.data.Loader(ds, batch_size=4, num_workers=2, shuffle=True, seed=9, drop_last=True,
                               output="numpy")
        it = iter(l)
        next(it), next(it)
        resumed = tandem.data.Loader(ds, batch_size=4, num_workers=1, shuffle=True, seed=9, drop_last=True,
                                     output="numpy")
        resumed.load_state_dict(l.state_dict())
        tail = collect(resumed)
        self.assertEqual(len(tail), 3)  # 22 // 4 = 5 batches, 2 taken
        for (a, _), (c, _) in zip(tail, ref[2:5]):
            np.testing.assert_array_equal(a, c)

    def test_bytes_without_labels(self):
        l = tandem.data.Loader(Bytes(), batch_size=4, num_workers=2, output="numpy")
        self.assertEqual(l.fields, [{"name": "inputs", "dtype": "u8", "shape": [4], "role": "input"}])
        (first,), (_,), (last,) = collect(l)
        np.testing.assert_array_equal(first, [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]])
        np.testing.assert_array_equal(last, [[8, 9, 10, 11]])

    def test_errors_name_the_sample(self):
        for index, pattern in ((13, r"dataset\[13\] raised KeyError: 'no sample 13 here'"),
                               (17, r"dataset\[17\]: expected shape \[2, 3\] as dataset\[0\], got \[3, 2\]"),
                               (19, r"dataset\[19\]: expected f32 as dataset\[0\], got format 'd'"),
                               (20, r"label 9 is outside")):
            l = tandem.data.Loader(Broken(), batch_size=1, num_workers=2, output="numpy")
            l.load_state_dict({"epoch": 0, "batch": index})
            with self.assertRaisesRegex(tandem.Error, pattern):
                next(iter(l))
        with self.assertRaisesRegex(ValueError, "__len__ and __getitem__"):
            tandem.data.Loader(object())
        with self.assertRaisesRegex(ValueError, "at least one sample"):
            tandem.data.Loader(Squares(0))
        with self.assertRaisesRegex(ValueError, "precision"):
            tandem.data.Loader(Squares(), precision="bf16")

    def test_dropping_a_loader_mid_epoch_with_busy_workers(self):
        for _ in range(5):
            l = tandem.data.Loader(Squares(400), batch_size=2, num_workers=3, prefetch_factor=4, output="numpy")
            x, y = next(iter(l))
            del l  # workers are waiting for the GIL: the loader must not wait for them holding it
            gc.collect()
            np.testing.assert_array_equal(y, [0, 1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
