"""The paper's datasets through torchvision's dataset classes, in their usual on-disk layouts:

    mnist         root/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte
    fashionmnist  root/FashionMNIST/raw/ (same file names)
    cifar10       root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}
    cifar100      root/cifar-100-python/{train,test,meta}
    svhn          root/{train,test}_32x32.mat
    textures      root/dtd/dtd/{images/<class>/*.jpg, labels/{train,val,test}<partition>.txt}

Nothing is fetched unless `download=True` (a machine with internet). The out-of-distribution
sets (fashionmnist, svhn, textures) take `size` and `channels` so that they can be given the
shape of the in-distribution set they are compared with.
"""

from __future__ import annotations

import functools
import os
import pickle
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torchvision import datasets

from symbnn.data.core import ImageData
from symbnn.data.tinyimagenet import load_image
from symbnn.settings import Config

# usual training-set statistics of each dataset
MNIST_STATS = ((0.1307,), (0.3081,))
FASHIONMNIST_STATS = ((0.2860,), (0.3530,))
CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100_STATS = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
SVHN_STATS = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601, as PIL's convert("L")


class _CifarFiles:
    """Mixin for torchvision's CIFAR classes that checks their files exist instead of hashing
    them on every load: torchvision verifies the archive's md5 when download=True fetches it,
    and re-hashing 160 MB per load costs time (and rejects the small files the tests write in
    the same format)."""

    def _paths(self) -> list[Path]:
        names = [name for name, _ in self.train_list + self.test_list] + [self.meta["filename"]]
        return [Path(self.root) / self.base_folder / name for name in names]

    def _check_integrity(self) -> bool:
        return all(path.is_file() for path in self._paths())

    def _load_meta(self) -> None:
        with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as file:
            self.classes = pickle.load(file, encoding="latin1")[self.meta["key"]]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}


class _CIFAR10Files(_CifarFiles, datasets.CIFAR10):
    pass


class _CIFAR100Files(_CifarFiles, datasets.CIFAR100):
    pass


class _SVHNFiles(datasets.SVHN):
    """SVHN that checks its .mat file exists instead of hashing it on every load (md5 is
    verified by torchvision's download_url when download=True fetches it)."""

    def _check_integrity(self) -> bool:
        return os.path.isfile(os.path.join(self.root, self.filename))


def _require(dataset: str, paths: list[Path], download: bool) -> None:
    """Name the first missing file, which torchvision's own 'Dataset not found' does not."""
    if download:
        return
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(
                f"dataset {dataset!r}: {path} not found "
                "(place the files there, or pass download=True on a machine with internet)"
            )


def _split_flag(split: str) -> bool:
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r} (known: train, test)")
    return split == "train"


def channel_stats(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of uint8 images on the [0, 1] scale, from 256-bin histograms
    (exact, and no float copy of the whole set)."""
    levels = torch.arange(256, dtype=torch.float64) / 255.0
    means, stds = [], []
    for c in range(images.shape[1]):
        counts = torch.bincount(images[:, c].reshape(-1), minlength=256).to(torch.float64)
        p = counts / counts.sum()
        mean = float((p * levels).sum())
        means.append(mean)
        stds.append(float((p * (levels - mean) ** 2).sum().sqrt()))
    return tuple(means), tuple(stds)


def fit_shape(
    images: torch.Tensor, size: int | None, channels: int | None, chunk: int = 4096
) -> torch.Tensor:
    """uint8 (N, C, H, W) -> (N, channels, size, size); None keeps that dimension. Gray -> RGB
    repeats the channel, RGB -> gray takes the luma; resizing is bilinear with antialiasing."""
    if channels not in (None, 1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    channels = channels or images.shape[1]
    size = size or images.shape[-1]
    if channels == images.shape[1] and (size, size) == tuple(images.shape[-2:]):
        return images
    out = torch.empty((images.shape[0], channels, size, size), dtype=torch.uint8)
    luma = torch.tensor(LUMA).view(1, 3, 1, 1)
    for start in range(0, images.shape[0], chunk):  # chunks bound the float32 working copy
        x = images[start : start + chunk].to(torch.float32)
        if channels == 1 and x.shape[1] == 3:
            x = (x * luma).sum(dim=1, keepdim=True)
        elif channels == 3 and x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if x.shape[-2:] != (size, size):
            x = F.interpolate(
                x, size=(size, size), mode="bilinear", antialias=True, align_corners=False
            )
        out[start : start + chunk] = x.round().clamp(0, 255).to(torch.uint8)
    return out


def _image_data(
    images: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    stats,
    name: str,
    size: int | None = None,
    channels: int | None = None,
) -> ImageData:
    fitted = fit_shape(images, size, channels)
    # the standard constants describe the native shape; a reshaped set gets its own
    mean, std = stats if fitted is images else channel_stats(fitted)
    return ImageData(fitted, labels, num_classes, mean, std, name)


def _idx_dataset(cls, dataset: str, split: str, root: Path, download: bool):
    train = _split_flag(split)
    raw = Path(root) / cls.__name__ / "raw"
    names = [
        f"{prefix}-{kind}-ubyte"
        for prefix in ("train", "t10k")
        for kind in ("images-idx3", "labels-idx1")
    ]
    _require(dataset, [raw / name for name in names], download)
    ds = cls(root, train=train, download=download)
    return ds.data.unsqueeze(1).contiguous(), ds.targets.to(torch.int64)


def load_mnist(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """MNIST: uint8 (1, 28, 28), 10 classes; 60,000 train / 10,000 test."""
    images, labels = _idx_dataset(datasets.MNIST, "mnist", split, root, download)
    return _image_data(images, labels, 10, MNIST_STATS, f"mnist-{split}")


def load_fashionmnist(
    split: str,
    root: Path,
    download: bool = Config.default("download"),
    size: int | None = None,
    channels: int | None = None,
) -> ImageData:
    """FashionMNIST (the MNIST OOD set): uint8 (1, 28, 28) natively, 10 classes."""
    images, labels = _idx_dataset(datasets.FashionMNIST, "fashionmnist", split, root, download)
    return _image_data(
        images, labels, 10, FASHIONMNIST_STATS, f"fashionmnist-{split}", size, channels
    )


def _cifar(cls, dataset: str, split: str, root: Path, download: bool):
    train = _split_flag(split)
    probe = cls.__new__(cls)  # file names without loading anything
    probe.root = str(root)
    _require(dataset, probe._paths(), download)
    ds = cls(root, train=train, download=download)
    images = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))  # stored NHWC
    labels = torch.from_numpy(np.asarray(ds.targets, dtype=np.int64))
    return images, labels, len(ds.classes)


def load_cifar10(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """CIFAR-10: uint8 (3, 32, 32), 10 classes; 50,000 train / 10,000 test."""
    images, labels, classes = _cifar(_CIFAR10Files, "cifar10", split, root, download)
    return _image_data(images, labels, classes, CIFAR10_STATS, f"cifar10-{split}")


def load_cifar100(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """CIFAR-100 fine labels: uint8 (3, 32, 32), 100 classes; 50,000 train / 10,000 test."""
    images, labels, classes = _cifar(_CIFAR100Files, "cifar100", split, root, download)
    return _image_data(images, labels, classes, CIFAR100_STATS, f"cifar100-{split}")


def load_svhn(
    split: str,
    root: Path,
    download: bool = Config.default("download"),
    size: int | None = None,
    channels: int | None = None,
) -> ImageData:
    """SVHN cropped digits (the CIFAR-100 OOD set): uint8 (3, 32, 32) natively, 10 classes,
    digit 0 labelled 0 (the .mat files say 10; torchvision maps it); 73,257 train / 26,032 test."""
    _split_flag(split)
    _require("svhn", [Path(root) / f"{split}_32x32.mat"], download)
    ds = _SVHNFiles(root, split=split, download=download)
    images = torch.from_numpy(np.ascontiguousarray(ds.data))  # torchvision already made it NCHW
    labels = torch.from_numpy(np.asarray(ds.labels, dtype=np.int64).reshape(-1))
    return _image_data(images, labels, 10, SVHN_STATS, f"svhn-{split}", size, channels)


def load_textures(
    split: str,
    root: Path,
    download: bool = Config.default("download"),
    size: int = 64,
    channels: int = 3,
    partition: int = 1,
) -> ImageData:
    """Describable Textures (the TinyImageNet OOD set): each image centre-cropped to a square
    and resized to uint8 (channels, size, size); labels are the 47 texture classes. Splits are
    DTD's train/test lists of `partition` (1,880 images each; DTD's val list is not used).
    DTD has no standard normalisation constants: mean/std are computed from the images."""
    _split_flag(split)
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    folder = Path(root) / "dtd" / "dtd"
    _require(
        "textures", [folder / "images", folder / "labels" / f"{split}{partition}.txt"], download
    )
    ds = datasets.DTD(
        root,
        split=split,
        partition=partition,
        download=download,
        loader=functools.partial(load_image, size=size, channels=channels),
    )
    images = np.empty((len(ds), channels, size, size), dtype=np.uint8)
    labels = np.empty(len(ds), dtype=np.int64)
    for i in range(len(ds)):  # one JPEG decode per image: no array to convert here
        images[i], labels[i] = ds[i]
    images = torch.from_numpy(images)
    mean, std = channel_stats(images)
    return ImageData(
        images, torch.from_numpy(labels), len(ds.classes), mean, std, f"textures-{split}"
    )
