"""tandem.data.Loader on token shards (a folder with train.tok and val.tok): windows of input
ids and target ids [B, T], checked against the shard's ids."""

import os
import random
import tempfile
import unittest

import numpy as np

import tandem
from data_files import write_token_shard

VOCAB, T = 97, 8


class TokenLoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "tok")
        os.makedirs(cls.dir)
        rng = random.Random(5)
        cls.ids = {"train": [rng.randrange(VOCAB) for _ in range(801)], "test": [rng.randrange(VOCAB) for _ in range(161)]}
        write_token_shard(os.path.join(cls.dir, "train.tok"), cls.ids["train"], VOCAB)
        write_token_shard(os.path.join(cls.dir, "val.tok"), cls.ids["test"], VOCAB)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def loader(self, **kw):
        args = dict(batch_size=4, block_size=T, num_workers=0, shuffle=True, seed=3, output="numpy")
        args.update(kw)
        return tandem.data.Loader(self.dir, **args)

    def windows(self, split):
        """Every window of T + 1 consecutive ids of the split's shard, by bytes, to its start."""
        ids = np.array(self.ids[split], np.int64)
        return {ids[s:s + T + 1].tobytes(): s for s in range(len(ids) - T)}

    def test_fields_and_windows_of_each_split(self):
        for split, samples in (("train", 800 // T), ("test", 160 // T)):
            l = self.loader(split=split, num_workers=2)
            self.assertEqual(l.fields, [
                {"name": "tokens", "dtype": "i32", "shape": [T], "role": "input"},
                {"name": "targets", "dtype": "i64", "shape": [T], "role": "target"}])
            self.assertEqual(len(l), samples // 4)
            windows = self.windows(split)
            starts = []
            for tokens, targets in l:
                self.assertEqual((tokens.dtype, tokens.shape), (np.int32, (4, T)))
                self.assertEqual((targets.dtype, targets.shape), (np.int64, (4, T)))
                for x, y in zip(tokens, targets):
                    np.testing.assert_array_equal(y[:-1], x[1:])  # each target is the next input id
                    window = np.concatenate([x.astype(np.int64), y[-1:]])
                    self.assertIn(window.tobytes(), windows, f"{split}: not a window of the shard's ids")
                    starts.append(windows[window.tobytes()])
            self.assertGreater(len(set(starts)), len(starts) // 2, "windows start at varying places")

    def test_same_batches_for_any_num_workers_and_bit_exact_resume(self):
        ref = [tuple(f.tobytes() for f in b) for b in self.loader(num_workers=0)]
        for w in (1, 2, 3):
            self.assertEqual([tuple(f.tobytes() for f in b) for b in self.loader(num_workers=w)], ref)
        part = self.loader(num_workers=2)
        it = iter(part)
        head = [tuple(f.tobytes() for f in next(it)) for _ in range(7)]
        resumed = self.loader(num_workers=1)
        resumed.load_state_dict(part.state_dict())
        self.assertEqual(head + [tuple(f.tobytes() for f in b) for b in resumed], ref)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "block_size: expected the tokens per window"):
            tandem.data.Loader(self.dir, batch_size=4, output="numpy")
        with self.assertRaisesRegex(ValueError, "val.tok"):
            self.loader(block_size=500, split="test")
        with self.assertRaisesRegex(ValueError, "precision 'fp16': only for image data"):
            self.loader(precision="fp16")
        empty = os.path.join(self.tmp.name, "half")
        os.makedirs(empty)
        write_token_shard(os.path.join(empty, "train.tok"), self.ids["train"], VOCAB)
        with self.assertRaisesRegex(ValueError, "val.tok"):
            tandem.data.Loader(empty, block_size=T, output="numpy")


if __name__ == "__main__":
    unittest.main(verbosity=2)
