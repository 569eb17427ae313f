"""tandem.train(config): the run of `tandem train` with the same flags, and its metrics records."""

import json
import math
import os
import subprocess
import tempfile
import unittest

import tandem
from data_files import write_cifar10

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "cifar")
        write_cifar10(cls.dir, per_file=16, test_records=16)
        cls.config = {"data": cls.dir, "model": "mlp", "epochs": 2, "batch_size": 8, "device": "cpu", "threads": 1,
                      "num_workers": 0, "seed": 4, "lr": 0.01, "log_interval": 5, "mean": [0.5, 0.5, 0.5],
                      "std": [0.25, 0.25, 0.25], "progress": 0}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_records_equal_the_command_line_run(self):
        records = tandem.train(self.config)
        self.assertEqual(records[0]["type"], "run")
        self.assertEqual((records[0]["model"], records[0]["batch_size"], records[0]["epochs"]), ("mlp", 8, 2))
        self.assertEqual(records[-1]["type"], "summary")
        epochs = [r for r in records if r["type"] == "epoch"]
        self.assertEqual([e["epoch"] for e in epochs], [1, 2])
        self.assertEqual(epochs[-1]["global_step"], 2 * 80 // 8)
        for e in epochs:
            self.assertTrue(math.isfinite(e["train_loss"]) and math.isfinite(e["test_loss"]))
            self.assertTrue(0 <= e["test_accuracy"] <= 1)
        # The same flags on the command line: the same per-epoch figures, bit for bit.
        metrics = os.path.join(self.tmp.name, "cli.jsonl")
        flags = []
        for k, v in self.config.items():
            flags += [f"--{k.replace('_', '-')}"] + ([str(x) for x in v] if isinstance(v, list) else [str(v)])
        subprocess.run([tandem.training.executable(), "train", *flags, "--metrics-file", metrics], check=True,
                       capture_output=True)
        with open(metrics) as f:
            cli = [json.loads(l) for l in f if l.strip()]
        keys = ("epoch", "global_step", "train_loss", "train_accuracy", "test_loss", "test_accuracy")
        self.assertEqual([{k: r[k] for k in keys} for r in cli if r["type"] == "epoch"],
                         [{k: e[k] for k in keys} for e in epochs])

    def test_metrics_file_kept_when_named(self):
        path = os.path.join(self.tmp.name, "kept.jsonl")
        records = tandem.train(dict(self.config, epochs=1, metrics_file=path))
        with open(path) as f:
            self.assertEqual([json.loads(l) for l in f if l.strip()], records)

    def test_bad_config_is_one_clear_error(self):
        with self.assertRaisesRegex(tandem.Error, r"key 'colour'") as e:
            tandem.train(dict(self.config, colour=True))
        self.assertNotIn(self.tmp.name, str(e.exception).replace(self.dir, ""))  # no temporary path
        with self.assertRaisesRegex(tandem.Error, "batch.size"):
            tandem.train(dict(self.config, batch_size=0))
        with self.assertRaisesRegex(tandem.Error, "no-such-data"):
            tandem.train(dict(self.config, data=os.path.join(self.tmp.name, "no-such-data")))
        with self.assertRaisesRegex(TypeError, "config\\['lr'\\]"):
            tandem.train(dict(self.config, lr={"peak": 1}))
        with self.assertRaisesRegex(TypeError, "expected a dict"):
            tandem.train(["data", self.dir])

    @unittest.skipUnless(os.path.isdir(FASHION_MNIST), f"needs {FASHION_MNIST} (apt-get install dataset-fashion-mnist)")
    def test_fashion_mnist_mlp_learns(self):
        records = tandem.train({"data": FASHION_MNIST, "model": "mlp", "max_steps": 150, "batch_size": 64,
                                "device": "cpu", "threads": 2, "optimizer": "adamw", "lr": 0.002, "schedule": "constant",
                                "seed": 1})
        epoch = [r for r in records if r["type"] == "epoch"][-1]
        self.assertEqual(epoch["global_step"], 150)
        # From ln(10) = 2.30 at the start: 150 steps of 64 images reach about 80% on the test set.
        self.assertGreater(epoch["test_accuracy"], 0.7)
        self.assertLess(epoch["test_loss"], 1.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
