"""Minimal safetensors writer for golden-value scripts (numpy + json; the safetensors package
is not a dependency). Format: 8-byte little-endian header length, JSON header
{name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the raw
little-endian tensor bytes."""
import json
import struct

import numpy as np

DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int32"): "I32",
          np.dtype("int64"): "I64", np.dtype("uint8"): "U8"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array} in file order; metadata: {str: str} or None."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, arr in tensors.items():
        arr = np.asarray(arr, order="C")  # keeps 0-d shapes (ascontiguousarray makes them [1])
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
