"""tandem.data.Loader and tandem.load_weights under any Python 3 (no numpy or torch needed)."""

import gc
import os
import struct
import tempfile
import unittest

import tandem
from data_files import write_cifar10, write_safetensors


def batches(loader):
    return [tuple(f.tobytes() for f in b) for b in loader]


class LoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "cifar")
        cls.samples = write_cifar10(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def loader(self, **kw):
        args = dict(batch_size=16, num_workers=0, shuffle=True, seed=7, output="dlpack")
        args.update(kw)
        return tandem.data.Loader(self.dir, **args)

    def test_shapes_and_labels(self):
        l = self.loader(shuffle=False, augment=False)
        self.assertEqual(len(l), (self.samples + 15) // 16)
        images, labels = next(iter(l))
        self.assertEqual(images.shape, [16, 3, 32, 32])
        self.assertEqual(images.dtype, "f32")
        self.assertEqual(labels.dtype, "i64")
        # The first record's label byte is the first label, unshuffled.
        with open(os.path.join(self.dir, "data_batch_1.bin"), "rb") as f:
            first = f.read(1)[0]
        self.assertEqual(struct.unpack("<q", labels.tobytes()[:8])[0], first)

    def test_same_batches_for_any_num_workers(self):
        ref = batches(self.loader(num_workers=0))
        self.assertEqual(len(ref), (self.samples + 15) // 16)
        for w in (1, 2, 3):
            self.assertEqual(batches(self.loader(num_workers=w)), ref, f"num_workers={w}")

    def test_epochs_differ_and_shuffle_moves_samples(self):
        l = self.loader(num_workers=2)
        e0, e1 = batches(l), batches(l)
        self.assertNotEqual(e0, e1)
        self.assertEqual(l.state_dict(), {"epoch": 2, "batch": 0})

    def test_mid_epoch_resume_is_bit_exact(self):
        full = self.loader(num_workers=2)
        batches(full)  # epoch 0
        epoch1 = batches(full)
        part = self.loader(num_workers=2)
        batches(part)
        it = iter(part)
        head = [tuple(f.tobytes() for f in next(it)) for _ in range(5)]
        state = part.state_dict()
        self.assertEqual(state, {"epoch": 1, "batch": 5})
        resumed = self.loader(num_workers=1)
        resumed.load_state_dict(state)
        tail = batches(resumed)
        self.assertEqual(head + tail, epoch1)

    def test_holding_1000_batches_is_bounded_and_freed(self):
        l = self.loader(batch_size=1, num_workers=2, max_held_batches=8)
        bound = 2 * 2 + 8
        held = []
        while len(held) < 1000:
            for b in l:
                held.append(b)
                if len(held) == 1000:
                    break
        self.assertLessEqual(l.num_slots, bound)
        self.assertLessEqual(l.held_batches, 8)
        self.assertGreater(l.held_copied_bytes, 0)
        # Held batches keep their values: the first one still equals a fresh epoch's first.
        fresh = self.loader(batch_size=1, num_workers=0, max_held_batches=8)
        self.assertEqual(held[0][0].tobytes(), next(iter(fresh))[0].tobytes())
        del held, b
        gc.collect()
        self.assertEqual(l.held_batches, 0)
        self.assertEqual(l.held_copied_bytes, 0)
        self.assertLessEqual(l.num_slots, bound)

    def test_bad_arguments_are_one_clear_error(self):
        with self.assertRaisesRegex(ValueError, "batch_size"):
            self.loader(batch_size=0)
        with self.assertRaisesRegex(ValueError, "precision"):
            self.loader(precision="fp8")
        with self.assertRaisesRegex(TypeError, "colour"):
            self.loader(colour=True)
        with self.assertRaisesRegex(ValueError, "no-such-dir"):
            tandem.data.Loader(os.path.join(self.tmp.name, "no-such-dir"), output="dlpack")
        l = self.loader()
        with self.assertRaisesRegex(ValueError, "batch"):
            l.load_state_dict({"epoch": 0, "batch": len(l) + 1})

    def test_load_weights(self):
        path = os.path.join(self.tmp.name, "w.safetensors")
        write_safetensors(path, {"fc.weight": ("F32", [2, 2], [1.0, -2.5, 3.0, 0.5]), "fc.bias": ("F32", [2], [7.0, 8.0])})
        w = tandem.load_weights(path)
        self.assertEqual(sorted(w), ["fc.bias", "fc.weight"])
        self.assertEqual(list(w["fc.weight"].shape), [2, 2])
        raw = w["fc.weight"].tobytes() if hasattr(w["fc.weight"], "tobytes") else bytes(w["fc.weight"])
        self.assertEqual(struct.unpack("<4f", raw), (1.0, -2.5, 3.0, 0.5))
        with self.assertRaisesRegex(ValueError, "missing.safetensors"):
            tandem.load_weights(os.path.join(self.tmp.name, "missing.safetensors"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
