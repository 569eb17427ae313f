"""tandem.data.CudaPrefetcher: batches copied to a CUDA device ahead of use, on a stream of their own.

The textbook loop copies each batch with ``.to(device, non_blocking=True)`` on the stream the
model runs on, so the copy of batch i+1 cannot start before the step of batch i has been queued,
and a pinned batch of tandem's pool must be kept alive by hand until its copy is done (the pool
reuses the slot as soon as the tensors are freed). CudaPrefetcher does both for any iterable of
tuples of tensors (a tandem.data.Loader, or a torch DataLoader):

- it keeps ``depth`` batches in flight: each is copied with non_blocking=True on a side stream
  (``torch.cuda.Stream``), and a ``torch.cuda.Event`` is recorded after its copies;
- when the loop takes a batch, the loop's current stream waits on that event (a device-side
  wait: the CPU does not block), and each device tensor is marked used on that stream
  (``Tensor.record_stream``) so PyTorch's caching allocator does not reuse its memory early;
- the host batch is kept until its event has completed, then dropped, which returns a
  tandem slot to its pool.

Copies overlap compute only from pinned host memory (``pin_memory=True``); from pageable
memory they still run ahead but the CPU waits for each. Without a CUDA device (``torch.cuda.
is_available()`` False, e.g. a CPU-only machine) the constructor raises RuntimeError naming
that; iterate the loader itself there (``.to("cpu")`` is a no-op). Depends on torch only.
Not thread-safe: iterate from one thread, as the loader.
"""

import collections


class CudaPrefetcher:
    """Iterable over ``loader``'s batches, each a tuple of tensors on ``device``.

    loader: an iterable whose items are tuples (or lists) of torch tensors, e.g.
        tandem.data.Loader(..., pin_memory=True); len(prefetcher) is len(loader) when it has one.
    device: a CUDA device ("cuda", "cuda:1", torch.device); other kinds raise ValueError.
    depth: batches copied ahead of the one the loop uses (>= 1, default 2).
    Raises RuntimeError when torch has no CUDA device, ValueError for a bad device or depth,
    TypeError (at iteration) for a batch that is not a tuple of tensors.
    """

    def __init__(self, loader, device="cuda", depth=2):
        import torch

        self._torch = torch
        self._device = torch.device(device)
        if self._device.type != "cuda":
            raise ValueError(f"tandem.data.CudaPrefetcher: device {str(self._device)!r}: expected a cuda device")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"tandem.data.CudaPrefetcher: depth {depth!r}: expected an integer >= 1")
        if not torch.cuda.is_available():
            raise RuntimeError("tandem.data.CudaPrefetcher: torch sees no CUDA device (torch.cuda.is_available() "
                               "is False); iterate the loader itself on a machine without a GPU")
        if self._device.index is None:
            self._device = torch.device("cuda", torch.cuda.current_device())
        self._loader, self._depth = loader, depth

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        return _CudaEpoch(self._torch, iter(self._loader), self._device, self._depth)


class _CudaEpoch:
    """One pass: `ahead` holds (host, device, copied event) in order; `retiring` holds the host
    batches the loop has taken whose copies may still be running."""

    def __init__(self, torch, batches, device, depth):
        self._torch, self._batches, self._device, self._depth = torch, batches, device, depth
        self._stream = torch.cuda.Stream(device=device)
        self._ahead = collections.deque()
        self._retiring = collections.deque()
        self._done = False
        self._fill()

    def __iter__(self):
        return self

    def _fill(self):
        torch = self._torch
        while not self._done and len(self._ahead) < self._depth:
            try:
                host = next(self._batches)
            except StopIteration:
                self._done = True
                break
            if not isinstance(host, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in host):
                raise TypeError("tandem.data.CudaPrefetcher: a batch must be a tuple of torch tensors, got "
                                f"{type(host).__name__}")
            # No wait on the loop's stream: the copies' device memory comes from the side
            # stream's own pool, and record_stream (at __next__) keeps it from reuse while
            # the loop's stream still uses it.
            with torch.cuda.stream(self._stream):
                dev = tuple(t.to(self._device, non_blocking=True) for t in host)
                copied = torch.cuda.Event()
                copied.record(self._stream)
            self._ahead.append((host, dev, copied))

    def _retire(self, wait=False):
        while self._retiring and (wait or self._retiring[0][1].query()):
            host, copied = self._retiring.popleft()
            if wait:
                copied.synchronize()
            del host

    def __next__(self):
        self._retire()
        if not self._ahead:
            self._retire(wait=True)
            raise StopIteration
        host, dev, copied = self._ahead.popleft()
        current = self._torch.cuda.current_stream(self._device)
        current.wait_event(copied)
        for t in dev:
            t.record_stream(current)
        self._retiring.append((host, copied))
        self._fill()
        return dev

    def close(self):
        """Waits for the copies in flight and drops the host batches (their slots go back)."""
        for _, _, copied in self._ahead:
            copied.synchronize()
        self._ahead.clear()
        self._retire(wait=True)
        self._done = True

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: torch may be gone already
            pass
