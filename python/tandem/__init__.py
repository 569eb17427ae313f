"""tandem for Python: its data loader as a PyTorch-ready iterator, its trainer, its saved weights.

See docs/python.md. ``tandem.data.Loader`` yields batches whose tensors reach PyTorch through
DLPack without a copy; ``tandem.train`` runs tandem's trainer from a dict and returns its
metrics records; ``tandem.load_weights`` reads a safetensors file of tandem's.
"""

from . import data
from ._tandem import Error
from . import training
from .training import train
from .weights import load_weights

__all__ = ["data", "Error", "load_weights", "train", "training"]
