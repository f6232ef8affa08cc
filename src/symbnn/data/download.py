"""Fetching a dataset with torchvision's downloader, without its parser."""

from __future__ import annotations

import os


def torchvision_download(class_name: str, root: str | os.PathLike) -> None:
    """Download the files of torchvision's dataset class ``class_name`` (MNIST, FashionMNIST,
    CIFAR10, CIFAR100) into ``root``; torchvision checks the archives' md5. The instance is
    made without ``__init__``, which would also parse the files (pickle.load for CIFAR,
    asserts for IDX): symbnn's own readers parse them."""
    from torchvision import datasets

    cls = getattr(datasets, class_name)
    fetcher = cls.__new__(cls)
    fetcher.root = os.fspath(root)
    fetcher.download()
