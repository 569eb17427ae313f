"""tandem.data.Loader into PyTorch: torch.from_dlpack shares the slot, and frees it with the tensor."""

import gc
import os
import unittest

import torch

import tandem
from data_files import CifarDirMixin


class TensorSet(torch.utils.data.Dataset):
    """A map-style torch data set of tensors: sample i is float32 [3, 2] of i, label i % 3."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.full((3, 2), float(i)), i % 3


class TorchTest(CifarDirMixin, unittest.TestCase):
    def test_batches_are_torch_tensors_without_copy(self):
        l = tandem.data.Loader(self.dir, batch_size=8, num_workers=2, seed=3, output="dlpack", augment=False)
        images, labels = next(iter(l))
        a, b = torch.from_dlpack(images), torch.from_dlpack(images)
        self.assertEqual(a.data_ptr(), b.data_ptr())  # both views of the slot
        self.assertEqual(tuple(a.shape), (8, 3, 32, 32))
        self.assertEqual(a.dtype, torch.float32)
        self.assertEqual(torch.from_dlpack(labels).dtype, torch.int64)
        self.assertEqual(a.numpy().tobytes(), images.tobytes())

    def test_slot_returns_when_the_last_tensor_dies(self):
        l = tandem.data.Loader(self.dir, batch_size=8, num_workers=2, seed=3)
        it = iter(l)
        images, labels = next(it)
        self.assertEqual(l.held_batches, 1)
        view = images[:2]
        del images, labels
        gc.collect()
        self.assertEqual(l.held_batches, 1)  # the view keeps the slot
        self.assertTrue(torch.isfinite(view).all())
        del view
        gc.collect()
        self.assertEqual(l.held_batches, 0)

    def test_torch_data_set_batches_equal_the_dataloader_s(self):
        ds = TensorSet()
        ours = list(tandem.data.Loader(ds, batch_size=4, num_workers=2))
        theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0))
        self.assertEqual(len(ours), len(theirs))
        for (a, b), (c, d) in zip(ours, theirs):
            torch.testing.assert_close(a, c, rtol=0, atol=0)
            torch.testing.assert_close(b, d, rtol=0, atol=0)

    def test_bf16_images(self):
        l = tandem.data.Loader(self.dir, batch_size=4, precision="bf16", augment=False)
        f32 = tandem.data.Loader(self.dir, batch_size=4, augment=False)
        a, b = next(iter(l))[0], next(iter(f32))[0]
        self.assertEqual(a.dtype, torch.bfloat16)
        # bf16 keeps 8 significant bits: within half a unit in the last place (2^-9 relative) of
        # the f32 batch, plus rounding of the normalize done in f32 first.
        torch.testing.assert_close(a.float(), b, rtol=2.0**-8, atol=1e-3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
