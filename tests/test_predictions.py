"""Prediction stores: `symbnn store validate` (and `make verify`) read them whole and catch a
truncated chunk or NaN probabilities, as they do for weight stores."""

import numpy as np
import torch
import zarr

from symbnn.cli import main
from symbnn.data.core import ImageData
from symbnn.predictions import is_predictions, write_predictions


def images(n, seed):
    g = torch.Generator().manual_seed(seed)
    return ImageData(
        torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8),
        torch.arange(n) % 10,
        10,
        (0.5,),
        (0.25,),
        f"set{seed}",
    )


def predictions(optunet_store, tmp_path):
    store, _ = optunet_store("samples.zarr", n=3)
    return write_predictions(
        store.path, tmp_path / "pred.zarr", images(20, 0), images(8, 1), batch=7
    ), store


def test_validate_accepts_a_whole_store_and_tells_the_kinds_apart(optunet_store, tmp_path, capsys):
    path, store = predictions(optunet_store, tmp_path)
    assert is_predictions(path) and not is_predictions(store.path)
    assert main(["store", "validate", str(path)]) == 0
    assert main(["store", "validate", str(store.path)]) == 0
    assert capsys.readouterr().out.count("OK:") == 2


def test_truncated_chunk_is_reported(optunet_store, tmp_path, capsys):
    path, _ = predictions(optunet_store, tmp_path)
    chunk = max(
        (p for p in (path / "test").rglob("*") if p.is_file() and p.name != "zarr.json"),
        key=lambda p: p.stat().st_size,
    )
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])
    assert main(["store", "validate", str(path)]) == 1
    assert "INVALID" in capsys.readouterr().out


def test_nan_probabilities_are_reported(optunet_store, tmp_path, capsys):
    path, _ = predictions(optunet_store, tmp_path)
    array = zarr.open_group(path, mode="r+")["ood"]
    block = array[1]
    block[0, 0] = np.nan
    array[1] = block
    assert main(["store", "validate", str(path)]) == 1
    assert "ood[1] holds NaN" in capsys.readouterr().out


def test_ood_images_go_through_the_in_distribution_normalisation(optunet_store, tmp_path):
    """The network was trained on images normalised with the training statistics: the OOD
    set is normalised the same way, not with its own mean and std."""
    from symbnn.models import build_model
    from symbnn.predictions import open_predictions

    store, state = optunet_store("w.zarr", n=1)
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, 1, 28, 28), dtype=torch.uint8, generator=generator)
    test = ImageData(images, torch.zeros(6, dtype=torch.int64), 10, (0.1,), (0.3,), "test")
    ood = ImageData(images.flip(-1), torch.zeros(6, dtype=torch.int64), 10, (0.6,), (0.1,), "ood")
    write_predictions(store.path, tmp_path / "p.zarr", test, ood)
    model = build_model({"name": "optunet"}).eval()
    model.load_state_dict({name: t[0] for name, t in state.items()})
    with torch.no_grad():
        expected = torch.softmax(model(test.normalize(ood.images)), 1).numpy()
        own = torch.softmax(model(ood.normalize(ood.images)), 1).numpy()
    got = open_predictions(tmp_path / "p.zarr").read("ood")[0].astype(np.float64)
    assert np.allclose(got, expected, atol=2e-3) and not np.allclose(got, own, atol=2e-3)
