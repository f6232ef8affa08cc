"""CIFAR-10 and CIFAR-100 from their python archives, read without running code:

    cifar10   root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}
    cifar100  root/cifar-100-python/{train,test,meta}

Each batch is a pickled dict (`symbnn.data.safe_pickle` unpickles only plain data and numpy
arrays) and is checked: a dict whose keys (str, or latin-1 bytes) include `data`, uint8 of
shape (N, 3072) (the R, G, B planes of a 32 x 32 image), and the labels (`labels` for
CIFAR-10, `fine_labels` for CIFAR-100), N integers within the classes the meta file names
(`label_names`, `fine_label_names`), whose count must be the dataset's (10, 100).
torchvision is used only to download (download=True).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from symbnn.data.core import DatasetError
from symbnn.data.download import torchvision_download
from symbnn.data.safe_pickle import load_data_pickle
from symbnn.data.validate import check_labels, require_file

HINT = " (place the files there, or pass download=True on a machine with internet)"
ROW = 3 * 32 * 32


@dataclass(frozen=True)
class CifarLayout:
    dataset: str
    folder: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    meta: str
    names_key: str
    labels_key: str
    num_classes: int
    downloader: str  # torchvision's class, used only to download

    def files(self, split: str) -> list[str]:
        return list(self.train if split == "train" else self.test)

    def paths(self, root: Path) -> list[Path]:
        """Every file of the archive: a partial archive is named whichever split is read."""
        folder = Path(root) / self.folder
        return [folder / name for name in (*self.train, *self.test, self.meta)]


CIFAR10 = CifarLayout(
    "cifar10",
    "cifar-10-batches-py",
    tuple(f"data_batch_{i}" for i in range(1, 6)),
    ("test_batch",),
    "batches.meta",
    "label_names",
    "labels",
    10,
    "CIFAR10",
)
CIFAR100 = CifarLayout(
    "cifar100",
    "cifar-100-python",
    ("train",),
    ("test",),
    "meta",
    "fine_label_names",
    "fine_labels",
    100,
    "CIFAR100",
)


def _entries(path: Path, layout: CifarLayout) -> dict[str, Any]:
    """The pickled dict of ``path`` with str keys (the real files' keys are latin-1 bytes or
    str, depending on how they are read)."""
    value = load_data_pickle(path, layout.dataset, HINT)
    if not isinstance(value, dict):
        raise DatasetError(f"{path}: holds a pickled {type(value).__name__}, expected a dict")
    entries = {}
    for key, item in value.items():
        if isinstance(key, bytes):
            key = key.decode("latin1")
        if not isinstance(key, str):
            raise DatasetError(f"{path}: key {key!r} is not a string")
        entries[key] = item
    return entries


def _field(entries: dict[str, Any], key: str, path: Path) -> Any:
    if key not in entries:
        raise DatasetError(f"{path}: no {key!r} entry (has: {', '.join(sorted(entries))})")
    return entries[key]


def class_names(layout: CifarLayout, root: Path) -> list[str]:
    """The classes the meta file names; their number must be the dataset's."""
    path = Path(root) / layout.folder / layout.meta
    names = _field(_entries(path, layout), layout.names_key, path)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, (str, bytes)) for n in names):
        raise DatasetError(f"{path}: {layout.names_key!r} is not a list of class names")
    if len(names) != layout.num_classes:
        raise DatasetError(
            f"{path}: {layout.names_key!r} lists {len(names)} classes; {layout.dataset} has "
            f"{layout.num_classes}"
        )
    return [n.decode("latin1") if isinstance(n, bytes) else n for n in names]


def _labels(value: Any, key: str, n: int, num_classes: int, path: Path) -> np.ndarray:
    if isinstance(value, np.ndarray):
        labels = value
    elif isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        labels = np.asarray(value, dtype=np.int64)
    else:
        raise DatasetError(f"{path}: {key!r} is not a list of integer labels")
    if labels.ndim != 1 or (labels.size and labels.dtype.kind not in "iu"):
        raise DatasetError(f"{path}: {key!r} is not a list of integer labels")
    if len(labels) != n:
        raise DatasetError(f"{path}: {len(labels)} labels in {key!r}, but {n} images in 'data'")
    labels = labels.astype(np.int64)
    check_labels(torch.from_numpy(labels), num_classes, f"{path}: {key!r}")
    return labels


def read_batch(path: Path, layout: CifarLayout, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64 of one pickled batch, checked."""
    entries = _entries(path, layout)
    data = _field(entries, "data", path)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2:
        kind = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise DatasetError(f"{path}: 'data' must be a uint8 array (N, {ROW}), got {kind}")
    if data.shape[1] != ROW:
        raise DatasetError(
            f"{path}: 'data' rows hold {data.shape[1]} values; CIFAR images are 3 x 32 x 32 = {ROW}"
        )
    labels = _labels(
        _field(entries, layout.labels_key, path), layout.labels_key, len(data), num_classes, path
    )
    return data.reshape(-1, 3, 32, 32), labels


def load_cifar_split(
    layout: CifarLayout, split: str, root: Path, download: bool
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """uint8 images (N, 3, 32, 32), int64 labels and the class count of one split."""
    if download:
        torchvision_download(layout.downloader, root)
    for path in layout.paths(root):
        require_file(path, layout.dataset, HINT)
    num_classes = len(class_names(layout, root))
    parts = [
        read_batch(Path(root) / layout.folder / name, layout, num_classes)
        for name in layout.files(split)
    ]
    images = np.ascontiguousarray(np.concatenate([images for images, _ in parts]))
    labels = np.concatenate([labels for _, labels in parts])
    return torch.from_numpy(images), torch.from_numpy(labels), num_classes
