import numpy as np
import pytest

from symbnn.data.experiment import load_in_distribution, load_out_of_distribution
from symbnn.posterior import converged_rows, convergence_table, gather_shards
from symbnn.report.tables import write_table
from symbnn.settings import Data
from symbnn.store import StoreError


def test_gather_concatenates_shards_in_order(optunet_store, tmp_path):
    a, state_a = optunet_store("a.zarr", n=3, first_seed=0)
    b, state_b = optunet_store("b.zarr", n=2, first_seed=3)
    out = gather_shards([a.path, b.path], tmp_path / "target.zarr")
    assert out.n_samples == 5
    assert np.array_equal(out.info("seed"), np.arange(5))
    for name in state_a:
        assert np.array_equal(out.read(name), np.concatenate([state_a[name], state_b[name]]))
    assert out.attrs["experiment"] == "t" and out.attrs["shards"] == ["a.zarr", "b.zarr"]
    out.validate()


def test_gather_rejects_repeated_seeds(optunet_store, tmp_path):
    a, _ = optunet_store("a.zarr", n=3, first_seed=0)
    b, _ = optunet_store("b.zarr", n=3, first_seed=2)
    with pytest.raises(StoreError, match="repeat seeds"):
        gather_shards([a.path, b.path], tmp_path / "target.zarr")
    assert not (tmp_path / "target.zarr").exists()


def test_gather_rejects_shards_of_another_recipe(optunet_store, tmp_path):
    a, _ = optunet_store("a.zarr", n=2, first_seed=0)
    b, _ = optunet_store("b.zarr", n=2, first_seed=2, attrs={"recipe": {"epochs": 2}})
    with pytest.raises(StoreError, match="b.zarr: attribute 'recipe' differs"):
        gather_shards([a.path, b.path], tmp_path / "target.zarr")


def test_ood_set_must_match_the_in_distribution_shape():
    data = {
        "train": "digits",
        "ood": "natural_patches",
        "ood_options": {"n": 20, "size": 28, "channels": 1},
        "train_limit": 100,
        "test_limit": 50,
    }
    train, test = load_in_distribution(Data.parse(data, "data"), "data")
    assert (len(train), len(test)) == (100, 50)
    shape = load_out_of_distribution(Data.parse(data, "data"), "data", like=test).images.shape
    assert shape == (20, 1, 28, 28)
    data["ood_options"]["size"] = 32
    with pytest.raises(ValueError, match="data.ood: 'natural_patches' images have shape"):
        load_out_of_distribution(Data.parse(data, "data"), "data", like=test)


def test_convergence_is_flagged_by_threshold_after_training(optunet_store, tmp_path):
    store, _ = optunet_store("t.zarr", n=6, first_seed=20)  # accuracies 0.5 .. 0.9
    table = convergence_table(store.path, min_accuracy=0.7)
    assert table["row"].to_list() == list(range(6)) and table["seed"].to_list() == list(
        range(20, 26)
    )
    expected = [a >= 0.7 for a in store.info("test_accuracy")]
    assert table["converged"].to_list() == expected and table["min_accuracy"][0] == 0.7
    write_table(table, tmp_path / "converged.parquet")
    assert converged_rows(tmp_path / "converged.parquet") == [
        i for i, ok in enumerate(expected) if ok
    ]
    # a lower threshold flags more networks, from the same store (no retraining)
    assert convergence_table(store.path, min_accuracy=0.0)["converged"].all()
