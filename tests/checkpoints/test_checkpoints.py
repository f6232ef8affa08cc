"""Importing the authors' released networks (symbnn.checkpoints), on bundles built exactly like
the released ones: a tgz of float16 safetensors files inside a folder named like the bundle,
networks made with TorchUncertainty's own classes where it is installed."""

import gzip
import sys
import tarfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from symbnn.checkpoints import CheckpointError, import_checkpoints, release, source_files
from symbnn.checkpoints.bundles import as_released, write_bundle
from symbnn.checkpoints.safetensors_io import parse
from symbnn.cli import main
from symbnn.models import OptuNet, build_model
from symbnn.store import open_store

# OptuMNIST-v1's parameters as TorchUncertainty names and shapes them (the dataset's card).
OPTUMNIST_V1 = {
    "conv1.weight": (2, 1, 4, 4),
    "conv2.weight": (10, 1, 5, 5),
    "fc1.weight": (3, 10),
    "fc1.bias": (3,),
    "fc2.weight": (10, 3),
    "fc2.bias": (10,),
}
# TorchUncertainty 0.13's ResNet names where they differ from torchvision's, read from
# torch_uncertainty/models/classification/resnet/std.py (`shortcut`, `linear`).
TU_RESNET_NAMES = {
    "layer2.0.downsample.0.weight": "layer2.0.shortcut.0.weight",
    "layer2.0.downsample.1.running_var": "layer2.0.shortcut.1.running_var",
    "layer4.0.downsample.1.num_batches_tracked": "layer4.0.shortcut.1.num_batches_tracked",
    "fc.weight": "linear.weight",
    "fc.bias": "linear.bias",
    "layer1.1.bn2.weight": "layer1.1.bn2.weight",
    "conv1.weight": "conv1.weight",
}


def optunets(n, seed=0):
    """n OptuMNIST-v1 networks as the release holds them (float16), named model_<i>."""
    torch.manual_seed(seed)
    return [(f"model_{i}", as_released(OptuNet().state_dict())) for i in range(n)]


def optunet_bundle(folder, first=0, n=8, seed=0):
    nets = optunets(n, seed)
    path = write_bundle(Path(folder) / f"mnist-optunet-{first}-{first + n - 1}.tgz", nets)
    return path, nets


def logits(spec, state, images):
    model = build_model(spec)
    model.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in state.items()})
    model.eval()
    with torch.no_grad():
        return model(images)


def no_store_left(out: Path):
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.tmp-*")), "a staging folder was left"


def test_symbnn_optunet_is_optumnist_v1():
    shapes = {name: tuple(t.shape) for name, t in OptuNet().state_dict().items()}
    assert shapes == OPTUMNIST_V1
    assert sum(np.prod(s) for s in shapes.values()) == 355


def test_resnet_names_map_to_torch_uncertainty_names():
    resnet = release("cifar100-resnet18")
    for ours, theirs in TU_RESNET_NAMES.items():
        assert resnet.source_name(ours) == theirs


def test_imported_optunets_compute_the_original_logits(tmp_path):
    bundle, nets = optunet_bundle(tmp_path, n=8)
    store = import_checkpoints(bundle, tmp_path / "out.zarr", "mnist-optunet")
    assert store.n_samples == 8
    assert store.attrs["architecture"] == {"name": "optunet"}
    assert store.attrs["source"]["stored_dtype"] == "float32"
    assert store.attrs["source"]["source_dtype"] == "float16"
    assert store.info("seed").tolist() == list(range(8))
    assert source_files(store, [3]) == [
        "mnist-optunet-0-7.tgz:mnist-optunet-0-7/model_3.safetensors"
    ]
    images = torch.rand(5, 1, 28, 28)
    for row in (0, 7):
        expected = logits(
            {"name": "optunet"}, {k: v.astype(np.float32) for k, v in nets[row][1].items()}, images
        )
        imported = logits({"name": "optunet"}, store.state_dict(row), images)
        assert torch.equal(imported, expected)
    store.validate()


def test_float16_is_kept_when_asked(tmp_path):
    bundle, nets = optunet_bundle(tmp_path, n=3)
    store = import_checkpoints(bundle, tmp_path / "half.zarr", "mnist-optunet", dtype="float16")
    assert store.read("conv2.weight").dtype == np.float16
    assert store.attrs["source"]["conversion"] == "none"
    assert np.array_equal(store.read("conv2.weight", 2), nets[2][1]["conv2.weight"])


def test_a_folder_of_bundles_and_an_untarred_bundle_give_the_same_networks(tmp_path):
    folder = tmp_path / "bundles"
    folder.mkdir()
    _, first_nets = optunet_bundle(folder, first=0, n=5, seed=0)
    _, second_nets = optunet_bundle(folder, first=5, n=5, seed=1)
    # a range across the two bundles, by release index
    store = import_checkpoints(folder, tmp_path / "range.zarr", "mnist-optunet", first=3, count=4)
    assert store.info("seed").tolist() == [3, 4, 5, 6]
    assert np.array_equal(
        store.read("fc1.weight", 2), second_nets[0][1]["fc1.weight"].astype(np.float32)
    )
    assert source_files(store)[1].startswith("mnist-optunet-0-4.tgz:")
    # the same bundle untarred: files in natural order (model_2 before model_10)
    untarred = tmp_path / "untarred"
    with tarfile.open(folder / "mnist-optunet-5-9.tgz") as tar:
        tar.extractall(untarred, filter="data")
    out = import_checkpoints(untarred / "mnist-optunet-5-9", tmp_path / "u.zarr", "mnist-optunet")
    assert out.info("seed").tolist() == [5, 6, 7, 8, 9]
    assert np.array_equal(
        out.read("conv1.weight"),
        import_checkpoints(
            folder / "mnist-optunet-5-9.tgz", tmp_path / "t.zarr", "mnist-optunet"
        ).read("conv1.weight"),
    )


def test_a_bundle_outside_the_range_is_not_opened(tmp_path):
    folder = tmp_path / "bundles"
    folder.mkdir()
    optunet_bundle(folder, first=0, n=4)
    optunet_bundle(folder, first=4, n=4, seed=1)
    (folder / "mnist-optunet-0-3.tgz").write_bytes(b"not a gzip file")  # never read
    store = import_checkpoints(folder, tmp_path / "out.zarr", "mnist-optunet", first=4)
    assert store.info("seed").tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_bundle_is_an_error_and_leaves_no_store(tmp_path, damage):
    bundle, _ = optunet_bundle(tmp_path, n=64)
    data = bytearray(bundle.read_bytes())
    if damage == "truncate":  # an interrupted download
        data = data[: len(data) // 2]
    else:  # one bit flipped in the compressed stream
        data[len(data) // 2] ^= 0x10
    bundle.write_bytes(bytes(data))
    out = tmp_path / "out.zarr"
    with pytest.raises(
        CheckpointError, match=r"mnist-optunet-0-63\.tgz.*(truncated or corrupt|safetensors)"
    ):
        import_checkpoints(bundle, out, "mnist-optunet")
    no_store_left(out)


def test_a_damaged_file_inside_a_bundle_is_named(tmp_path):
    nets = [(name, tensors) for name, tensors in optunets(3)]
    bundle = write_bundle(tmp_path / "mnist-optunet-0-2.tgz", nets)
    # rewrite the bundle with model_1's file cut short
    members = []
    with tarfile.open(bundle) as tar:
        for member in tar:
            members.append((member, tar.extractfile(member).read()))
    with tarfile.open(bundle, "w:gz") as tar:
        for member, data in members:
            if member.name.endswith("model_1.safetensors"):
                data = data[:100]
                member.size = len(data)
            tar.addfile(member, __import__("io").BytesIO(data))
    out = tmp_path / "out.zarr"
    with pytest.raises(CheckpointError, match=r"model_1\.safetensors: not a readable safetensors"):
        import_checkpoints(bundle, out, "mnist-optunet")
    no_store_left(out)


def test_unknown_missing_and_misshapen_keys_are_listed(tmp_path):
    good = optunets(1)[0][1]
    renamed = {("fc3.weight" if k == "fc2.weight" else k): v for k, v in good.items()}
    bundle = write_bundle(tmp_path / "a" / "mnist-optunet-0-0.tgz", [("m", renamed)])
    with pytest.raises(
        CheckpointError, match=r"unknown keys fc3\.weight; missing keys fc2\.weight"
    ):
        import_checkpoints(bundle, tmp_path / "a.zarr", "mnist-optunet")
    misshapen = {**good, "fc1.bias": np.zeros(4, np.float16)}
    bundle = write_bundle(tmp_path / "b" / "mnist-optunet-0-0.tgz", [("m", misshapen)])
    with pytest.raises(CheckpointError, match=r"fc1\.bias has shape \(4,\).*expects \(3,\)"):
        import_checkpoints(bundle, tmp_path / "b.zarr", "mnist-optunet")
    nan = {**good, "fc1.bias": np.full(3, np.nan, np.float16)}
    bundle = write_bundle(tmp_path / "c" / "mnist-optunet-0-0.tgz", [("m", nan)])
    with pytest.raises(CheckpointError, match=r"m\.safetensors: fc1\.bias holds NaN"):
        import_checkpoints(bundle, tmp_path / "c.zarr", "mnist-optunet")
    for name in ("a.zarr", "b.zarr", "c.zarr"):
        no_store_left(tmp_path / name)


def test_a_late_bad_network_leaves_no_store(tmp_path):
    nets = optunets(5)
    nets[4] = ("model_4", {**nets[4][1], "extra.weight": np.zeros(2, np.float16)})
    bundle = write_bundle(tmp_path / "mnist-optunet-0-4.tgz", nets)
    out = tmp_path / "out.zarr"
    with pytest.raises(CheckpointError, match=r"model_4\.safetensors.*unknown keys extra\.weight"):
        import_checkpoints(bundle, out, "mnist-optunet")
    no_store_left(out)


def test_asking_for_more_networks_than_the_source_holds(tmp_path):
    bundle, _ = optunet_bundle(tmp_path, n=4)
    out = tmp_path / "out.zarr"
    with pytest.raises(
        CheckpointError, match=r"asked for 10 networks from release index 2, found 2"
    ):
        import_checkpoints(bundle, out, "mnist-optunet", first=2, count=10)
    no_store_left(out)
    partial = tmp_path / "mnist-optunet-0-3.tgz.part"
    partial.write_bytes(bundle.read_bytes())
    with pytest.raises(CheckpointError, match=r"not a bundle"):
        import_checkpoints(partial, out, "mnist-optunet")
    with pytest.raises(CheckpointError, match=r"unknown released setting 'mnist'"):
        import_checkpoints(bundle, out, "mnist")


def test_gzip_checksum_is_checked(tmp_path):
    """A bundle whose gzip trailer is damaged (the tar inside intact) is refused."""
    bundle, _ = optunet_bundle(tmp_path, n=4)
    data = bytearray(bundle.read_bytes())
    data[-8] ^= 0xFF  # the CRC-32 of the uncompressed stream
    bundle.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"truncated or corrupt"):
        import_checkpoints(bundle, tmp_path / "out.zarr", "mnist-optunet")
    with gzip.open(bundle) as stream, pytest.raises(gzip.BadGzipFile):
        stream.read()


def tu_resnet(num_classes, style, seed):
    """A TorchUncertainty ResNet-18 (its own class) with random weights and BatchNorm
    statistics, in eval mode."""
    from torch_uncertainty.models.classification.resnet import resnet

    torch.manual_seed(seed)
    model = resnet(in_channels=3, num_classes=num_classes, arch=18, style=style)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.normal_(1, 0.1)
                module.bias.normal_(0, 0.1)
    return model.eval()


@pytest.mark.parametrize(
    ("setting", "num_classes", "style", "stem"),
    [
        ("cifar10-resnet18", 10, "cifar", None),
        ("tiny-imagenet-resnet18", 200, "imagenet", "imagenet"),
    ],
)
def test_torch_uncertainty_resnets_compute_the_same_logits(
    tmp_path, setting, num_classes, style, stem
):
    pytest.importorskip("torch_uncertainty", reason="TorchUncertainty is not installed")
    models = [tu_resnet(num_classes, style, seed) for seed in (0, 1)]
    nets = [(f"net{i}", as_released(m.state_dict())) for i, m in enumerate(models)]
    bundle = write_bundle(tmp_path / f"{setting}-0-1.tgz", nets, compresslevel=1)
    store = import_checkpoints(bundle, tmp_path / "out.zarr", setting)
    spec = {"name": "resnet18", "num_classes": num_classes, **({"stem": stem} if stem else {})}
    assert store.attrs["architecture"] == spec
    images = torch.rand(2, 3, 32, 32)
    for row, model in enumerate(models):
        model.load_state_dict(
            {k: torch.as_tensor(v).to(model.state_dict()[k].dtype) for k, v in nets[row][1].items()}
        )
        with torch.no_grad():
            expected = model(images)
        imported = logits(spec, store.state_dict(row), images)
        torch.testing.assert_close(imported, expected, rtol=1e-5, atol=1e-5)


def test_resnet_bundles_without_step_counters_import(tmp_path):
    """BatchNorm's num_batches_tracked carries no weight: a file without it still imports."""
    model = build_model({"name": "resnet18", "num_classes": 100})
    state = {release("cifar100-resnet18").source_name(k): v for k, v in model.state_dict().items()}
    state = {k: v for k, v in as_released(state).items() if not k.endswith("num_batches_tracked")}
    bundle = write_bundle(tmp_path / "cifar100-resnet18-0-0.tgz", [("n", state)], compresslevel=1)
    store = import_checkpoints(bundle, tmp_path / "out.zarr", "cifar100-resnet18", dtype="float16")
    assert store.read("layer2.0.downsample.1.num_batches_tracked").tolist() == [0]
    assert np.array_equal(store.read("fc.weight", 0), state["linear.weight"])


def test_parse_names_what_is_wrong():
    with pytest.raises(CheckpointError, match=r"x\.safetensors: not a readable"):
        parse(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json", "x.safetensors")


def test_cli_imports_and_reports_errors_in_one_line(tmp_path, capsys):
    bundle, _ = optunet_bundle(tmp_path, n=6)
    out = tmp_path / "cli.zarr"
    code = main(
        [
            "import-checkpoints",
            str(bundle),
            str(out),
            "--setting",
            "mnist-optunet",
            "--first",
            "1",
            "--count",
            "3",
        ]
    )
    assert code == 0
    assert "3 mnist-optunet networks (release indices 1..3)" in capsys.readouterr().out
    assert open_store(out).info("seed").tolist() == [1, 2, 3]
    code = main(
        [
            "import-checkpoints",
            str(bundle),
            str(tmp_path / "x.zarr"),
            "--setting",
            "cifar100-resnet18",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("symbnn import-checkpoints: error: ")
    assert "conv1.weight has a (4, 4) kernel" in err[0]


def test_download_fetches_only_the_bundles_in_range(tmp_path, monkeypatch):
    """huggingface_hub is imported only when a download is asked for; a stand-in records what
    is fetched."""
    hub_files = tmp_path / "hub"
    hub_files.mkdir()
    optunet_bundle(hub_files, first=0, n=4)
    optunet_bundle(hub_files, first=4, n=4, seed=1)
    fetched = []

    def hf_hub_download(repo, name, repo_type, local_dir):
        assert (repo, repo_type) == ("torch-uncertainty/Checkpoints", "dataset")
        fetched.append(name)
        target = Path(local_dir) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((hub_files / Path(name).name).read_bytes())
        return str(target)

    fake = types.SimpleNamespace(
        hf_hub_download=hf_hub_download,
        list_repo_files=lambda repo, repo_type: [
            "README.md",
            "scripts/mnist-optunet/load.py",
            "models/mnist-optunet/mnist-optunet-0-3.tgz",
            "models/mnist-optunet/mnist-optunet-4-7.tgz",
            "models/cifar10-resnet18/cifar10-resnet18-0-1023.tgz",
        ],
    )
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    out = tmp_path / "out.zarr"
    code = main(
        [
            "import-checkpoints",
            str(tmp_path / "dl"),
            str(out),
            "--setting",
            "mnist-optunet",
            "--first",
            "5",
            "--download",
        ]
    )
    assert code == 0
    assert fetched == ["models/mnist-optunet/mnist-optunet-4-7.tgz"]
    assert open_store(out).info("seed").tolist() == [5, 6, 7]


def test_the_store_says_what_was_done_to_the_released_floats(tmp_path):
    """The conversion is recorded from the dtypes the files hold, not assumed."""
    torch.manual_seed(0)
    single = {k: v.numpy() for k, v in OptuNet().state_dict().items()}  # float32 files
    bundle = write_bundle(tmp_path / "mnist-optunet-0-0.tgz", [("m", single)])
    store = import_checkpoints(bundle, tmp_path / "half.zarr", "mnist-optunet", dtype="float16")
    assert store.attrs["source"]["source_dtype"] == "float32"
    assert store.attrs["source"]["conversion"] == "float32 rounded to float16"
    store = import_checkpoints(bundle, tmp_path / "full.zarr", "mnist-optunet")
    assert store.attrs["source"]["conversion"] == "none"


def test_stacked_accuracies_are_those_of_each_network():
    """The import measures thousands of OptuNets at once; each accuracy is the network's own."""
    from conftest import random_images

    from symbnn.checkpoints.experiment import looped_accuracies, stacked_accuracies

    torch.manual_seed(0)
    spec = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}
    nets = [build_model(spec).state_dict() for _ in range(6)]
    stacked = {k: torch.stack([n[k] for n in nets]) for k in nets[0]}
    data = random_images(250, seed=1)
    model = build_model(spec)
    fast = stacked_accuracies(model, stacked, data, "cpu", images=64)
    slow = looped_accuracies(model, stacked, data, "cpu")
    # the same numbers, up to one image whose top two logits tie to rounding
    assert np.abs(fast - slow).max() <= 1 / 250 and len(set(fast.tolist())) > 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_finiteness_check_finds_every_non_finite_value(dtype):
    from symbnn.checkpoints.mapping import all_finite

    values = np.linspace(-1, 1, 1001).astype(dtype)
    values[3] = np.finfo(dtype).max  # the largest finite value passes
    assert all_finite(values)
    for bad in (np.inf, -np.inf, np.nan):
        damaged = values.copy()
        damaged[500] = bad
        assert not all_finite(damaged)
        assert not all_finite(damaged.reshape(7, 11, 13)[:, 1::2])  # not contiguous, holds it
