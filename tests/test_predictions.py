"""Prediction stores: `symbnn store validate` (and `make verify`) read them whole and catch a
truncated chunk or NaN probabilities, as they do for weight stores."""

import numpy as np
import pytest
import torch
import zarr
from conftest import random_images

from symbnn.cli import main
from symbnn.data.core import ImageData
from symbnn.predictions import is_predictions, write_predictions
from symbnn.store import seal


def predictions(optunet_store, tmp_path):
    store, _ = optunet_store("samples.zarr", n=3)
    return write_predictions(
        store.path, tmp_path / "pred.zarr", random_images(20, 0), random_images(8, 1), batch=7
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
    # as if written so: the manifest and digest recorded afterwards (else the rewritten chunk
    # is reported as not the one the store was written with)
    seal(path, ["test", "ood", "labels", "test_accuracy"])
    assert main(["store", "validate", str(path)]) == 1
    assert "ood[1] holds NaN" in capsys.readouterr().out


def test_ood_images_go_through_the_in_distribution_normalization(optunet_store, tmp_path):
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


def test_linearized_predictions_expand_each_sample_at_its_pool_mode(optunet_store, tmp_path):
    """Samples record their mode's pool seed; with `linearize_at` each is predicted through
    the network linearised there: at the mode itself that is the network, away from it the
    first-order expansion (`symbnn.linearize`), not the sampled network."""
    from symbnn.linearize import Linearized
    from symbnn.models import build_model
    from symbnn.predictions import open_predictions
    from symbnn.store import StoreError, write_store

    pool, modes = optunet_store("pool.zarr", n=3, first_seed=10)
    # samples 0, 1 at pool seed 11 (sample 0 is the mode itself), sample 2 at seed 12
    rows = [1, 1, 2]
    g = torch.Generator().manual_seed(3)
    state = {name: t[rows].clone() for name, t in modes.items()}
    for t in state.values():
        t[1:] += 0.05 * torch.randn(t[1:].shape, generator=g)
    info = {"mode_index": np.array([0, 0, 1]), "mode_seed": np.array([11, 11, 12])}
    attrs = {"experiment": "t", "architecture": {"name": "optunet"}, "method": "laplace"}
    samples = write_store(tmp_path / "s.zarr", state, info, attrs)
    test, ood = random_images(9, 0), random_images(5, 1)
    write_predictions(samples.path, tmp_path / "lin.zarr", test, ood, linearize_at=pool.path)
    write_predictions(samples.path, tmp_path / "raw.zarr", test, ood)
    lin, raw = open_predictions(tmp_path / "lin.zarr"), open_predictions(tmp_path / "raw.zarr")
    assert lin.attrs["predictive"] == "linearised" and raw.attrs["predictive"] == "sampled"
    np.testing.assert_allclose(lin.read("test")[0], raw.read("test")[0], atol=1e-3)
    model = build_model({"name": "optunet"}).eval()
    x = test.normalize(test.images)
    for k in (1, 2):
        mode = {name: t[rows[k]] for name, t in modes.items()}
        sample = {name: t[k] for name, t in state.items()}
        expected = torch.softmax(Linearized(model, mode, sample)(x), 1).detach().numpy()
        np.testing.assert_allclose(lin.read("test")[k], expected, atol=1e-3)
    assert not np.allclose(lin.read("test")[1:], raw.read("test")[1:], atol=1e-3)
    # a sample whose mode is not in the pool names the seed
    other, _ = optunet_store("other.zarr", n=2, first_seed=50)
    with pytest.raises(StoreError, match="no pool network has seed 11"):
        write_predictions(samples.path, tmp_path / "x.zarr", test, ood, linearize_at=other.path)
    assert not (tmp_path / "x.zarr").exists()
