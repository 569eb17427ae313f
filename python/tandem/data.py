"""tandem.data.Loader: tandem's loader (the trainer's data recipe) as a Python iterable.

Each batch is a tuple of torch tensors sharing the loader's memory (DLPack, no copy), one per
field (``loader.fields``): (images [B, C, H, W], labels [B] int64) for image data, (tokens
[B, T] int32, targets [B, T] int64) for token shards, (inputs [B, ...], labels [B] int64) for a
Python data set; output="numpy" gives numpy arrays, output="dlpack" the raw objects with
__dlpack__. A batch's memory returns to the loader's pool when its last tensor
is freed. Memory is bounded: the pool has num_workers * prefetch_factor + max_held_batches
slots; while the caller holds max_held_batches - 1 pool batches, further batches are copies
of their own (freed with them). Batches are the same for any num_workers and are resumable
mid-epoch with state_dict() / load_state_dict(). CudaPrefetcher(loader) copies batches to a
CUDA device ahead of use on a stream of its own (tandem/prefetch.py). Details: docs/python.md.
"""

import os

from . import _tandem
from .prefetch import CudaPrefetcher

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
            setattr(a, k, list(v) if k in ("mean", "std") else v)
        self._loader = _tandem.Loader(a)
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

    def state_dict(self):
        """{"epoch", "batch"}: where the next iteration (or the one under way) continues."""
        return {"epoch": self._loader.epoch, "batch": self._loader.batch}

    def load_state_dict(self, state):
        """Makes the next iteration yield, bit for bit, the batches from state's position on."""
        self._loader.set_state(int(state["epoch"]), int(state["batch"]))

    @property
    def num_slots(self):
        """Batch slots of the pool (its bound: num_workers * prefetch_factor + max_held_batches)."""
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
        fields = self._loader.next()
        if not fields:
            self._loader = None
            raise StopIteration
        if self._convert is None:
            return tuple(fields)
        return tuple(self._convert(f) for f in fields)
