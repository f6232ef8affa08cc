"""The checks every dataset passes, whoever loaded it.

`symbnn.data.load_dataset` runs `check_image_data` on what every loader returns (the shipped
ones, and any other loader given the same signature), so a set reaches training only as
uint8 NCHW images with at least one pixel, int64 labels within [0, num_classes), at least two
classes (one for a set without classes, e.g. an OOD set), and finite per-channel statistics
with std > 0. The format readers (`symbnn.data.idx`, `symbnn.data.safe_pickle`, the CIFAR,
SVHN and JPEG-folder loaders) check their files before that and name the file at fault;
`require_file` / `require_folder` name a path that is missing or of the wrong kind.
`check_fits_model` compares a set's images with the input a model spec takes
(`symbnn.models.input_requirements`).

Every failure is a `DatasetError` (a ValueError: one line on the command line and in a
workflow job, no traceback).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from symbnn.data.core import DatasetError, ImageData
from symbnn.models import input_requirements


class DatasetFileMissing(DatasetError, FileNotFoundError):
    """A dataset file or folder that does not exist (also a FileNotFoundError)."""


def require_file(path: Path, dataset: str, hint: str = "") -> Path:
    """``path`` if it is a regular file; else a DatasetError naming it (``hint``: what to do)."""
    path = Path(path)
    if path.is_dir():
        raise DatasetError(f"dataset {dataset!r}: {path} is a directory, expected a file")
    if not path.exists():
        raise DatasetFileMissing(f"dataset {dataset!r}: {path} not found{hint}")
    if not path.is_file():
        raise DatasetError(f"dataset {dataset!r}: {path} is not a regular file")
    return path


def require_folder(path: Path, dataset: str, hint: str = "") -> Path:
    """``path`` if it is a directory; else a DatasetError naming it."""
    path = Path(path)
    if not path.exists():
        raise DatasetFileMissing(f"dataset {dataset!r}: {path} not found{hint}")
    if not path.is_dir():
        raise DatasetError(f"dataset {dataset!r}: {path} is a file, expected a directory")
    return path


def read_lines(path: Path, dataset: str, hint: str = "") -> list[str]:
    """The lines of text file ``path`` (UTF-8); a missing or binary file is a DatasetError."""
    path = require_file(path, dataset, hint)
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None


def check_image_data(data: Any, source: str, labelled: bool = True) -> ImageData:
    """``data`` if it is a usable image set; else a DatasetError starting with ``source``
    (e.g. "dataset 'mnist', split 'train'"). ``labelled``: a classification set (at least
    two classes); otherwise a set without classes (num_classes 1, every label 0)."""
    if not isinstance(data, ImageData):
        raise DatasetError(f"{source}: the loader returned {type(data).__name__}, not ImageData")
    data.check_layout(source)
    n, *image_shape = data.images.shape
    if n == 0:
        raise DatasetError(f"{source}: no images")
    if min(image_shape) == 0:
        raise DatasetError(f"{source}: images of shape {tuple(image_shape)} have no pixels")
    if isinstance(data.num_classes, bool) or not isinstance(data.num_classes, int):
        raise DatasetError(f"{source}: num_classes must be an int, got {data.num_classes!r}")
    if labelled and data.num_classes < 2:
        raise DatasetError(f"{source}: {data.num_classes} class(es); a classification set needs 2+")
    if not labelled and data.num_classes != 1:
        raise DatasetError(
            f"{source}: a set without classes has num_classes 1, not {data.num_classes}"
        )
    check_labels(data.labels, data.num_classes, source)
    for what, values in (("mean", data.mean), ("std", data.std)):
        if not all(_finite(v) for v in values):
            raise DatasetError(f"{source}: {what} {tuple(values)} is not finite")
    if min(data.std) <= 0:
        raise DatasetError(f"{source}: std {tuple(data.std)} must be > 0 in every channel")
    return data


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def check_labels(labels: torch.Tensor, num_classes: int, source: str, lowest: int = 0) -> None:
    """Every label in lowest..lowest + num_classes - 1; else an error naming the first outside."""
    last = lowest + num_classes - 1
    outside = (labels < lowest) | (labels > last)
    if bool(outside.any()):
        index = int(outside.nonzero()[0, 0])
        count = int(outside.sum())
        raise DatasetError(
            f"{source}: label {int(labels[index])} at index {index} is outside "
            f"{lowest}..{last} ({count} label(s) outside)"
        )


def check_fits_model(
    data: ImageData, spec: dict[str, Any], where: str, classes: bool = True
) -> None:
    """``data``'s images (and, with ``classes``, its class count) fit the input (and output) of
    the model ``spec`` describes; else a DatasetError naming the dataset, its image shape and
    what the model takes. ``where`` says which part of the experiment the set is."""
    needs = input_requirements(spec)
    shape = tuple(int(s) for s in data.images.shape[1:])
    problem = needs.mismatch(shape, data.num_classes if classes else None)
    if problem:
        raise DatasetError(
            f"{where}: dataset {data.name!r} has images of shape (C, H, W) = {shape} and "
            f"{data.num_classes} classes, but model {spec.get('name')!r} {problem}"
        )
