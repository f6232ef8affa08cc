"""The paper's datasets in their usual on-disk layouts, read and checked by symbnn:

    mnist         root/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte
    fashionmnist  root/FashionMNIST/raw/ (same file names)
    cifar10       root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}
    cifar100      root/cifar-100-python/{train,test,meta}
    svhn          root/{train,test}_32x32.mat
    textures      root/dtd/dtd/{images/<class>/*.jpg, labels/{train,val,test}<partition>.txt}

Nothing is fetched unless `download=True` (a machine with internet); torchvision only
downloads (checking the archives' md5), symbnn parses: IDX files with its own reader
(`symbnn.data.idx`), the CIFAR pickles without running code (`symbnn.data.cifar`), SVHN's
.mat with scipy (plain arrays: X (32, 32, 3, N) uint8, y (N, 1) in 1..10), DTD's JPEGs with
PIL. Every defect is a DatasetError naming the file. The out-of-distribution sets
(fashionmnist, svhn, textures) take `size` and `channels` so that they can be given the shape
of the in-distribution set they are compared with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from symbnn.data.cifar import CIFAR10, CIFAR100, load_cifar_split
from symbnn.data.core import DatasetError, ImageData
from symbnn.data.download import torchvision_download
from symbnn.data.idx import read_idx_pair
from symbnn.data.tinyimagenet import load_image
from symbnn.data.validate import check_labels, read_lines, require_file, require_folder
from symbnn.settings import Config

# usual training-set statistics of each dataset
MNIST_STATS = ((0.1307,), (0.3081,))
FASHIONMNIST_STATS = ((0.2860,), (0.3530,))
CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100_STATS = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
SVHN_STATS = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601, as PIL's convert("L")
HINT = " (place the files there, or pass download=True on a machine with internet)"


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


def _idx_dataset(folder: str, dataset: str, split: str, root: Path, download: bool):
    train = _split_flag(split)
    raw = Path(root) / folder / "raw"
    if download:
        torchvision_download(folder, root)
    prefix = "train" if train else "t10k"
    images, labels = read_idx_pair(
        raw / f"{prefix}-images-idx3-ubyte",
        raw / f"{prefix}-labels-idx1-ubyte",
        (28, 28),
        10,
        dataset,
        HINT,
    )
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels)


def load_mnist(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """MNIST: uint8 (1, 28, 28), 10 classes; 60,000 train / 10,000 test."""
    images, labels = _idx_dataset("MNIST", "mnist", split, root, download)
    return _image_data(images, labels, 10, MNIST_STATS, f"mnist-{split}")


def load_fashionmnist(
    split: str,
    root: Path,
    download: bool = Config.default("download"),
    size: int | None = None,
    channels: int | None = None,
) -> ImageData:
    """FashionMNIST (the MNIST OOD set): uint8 (1, 28, 28) natively, 10 classes."""
    images, labels = _idx_dataset("FashionMNIST", "fashionmnist", split, root, download)
    return _image_data(
        images, labels, 10, FASHIONMNIST_STATS, f"fashionmnist-{split}", size, channels
    )


def load_cifar10(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """CIFAR-10: uint8 (3, 32, 32), 10 classes; 50,000 train / 10,000 test."""
    _split_flag(split)
    images, labels, classes = load_cifar_split(CIFAR10, split, root, download)
    return _image_data(images, labels, classes, CIFAR10_STATS, f"cifar10-{split}")


def load_cifar100(split: str, root: Path, download: bool = Config.default("download")) -> ImageData:
    """CIFAR-100 fine labels: uint8 (3, 32, 32), 100 classes; 50,000 train / 10,000 test."""
    _split_flag(split)
    images, labels, classes = load_cifar_split(CIFAR100, split, root, download)
    return _image_data(images, labels, classes, CIFAR100_STATS, f"cifar100-{split}")


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64 (digit 0 labelled 0; the files say
    10) of an SVHN .mat file, checked: X (32, 32, 3, N) uint8, y (N, 1) in 1..10. scipy's
    MATLAB reader builds plain arrays (it runs no code); only X and y are read."""
    from scipy.io import loadmat

    require_file(path, "svhn", HINT)
    try:
        mat = loadmat(path, variable_names=("X", "y"), appendmat=False)
    except Exception as exc:  # any defect of an untrusted file is one error
        reason = str(exc) or type(exc).__name__
        raise DatasetError(f"{path}: not a readable MATLAB file: {reason}") from None
    for key in ("X", "y"):
        if key not in mat:
            raise DatasetError(f"{path}: no {key!r} array")
    x, y = mat["X"], mat["y"]
    if (
        not isinstance(x, np.ndarray)
        or x.dtype != np.uint8
        or x.ndim != 4
        or x.shape[:3] != (32, 32, 3)
    ):
        kind = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        raise DatasetError(f"{path}: 'X' must be uint8 of shape (32, 32, 3, N), got {kind}")
    n = x.shape[3]
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "iuf" or y.shape not in ((n, 1), (n,)):
        raise DatasetError(
            f"{path}: 'y' must hold one label per image, shape ({n}, 1), got "
            f"{getattr(y, 'dtype', type(y).__name__)} {getattr(y, 'shape', '')}"
        )
    y = y.reshape(-1)
    if y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
        raise DatasetError(f"{path}: 'y' holds non-integer labels")
    labels = y.astype(np.int64)
    check_labels(torch.from_numpy(labels), 10, f"{path}: 'y'", lowest=1)  # 10: the digit 0
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1))  # (H, W, C, N) -> NCHW
    return images, labels % 10


def load_svhn(
    split: str,
    root: Path,
    download: bool = Config.default("download"),
    size: int | None = None,
    channels: int | None = None,
) -> ImageData:
    """SVHN cropped digits (the CIFAR-100 OOD set): uint8 (3, 32, 32) natively, 10 classes,
    digit 0 labelled 0 (the .mat files say 10); 73,257 train / 26,032 test."""
    _split_flag(split)
    path = Path(root) / f"{split}_32x32.mat"
    if download:
        from torchvision import datasets
        from torchvision.datasets.utils import download_url

        url, filename, md5 = datasets.SVHN.split_list[split]
        download_url(url, str(root), filename, md5)
    images, labels = read_svhn_mat(path)
    return _image_data(
        torch.from_numpy(images),
        torch.from_numpy(labels),
        10,
        SVHN_STATS,
        f"svhn-{split}",
        size,
        channels,
    )


def dtd_files(folder: Path, split: str, partition: int) -> tuple[list[Path], list[int], int]:
    """DTD's image files of one split's list, their labels and the number of classes. The
    classes are the folders of images/ in sorted order (DTD's 47, each listed by every split);
    a list line naming another class, or a missing image, is an error naming the line."""
    images = require_folder(folder / "images", "textures", HINT)
    listing = folder / "labels" / f"{split}{partition}.txt"
    lines = read_lines(listing, "textures", HINT)
    classes = sorted(p.name for p in images.iterdir() if p.is_dir())
    index = {name: label for label, name in enumerate(classes)}
    files, labels = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.strip().split("/")
        if len(parts) != 2:
            raise DatasetError(f"{listing}:{number}: expected '<class>/<file>', got {line!r}")
        name, file = parts
        if name not in index:
            raise DatasetError(f"{listing}:{number}: class {name!r} is not a folder of {images}")
        files.append(require_file(images / name / file, "textures"))
        labels.append(index[name])
    if not files:
        raise DatasetError(f"{listing}: lists no images")
    return files, labels, len(classes)


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
    if not 1 <= partition <= 10:
        raise ValueError(f"DTD partition must lie in 1..10, got {partition}")
    if download:
        from torchvision import datasets

        datasets.DTD(root, split=split, partition=partition, download=True)
    files, labels, num_classes = dtd_files(Path(root) / "dtd" / "dtd", split, partition)
    images = np.empty((len(files), channels, size, size), dtype=np.uint8)
    for i, path in enumerate(files):  # one JPEG decode per image: no array to convert here
        images[i] = load_image(path, size, channels)
    images = torch.from_numpy(images)
    mean, std = channel_stats(images)
    return ImageData(
        images,
        torch.tensor(labels, dtype=torch.int64),
        num_classes,
        mean,
        std,
        f"textures-{split}",
    )
