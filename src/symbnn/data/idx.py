"""IDX files (the format of MNIST and FashionMNIST), read by symbnn itself so that every
defect is one clear error naming the file (torchvision's parser asserts, or fails deep inside).

Layout: two zero bytes, a data-type byte, the number of dimensions d; d big-endian uint32
sizes; then the items, row-major, exactly the product of the sizes. These sets hold unsigned
bytes (type 0x08): images (N, 28, 28) and labels (N,).
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import torch

from symbnn.data.core import DatasetError
from symbnn.data.validate import check_labels, require_file

# the IDX data types, by their byte: only unsigned bytes are valid for the image sets
IDX_TYPES = {
    0x08: "unsigned byte",
    0x09: "signed byte",
    0x0B: "short",
    0x0C: "int",
    0x0D: "float",
    0x0E: "double",
}
UNSIGNED_BYTE = 0x08


def read_idx(path: Path, shape: tuple[int | None, ...], dataset: str, hint: str = "") -> np.ndarray:
    """The uint8 array in IDX file ``path``, whose dimensions must be ``shape`` (None: any
    size); anything else is a DatasetError naming the file and the defect."""
    path = require_file(path, dataset, hint)
    length = path.stat().st_size
    with open(path, "rb") as file:
        magic = file.read(4)
        if len(magic) < 4:
            state = "empty" if length == 0 else f"{length} bytes long"
            raise DatasetError(f"{path}: not an IDX file: {state}, shorter than the 4-byte header")
        if magic[:2] != b"\0\0":
            raise DatasetError(
                f"{path}: not an IDX file: it starts with bytes {magic[:2].hex()}, not 0000"
            )
        kind, ndim = magic[2], magic[3]
        if kind != UNSIGNED_BYTE:
            name = IDX_TYPES.get(kind, "not an IDX type")
            raise DatasetError(
                f"{path}: IDX data type 0x{kind:02x} ({name}); {dataset} files hold unsigned "
                "bytes (0x08)"
            )
        if ndim != len(shape):
            raise DatasetError(f"{path}: {ndim} dimension(s), expected {len(shape)}")
        header = 4 + 4 * ndim
        sizes = file.read(4 * ndim)
        if len(sizes) < 4 * ndim:
            raise DatasetError(
                f"{path}: truncated: {length} bytes, the header alone needs {header}"
            )
        dims = struct.unpack(f">{ndim}I", sizes)
        if any(want is not None and got != want for got, want in zip(dims, shape)):
            expected = " x ".join("N" if s is None else str(s) for s in shape)
            raise DatasetError(
                f"{path}: dimensions {' x '.join(map(str, dims))}, expected {expected}"
            )
        count = math.prod(dims)
        if length != header + count:
            which = "truncated" if length < header + count else "trailing bytes"
            raise DatasetError(
                f"{path}: {which}: {length} bytes, but dimensions {' x '.join(map(str, dims))} "
                f"need {header + count} ({header} of header and {count} items)"
            )
        items = np.fromfile(file, dtype=np.uint8, count=count)
    if items.size != count:  # the file changed while being read
        raise DatasetError(f"{path}: truncated while reading ({items.size} of {count} items)")
    return items.reshape(dims)


def read_idx_pair(
    images_path: Path,
    labels_path: Path,
    image_size: tuple[int, int],
    num_classes: int,
    dataset: str,
    hint: str = "",
) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, H, W) uint8 and labels (N,) int64 of one split, checked against each other:
    as many labels as images, every label in 0..num_classes - 1."""
    images = read_idx(images_path, (None, *image_size), dataset, hint)
    labels = read_idx(labels_path, (None,), dataset, hint)
    if len(images) != len(labels):
        raise DatasetError(
            f"{labels_path}: {len(labels)} labels, but {images_path} holds {len(images)} images"
        )
    labels = labels.astype(np.int64)
    check_labels(torch.from_numpy(labels), num_classes, str(labels_path))
    return images, labels
