"""TinyImageNet (200 classes, 64 x 64 RGB) from the folder that tiny-imagenet-200.zip unpacks to:

    tiny-imagenet-200/wnids.txt                          one WordNet id per line = class order
    tiny-imagenet-200/train/<wnid>/images/<wnid>_<k>.JPEG   500 per class
    tiny-imagenet-200/val/images/val_<k>.JPEG            10,000 labelled images
    tiny-imagenet-200/val/val_annotations.txt            file <TAB> wnid <TAB> bbox...

The official test folder has no labels, so split "test" is the labelled val folder, as is usual.
`root` may be the folder holding tiny-imagenet-200/ or tiny-imagenet-200/ itself.

Checked: every path is a file or a folder as the layout says, every image decodes
(`load_image`), the annotations name only classes of wnids.txt and list existing images;
each defect is a DatasetError naming the path (and the line of a text file).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

from symbnn.data.core import DatasetError, ImageData
from symbnn.data.validate import DatasetFileMissing, read_lines, require_file, require_folder

# widely used TinyImageNet training-set statistics
MEAN, STD = (0.4802, 0.4481, 0.3975), (0.2302, 0.2265, 0.2262)


def load_image(path: Path, size: int, channels: int) -> np.ndarray:
    """One image file as uint8 (channels, size, size): centre crop to a square, then resize.
    A file that is not a decodable image is a DatasetError naming it."""
    if Path(path).is_dir():
        raise DatasetError(f"{path} is a directory, expected an image file")
    try:
        with Image.open(path) as image:
            # some TinyImageNet (and DTD) files are grayscale or CMYK JPEGs
            image = image.convert("L" if channels == 1 else "RGB")
            if image.size != (size, size):
                image = ImageOps.fit(image, (size, size), method=Image.Resampling.BILINEAR)
            array = np.asarray(image, dtype=np.uint8)
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        reason = str(exc).replace(f" '{path}'", "")  # PIL repeats the path
        raise DatasetError(f"{path}: cannot decode the image ({reason})") from None
    return array[None] if channels == 1 else array.transpose(2, 0, 1)


def _hint(what: str) -> str:
    return f" ({what}; unpack tiny-imagenet-200.zip into the data root)"


def _require(path: Path, what: str) -> Path:
    return require_file(path, "tinyimagenet", _hint(what))


def _lines(path: Path, what: str) -> list[str]:
    return read_lines(path, "tinyimagenet", _hint(what))


def _require_folder(path: Path, what: str) -> Path:
    return require_folder(path, "tinyimagenet", _hint(what))


def _dataset_folder(root: Path) -> Path:
    root = Path(root)
    return root if (root / "wnids.txt").exists() else root / "tiny-imagenet-200"


def _train_files(folder: Path, wnids: list[str]) -> tuple[list[Path], list[int]]:
    files, labels = [], []
    for label, wnid in enumerate(wnids):
        class_folder = _require_folder(
            folder / "train" / wnid / "images", f"training folder of class {wnid}"
        )
        images = sorted(class_folder.glob("*.JPEG"))
        if not images:
            raise DatasetFileMissing(f"dataset 'tinyimagenet': no .JPEG files in {class_folder}")
        files += images
        labels += [label] * len(images)
    return files, labels


def _val_files(folder: Path, wnids: list[str]) -> tuple[list[Path], list[int]]:
    index = {wnid: label for label, wnid in enumerate(wnids)}
    annotations = folder / "val" / "val_annotations.txt"
    lines = _lines(annotations, "validation labels")
    images = _require_folder(folder / "val" / "images", "validation image folder")
    files, labels = [], []
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise DatasetError(
                f"{annotations}:{line_number}: expected '<file> TAB <wnid> ...', got {line!r}"
            )
        name, wnid = fields[:2]
        if wnid not in index:
            raise DatasetError(
                f"dataset 'tinyimagenet': {annotations}:{line_number}: class {wnid!r} is not "
                "in wnids.txt"
            )
        files.append(_require(images / name, "validation image"))
        labels.append(index[wnid])
    return files, labels


def load_tinyimagenet(split: str, root: Path) -> ImageData:
    """uint8 (3, 64, 64) images; labels index wnids.txt (200 classes in the real set):
    "train" = 100,000 training images, "test" = the 10,000 labelled val images."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r} (known: train, test)")
    folder = _dataset_folder(root)
    wnids_file = folder / "wnids.txt"
    wnids = [line.strip() for line in _lines(wnids_file, "class list wnids.txt") if line.strip()]
    if len(set(wnids)) != len(wnids):
        raise DatasetError(f"{wnids_file}: lists a class more than once")
    files, labels = (_train_files if split == "train" else _val_files)(folder, wnids)
    images = np.empty((len(files), 3, 64, 64), dtype=np.uint8)
    for i, path in enumerate(files):  # one JPEG decode per image: no way around a loop here
        images[i] = load_image(path, 64, 3)
    return ImageData(
        torch.from_numpy(images),
        torch.tensor(labels, dtype=torch.int64),
        num_classes=len(wnids),
        mean=MEAN,
        std=STD,
        name=f"tinyimagenet-{split}",
    )
