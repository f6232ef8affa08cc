"""The datasets an experiment's `data` section names, cut to its limits."""

from __future__ import annotations

import os

from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.settings import Config, Data


def load_in_distribution(
    data: Data, root: str | os.PathLike, download: bool = Config.default("download")
) -> tuple[ImageData, ImageData]:
    """(train, test) of the in-distribution set, cut to train_limit / test_limit."""
    options = {"download": True} if download else {}
    train = load_dataset(data.train, "train", root, **options)
    test = load_dataset(data.train, "test", root, **options)
    if data.train_limit is not None:
        train = train.subset(slice(0, data.train_limit))
    if data.test_limit is not None:
        test = test.subset(slice(0, data.test_limit))
    return train, test


def load_out_of_distribution(
    data: Data, root: str | os.PathLike, like: ImageData, download: bool = Config.default("download")
) -> ImageData:
    """The OOD set; its images must match ``like``'s shape."""
    options = {"download": True} if download else {}
    ood = load_dataset(data.ood, "test", root, **options, **data.ood_options.to_dict())
    if ood.images.shape[1:] != like.images.shape[1:]:
        raise ValueError(
            f"data.ood: {data.ood!r} images have shape {tuple(ood.images.shape[1:])}, "
            f"the in-distribution set {data.train!r} has {tuple(like.images.shape[1:])}; "
            "set data.ood_options (size, channels) to match"
        )
    return ood
