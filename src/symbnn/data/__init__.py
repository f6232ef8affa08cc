"""Datasets: `load_dataset(name, split, root)` returns an `ImageData` (uint8 images, labels).
`name` is a shipped dataset, or the import path ``package.module:function`` of a loader of
the user's own with the same signature, ``function(split, root, **options) -> ImageData``
(imported only when trusted: `symbnn.trust`, i.e. when the configuration names it).

Every loader's result passes `symbnn.data.validate.check_image_data` before it is returned,
and each format reader checks its files first; a bad dataset is a `DatasetError` (a
ValueError) naming the file, or the dataset and split, and what is wrong (docs/maths.md,
section 7.3). Loaders are imported lazily so that a run on the packaged default never
imports the code of datasets it does not use. Out-of-distribution sets come back in the shape of the
in-distribution set they pair with (see each loader's options) and are normalised with the
in-distribution set's statistics by the caller (`id_data.normalize(ood.images)`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from symbnn import trust, user_code
from symbnn.data.core import DatasetError, ImageData
from symbnn.data.validate import check_image_data

# name -> "module:function"; each function takes (split, root, **options) -> ImageData
_LOADERS = {
    "digits": "symbnn.data.packaged:load_mnist5k",
    "natural_patches": "symbnn.data.packaged:load_natural_patches",
    "mnist": "symbnn.data.torchvision_sets:load_mnist",
    "fashionmnist": "symbnn.data.torchvision_sets:load_fashionmnist",
    "cifar10": "symbnn.data.torchvision_sets:load_cifar10",
    "cifar100": "symbnn.data.torchvision_sets:load_cifar100",
    "svhn": "symbnn.data.torchvision_sets:load_svhn",
    "textures": "symbnn.data.torchvision_sets:load_textures",
    "tinyimagenet": "symbnn.data.tinyimagenet:load_tinyimagenet",
}

# sets without classes (every label 0, num_classes 1): the OOD sets cut from photographs
UNLABELLED = frozenset({"natural_patches"})

DATASET_NAMES = tuple(_LOADERS)
SPLITS = ("train", "test")


def load_dataset(name: str, split: str, root: str | Path = "data", **options: Any) -> ImageData:
    if split not in SPLITS:
        raise ValueError(f"dataset {name!r}: unknown split {split!r} (known: {', '.join(SPLITS)})")
    source = f"dataset {name!r}, split {split!r}"
    if trust.is_import_path(name):
        data = _load_imported(name, split, Path(root), options)
        # a set of the user's own may be a classification set or one without classes (OOD)
        labelled = getattr(data, "num_classes", None) != 1
        return check_image_data(data, source, labelled)
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r} (known: {', '.join(DATASET_NAMES)})")
    module_name, function_name = _LOADERS[name].split(":")
    loader = getattr(importlib.import_module(module_name), function_name)
    data = loader(split, Path(root), **options)
    return check_image_data(data, source, name not in UNLABELLED)


def _load_imported(path: str, split: str, root: Path, options: dict[str, Any]) -> Any:
    """What the user's loader ``path`` returns for ``split`` (imported only if trusted,
    checked to be a function taking these arguments before it is called); an exception of
    the loader's own is a `symbnn.user_code.UserCodeError` naming it."""
    try:
        loader = user_code.dataset_loader(path, options)
    except trust.UntrustedImport:
        raise
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    with user_code.calling(f"dataset loader {path!r}", f"on split {split!r}"):
        return loader(split, root, **options)


__all__ = ["DatasetError", "ImageData", "load_dataset", "DATASET_NAMES", "SPLITS"]
