"""tandem.load_weights: a safetensors file as a dict of arrays."""

from . import _tandem


def load_weights(path):
    """Returns {name: array} for the tensors of the safetensors file at ``path``, in file order.

    Arrays are numpy arrays (numpy.from_dlpack, no copy) when numpy is installed, otherwise
    the module's Field objects (``shape``, ``dtype``, ``__dlpack__``). Raises tandem.Error
    (a ValueError) naming the file when it is missing or not a safetensors file.
    """
    fields = _tandem.load_weights(str(path))
    try:
        import numpy
    except ImportError:
        return dict(fields)
    return {name: numpy.from_dlpack(f) for name, f in fields}
