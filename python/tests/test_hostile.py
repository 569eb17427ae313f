"""Bad arguments, interrupts, fork and interpreter exit: one line naming the thing, never a
crash or a hang. Each process-level case runs in a child interpreter with a timeout."""

import os
import subprocess
import sys
import unittest

import numpy as np

import tandem
from data_files import CifarDirMixin

HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(code, timeout=60):
    """Runs `code` in a fresh interpreter with this one's module path; (returncode, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


class SleepySet:
    """A Python data set whose __getitem__ releases the GIL (sleeps 5 ms)."""

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        import time

        time.sleep(0.005)
        return np.full(2, i, np.float32)


class Hostile(CifarDirMixin, unittest.TestCase):
    def loader(self, **kw):
        return tandem.data.Loader(self.dir, batch_size=4, output="numpy", **kw)

    def test_bad_arguments_name_the_argument(self):
        cases = [
            (dict(batch_size="4"), TypeError, r"batch_size: expected an integer, got str '4'"),
            (dict(batch_size=True), TypeError, r"batch_size: expected an integer, got bool"),
            (dict(seed=-1), ValueError, r"seed: expected 0\.\.18446744073709551615, got -1"),
            (dict(num_workers=50000), ValueError, r"num_workers: expected 0\.\.256, got 50000"),
            (dict(shuffle="no"), TypeError, r"shuffle: expected True or False, got 'no'"),
            (dict(augment=2), TypeError, r"augment: expected True or False, got 2"),
            (dict(resize_size=-5), ValueError, r"resize_size: expected 0\.\.8192, got -5"),
            (dict(std=[5, 5, 5]), ValueError, r"std given without mean: expected both"),
            (dict(mean=[0.5, 0.5, 0.5]), ValueError, r"mean given without std: expected both"),
            (dict(mean=0.5, std=0.5), TypeError, r"mean: expected 1 or 3 numbers, got 0\.5"),
            (dict(mean=[1, 2, 3], std=[0, 1, 1]), ValueError, r"std: expected values > 0"),
            (dict(mean=[1, 2, 3], std=[1]), ValueError, r"std: expected as many values as mean \(3\), got 1"),
            (dict(precision="bf16"), ValueError, r"precision 'bf16' with output='numpy': numpy has no bfloat16"),
        ]
        for kw, error, message in cases:
            with self.subTest(kw=kw):
                bs = kw.pop("batch_size", 4)
                with self.assertRaisesRegex(error, "^tandem.data.Loader: " + message):
                    tandem.data.Loader(self.dir, batch_size=bs, output="numpy", **kw)

    def test_given_mean_and_std_change_the_batches(self):
        a = next(iter(self.loader(split="test")))[0]
        b = next(iter(self.loader(split="test", mean=[0.0, 0.0, 0.0], std=[5.0, 5.0, 5.0])))[0]
        self.assertFalse(np.array_equal(np.asarray(a), np.asarray(b)))

    def test_state_dict_out_of_range_or_wrong_type(self):
        l = self.loader()
        with self.assertRaisesRegex(ValueError, r"epoch: expected 0\.\.2\^62 - 1, got 9223372036854775807"):
            l.load_state_dict({"epoch": 2**63 - 1, "batch": 0})
        with self.assertRaisesRegex(TypeError, r"batch: expected an integer .*, got 1\.5"):
            l.load_state_dict({"epoch": 0, "batch": 1.5})

    def test_closed_loader_says_so_and_held_batches_stay(self):
        l = self.loader(num_workers=2)
        held = next(iter(l))
        want = np.asarray(held[0]).copy()
        l.close()
        l.close()  # idempotent
        with self.assertRaisesRegex(tandem.Error, r"the loader is closed"):
            next(iter(l))
        self.assertTrue(np.array_equal(np.asarray(held[0]), want))

    def test_keyboard_interrupt_in_getitem_stays_keyboard_interrupt(self):
        class Interrupting:
            def __init__(self, error):
                self.error = error

            def __len__(self):
                return 10

            def __getitem__(self, i):
                if i == 5:
                    raise self.error
                return np.zeros(3, np.float32)

        for error in (KeyboardInterrupt, SystemExit):
            with self.subTest(error=error.__name__), self.assertRaises(error):
                list(tandem.data.Loader(Interrupting(error), batch_size=4, num_workers=2, output="numpy"))

    def test_exit_with_workers_inside_a_python_data_set(self):
        # The loop raises while workers sleep in __getitem__; the traceback keeps the loader
        # alive until exit. The workers are stopped at exit: the error's exit code, no abort.
        code = ("import tandem, test_hostile\n"
                "L = tandem.data.Loader(test_hostile.SleepySet(), batch_size=2, num_workers=2, output='numpy')\n"
                "for b in L:\n    raise RuntimeError('from the loop')\n")
        for _ in range(3):
            rc, _, err = run_child(code)
            self.assertEqual(rc, 1, err)
            self.assertIn("RuntimeError: from the loop", err)
            self.assertNotIn("Fatal Python error", err)

    def test_a_forked_child_gets_an_error_not_a_hang(self):
        code = (f"import os, sys, tandem\nL = tandem.data.Loader({self.dir!r}, batch_size=4, num_workers=2, output='numpy')\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    try:\n        list(L)\n        os._exit(3)\n"
                "    except tandem.Error as e:\n        print('child:', e, flush=True)\n"
                "    del L\n    sys.exit(0)\n"
                "_, status = os.waitpid(pid, 0)\n"
                "print('child exit', os.waitstatus_to_exitcode(status), 'parent batches', len(list(L)))\n")
        rc, out, err = run_child(code, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("this is a forked child", out)
        self.assertIn("make the Loader in the child", out)
        self.assertIn("child exit 0 parent batches 10", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
