"""tandem.data.Loader on image data (CIFAR-10 binaries) and tandem.load_weights, with numpy.

References: the batches without augmentation against (pixels / 255 - mean) / std computed in
float64 from the files; with augmentation, every sample against the 9 x 9 x 2 pad-4 crops and
flips of its record; and the first batch of an epoch against the one `tandem show-batch` (the
C++ loader of the tandem program) draws.
"""

import ctypes
import gc
import os
import subprocess
import tempfile
import unittest

import numpy as np

import tandem
from data_files import read_cifar10, read_png_rgb, write_cifar10, write_safetensors

MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(3, 1, 1)


def arrays(batch):
    return tuple(np.from_dlpack(f) for f in batch)


def epoch_bytes(loader):
    return [tuple(f.tobytes() for f in b) for b in loader]


def to_u8(images):
    """De-normalised images [N, 3, 32, 32] as u8, as show-batch computes them (float32)."""
    x = (images.astype(np.float32) * STD + MEAN) * np.float32(255.0)
    return np.clip(np.floor(x + np.float32(0.5)), 0, 255).astype(np.uint8)


def heap_in_use():
    """Bytes malloc has handed out and not had back (glibc's mallinfo2), or None elsewhere."""
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = MallInfo2
    m = f()
    return m.uordblks + m.hblkhd


class LoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "cifar")
        cls.samples = write_cifar10(cls.dir)
        cls.records = read_cifar10(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def loader(self, **kw):
        args = dict(batch_size=4, num_workers=0, shuffle=True, seed=7, output="dlpack")
        args.update(kw)
        return tandem.data.Loader(self.dir, **args)

    def test_unaugmented_batches_equal_the_float64_reference_for_any_num_workers(self):
        raw = np.stack([np.frombuffer(p, np.uint8).reshape(3, 32, 32) for _, p in self.records])
        want = (raw / 255.0 - MEAN.astype(np.float64)) / STD.astype(np.float64)
        labels = np.array([l for l, _ in self.records], np.int64)
        for w in (0, 1, 2, 3):
            l = self.loader(num_workers=w, shuffle=False, augment=False, batch_size=16)
            self.assertEqual(len(l), 3)  # 40 samples: 16, 16, 8
            got = [arrays(b) for b in l]
            self.assertEqual([g[0].shape for g in got], [(16, 3, 32, 32), (16, 3, 32, 32), (8, 3, 32, 32)])
            self.assertEqual(got[0][0].dtype, np.float32)
            images = np.concatenate([g[0] for g in got])
            np.testing.assert_allclose(images, want, rtol=1e-6, atol=1e-6, err_msg=f"num_workers={w}")
            np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), labels)

    def test_augmented_samples_are_pad_crop_flips_of_a_permutation(self):
        # Every crop (dy, dx in 0..8 of the 40x40 zero-padded image) and its mirror, by bytes.
        crops = {}
        for r, (label, pixels) in enumerate(self.records):
            padded = np.pad(np.frombuffer(pixels, np.uint8).reshape(3, 32, 32), ((0, 0), (4, 4), (4, 4)))
            for dy in range(9):
                for dx in range(9):
                    c = padded[:, dy:dy + 32, dx:dx + 32]
                    crops.setdefault(c.tobytes(), (r, dy, dx, False))
                    crops.setdefault(c[:, :, ::-1].tobytes(), (r, dy, dx, True))
        seen = set()
        for epoch in range(2):
            l = self.loader(num_workers=2)
            l.load_state_dict({"epoch": epoch, "batch": 0})
            records, draws = [], set()
            for images, labels in (arrays(b) for b in l):
                for img, label in zip(to_u8(images), labels):
                    hit = crops.get(img.tobytes())
                    self.assertIsNotNone(hit, "a sample is no pad-4 crop or flip of any record")
                    self.assertEqual(label, self.records[hit[0]][0])
                    records.append(hit[0])
                    draws.add(hit[1:])
            self.assertEqual(sorted(records), list(range(self.samples)), "an epoch is a permutation")
            self.assertGreater(len(draws), self.samples // 2, "crops and flips vary")
            seen.add(tuple(records))
        self.assertEqual(len(seen), 2, "the two epochs have different orders")

    def test_first_batch_equals_tandem_show_batch(self):
        exe = tandem.training.executable()
        png = os.path.join(self.tmp.name, "batch.png")
        subprocess.run([exe, "show-batch", "--data", self.dir, "--count", "16", "--columns", "8", "--seed", "7",
                        "--epoch", "1", "--out", png], check=True, capture_output=True)
        width, height, rows = read_png_rgb(png)
        cell_w, cell_h = (width - 4) // 8, (height - 4) // 2
        for w in (0, 2):
            l = self.loader(batch_size=16, num_workers=w)
            l.load_state_dict({"epoch": 1, "batch": 0})
            images = to_u8(arrays(next(iter(l)))[0])
            for k in range(16):
                x0, y0 = 4 + (k % 8) * cell_w, 4 + (k // 8) * cell_h
                cell = np.stack([np.frombuffer(rows[y0 + y], np.uint8)[3 * x0:3 * (x0 + 32)].reshape(32, 3)
                                 for y in range(32)])
                np.testing.assert_array_equal(images[k], cell.transpose(2, 0, 1), err_msg=f"image {k}, num_workers={w}")

    def test_same_batches_for_any_num_workers(self):
        ref = epoch_bytes(self.loader(num_workers=0))
        self.assertEqual(len(ref), self.samples // 4)
        for w in (1, 2, 3):
            self.assertEqual(epoch_bytes(self.loader(num_workers=w)), ref, f"num_workers={w}")

    def test_epochs_differ(self):
        l = self.loader(num_workers=2)
        e0, e1 = epoch_bytes(l), epoch_bytes(l)
        self.assertNotEqual(e0, e1)
        self.assertEqual(l.state_dict(), {"epoch": 2, "batch": 0})

    def test_mid_epoch_resume_is_bit_exact(self):
        full = self.loader(num_workers=2)
        epoch_bytes(full)  # epoch 0
        epoch1 = epoch_bytes(full)
        part = self.loader(num_workers=2)
        epoch_bytes(part)
        it = iter(part)
        head = [tuple(f.tobytes() for f in next(it)) for _ in range(5)]
        state = part.state_dict()
        self.assertEqual(state, {"epoch": 1, "batch": 5})
        for w in (0, 1, 3):
            resumed = self.loader(num_workers=w)
            resumed.load_state_dict(state)
            self.assertEqual(head + epoch_bytes(resumed), epoch1, f"num_workers={w}")

    def test_holding_1000_batches_is_bounded_copies_freed_on_delete(self):
        l = self.loader(batch_size=4, num_workers=2, max_held_batches=8)
        bound = 2 * 2 + 8
        batch_bytes = 4 * 3 * 32 * 32 * 4 + 4 * 8
        gc.collect()
        before = heap_in_use()
        held = []
        while len(held) < 1000:
            for b in l:
                held.append(b)
                if len(held) == 1000:
                    break
        self.assertLessEqual(l.num_slots, bound)
        self.assertEqual(l.held_batches, 7)  # one slot stays for the loader's next batch
        self.assertEqual(l.held_copied_bytes, (1000 - 7) * batch_bytes)
        if before is not None:
            self.assertGreater(heap_in_use() - before, 900 * batch_bytes)
        # Held batches keep their values: each still equals a fresh loader's batch there.
        fresh = epoch_bytes(self.loader(batch_size=4, num_workers=0))
        per_epoch = len(fresh)
        self.assertEqual(tuple(f.tobytes() for f in held[0]), fresh[0])
        again = self.loader(batch_size=4, num_workers=0)
        again.load_state_dict({"epoch": 999 // per_epoch, "batch": 999 % per_epoch})
        self.assertEqual(tuple(f.tobytes() for f in held[999]), tuple(f.tobytes() for f in next(iter(again))))
        del held, b
        gc.collect()
        self.assertEqual(l.held_batches, 0)
        self.assertEqual(l.held_copied_bytes, 0)
        self.assertLessEqual(l.num_slots, bound)
        if before is not None:
            self.assertLess(heap_in_use() - before, 100 * batch_bytes)

    def test_numpy_output_keeps_the_batch_alive(self):
        l = self.loader(output="numpy", num_workers=2, shuffle=False, augment=False)
        images, labels = next(iter(l))
        self.assertIsInstance(images, np.ndarray)
        self.assertEqual(l.held_batches, 1)
        view = images[1:2]
        del images, labels
        gc.collect()
        self.assertEqual(l.held_batches, 1)  # the view keeps the slot
        raw = np.frombuffer(self.records[1][1], np.uint8).reshape(3, 32, 32)
        np.testing.assert_allclose(view[0], (raw / 255.0 - MEAN) / STD, rtol=1e-6, atol=1e-6)
        del view
        gc.collect()
        self.assertEqual(l.held_batches, 0)

    def test_fields(self):
        self.assertEqual(self.loader(precision="bf16").fields, [
            {"name": "images", "dtype": "bf16", "shape": [3, 32, 32], "role": "input"},
            {"name": "labels", "dtype": "i64", "shape": [], "role": "target"}])

    def test_bad_arguments_are_one_clear_error(self):
        with self.assertRaisesRegex(ValueError, "batch_size"):
            self.loader(batch_size=0)
        with self.assertRaisesRegex(ValueError, "precision"):
            self.loader(precision="fp8")
        with self.assertRaisesRegex(ValueError, "block_size: only for token shards"):
            self.loader(block_size=8)
        with self.assertRaisesRegex(TypeError, "colour"):
            self.loader(colour=True)
        with self.assertRaisesRegex(ValueError, "no-such-dir"):
            tandem.data.Loader(os.path.join(self.tmp.name, "no-such-dir"), output="dlpack")
        l = self.loader()
        with self.assertRaisesRegex(ValueError, "batch"):
            l.load_state_dict({"epoch": 0, "batch": len(l) + 1})

    def test_load_weights(self):
        path = os.path.join(self.tmp.name, "w.safetensors")
        write_safetensors(path, {"fc.weight": ("F32", [2, 2], [1.0, -2.5, 3.0, 0.5]),
                                 "fc.bias": ("I64", [2], [7, -8])})
        w = tandem.load_weights(path)
        self.assertEqual(sorted(w), ["fc.bias", "fc.weight"])
        np.testing.assert_array_equal(w["fc.weight"], np.array([[1.0, -2.5], [3.0, 0.5]], np.float32))
        self.assertEqual(w["fc.weight"].dtype, np.float32)
        np.testing.assert_array_equal(w["fc.bias"], np.array([7, -8], np.int64))
        with self.assertRaisesRegex(ValueError, "missing.safetensors"):
            tandem.load_weights(os.path.join(self.tmp.name, "missing.safetensors"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
