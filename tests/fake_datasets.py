"""Tiny datasets written in each real dataset's own on-disk format, for the loader tests.

Each writer returns what it wrote (arrays or label lists) so tests can compare exactly.
JPEG writers use solid colours, whose grey level survives lossy compression to within a few
levels, so a test can tell which image landed where.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
from PIL import Image


def write_idx(path: Path, array: np.ndarray) -> None:
    """IDX file (MNIST's format): magic 0x0000 0x08 (uint8) ndim, big-endian int32 dims, data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    path.write_bytes(header + array.tobytes())


def write_mnist_like(root: Path, folder: str, n_train: int, n_test: int, seed: int = 0) -> dict:
    """root/<folder>/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (folder MNIST or FashionMNIST)."""
    rng = np.random.default_rng(seed)
    written = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        write_idx(root / folder / "raw" / f"{prefix}-images-idx3-ubyte", images)
        write_idx(root / folder / "raw" / f"{prefix}-labels-idx1-ubyte", labels)
        written[split] = (images, labels)
    return written


def write_cifar100(root: Path, n_train: int, n_test: int, seed: int = 0) -> dict:
    """root/cifar-100-python/{train,test,meta}: pickled dicts, rows of 3072 bytes (R, G, B planes
    of 32x32). The real files are Python 2 pickles whose str keys load as str under
    encoding='latin1' (what torchvision uses), so str keys are written here."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    written = {}
    for split, n in (("train", n_train), ("test", n_test)):
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        fine = [int(i * 7 % 100) for i in range(n)]
        entry = {
            "batch_label": f"{split} batch",
            "filenames": [f"img_{i}.png" for i in range(n)],
            "fine_labels": fine,
            "coarse_labels": [f // 5 for f in fine],
            "data": data,
        }
        (folder / split).write_bytes(pickle.dumps(entry, protocol=2))
        written[split] = (data, fine)
    meta = {
        "fine_label_names": [f"fine_{i}" for i in range(100)],
        "coarse_label_names": [f"coarse_{i}" for i in range(20)],
    }
    (folder / "meta").write_bytes(pickle.dumps(meta, protocol=2))
    return written


def write_cifar10(root: Path, n_train: int, n_test: int, seed: int = 0) -> dict:
    """root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}: pickled dicts as in
    the real archive (rows of 3072 bytes, R, G, B planes of 32x32; `labels`); the training
    images are spread over the five batches in order."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = {}
    for split, n in (("train", n_train), ("test", n_test)):
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = [int(i * 3 % 10) for i in range(n)]
        written[split] = (data, labels)
        names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
        for name, rows in zip(names, np.array_split(np.arange(n), len(names))):
            entry = {
                "batch_label": name,
                "labels": [labels[i] for i in rows],
                "data": data[rows],
                "filenames": [f"img_{i}.png" for i in rows],
            }
            (folder / name).write_bytes(pickle.dumps(entry, protocol=2))
    meta = {"label_names": [f"class_{i}" for i in range(10)], "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return written


def write_svhn(root: Path, split: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """root/<split>_32x32.mat with X (32, 32, 3, N) uint8 and y (N, 1) labels 1..10 (10 = digit 0)."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = (np.arange(n) % 10 + 1).astype(np.uint8).reshape(n, 1)
    root.mkdir(parents=True, exist_ok=True)
    savemat(root / f"{split}_32x32.mat", {"X": x, "y": y})
    return x, y


def write_jpeg(
    path: Path, value: int | tuple[int, int, int], size: tuple[int, int], mode: str = "RGB"
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, value).save(path, quality=95)


def write_dtd(
    root: Path, classes: list[str], per_split: int = 2
) -> dict[str, list[tuple[str, int]]]:
    """root/dtd/dtd/images/<class>/<class>_<k>.jpg (non-square, as DTD's are) and
    labels/{train,val,test}1.txt listing "<class>/<file>". Returns split -> [(class, grey)]."""
    data = root / "dtd" / "dtd"
    listed: dict[str, list[tuple[str, int]]] = {}
    k = 0
    for split in ("train", "val", "test"):
        lines, listed[split] = [], []
        for c, name in enumerate(classes):
            for _ in range(per_split):
                grey = 30 + 60 * c
                file = f"{name}_{k:04d}.jpg"
                write_jpeg(data / "images" / name / file, (grey, grey, grey), (90 + 10 * k, 70))
                lines.append(f"{name}/{file}")
                listed[split].append((name, grey))
                k += 1
        (data / "labels").mkdir(parents=True, exist_ok=True)
        (data / "labels" / f"{split}1.txt").write_text("\n".join(lines) + "\n")
    return listed


def tiny_grey(label: int) -> int:
    return 20 + 40 * label


def write_tinyimagenet(root: Path, wnids: list[str], per_class: int, val_labels: list[int]) -> Path:
    """root/tiny-imagenet-200 with wnids.txt, train/<wnid>/images/<wnid>_<k>.JPEG (+ the boxes
    file the real set has), val/images/val_<k>.JPEG and val/val_annotations.txt. Images of class
    c are solid grey tiny_grey(c); the first training image of the last class is a grayscale
    JPEG, as a few real ones are."""
    folder = root / "tiny-imagenet-200"
    folder.mkdir(parents=True)
    (folder / "wnids.txt").write_text("\n".join(wnids) + "\n")
    for c, wnid in enumerate(wnids):
        boxes = []
        for k in range(per_class):
            gray = c == len(wnids) - 1 and k == 0
            value = tiny_grey(c) if gray else (tiny_grey(c),) * 3
            write_jpeg(
                folder / "train" / wnid / "images" / f"{wnid}_{k}.JPEG",
                value,
                (64, 64),
                "L" if gray else "RGB",
            )
            boxes.append(f"{wnid}_{k}.JPEG\t0\t0\t63\t63")
        (folder / "train" / wnid / f"{wnid}_boxes.txt").write_text("\n".join(boxes) + "\n")
    lines = []
    for k, label in enumerate(val_labels):
        write_jpeg(folder / "val" / "images" / f"val_{k}.JPEG", (tiny_grey(label),) * 3, (64, 64))
        lines.append(f"val_{k}.JPEG\t{wnids[label]}\t3\t5\t60\t61")
    (folder / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return folder


# --- damaged and hand-made files, for the validation tests -------------------------------------


def write_pickle(path: Path, value, protocol: int = 2) -> Path:
    """``value`` pickled to ``path`` (protocol 2 as the real CIFAR files; others to test)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(value, protocol=protocol))
    return path


def truncate(path: Path, keep: int) -> Path:
    """Keep the first ``keep`` bytes of ``path`` (a download cut short)."""
    path.write_bytes(path.read_bytes()[:keep])
    return path


def random_bytes(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` random bytes in place of the file (whose first two are not both zero)."""
    data = bytearray(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes())
    data[0] = data[0] or 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))
    return path


def replace_with_folder(path: Path) -> Path:
    """A directory where the file ``path`` was."""
    path.unlink()
    path.mkdir()
    return path


def write_svhn_arrays(root: Path, split: str, x, y) -> Path:
    """root/<split>_32x32.mat holding the given X and y, whatever their shapes."""
    from scipy.io import savemat

    root.mkdir(parents=True, exist_ok=True)
    savemat(root / f"{split}_32x32.mat", {"X": x, "y": y})
    return root / f"{split}_32x32.mat"
