"""The datasets an experiment's `data` section names, cut to its limits, checked against the
experiment's model."""

from __future__ import annotations

import os
from typing import Any

from symbnn.data import load_dataset
from symbnn.data.core import DatasetError, ImageData
from symbnn.data.validate import check_fits_model
from symbnn.settings import Config, Data
from symbnn.trust import is_import_path


def _download(name: str, download: bool) -> dict[str, Any]:
    """The shipped loaders' download option; a loader of the user's own gets none."""
    return {"download": True} if download and not is_import_path(name) else {}


def load_in_distribution(
    data: Data,
    root: str | os.PathLike,
    download: bool = Config.default("download"),
    model: dict[str, Any] | None = None,
) -> tuple[ImageData, ImageData]:
    """(train, test) of the in-distribution set, each cut to train_limit / test_limit by a
    stratified subset (`symbnn.data.limits`). Given the experiment's ``model`` spec, both
    splits must fit its input and class count (a DatasetError before anything trains)."""
    options = _download(data.train, download)
    train = load_dataset(data.train, "train", root, **options)
    test = load_dataset(data.train, "test", root, **options)
    if data.train_limit is not None:
        train = train.limited(data.train_limit)
    if data.test_limit is not None:
        test = test.limited(data.test_limit)
    shapes = [tuple(split.images.shape[1:]) for split in (train, test)]
    if shapes[0] != shapes[1] or train.num_classes != test.num_classes:
        raise DatasetError(
            f"data.train ({data.train!r}): the train split has images {shapes[0]} and "
            f"{train.num_classes} classes, the test split {shapes[1]} and {test.num_classes}"
        )
    if model is not None:
        for split in (train, test):
            check_fits_model(split, model, f"data.train ({data.train!r})")
    return train, test


def load_out_of_distribution(
    data: Data,
    root: str | os.PathLike,
    like: ImageData,
    download: bool = Config.default("download"),
) -> ImageData:
    """The OOD set; its images must match ``like``'s shape."""
    options = _download(data.ood, download)
    ood = load_dataset(data.ood, "test", root, **options, **data.ood_options.to_dict())
    if ood.images.shape[1:] != like.images.shape[1:]:
        raise ValueError(
            f"data.ood: {data.ood!r} images have shape {tuple(ood.images.shape[1:])}, "
            f"the in-distribution set {data.train!r} has {tuple(like.images.shape[1:])}; "
            "set data.ood_options (size, channels) to match"
        )
    return ood
