"""tandem.data.Loader: tandem's loader (the trainer's data recipe) as a Python iterable.

Each batch is a tuple of torch tensors sharing the loader's memory (DLPack, no copy), one per
field (``loader.fields``): (images [B, C, H, W], labels [B] int64) for image data, (tokens
[B, T] int32, targets [B, T] int64) for token shards, (inputs [B, ...], labels [B] int64) for a
Python data set; output="numpy" gives numpy arrays, output="dlpack" the raw objects with
__dlpack__. A batch's memory returns to the loader's pool when its last tensor
is freed. Memory is bounded: the pool has at most num_workers * prefetch_factor +
max_held_batches slots (fewer when an epoch has fewer batches than the workers would prefetch); while the caller holds max_held_batches - 1 pool batches, further batches are copies
of their own (freed with them). Batches are the same for any num_workers and are resumable
mid-epoch with state_dict() / load_state_dict(). CudaPrefetcher(loader) copies batches to a
CUDA device ahead of use on a stream of its own (tandem/prefetch.py). Details: docs/python.md.
"""

import atexit
import numbers
import os
import re
import weakref

from . import _tandem
from .prefetch import CudaPrefetcher

_INTS = {"batch_size": 1, "num_workers": 0, "seed": 0, "prefetch_factor": 1, "image_size": 0, "resize_size": 0,
         "max_held_batches": 1, "block_size": 0}  # the least value of each
_BOOLS = ("shuffle", "augment", "drop_last", "pin_memory")
_LIVE = weakref.WeakSet()  # open loaders, closed at interpreter exit


def _check_args(kw):
    """One line naming the argument for a wrong type or range (before the extension sees it)."""
    for k, least in _INTS.items():
        if k not in kw:
            continue
        v = kw[k]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"tandem.data.Loader: {k}: expected an integer, got {type(v).__name__} {v!r}")
        top = {"num_workers": 256, "seed": 2**64 - 1, "image_size": 8192, "resize_size": 8192}.get(k, 2**31 - 1)
        if not least <= v <= top:
            raise ValueError(f"tandem.data.Loader: {k}: expected {least}..{top}, got {v}")
    for k in _BOOLS:
        if k in kw and not isinstance(kw[k], bool):
            raise TypeError(f"tandem.data.Loader: {k}: expected True or False, got {kw[k]!r}")
    if ("mean" in kw) != ("std" in kw):
        given, missing = ("mean", "std") if "mean" in kw else ("std", "mean")
        raise ValueError(f"tandem.data.Loader: {given} given without {missing}: expected both (or neither, for the "
                         "data set's own)")
    for k in ("mean", "std"):
        if k not in kw:
            continue
        try:
            v = [float(x) for x in kw[k]]
        except (TypeError, ValueError):
            raise TypeError(f"tandem.data.Loader: {k}: expected 1 or 3 numbers, got {kw[k]!r}") from None
        if len(v) not in (1, 3) or any(x != x or x in (float("inf"), float("-inf")) for x in v):
            raise ValueError(f"tandem.data.Loader: {k}: expected 1 or 3 finite numbers, got {kw[k]!r}")
        if k == "std" and any(x <= 0 for x in v):
            raise ValueError(f"tandem.data.Loader: std: expected values > 0, got {kw[k]!r}")
        kw[k] = v
    if "mean" in kw and len(kw["mean"]) != len(kw["std"]):
        raise ValueError(f"tandem.data.Loader: std: expected as many values as mean ({len(kw['mean'])}), "
                         f"got {len(kw['std'])}")


@atexit.register
def _close_all():
    # Workers calling a Python data set need the interpreter: stop them while it still runs.
    for loader in list(_LIVE):
        loader.close()

_ARGS = ("dataset", "split", "prefetch_factor", "image_size", "resize_size", "augment", "mean", "std",
         "precision", "drop_last", "pin_memory", "max_held_batches", "block_size")


class Loader:
    """Iterable of batches of ``path`` or of a Python data set.

    path: a folder of images, packed shards (tandem pack), CIFAR-10/100 binaries or IDX files;
    a folder of token shards (train.tok and val.tok from tandem tokenize; block_size tokens a
    window, split "test" reads val.tok); or an object with __len__ and __getitem__ whose
    dataset[i] is (array or bytes, integer label) or an array alone, called from tandem's
    workers under the GIL (docs/python.md: what that costs).
    batch_size, num_workers, shuffle, seed, drop_last, pin_memory, prefetch_factor: as
    torch.utils.data.DataLoader's. image_size (0 = the data set's, folders 224), resize_size,
    augment (training split: RandomResizedCrop + flip for resized images, pad + random crop +
    flip otherwise, as ``tandem train``), mean/std (Normalize, default the data set's),
    precision ("fp32" | "bf16" | "fp16": the images' dtype), split ("train" | "test").
    Raises tandem.Error (a ValueError) with one line naming the bad argument.
    Not thread-safe: iterate one Loader from one thread.
    """

    def __init__(self, path, batch_size=1, num_workers=0, shuffle=False, seed=0, output="torch", **options):
        unknown = sorted(set(options) - set(_ARGS))
        if unknown:
            raise TypeError(f"tandem.data.Loader: unknown argument {unknown[0]!r}; expected one of {', '.join(_ARGS)}")
        if output not in ("torch", "numpy", "dlpack"):
            raise ValueError(f"tandem.data.Loader: output: expected torch, numpy or dlpack, got {output!r}")
        if output == "numpy" and options.get("precision") in ("bf16",):
            raise ValueError("tandem.data.Loader: precision 'bf16' with output='numpy': numpy has no bfloat16; "
                             "use output='torch' (or 'dlpack'), or precision 'fp32' or 'fp16'")
        checked = dict(options, batch_size=batch_size, num_workers=num_workers, seed=seed, shuffle=shuffle)
        _check_args(checked)
        options = {k: checked[k] for k in options}
        a = _tandem.LoaderArgs()
        if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__"):
            a.path = os.fsdecode(path)
        else:
            a.set_dataset(path)
        a.batch_size = batch_size
        a.num_workers = num_workers
        a.shuffle = shuffle
        a.seed = seed
        for k, v in options.items():
            setattr(a, k, v)
        self._loader = _tandem.Loader(a)
        _LIVE.add(self)
        if output == "torch":
            import torch
            self._convert = torch.from_dlpack
        elif output == "numpy":
            import numpy
            self._convert = numpy.from_dlpack
        else:
            self._convert = None

    def __len__(self):
        return self._loader.num_batches

    @property
    def fields(self):
        """The batch's fields in order: [{"name", "dtype", "shape" (one sample's), "role"}]."""
        return self._loader.fields

    def __iter__(self):
        self._loader.begin()
        return _Epoch(self._loader, self._convert)

    def close(self):
        """Stops and joins the workers (batches held stay valid); iterating afterwards raises
        tandem.Error. Called for every open Loader at interpreter exit. Idempotent."""
        self._loader.close()
        _LIVE.discard(self)

    def state_dict(self):
        """{"epoch", "batch"}: where the next iteration (or the one under way) continues."""
        return {"epoch": self._loader.epoch, "batch": self._loader.batch}

    def load_state_dict(self, state):
        """Makes the next iteration yield, bit for bit, the batches from state's position on."""
        for k in ("epoch", "batch"):
            v = state.get(k) if isinstance(state, dict) else None
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"tandem.data.Loader.load_state_dict: {k}: expected an integer (a state_dict() of "
                                f"a Loader), got {v!r}")
            if not 0 <= v < 2**62:
                raise ValueError(f"tandem.data.Loader.load_state_dict: {k}: expected 0..2^62 - 1, got {v}")
        self._loader.set_state(int(state["epoch"]), int(state["batch"]))

    @property
    def num_slots(self):
        """Batch slots of the pool: at most num_workers * prefetch_factor + max_held_batches (the
        prefetch part is capped at the batches of an epoch)."""
        return self._loader.num_slots

    @property
    def held_batches(self):
        """Pool batches the caller holds now."""
        return self._loader.held_slots

    @property
    def held_copied_bytes(self):
        """Bytes of copied batches (past max_held_batches) the caller holds now."""
        return self._loader.held_copied_bytes


class _Epoch:
    """The iterator of one epoch. It keeps no reference to the batches it returned, so a
    batch's slot goes back to the pool as soon as the caller drops it."""

    def __init__(self, loader, convert):
        self._loader, self._convert = loader, convert

    def __iter__(self):
        return self

    def __next__(self):
        if self._loader is None:
            raise StopIteration
        try:
            fields = self._loader.next()
        except _tandem.Error as e:
            # Ctrl-C or sys.exit() inside a Python data set's __getitem__ (in a worker) stay
            # what they are, not a tandem.Error (a ValueError an except clause might swallow).
            m = re.search(r"raised (KeyboardInterrupt|SystemExit)\b", str(e))
            if m:
                raise (KeyboardInterrupt if m.group(1) == "KeyboardInterrupt" else SystemExit)(str(e)) from e
            raise
        if not fields:
            self._loader = None
            raise StopIteration
        if self._convert is None:
            return tuple(fields)
        return tuple(self._convert(f) for f in fields)
