import numpy as np
import pytest

from symbnn.posterior import gather_shards, load_in_distribution, load_out_of_distribution
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
    train, test = load_in_distribution(data, "data")
    assert (len(train), len(test)) == (100, 50)
    assert load_out_of_distribution(data, "data", like=test).images.shape == (20, 1, 28, 28)
    data["ood_options"]["size"] = 32
    with pytest.raises(ValueError, match="data.ood: 'natural_patches' images have shape"):
        load_out_of_distribution(data, "data", like=test)
