"""Damaged, hostile or unfit dataset files: each is one DatasetError (a ValueError) naming the
file (or the dataset and split) and what is wrong, never a traceback from deep inside a
parser; a crafted pickle runs no code; limits keep stratified subsets; a set that does not
fit the experiment's model is refused before training."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from conftest import run_snakemake, tiny_experiment, workflow_config
from fake_datasets import (
    random_bytes,
    replace_with_folder,
    truncate,
    write_cifar10,
    write_cifar100,
    write_dtd,
    write_idx,
    write_mnist_like,
    write_pickle,
    write_svhn,
    write_svhn_arrays,
    write_tinyimagenet,
)

from symbnn.data import DatasetError, ImageData, load_dataset
from symbnn.data.experiment import load_in_distribution
from symbnn.data.limits import class_quotas, stratified_indices
from symbnn.data.safe_pickle import load_data_pickle
from symbnn.data.validate import check_fits_model, check_image_data
from symbnn.models import build_model, input_requirements
from symbnn.settings import Data


def refused(call, *fragments):
    """``call()`` raises a DatasetError whose message holds every fragment (a path, a value)."""
    with pytest.raises(DatasetError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert str(fragment) in message, (fragment, message)
    assert "\n" not in message
    return message


# --- MNIST / FashionMNIST: IDX files ----------------------------------------------------------


@pytest.fixture
def mnist(tmp_path):
    write_mnist_like(tmp_path, "MNIST", n_train=20, n_test=10)
    raw = tmp_path / "MNIST" / "raw"
    return tmp_path, raw / "train-images-idx3-ubyte", raw / "train-labels-idx1-ubyte"


def load_mnist_train(root):
    return lambda: load_dataset("mnist", "train", root)


def test_idx_truncated_file(mnist):
    root, images, _ = mnist
    truncate(images, 16 + 28 * 28 * 5 + 3)
    refused(load_mnist_train(root), images, "truncated", f"need {16 + 20 * 784}")


def test_idx_trailing_bytes(mnist):
    root, images, _ = mnist
    images.write_bytes(images.read_bytes() + b"\0")
    refused(load_mnist_train(root), images, "trailing bytes")


def test_idx_changed_data_type(mnist):
    root, images, _ = mnist
    content = bytearray(images.read_bytes())
    content[2] = 0x0D  # float
    images.write_bytes(bytes(content))
    refused(load_mnist_train(root), images, "data type 0x0d (float)", "unsigned bytes (0x08)")


@pytest.mark.parametrize("size", [0, 3, 500])
def test_idx_empty_short_or_random_file(mnist, size):
    root, images, _ = mnist
    random_bytes(images, size) if size else images.write_bytes(b"")
    what = "empty" if size == 0 else ("3 bytes long" if size == 3 else "not an IDX file")
    refused(load_mnist_train(root), images, what)


@pytest.mark.parametrize("label", [10, 12, 255])
def test_idx_labels_outside_the_ten_digits(mnist, label):
    root, _, labels = mnist
    values = (np.arange(20) % 10).astype(np.uint8)
    values[7] = label
    write_idx(labels, values)
    refused(load_mnist_train(root), labels, f"label {label} at index 7", "outside 0..9")


@pytest.mark.parametrize("side", [8, 32])
def test_idx_images_of_another_size(mnist, side):
    root, images, _ = mnist
    write_idx(images, np.zeros((20, side, side), np.uint8))
    refused(load_mnist_train(root), images, f"dimensions 20 x {side} x {side}", "N x 28 x 28")


def test_idx_wrong_number_of_dimensions(mnist):
    root, _, labels = mnist
    write_idx(labels, np.zeros((20, 1), np.uint8))
    refused(load_mnist_train(root), labels, "2 dimension(s), expected 1")


def test_idx_images_and_labels_disagree(mnist):
    root, _, labels = mnist
    write_idx(labels, np.zeros(19, np.uint8))
    refused(load_mnist_train(root), labels, "19 labels", "20 images")


def test_idx_directory_in_place_of_a_file(mnist):
    root, images, _ = mnist
    replace_with_folder(images)
    refused(load_mnist_train(root), images, "is a directory, expected a file")


def test_fashionmnist_is_read_by_the_same_checks(tmp_path):
    write_mnist_like(tmp_path, "FashionMNIST", n_train=3, n_test=4)
    labels = tmp_path / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte"
    write_idx(labels, np.array([0, 1, 99, 3], np.uint8))
    refused(lambda: load_dataset("fashionmnist", "test", tmp_path), labels, "label 99")


def test_mnist_download_uses_torchvision_only_to_fetch(tmp_path, monkeypatch):
    """download=True calls torchvision's downloader (here a stand-in writing the files);
    the files are then parsed, and checked, by symbnn's reader."""
    from torchvision import datasets

    def fake_download(self):
        write_mnist_like(tmp_path, "MNIST", n_train=6, n_test=2)
        write_idx(tmp_path / "MNIST" / "raw" / "t10k-images-idx3-ubyte", np.zeros((2, 8, 8)))

    monkeypatch.setattr(datasets.MNIST, "download", fake_download)
    assert len(load_dataset("mnist", "train", tmp_path, download=True)) == 6
    refused(lambda: load_dataset("mnist", "test", tmp_path, download=True), "2 x 8 x 8")


# --- CIFAR: python pickles, read without running code ---------------------------------------


def test_cifar_download_uses_torchvision_only_to_fetch(tmp_path, monkeypatch):
    from torchvision import datasets

    def fake_download(self):
        assert self.root == str(tmp_path)
        write_cifar10(tmp_path, n_train=5, n_test=3)

    monkeypatch.setattr(datasets.CIFAR10, "download", fake_download)
    assert len(load_dataset("cifar10", "test", tmp_path, download=True)) == 3


class SystemCall:
    """A pickle that, loaded by pickle.load, would run a shell command."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_a_pickle_that_would_run_a_command_is_refused(tmp_path):
    write_cifar10(tmp_path, n_train=5, n_test=2)
    marker = tmp_path / "pwned"
    batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    write_pickle(batch, {"data": SystemCall(f"touch {marker}"), "labels": [0]})
    assert b"system" in batch.read_bytes()
    message = refused(lambda: load_dataset("cifar10", "test", tmp_path), batch, "refused")
    assert re.search(r"(posix|nt|os)\.system", message)
    assert not marker.exists()  # nothing ran
    # the same for any other callable, at any depth, and through load_data_pickle directly
    write_pickle(batch, {"labels": [eval]}, protocol=4)
    refused(lambda: load_data_pickle(batch, "cifar10"), batch, "builtins.eval")
    assert not marker.exists()


def test_codecs_encode_only_as_protocol_2_writes_bytes(tmp_path):
    """protocol 2 writes bytes as _codecs.encode(text, 'latin1'); no other codec is run."""
    path = write_pickle(tmp_path / "p", {"b": b"\x00\xff"}, protocol=2)
    assert load_data_pickle(path, "cifar10") == {"b": b"\x00\xff"}
    path.write_bytes(path.read_bytes().replace(b"latin1", b"rot_13"))
    refused(lambda: load_data_pickle(path, "cifar10"), path, "not a readable pickle", "rot_13")


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_arrays_of_every_pickle_protocol_load(tmp_path, protocol):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    value = {"data": array, "labels": [1, 2, 3], "n": np.int64(7), "name": "x"}
    loaded = load_data_pickle(write_pickle(tmp_path / "p", value, protocol), "cifar10")
    assert np.array_equal(loaded["data"], array) and loaded["data"].dtype == np.uint8
    assert loaded["labels"] == [1, 2, 3] and loaded["n"] == 7 and loaded["name"] == "x"


def test_numpy_1_module_names_load(tmp_path):
    """The real CIFAR files were written by numpy 1 (numpy.core.multiarray._reconstruct)."""
    path = write_pickle(tmp_path / "p", {"data": np.arange(5, dtype=np.uint8)})
    content = path.read_bytes()
    assert b"numpy._core.multiarray" in content
    path.write_bytes(content.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    assert load_data_pickle(path, "cifar10")["data"].tolist() == [0, 1, 2, 3, 4]


def test_real_files_bytes_keys_are_read(tmp_path):
    """Python 2 pickles read with encoding='bytes' have bytes keys: both kinds are accepted."""
    write_cifar10(tmp_path, n_train=5, n_test=3)
    batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    rows = np.full((3, 3072), 7, np.uint8)
    write_pickle(batch, {b"batch_label": b"testing", b"data": rows, b"labels": [2, 0, 9]})
    data = load_dataset("cifar10", "test", tmp_path)
    assert data.labels.tolist() == [2, 0, 9] and data.images.eq(7).all()


@pytest.fixture
def cifar100(tmp_path):
    write_cifar100(tmp_path, n_train=6, n_test=4)
    return tmp_path, tmp_path / "cifar-100-python" / "test"


def load_cifar100_test(root):
    return lambda: load_dataset("cifar100", "test", root)


def test_cifar_truncated_random_and_empty_pickles(cifar100):
    root, batch = cifar100
    truncate(batch, len(batch.read_bytes()) // 2)
    refused(load_cifar100_test(root), batch, "not a readable pickle")
    random_bytes(batch, 4000)
    refused(load_cifar100_test(root), batch, "not a readable pickle")
    batch.write_bytes(b"")
    refused(load_cifar100_test(root), batch, "empty file")


def test_cifar_pickle_of_a_list(cifar100):
    root, batch = cifar100
    write_pickle(batch, [1, 2, 3])
    refused(load_cifar100_test(root), batch, "holds a pickled list, expected a dict")


def test_cifar_pickle_without_fine_labels(cifar100):
    root, batch = cifar100
    write_pickle(batch, {"data": np.zeros((4, 3072), np.uint8), "coarse_labels": [0] * 4})
    refused(load_cifar100_test(root), batch, "no 'fine_labels' entry", "coarse_labels")


def test_cifar_label_outside_the_classes(cifar100):
    root, batch = cifar100
    write_pickle(batch, {"data": np.zeros((4, 3072), np.uint8), "fine_labels": [0, 150, 3, 4]})
    refused(load_cifar100_test(root), batch, "label 150 at index 1", "outside 0..99")


@pytest.mark.parametrize(
    "data,fragment",
    [
        (np.zeros((4, 3072), np.float32), "float32"),
        (np.zeros((4, 1024), np.uint8), "1024 values"),
        ([[0] * 3072] * 4, "got list"),
    ],
)
def test_cifar_data_of_the_wrong_type_or_shape(cifar100, data, fragment):
    root, batch = cifar100
    write_pickle(batch, {"data": data, "fine_labels": [0, 1, 2, 3]})
    refused(load_cifar100_test(root), batch, "'data'", fragment)


def test_cifar_label_count_or_kind(cifar100):
    root, batch = cifar100
    write_pickle(batch, {"data": np.zeros((4, 3072), np.uint8), "fine_labels": [0, 1, 2]})
    refused(load_cifar100_test(root), batch, "3 labels", "4 images")
    write_pickle(batch, {"data": np.zeros((4, 3072), np.uint8), "fine_labels": ["a"] * 4})
    refused(load_cifar100_test(root), batch, "not a list of integer labels")


def test_cifar100_meta_of_ten_classes(cifar100):
    """A meta file listing 10 classes (with labels up to 99) was accepted silently."""
    root, _ = cifar100
    meta = root / "cifar-100-python" / "meta"
    write_pickle(meta, {"fine_label_names": [f"c{i}" for i in range(10)]})
    refused(load_cifar100_test(root), meta, "lists 10 classes; cifar100 has 100")


def test_cifar10_labels_beyond_its_ten_classes(tmp_path):
    write_cifar10(tmp_path, n_train=5, n_test=2)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    write_pickle(batch, {"data": np.zeros((2, 3072), np.uint8), "labels": [3, 99]})
    refused(lambda: load_dataset("cifar10", "train", tmp_path), batch, "label 99", "0..9")


def test_cifar_directory_in_place_of_a_batch(cifar100):
    root, batch = cifar100
    replace_with_folder(batch)
    refused(load_cifar100_test(root), batch, "is a directory")


# --- SVHN: .mat files -------------------------------------------------------------------------


def test_svhn_damaged_files(tmp_path):
    path = tmp_path / "test_32x32.mat"
    write_svhn(tmp_path, "test", 5)
    truncate(path, 300)
    refused(lambda: load_dataset("svhn", "test", tmp_path), path, "not a readable MATLAB file")
    random_bytes(path, 2000)
    refused(lambda: load_dataset("svhn", "test", tmp_path), path, "not a readable MATLAB file")
    replace_with_folder(path)
    refused(lambda: load_dataset("svhn", "test", tmp_path), path, "is a directory")


@pytest.mark.parametrize(
    "x,y,fragment",
    [
        (np.zeros((28, 28, 3, 4), np.uint8), np.ones((4, 1), np.uint8), "(32, 32, 3, N)"),
        (np.zeros((32, 32, 3, 4), np.float64), np.ones((4, 1), np.uint8), "'X' must be uint8"),
        (np.zeros((32, 32, 3, 4), np.uint8), np.ones((3, 1), np.uint8), "shape (4, 1)"),
        (np.zeros((32, 32, 3, 4), np.uint8), np.array([[1], [0], [2], [3]]), "label 0 at index 1"),
        (np.zeros((32, 32, 3, 4), np.uint8), np.array([[1], [11], [2], [3]]), "outside 1..10"),
    ],
)
def test_svhn_arrays_checked(tmp_path, x, y, fragment):
    path = write_svhn_arrays(tmp_path, "test", x, y)
    refused(lambda: load_dataset("svhn", "test", tmp_path), path, fragment)


def test_svhn_without_y(tmp_path):
    from scipy.io import savemat

    savemat(tmp_path / "train_32x32.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8)})
    refused(lambda: load_dataset("svhn", "train", tmp_path), "train_32x32.mat", "no 'y' array")


# --- TinyImageNet and Textures: JPEG folders ---------------------------------------------------


@pytest.fixture
def tiny(tmp_path):
    return tmp_path, write_tinyimagenet(tmp_path, ["n01", "n02"], per_class=2, val_labels=[0, 1])


def test_tinyimagenet_folder_where_a_file_should_be_and_back(tiny):
    root, folder = tiny
    replace_with_folder(folder / "wnids.txt")
    refused(lambda: load_dataset("tinyimagenet", "train", folder), "wnids.txt", "is a directory")
    (folder / "wnids.txt").rmdir()
    (folder / "wnids.txt").write_text("n01\nn02\n")
    images = folder / "train" / "n02" / "images"
    for file in images.iterdir():
        file.unlink()
    images.rmdir()
    images.write_text("not a folder")
    refused(lambda: load_dataset("tinyimagenet", "train", root), images, "is a file")


def test_tinyimagenet_undecodable_images(tiny):
    root, folder = tiny
    broken = folder / "train" / "n01" / "images" / "n01_1.JPEG"
    random_bytes(broken, 500)
    refused(lambda: load_dataset("tinyimagenet", "train", root), broken, "cannot decode")
    cut = folder / "val" / "images" / "val_1.JPEG"
    truncate(cut, 200)
    refused(lambda: load_dataset("tinyimagenet", "test", root), cut, "cannot decode")


def test_tinyimagenet_labels_naming_unknown_classes(tiny):
    root, folder = tiny
    annotations = folder / "val" / "val_annotations.txt"
    annotations.write_text("val_0.JPEG\tn01\t0\t0\t1\t1\nval_1.JPEG\tn77\t0\t0\t1\t1\n")
    refused(lambda: load_dataset("tinyimagenet", "test", root), f"{annotations}:2", "'n77'")
    annotations.write_text("val_0.JPEG n01\n")
    refused(lambda: load_dataset("tinyimagenet", "test", root), f"{annotations}:1", "expected")
    annotations.write_bytes(b"\xff\xfe\x00binary")
    refused(lambda: load_dataset("tinyimagenet", "test", root), annotations, "not a text file")


@pytest.fixture
def dtd(tmp_path):
    write_dtd(tmp_path, ["banded", "dotted"], per_split=2)
    return tmp_path, tmp_path / "dtd" / "dtd"


def test_textures_label_file_naming_an_unknown_class(dtd):
    root, folder = dtd
    listing = folder / "labels" / "test1.txt"
    listing.write_text(listing.read_text() + "striped/striped_0001.jpg\n")
    refused(lambda: load_dataset("textures", "test", root), f"{listing}:5", "'striped'")
    listing.write_text("banded\n")
    refused(lambda: load_dataset("textures", "test", root), f"{listing}:1", "<class>/<file>")


def test_textures_undecodable_image_and_folder_in_place_of_the_list(dtd):
    root, folder = dtd
    listing = folder / "labels" / "test1.txt"
    image = folder / "images" / listing.read_text().splitlines()[-1]
    random_bytes(image, 300)
    refused(lambda: load_dataset("textures", "test", root), image, "cannot decode")
    replace_with_folder(folder / "labels" / "train1.txt")
    refused(lambda: load_dataset("textures", "train", root), "train1.txt", "is a directory")


def test_textures_missing_image_is_named(dtd):
    root, folder = dtd
    listing = folder / "labels" / "test1.txt"
    listing.write_text("banded/nothing_here.jpg\n")
    with pytest.raises(FileNotFoundError, match="nothing_here.jpg"):
        load_dataset("textures", "test", root)


# --- what every loader's result must be ---------------------------------------------------------


def image_data(n=6, num_classes=3, shape=(1, 28, 28), **changes):
    fields = dict(
        images=torch.zeros((n, *shape), dtype=torch.uint8),
        labels=torch.arange(n) % num_classes,
        num_classes=num_classes,
        mean=(0.5,) * shape[0],
        std=(0.25,) * shape[0],
        name="custom",
    )
    fields.update(changes)
    return ImageData(**fields)


@pytest.mark.parametrize(
    "changes,fragment",
    [
        ({"n": 0}, "no images"),
        ({"num_classes": 1}, "1 class(es)"),
        ({"labels": torch.tensor([0, 1, 2, 3, 1, 0])}, "label 3 at index 3"),
        ({"labels": torch.tensor([0, -1, 2, 0, 1, 0])}, "label -1"),
        ({"std": (0.0,)}, "std (0.0,)"),
        ({"mean": (float("nan"),)}, "not finite"),
        ({"shape": (1, 0, 28)}, "no pixels"),
    ],
)
def test_check_image_data_refuses(changes, fragment):
    n = changes.pop("n", 6)
    shape = changes.pop("shape", (1, 28, 28))
    data = image_data(n=n, shape=shape, **changes)
    refused(lambda: check_image_data(data, "dataset 'custom', split 'train'"), "'custom'", fragment)


def test_check_image_data_layout_and_unlabelled_sets():
    refused(lambda: check_image_data("images", "dataset 'x'"), "returned str, not ImageData")
    data = image_data()
    data.images = data.images.to(torch.float32)  # changed after construction
    refused(lambda: check_image_data(data, "dataset 'x'"), "'x'", "must be uint8")
    assert check_image_data(image_data(std=(np.float32(0.3),)), "x").std == (np.float32(0.3),)
    ood = image_data(num_classes=1, labels=torch.zeros(6, dtype=torch.int64))
    assert check_image_data(ood, "ood", labelled=False) is ood
    refused(lambda: check_image_data(image_data(), "ood", labelled=False), "num_classes 1")
    with pytest.raises(DatasetError, match="images must be a torch.Tensor"):
        image_data(images=np.zeros((6, 1, 28, 28), np.uint8))


def test_every_registered_loader_is_checked(monkeypatch):
    """A loader of any module goes through the same checks (a user's set, later)."""
    import symbnn.data as data_module

    monkeypatch.setitem(data_module._LOADERS, "custom", "test_dataset_validation:bad_loader")
    refused(lambda: load_dataset("custom", "test"), "dataset 'custom', split 'test'", "label 5")


def bad_loader(split, root):
    return image_data(labels=torch.tensor([0, 1, 2, 5, 1, 0]))


# --- stratified limits --------------------------------------------------------------------------


def test_class_quotas_are_proportional_and_exact():
    assert class_quotas(np.array([400] * 10), 256).tolist() == [26] * 6 + [25] * 4
    assert class_quotas(np.array([50, 30, 20]), 10).tolist() == [5, 3, 2]
    assert class_quotas(np.array([1, 1, 1]), 2).tolist() == [1, 1, 0]  # ties: lower class first
    rng = np.random.default_rng(0)
    for _ in range(200):
        counts = rng.integers(0, 40, size=rng.integers(1, 12))
        if counts.sum() == 0:
            continue
        n = int(rng.integers(0, counts.sum() + 1))
        quotas = class_quotas(counts, n)
        assert quotas.sum() == n and (quotas <= counts).all() and (quotas >= 0).all()
        exact = counts * n / counts.sum()
        assert (np.abs(quotas - exact) < 1).all()  # each within one of its exact share


def test_stratified_indices_keep_file_order_and_first_images_of_each_class():
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2])
    kept = stratified_indices(labels, 6)
    assert kept.tolist() == [0, 1, 4, 6, 7, 8]  # 2, 1, 3 of 4, 2, 6
    assert torch.equal(kept, stratified_indices(labels, 6))  # deterministic
    assert stratified_indices(labels, 50).tolist() == list(range(12))


def test_train_limit_of_the_class_sorted_digits_keeps_every_class():
    """The packaged digits are sorted by class: a plain 'first N' kept only zeros."""
    data = Data.parse(
        {"train": "digits", "ood": "natural_patches", "train_limit": 256, "test_limit": 200},
        "data",
    )
    train, test = load_in_distribution(data, "data")
    assert len(train) == 256 and len(test) == 200
    assert torch.bincount(train.labels, minlength=10).tolist() == [26] * 6 + [25] * 4
    assert torch.bincount(test.labels, minlength=10).tolist() == [20] * 10
    full = load_dataset("digits", "train")
    kept = stratified_indices(full.labels, 256)
    assert torch.equal(train.images, full.images[kept])
    assert bool((kept[1:] > kept[:-1]).all())
    again, _ = load_in_distribution(data, "data")
    assert torch.equal(again.images, train.images)


# --- the images must fit the experiment's model ---------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "optunet"},
        {"name": "optunet", "kernel1": 3, "kernel2": 3, "pool": 2},
        {"name": "optunet", "kernel1": 5, "kernel2": 4, "pool": 4, "in_channels": 3},
    ],
)
def test_optunet_minimum_size_is_what_its_stack_consumes(spec):
    """The model runs on images of the minimum size and fails on one pixel less."""
    needs = input_requirements(spec)
    model = build_model(spec)
    channels = spec.get("in_channels", 1)
    model(torch.zeros(2, channels, needs.min_size, needs.min_size))
    with pytest.raises(RuntimeError):
        model(torch.zeros(2, channels, needs.min_size - 1, needs.min_size - 1))
    assert input_requirements({"name": "optunet"}).min_size == 18


def test_fit_checks_name_the_dataset_shape_and_what_the_model_takes():
    eight = image_data(num_classes=10, shape=(1, 8, 8))
    message = refused(
        lambda: check_fits_model(eight, {"name": "optunet"}, "data.train"),
        "'custom'",
        "(1, 8, 8)",
        "at least 18 x 18",
    )
    assert message.startswith("data.train: ")
    digits = image_data(num_classes=10)
    check_fits_model(digits, {"name": "optunet"}, "data.train")
    mlp = {"name": "mlp", "widths": [1024, 16, 10]}
    refused(lambda: check_fits_model(digits, mlp, "x"), "1024 input features", "= 784")
    refused(
        lambda: check_fits_model(digits, {"name": "resnet18", "num_classes": 10}, "x"), "3 input"
    )
    refused(lambda: check_fits_model(digits, {"name": "resnet20_frn_silu"}, "x"), "3 input")
    refused(
        lambda: check_fits_model(digits, {"name": "optunet", "num_classes": 7}, "x"), "7 classes"
    )
    check_fits_model(digits, {"name": "optunet", "num_classes": 7}, "x", classes=False)
    imported = {"name": "user_models:SmallCNN", "input_shape": [3, 32, 32]}
    refused(lambda: check_fits_model(digits, imported, "x"), "(3, 32, 32)", "input_shape")
    check_fits_model(digits, {"name": "user_models:SmallCNN"}, "x")  # no shape given: no check


def test_every_shipped_model_has_input_requirements():
    from symbnn.models import MODEL_NAMES

    for name in MODEL_NAMES:
        spec = {"name": name, "widths": [784, 10]} if name == "mlp" else {"name": name}
        assert input_requirements(spec).outputs is not None, name


def test_training_refuses_a_set_the_model_cannot_take_before_training(tmp_path):
    from symbnn.posterior import train_shard
    from symbnn.settings import Recipe

    data = Data.parse({"train": "digits", "ood": "natural_patches", "train_limit": 20}, "data")
    recipe = Recipe(epochs=1, batch_size=10, lr=0.1)
    out = tmp_path / "shard.zarr"
    for model, fragment in (
        ({"name": "optunet", "pool": 6}, "at least 33 x 33"),  # 6 * 5 + 4 - 1
        ({"name": "optunet", "in_channels": 3}, "3 input channel(s)"),
    ):
        refused(
            lambda model=model: train_shard(out, "e", data, model, recipe, [0]),
            "data.train ('digits')",
            "'digits-train'",
            "(1, 28, 28)",
            fragment,
        )
        assert not out.exists()


# --- one line, no traceback: on the command line and in a workflow job ------------------------


@pytest.mark.slow
def test_cli_prints_a_damaged_dataset_as_one_line(optunet_store, tmp_path):
    write_mnist_like(tmp_path / "data", "MNIST", n_train=10, n_test=10)
    images = tmp_path / "data" / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    truncate(images, 100)
    store, _ = optunet_store(n=2, attrs={"data": {"train": "mnist", "ood": "fashionmnist"}})
    command = [sys.executable, "-m", "symbnn.cli", "barrier", str(store.path), str(store.path)]
    result = subprocess.run(
        [*command, "--row-b", "1", "--data-root", str(tmp_path / "data")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(images) in lines[0] and "truncated" in lines[0], lines


@pytest.mark.slow
def test_train_shard_job_fails_with_one_line(tmp_path):
    """A damaged MNIST under data_root: the train_shard job of a real Snakemake run exits
    non-zero with one line naming the file in its log, and no traceback."""
    write_mnist_like(tmp_path / "data", "MNIST", n_train=10, n_test=10)
    labels = tmp_path / "data" / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    write_idx(labels, np.full(10, 12, np.uint8))
    experiment = tiny_experiment(n_samples=2)
    experiment["data"] = {"train": "mnist", "ood": "fashionmnist"}
    config = workflow_config({"bad": experiment}, data_root=str(tmp_path / "data"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "results/bad/posterior/shards/000.zarr", check=False)
    assert result.returncode != 0
    log = (tmp_path / "results" / "bad" / "logs" / "train_shard" / "000.log").read_text()
    assert "Traceback" not in log + result.stderr
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(labels) in errors[0] and "label 12" in errors[0], log
    assert not (tmp_path / "results" / "bad" / "posterior" / "shards" / "000.zarr").exists()
