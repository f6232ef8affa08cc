"""Datasets of a user's own, for the tests that name a loader by import path
(``user_datasets:stripes``, ``user_datasets:noise``): generated, no file to download.
``stripes`` reads its seed from ROOT/stripes_seed.txt when there is one, so that a test can
change what the loader returns under the same import path; the other loaders are broken on
purpose."""

from __future__ import annotations

from pathlib import Path

import torch

from symbnn.data.core import ImageData

SIZES = {"train": 400, "test": 100}


def stripes(split: str, root: Path) -> ImageData:
    """Ten classes of 28 x 28 grey images: class k has a bright band at rows 2k + 4 to
    2k + 6 over weak noise; one network learns it in an epoch."""
    seed_file = Path(root) / "stripes_seed.txt"
    seed = int(seed_file.read_text()) if seed_file.exists() else 0
    n = SIZES[split]
    gen = torch.Generator().manual_seed(seed * 2 + (split == "test"))
    labels = torch.arange(n, dtype=torch.int64) % 10
    images = torch.randint(0, 60, (n, 1, 28, 28), generator=gen, dtype=torch.uint8)
    for k in range(10):
        images[labels == k, :, 2 * k + 4 : 2 * k + 7, :] = 230
    return ImageData(images, labels, 10, (0.2,), (0.3,), "stripes")


def noise(
    split: str, root: Path, n: int = 50, size: int = 28, channels: int = 1, seed: int = 0
) -> ImageData:
    """Uniform noise images without classes (an OOD set: num_classes 1, every label 0);
    takes the OOD loaders' options."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, channels, size, size), generator=gen, dtype=torch.uint8)
    return ImageData(
        images, torch.zeros(n, dtype=torch.int64), 1, (0.5,) * channels, (0.29,) * channels
    )


def labels_out_of_range(split: str, root: Path) -> ImageData:
    data = stripes(split, root)
    data.labels[3] = 12
    return data


def not_image_data(split: str, root: Path) -> list:
    return [0, 1, 2]


def no_split(root: Path) -> ImageData:
    return stripes("train", root)
